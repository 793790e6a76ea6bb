"""all_reduce's small paths and their mismatch errors against every other path, on 2 and 3
real ranks: the shared-memory staging window (groups on one node, the default here) and, with
the window turned off (EMBER_DIST_SHM_MAX_BYTES=0, as for ranks on several nodes), the fused
point-to-point round (data and signature check in one message round)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mpi4py")

from tests.distributed._launch import free_port, launch  # noqa: E402


@pytest.fixture(scope="module", params=[(2, "1048576"), (3, "1048576"), (2, "0"), (3, "0")],
                ids=["2ranks", "3ranks", "2ranks-p2p", "3ranks-p2p"])
def run(request, tmp_path_factory):
    n, shm = request.param
    out = tmp_path_factory.mktemp(f"arc{n}")
    proc = launch("all_reduce_checks.py", str(out), nproc=n, timeout=240,
                  master_port=free_port(), env={"EMBER_DIST_SHM_MAX_BYTES": shm})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = []
    for r in range(n):
        d = {}
        for line in (out / f"rank{r}.txt").read_text().splitlines():
            key, value = line.split(": ", 1)
            d[key] = value
        lines.append(d)
        assert d["has_shm"] == str(shm != "0")  # the path under test
    return n, lines


def test_fused_results(run):
    n, lines = run
    parts = [np.float32([1e8, 1.0, -1e8][r % 3]) for r in range(n)]
    acc = parts[0]
    for p in parts[1:]:  # rank order, float32 rounding at each step
        acc = np.float32(acc + p)
    avg = (np.arange(6.0).reshape(2, 3) * n + sum(range(n))) / n
    for d in lines:
        assert d["order_sum"] == str([float(acc)] * 4)
        assert d["async_fused"] == "(True, True)"
        assert d["avg"] == str(avg.tolist())


def test_mismatches_name_every_rank_and_the_group_survives(run):
    n, lines = run
    odd = n - 1
    same = "; ".join(f"rank {r}: all_reduce ember.float32 (2,)" for r in range(odd))
    for r, d in enumerate(lines):
        pre = "EmberRuntimeError: [distributed.all_reduce] the ranks passed different"
        assert d["shape"] == f"{pre} shapes: {same}; rank {odd}: all_reduce ember.float32 (3,)"
        assert d["dtype"] == f"{pre} dtypes: {same}; rank {odd}: all_reduce ember.int32 (2,)"
        assert d["truncated"] == (f"{pre} shapes: {same}; rank {odd}: all_reduce "
                                  "ember.float32 (3000,)")
        assert d["fused_vs_checked"].startswith(f"{pre} shapes: rank 0: all_reduce "
                                                "ember.float32 (4,)")
        assert d["fused_vs_checked"].endswith(f"rank {odd}: all_reduce ember.float32 (10000,)")
        want = "MAX" if r == odd else "SUM"
        assert d["redop"] == (f"{pre} reduce ops (dtype and shape agree; this rank passed "
                              f"ReduceOp.{want})")
        if r == odd:
            assert "[distributed.all_gather] the ranks passed different ops" in d["vs_all_gather"]
            assert d["vs_barrier"].startswith(
                "EmberRuntimeError: [distributed.barrier] the ranks called different "
                "collectives: rank 0: all_reduce")
            assert d["local_error"].startswith("DTypeError: [distributed.all_reduce] "
                                               "ReduceOp.AVG needs a floating-point tensor")
        else:
            assert d["vs_all_gather"].endswith(f"rank {odd}: all_gather ember.float32 (2,)")
            assert d["vs_barrier"].endswith(f"rank {odd}: barrier")
            assert d["local_error"] == (f"EmberRuntimeError: [distributed.all_reduce] rank(s) "
                                        f"[{odd}] passed invalid arguments (their error says "
                                        "which)")
        for key in ("after_shape", "after_truncated", "after_mixed", "after_vs_all_gather",
                    "after_vs_barrier", "after_local"):
            assert d[key] == str(([float(n)] * 3, float(n), float(n))), key

"""Symmetric memory (ember.distributed._symmetric_memory, ember.ops.symm_mem) on 2 and 3 real
ranks, against NumPy references, on both transports: MPI shared-memory windows (one node) and
MPI RMA windows (forced on one node with EMBER_SYMM_MEM_BACKEND=rma), which must give the same
results."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("mpi4py")

from ember.distributed._symmetric_memory import NATIVE  # noqa: E402
from tests.distributed._launch import launch  # noqa: E402
from tests.distributed.scripts.symm_mem import N_ELEMS, ROUNDS, inp  # noqa: E402

_NP = {"float32": np.float32, "float64": np.float64, "bfloat16": ml_dtypes.bfloat16,
       "float16": np.float16}


@pytest.fixture(scope="module", params=[(2, "shm"), (3, "shm"), (2, "rma"), (3, "rma")],
                ids=["2ranks-shm", "3ranks-shm", "2ranks-rma", "3ranks-rma"])
def run(request, tmp_path_factory):
    if NATIVE.lib() is None:
        pytest.skip("symmetric memory needs its C kernels (no C compiler, or EMBER_EAGER_C=0)")
    n, backend = request.param
    out = tmp_path_factory.mktemp(f"symm{n}{backend}")
    proc = launch("symm_mem.py", str(out), nproc=n, timeout=240,
                  env={"EMBER_SYMM_MEM_BACKEND": backend})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = []
    for r in range(n):
        d = {}
        for line in (out / f"rank{r}.txt").read_text().splitlines():
            key, value = line.split(": ", 1)
            d[key] = value
        lines.append(d)
    return n, lines, [dict(np.load(out / f"rank{r}.npz")) for r in range(n)], backend


def _sum(dt: str, n: int) -> np.ndarray:
    """Rank-order sum with ember's rule: 16-bit floats accumulate in float32, round once."""
    parts = [inp(r).astype(_NP[dt]) for r in range(n)]
    if dt in ("bfloat16", "float16"):
        acc = parts[0].astype(np.float32)
        for p in parts[1:]:
            acc = acc + p.astype(np.float32)
        return acc.astype(_NP[dt]).astype(np.float64)
    acc = parts[0]
    for p in parts[1:]:
        acc = acc + p
    return acc.astype(np.float64)


def test_handle_and_peer_buffers(run):
    n, lines, res, backend = run
    for r in range(n):
        nxt = (r + 1) % n
        assert lines[r]["get"] == str(inp(nxt)[2:5].tolist())
        if backend == "rma":
            for key, op in (("peer_view", "get_buffer"), ("peer_pad", "get_signal_pad")):
                assert lines[r][key] == (
                    f"EmberRuntimeError: [symm_mem.{op}] rank {nxt}'s memory cannot be mapped "
                    "into this process: the symmetric heap is on MPI RMA windows (ranks on "
                    "several nodes, or set_backend('MPI_RMA')); copy with hdl.put(rank, "
                    "tensor) / hdl.get(rank, sizes, dtype), or use the symm_mem ops")
        else:
            assert "peer_view" not in lines[r]
        assert lines[r]["handle"] == str((r, n, N_ELEMS * 4, n, n))
        assert lines[r]["own_ptr"] == "True"
        assert lines[r]["is_symm"] == "(True, True, False)"
        assert lines[r]["same_handle"] == "True"
        assert lines[r]["signal_pad"] == "((2304,), 'ember.int32')"  # PyTorch's 9216 bytes
        np.testing.assert_array_equal(res[r]["peer_read"], inp((r + 1) % n))
        assert lines[r]["written_by_prev"] == str(1000.0 + (r - 1) % n)
        assert lines[r]["bad_region"].startswith("ShapeError: [symm_mem.get_buffer] sizes "
                                                 "(1002,)")
        assert lines[r]["self_signal"].startswith("EmberValueError: [symm_mem.put_signal]")


def test_put_wait_signal_ordering(run):
    n, lines, _, _ = run
    for r in range(n):
        want = [k * n + r for k in range(ROUNDS)] + ([ROUNDS * n] if r == 0 else [])
        assert lines[r]["token_seen"] == str(want)
        assert lines[r]["stream_ok"] == "True"
        prv = (r - 1) % n
        assert lines[r]["timeout"] == (
            "EmberRuntimeError: [symm_mem.wait_signal] timed out after 300 ms on channel 2 "
            f"waiting for rank {prv} (group rank {prv})")


@pytest.mark.parametrize("dt", ["float32", "float64", "bfloat16", "float16"])
def test_symm_mem_ops(run, dt):
    n, lines, res, _ = run
    want = _sum(dt, n)
    mine = [inp(r).astype(_NP[dt]).astype(np.float64) for r in range(n)]
    for r in range(n):
        for key in ("one_shot", "one_shot_out", "two_shot", "two_shot_out", "multimem"):
            np.testing.assert_array_equal(res[r][f"{key}-{dt}"], want, err_msg=key)
        np.testing.assert_array_equal(res[r][f"input_kept-{dt}"], mine[r])
        np.testing.assert_array_equal(res[r][f"gather-{dt}"], np.stack(mine))
        assert lines[r][f"two_shot_returns_input-{dt}"] == "True"


def test_op_errors_and_rendezvous_order(run):
    n, lines, _, _ = run
    for r in range(n):
        assert lines[r]["op_bad_reduce"].startswith(
            "EmberValueError: [symm_mem.one_shot_all_reduce] reduce_op must be 'sum'")
        assert "must be a symmetric-memory tensor" in lines[r]["op_not_symm"]
        assert lines[r]["op_small"] == str([float(n)] * 8)
        for key in ("order_error", "order_error2"):
            msg = lines[r][key]
            assert msg.startswith("EmberRuntimeError: [symm_mem.rendezvous] the ranks passed "
                                  "different allocations (rank 0: allocation #")
            assert "same order" in msg
        assert "rank 0: allocation #7 of 32 bytes; rank 1: allocation #8 of 64 bytes" in \
            lines[r]["order_error"]
        assert "passed a tensor that is not from symm_mem.empty" in lines[r]["not_symm"]
        assert lines[r]["after_errors"] == "32"
    for r in range(n):
        assert lines[r]["pad_default"] == "9216"
        assert lines[r]["pad_bad"].startswith("EmberValueError: [symm_mem.set_signal_pad_size]")
        assert lines[r]["pad_small"] == str((256, (64,), 64 // n))
        assert lines[r]["pad_channel_error"].startswith(
            f"EmberValueError: [symm_mem.barrier] channel {64 // n} is outside [0, {64 // n})")
        assert lines[r]["compat"] == "(False, True)"
    for r in range(2):
        assert lines[r]["sub"] == "('1', 2, [3.0, 3.0])"
    assert all("sub" not in lines[r] for r in range(2, n))

"""all_reduce through the shared-memory staging window on 2 and 3 real ranks: every reduce op
and dtype against NumPy references computed here in rank order (16-bit floats in float32,
rounded once; integers wrapping as NumPy's do)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mpi4py")
ml_dtypes = pytest.importorskip("ml_dtypes")

from tests.distributed._launch import free_port, launch  # noqa: E402
from tests.distributed.scripts.shm_all_reduce import DTYPES, SHAPES, make, ops_of  # noqa: E402

_NP_OP = {"SUM": np.add, "AVG": np.add, "PRODUCT": np.multiply, "MIN": np.minimum,
          "MAX": np.maximum, "BAND": np.bitwise_and, "BOR": np.bitwise_or,
          "BXOR": np.bitwise_xor}
_BOOL_OP = {"SUM": np.logical_or, "PRODUCT": np.logical_and, "MIN": np.logical_and,
            "MAX": np.logical_or, "BAND": np.logical_and, "BOR": np.logical_or,
            "BXOR": np.logical_xor}


@pytest.fixture(scope="module", params=[2, 3], ids=["2ranks", "3ranks"])
def results(request, tmp_path_factory):
    n = request.param
    out = tmp_path_factory.mktemp(f"shm{n}")
    proc = launch("shm_all_reduce.py", str(out), nproc=n, timeout=300,
                  master_port=free_port())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return n, [dict(np.load(out / f"rank{r}.npz")) for r in range(n)]


def _reference(dt: str, op: str, parts: list) -> np.ndarray:
    wide = dt in ("float16", "bfloat16")
    parts = [p.astype(np.float32) if wide else p for p in parts]
    f = _BOOL_OP[op] if dt == "bool" else _NP_OP[op]
    acc = parts[0]
    for p in parts[1:]:  # rank order
        acc = f(acc, p)
    if op == "AVG":
        acc = acc / np.array(len(parts), acc.dtype)
    if dt == "bfloat16":
        return acc.astype(ml_dtypes.bfloat16).astype(np.float32)
    return acc.astype(np.float16 if dt == "float16" else acc.dtype)


def _cases() -> list:
    return [(dt, op, shape) for dt in DTYPES for op in ops_of(dt) for shape in SHAPES]


def test_every_rank_used_the_window(results):
    n, res = results
    assert all(bool(d["has_shm"]) for d in res)


@pytest.mark.parametrize("dt,op,shape", _cases())
def test_all_reduce_ops_and_dtypes(results, dt, op, shape):
    n, res = results
    want = _reference(dt, op, [make(dt, r, SHAPES[shape]) for r in range(n)])
    for d in res:
        np.testing.assert_array_equal(d[f"{shape}-{op}-{dt}"], want)


@pytest.mark.parametrize("dt", DTYPES)
def test_strided_tensor_gets_the_result_in_place(results, dt):
    n, res = results
    want = _reference(dt, "MAX", [make(dt, r, (3, 4)) for r in range(n)])
    for d in res:
        np.testing.assert_array_equal(d[f"strided-MAX-{dt}"], want)


def test_async_rounds_in_flight_and_other_paths(results):
    n, res = results
    tri = sum(range(n))
    for r, d in enumerate(res):
        np.testing.assert_array_equal(d["async"], [[n * i + tri] * 5 for i in range(4)])
        np.testing.assert_array_equal(d["big"], [n * (n + 1) / 2] * 2)
        if r < 2:
            np.testing.assert_array_equal(d["sub"], [3.0] * 3)


def test_async_mismatch_raises_on_wait_on_every_rank(results):
    n, res = results
    same = "; ".join(f"rank {r}: all_reduce ember.float32 (2,)" for r in range(n - 1))
    for d in res:
        assert str(d["async_mismatch"]) == (
            "EmberRuntimeError: [distributed.all_reduce] the ranks passed different shapes: "
            f"{same}; rank {n - 1}: all_reduce ember.float32 (3,)")
        np.testing.assert_array_equal(d["after_async_mismatch"], [float(n)] * 2)


def test_async_round_against_another_collective(results):
    n, res = results
    for r, d in enumerate(res):
        msg = str(d["async_vs_all_gather"])
        if r == n - 1:
            assert "[distributed.all_gather] the ranks passed different ops" in msg
        else:
            assert msg.startswith("EmberRuntimeError: [distributed.all_reduce] the ranks passed "
                                  "different ops"), msg
            assert msg.endswith(f"rank {n - 1}: all_gather ember.float32 (2,)")
        np.testing.assert_array_equal(d["after_async_vs_all_gather"], [float(n)] * 2)


def test_a_missing_rank_is_named_after_the_timeout(results):
    n, res = results
    for r, d in enumerate(res[:-1]):
        msg = str(d["timeout"])
        assert msg.startswith("EmberRuntimeError: [distributed.all_reduce] timed out after 1 s: "
                              "rank(s) ["), msg
        named = msg.split("rank(s) [", 1)[1].split("]", 1)[0]
        # the odd rank is named (a peer that timed out too may be, having withdrawn its round)
        assert str(n - 1) in named.split(", ") and str(r) not in named.split(", "), msg
        assert msg.endswith("did not reach all_reduce (dead, hung, or in another collective)")
    for d in res:
        np.testing.assert_array_equal(d["after_timeout"], [float(n)] * 2)

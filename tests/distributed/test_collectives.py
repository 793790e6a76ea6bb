"""Every collective and dtype on 2 real ranks (one launch), against NumPy references."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mpi4py")

from tests.distributed._launch import launch  # noqa: E402
from tests.distributed.scripts.collectives import DTYPES, make  # noqa: E402

N = 2
_NP_OP = {"SUM": np.add, "PRODUCT": np.multiply, "MIN": np.minimum, "MAX": np.maximum,
          "BAND": np.bitwise_and, "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}
_BOOL_OP = {"SUM": np.logical_or, "PRODUCT": np.logical_and, "MIN": np.logical_and,
            "MAX": np.logical_or, "BAND": np.logical_and, "BOR": np.logical_or,
            "BXOR": np.logical_xor}


def _in(dt: str, rank: int, shape=(2, 3)) -> np.ndarray:
    a = make(dt, rank, shape).numpy()
    return a.astype(np.float64) if dt in ("float16", "bfloat16") else a


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("coll")
    proc = launch("collectives.py", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [dict(np.load(out / f"rank{r}.npz")) for r in range(N)]


def _reduce(dt: str, op: str, parts: list) -> np.ndarray:
    if op == "AVG":
        return sum(parts) / len(parts)
    f = _BOOL_OP[op] if dt == "bool" else _NP_OP[op]
    acc = parts[0]
    for p in parts[1:]:
        acc = f(acc, p)
    return acc


def _cases() -> list:
    cases = []
    for dt in DTYPES:
        extra = ["AVG"] if dt.startswith(("float", "bfloat")) else ["BAND", "BOR", "BXOR"]
        cases += [(dt, op) for op in ["SUM", "PRODUCT", "MIN", "MAX", *extra]]
    return cases


@pytest.mark.parametrize("dt,op", _cases())
def test_all_reduce(results, dt, op):
    want = _reduce(dt, op, [_in(dt, r) for r in range(N)])
    for r in range(N):
        got = results[r][f"all_reduce-{op}-{dt}"]
        np.testing.assert_array_equal(got, want.astype(got.dtype))


@pytest.mark.parametrize("dt", DTYPES)
def test_all_gather_and_broadcast(results, dt):
    stacked = np.stack([_in(dt, r) for r in range(N)])
    for r in range(N):
        np.testing.assert_array_equal(results[r][f"all_gather-{dt}"], stacked)
        np.testing.assert_array_equal(results[r][f"all_gather_into_tensor-{dt}"],
                                      stacked.reshape(N * 2, 3))
        np.testing.assert_array_equal(results[r][f"broadcast-{dt}"], _in(dt, 1))


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int64"])
def test_rooted_and_scatter_collectives(results, dt):
    big = [_in(dt, r, (2 * N, 3)) for r in range(N)]
    total = sum(big)
    for r in range(N):
        np.testing.assert_array_equal(results[r][f"reduce_scatter_tensor-{dt}"],
                                      total[2 * r:2 * r + 2])
        np.testing.assert_array_equal(results[r][f"scatter-{dt}"], _in(dt, 10 + r))
        np.testing.assert_array_equal(results[r][f"all_to_all_single-{dt}"],
                                      np.concatenate([b[2 * r:2 * r + 2] for b in big]))
    np.testing.assert_array_equal(results[0][f"reduce-{dt}"],
                                  np.maximum(_in(dt, 0), _in(dt, 1)))
    np.testing.assert_array_equal(results[1][f"gather-{dt}"],
                                  np.stack([_in(dt, r) for r in range(N)]))

"""Eager last-dim log_softmax in C (``ember/ops/_act_c.py``, ``csrc/act_eager.c``) against torch
2.13, and against the compiled row kernel bit for bit (both run ``row_exp.h``).

Tolerances: float32 outputs (x - m) - log(sum) within a few float32 ulps of the terms (torch's
exp and row sum differ from ember's in their last bits); half outputs within one ulp of the
dtype (the sum and its log are rounded to the dtype on both sides, from float32 values that
may differ in their last bits)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.ops import _act_c

torch = pytest.importorskip("torch")

F = ember.nn.functional
HALF = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def _rows(shape: tuple) -> np.ndarray:
    x = (np.random.default_rng(5).standard_normal(shape) * 5).astype(np.float32)
    x[0, :3] = [np.inf, -np.inf, 1.0]
    x[1, 0] = np.nan
    x[2] = -np.inf
    x[3, ::4] = -np.inf
    return x


def _spacing(want: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "float32":
        return np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(np.spacing(np.abs(want).astype(HALF[dtype])).astype(np.float64))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("threads", [1, 2])
def test_eager_log_softmax_matches_torch(dtype: str, threads: int) -> None:
    if _act_c._NATIVE.lib() is None:
        pytest.skip("no eager C kernels")
    old = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        x = _rows((300, 37 if threads == 1 else 1029))
        tx = torch.from_numpy(x).to(getattr(torch, dtype))
        ex = ember.tensor(x).to(getattr(ember, dtype))
        assert _act_c.log_softmax_last(ex.numpy()) is not None   # the C path runs
        got = F.log_softmax(ex, -1)
        assert got.dtype == getattr(ember, dtype)
        want = torch.log_softmax(tx, -1).float().numpy()
        g = got.float().numpy().astype(np.float64)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(want))
        inf = np.isinf(want)
        np.testing.assert_array_equal(g[inf], want[inf])
        ok = np.isfinite(want)
        m = np.where(np.isnan(x), -np.inf, x).max(axis=-1, keepdims=True)
        d = np.broadcast_to(np.abs(x - m), x.shape)[ok].astype(np.float64)
        if dtype == "float32":
            tol = 4 * _spacing(want[ok], dtype) + 2 * np.spacing((d + 8).astype(np.float32))
        else:
            tol = 1.0 * _spacing(want[ok], dtype)
        assert (np.abs(g[ok] - want[ok]) <= tol).all()
    finally:
        ember.set_num_threads(old)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_eager_log_softmax_equals_compiled(dtype: str) -> None:
    if _act_c._NATIVE.lib() is None:
        pytest.skip("no eager C kernels")
    x = ember.tensor(_rows((64, 513))).to(getattr(ember, dtype))
    fc = ember.compile(lambda v: F.log_softmax(v, -1), backend="c")
    bits = np.uint32 if dtype == "float32" else np.uint16
    c, e = fc(x).numpy(), F.log_softmax(x, -1).numpy()
    ok = ~np.isnan(e.astype(np.float32))          # NaN rows: NaN in both (any payload)
    np.testing.assert_array_equal(np.isnan(c.astype(np.float32)), ~ok)
    np.testing.assert_array_equal(c.view(bits)[ok], e.view(bits)[ok])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("threads", [1, 2])
def test_eager_softmax_streamed_output(dtype: str, threads: int) -> None:
    """A 16 MiB softmax output is written with non-temporal stores (``_act_c.STREAM_BYTES``):
    the compiled kernel's bits (which streams too), torch's values (float32: within
    5 + |x - max| ulps of torch's float64 result)."""
    if _act_c._NATIVE.lib() is None:
        pytest.skip("no eager C kernels")
    rows = _act_c.STREAM_BYTES // (1024 * (4 if dtype == "float32" else 2))
    x = np.random.default_rng(7).standard_normal((rows, 1024)).astype(np.float32) * 3
    ex = ember.tensor(x).to(getattr(ember, dtype))
    old = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        e = F.softmax(ex, -1).numpy()
        c = ember.compile(lambda v: F.softmax(v, -1), backend="c")(ex).numpy()
    finally:
        ember.set_num_threads(old)
    bits = np.uint32 if dtype == "float32" else np.uint16
    np.testing.assert_array_equal(e.view(bits), c.view(bits))
    if dtype == "float32":   # torch in float64: both float32 kernels are d-conditioned
        want = torch.softmax(torch.from_numpy(x).double(), -1).numpy()
    else:
        want = torch.softmax(torch.from_numpy(x).to(getattr(torch, dtype)).float(), -1)
        want = want.to(getattr(torch, dtype)).float().numpy()
    got = e.astype(np.float32)
    d = np.abs(x - x.max(-1, keepdims=True)).astype(np.float64)
    tol = (5 + d) * _spacing(want, "float32") if dtype == "float32" else _spacing(want, dtype)
    assert (np.abs(got - want) <= tol).all()

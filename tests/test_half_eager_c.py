"""Eager float16/bfloat16 conversions in C (``ember/ops/_half_c.py``): the same bits as NumPy's
and ml_dtypes' casts, and half elementwise ops through the blocked path equal to torch's."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.ops import _half_c

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(_half_c._NATIVE.lib() is None, reason="no eager C kernels")


def _snan16(bits):
    return ((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0) & ((bits & 0x200) == 0)


@pytest.mark.parametrize("threads", [1, 2])
def test_conversions_are_numpys_casts(threads):
    old = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        bits = np.tile(np.arange(0x10000, dtype=np.uint32).astype(np.uint16), 5)[:-3]
        for dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
            h = bits.view(dtype)
            got = _half_c.to_float32(h)
            want = h.astype(np.float32)
            keep = ~_snan16(bits) if dtype == np.float16 else slice(None)
            np.testing.assert_array_equal(got.view(np.uint32)[keep], want.view(np.uint32)[keep])
            x = np.concatenate([want[~np.isnan(want)],
                                np.random.default_rng(0).standard_normal(300001)
                                .astype(np.float32) * 1e3,
                                np.float32([np.nan, -np.nan, 65520, 65519.996, 2.9802322e-08])])
            x = np.concatenate([x, (x[:-5].astype(np.float64) * (1 + 2.0 ** -9))
                                .astype(np.float32)])
            np.testing.assert_array_equal(_half_c.from_float32(x, dtype).view(np.uint16),
                                          x.astype(dtype).view(np.uint16))
    finally:
        ember.set_num_threads(old)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("threads", [1, 2])
def test_eager_half_elementwise_match_torch(dtype, threads):
    old = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        rng = np.random.default_rng(3)
        n = (1 << 16) * 3 + 77            # several blocks and a short last one
        a = (rng.standard_normal(n) * 3).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        a[:4] = [np.inf, -0.0, 7e4, 3e-8]
        ed, td = getattr(ember, dtype), getattr(torch, dtype)
        ea, eb = ember.tensor(a).to(ed), ember.tensor(b).to(ed)
        ta, tb = torch.tensor(a).to(td), torch.tensor(b).to(td)
        for got, want in ((ea + eb, ta + tb), (ea * eb, ta * tb), (ea - ea, ta - ta),
                          (ea / eb, ta / tb), (ember.maximum(ea, eb), torch.maximum(ta, tb))):
            assert got.dtype == ed
            g, w = got.float().numpy(), want.float().numpy()
            assert np.array_equal(np.isnan(g), np.isnan(w))
            fin = ~np.isnan(w)
            np.testing.assert_array_equal(g[fin], w[fin])
    finally:
        ember.set_num_threads(old)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tensor_to_runs_the_c_casts_with_torchs_bits(dtype, monkeypatch):
    """``Tensor.to`` between float32 and a half dtype (autocast's casts of activations and
    weights) goes through the C converters, with torch's bits (ties, overflow, subnormals,
    inf; NaNs stay NaN)."""
    calls = []
    real = _half_c._convert
    monkeypatch.setattr(_half_c, "_convert", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((96, 130)) * 50).astype(np.float32)
    x.reshape(-1)[:8] = [np.inf, -np.inf, 65520.0, 65519.996, 2.9802322e-08, -0.0, 1e-40,
                         np.float32(1 + 2.0 ** -8)]
    ed, td = getattr(ember, dtype), getattr(torch, dtype)
    got, want = ember.tensor(x).to(ed), torch.tensor(x).to(td)
    assert calls, "float32 -> half did not run the C converter"
    np.testing.assert_array_equal(got.numpy().view(np.uint16), want.view(torch.int16).numpy()
                                  .view(np.uint16))
    calls.clear()
    back = got.float()
    assert calls, "half -> float32 did not run the C converter"
    np.testing.assert_array_equal(back.numpy(), want.float().numpy())
    x.reshape(-1)[9] = np.nan
    assert np.isnan(ember.tensor(x).to(ed).float().numpy().reshape(-1)[9])


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)])
def test_widen_permuted_views_in_memory_order(dtype):
    """``widen`` of a permuted view of contiguous memory (attention's heads) converts in memory
    order and permutes back: astype's values and layout, no 2-byte copy; other strided views
    keep the copy path."""
    base = (np.random.default_rng(2).standard_normal((3, 50, 4, 32)) * 9).astype(dtype)
    for v in (base.transpose(0, 2, 1, 3), base.transpose(3, 1, 0, 2), base[:, ::2],
              base.transpose(0, 2, 1, 3)[..., ::2]):
        got = _half_c.widen(v)
        want = v.astype(np.float32)
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_array_equal(got, want)
    heads = _half_c.widen(base.transpose(0, 2, 1, 3))
    assert heads.base is not None and heads.base.flags.c_contiguous   # permuted, not copied

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

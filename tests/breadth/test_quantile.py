"""quantile, nanquantile, nanmedian against torch."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from tests.breadth.helpers import assert_same, compare

torch = pytest.importorskip("torch")
R = np.random.default_rng(6)
X = R.standard_normal((3, 5, 4))
XN = X.copy()
XN[0, 1, :2] = np.nan
XN[1, :, 3] = np.nan


@pytest.mark.parametrize("interp", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (1, False), (-1, True)])
@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
def test_quantile(name, interp, dim, keepdim):
    for q in (0.3, 0.5, np.array([0.0, 0.25, 0.9, 1.0])):
        def run(lib, name=name, q=q):
            def f(x):
                qq = lib.tensor(q, dtype=x.dtype) if isinstance(q, np.ndarray) else q
                return getattr(lib, name)(x, qq, dim, keepdim, interpolation=interp)
            return f
        compare(run(ember), run(torch), (X,), grad=(0,) if interp == "linear" else (),
                fd=False)
        compare(run(ember), run(torch), (XN,))


def test_quantile_method_and_errors():
    compare(lambda x: x.quantile(0.4, 0), lambda x: x.quantile(0.4, 0), (X,), grad=(0,))
    x = ember.tensor(X)
    with pytest.raises(RuntimeError, match=r"q must be in the range \[0, 1\] but got 1.5"):
        ember.quantile(x, 1.5)
    with pytest.raises(RuntimeError, match="must be either float or double"):
        ember.quantile(ember.ones(3, dtype=ember.int64), 0.5)
    with pytest.raises(RuntimeError, match="q tensor must be same dtype"):
        ember.quantile(x.float(), ember.tensor([0.5], dtype=ember.float64))
    with pytest.raises(RuntimeError, match="non-empty"):
        ember.nanquantile(ember.ones(0), 0.5)


def test_nanmedian():
    for x in (XN, X, np.full((2, 3), np.nan)):
        assert_same(ember.nanmedian(ember.tensor(x)), torch.nanmedian(torch.tensor(x)), 0, 0)
        for dim, kd in ((0, False), (1, True), (-1, False)):
            if dim >= x.ndim:
                continue
            e = ember.tensor(x).nanmedian(dim, kd)
            t = torch.tensor(x).nanmedian(dim, kd)
            assert_same(e.values, t.values, 0, 0)
            finite = ~np.isnan(t.values.numpy())
            np.testing.assert_array_equal(e.indices.numpy()[finite], t.indices.numpy()[finite])
    compare(lambda a: ember.nanmedian(a, 1).values, lambda a: torch.nanmedian(a, 1).values,
            (XN[0],), grad=(0,), fd=False)  # (the index of an all-NaN range is unspecified)

"""gcd/lcm, cdist, nuclear_norm, torch.sinc/sinc_, Tensor.hardshrink/prelu against torch."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from tests.breadth.helpers import compare

torch = pytest.importorskip("torch")
R = np.random.default_rng(5)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8"])
def test_gcd_lcm(dtype):
    lo = 0 if dtype == "uint8" else -60
    a = R.integers(lo, 60, (5, 6)).astype(dtype)
    b = R.integers(lo, 60, (6,)).astype(dtype)
    a[0, :3] = 0
    b[:2] = 0
    for name in ("gcd", "lcm"):
        compare(getattr(ember, name), getattr(torch, name), (a, b), dtypes=(dtype,))
        e, t = ember.tensor(a), torch.tensor(a)
        getattr(e, name + "_")(ember.tensor(b))
        getattr(t, name + "_")(torch.tensor(b))
        np.testing.assert_array_equal(e.numpy(), t.numpy())
        assert str(getattr(ember.tensor(a), name)(ember.tensor(b)).dtype).endswith(dtype)


def test_gcd_rejects_floats():
    with pytest.raises(NotImplementedError, match="\"gcd_cpu\" not implemented for 'Float'"):
        ember.gcd(ember.ones(2), ember.ones(2))


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 3.0, float("inf")])
def test_cdist(p):
    x1, x2 = R.standard_normal((2, 4, 3)), R.standard_normal((2, 5, 3))
    compare(lambda a, b: ember.cdist(a, b, p), lambda a, b: torch.cdist(a, b, p), (x1, x2),
            grad=(0, 1) if p >= 1 else (), fd=p != float("inf"))


def test_cdist_errors():
    with pytest.raises(RuntimeError, match="same number of columns"):
        ember.cdist(ember.ones(2, 3), ember.ones(2, 4))


def test_nuclear_norm():
    x = R.standard_normal((3, 4, 5))
    compare(lambda a: ember.nuclear_norm(a[0]), lambda a: torch.nuclear_norm(a[0]), (x,),
            grad=(0,))
    compare(lambda a: ember.nuclear_norm(a, (0, 2), True),
            lambda a: torch.nuclear_norm(a, (0, 2), True), (x,), grad=(0,))


def test_sinc_top_level_and_inplace():
    x = np.concatenate([R.standard_normal(10), [0.0, 1.0, -2.5]])
    compare(ember.sinc, torch.sinc, (x,), grad=(0,))
    e, t = ember.tensor(x), torch.tensor(x)
    assert e.sinc_() is e
    t.sinc_()
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12)


def test_tensor_hardshrink_prelu():
    x = R.standard_normal((2, 3, 4))
    compare(lambda a: a.hardshrink(0.3), lambda a: a.hardshrink(0.3), (x,), grad=(0,))
    compare(lambda a, w: a.prelu(w), lambda a, w: a.prelu(w), (x, np.array([0.1, 0.2, 0.3])),
            grad=(0, 1))

"""lgamma, digamma, polygamma (orders 0, 1), mvlgamma and their special.* names against torch
on wide ranges and special values."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from tests.breadth.helpers import compare

torch = pytest.importorskip("torch")
R = np.random.default_rng(8)
SPECIAL = np.array([0.0, -0.0, 1.0, 2.0, 0.5, -0.5, -1.0, -2.0, -3.5, 1e-10, -1e-10, 1e-300,
                    10.0, 1e6, 1e20, 1e300, np.inf, -np.inf, np.nan, 171.5, -171.5])
WIDE = np.concatenate([R.uniform(-50, 50, 200), R.uniform(0, 3, 100), 10 ** R.uniform(-8, 8, 50),
                       -10 ** R.uniform(-8, 2, 50), SPECIAL])


@pytest.mark.parametrize("name,tol", [("lgamma", 1e-12), ("digamma", 1e-11)])
def test_values_wide(name, tol):
    x = WIDE[~((WIDE < 0) & (np.abs(WIDE) > 1e4))]  # no huge negative non-integers
    compare(getattr(ember, name), getattr(torch, name), (x,), rtol=tol, atol=1e-12,
            dtypes=("float64",))
    compare(getattr(ember, name), getattr(torch, name), (x,), rtol=2e-5, atol=1e-5,
            dtypes=("float32",))


def test_trigamma_values():
    x = WIDE[(np.abs(WIDE) < 1e6) & np.isfinite(WIDE) & ((WIDE > 0) | (WIDE != np.round(WIDE)))]
    compare(lambda a: ember.polygamma(1, a), lambda a: torch.polygamma(1, a), (x,), rtol=1e-9,
            atol=1e-12, dtypes=("float64",))


def test_integer_inputs_and_special_names():
    i = np.arange(1, 8)
    for name in ("lgamma", "digamma"):
        compare(getattr(ember, name), getattr(torch, name), (i,), dtypes=("int64",), rtol=2e-6)
    x = R.uniform(0.5, 5, 10)
    for e, t in ((ember.special.gammaln, torch.special.gammaln),
                 (ember.special.psi, torch.special.psi),
                 (ember.special.digamma, torch.special.digamma)):
        compare(e, t, (x,))
    compare(lambda a: ember.special.polygamma(1, a), lambda a: torch.special.polygamma(1, a),
            (x,))
    compare(lambda a: ember.special.multigammaln(a, 3),
            lambda a: torch.special.multigammaln(a, 3), (x + 1,), grad=(0,))


def test_grads():
    x = np.concatenate([R.uniform(0.2, 6, 10), R.uniform(-3.9, -3.1, 3)])
    compare(ember.lgamma, torch.lgamma, (x,), grad=(0,))
    compare(ember.digamma, torch.digamma, (x,), grad=(0,))
    a = ember.tensor(x, requires_grad=True)
    with pytest.raises(NotImplementedError, match="polygamma of order 2"):
        ember.polygamma(1, a).sum().backward()


def test_mvlgamma_methods_inplace_errors():
    x = R.uniform(2, 6, (3, 4))
    for p in (1, 2, 5):
        compare(lambda a, p=p: ember.mvlgamma(a, p), lambda a, p=p: torch.mvlgamma(a, p), (x,),
                grad=(0,))
    for name, args in (("lgamma_", ()), ("digamma_", ()), ("mvlgamma_", (2,)),
                       ("polygamma_", (1,))):
        e, t = ember.tensor(x), torch.tensor(x)
        assert getattr(e, name)(*args) is e
        getattr(t, name)(*args)
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-10)
    compare(lambda a: a.polygamma(1), lambda a: a.polygamma(1), (x,))
    with pytest.raises(RuntimeError, match=r"All elements must be greater than \(p-1\)/2"):
        ember.mvlgamma(ember.tensor([0.2]), 2)
    with pytest.raises(NotImplementedError, match="order 2"):
        ember.polygamma(2, ember.tensor(x))

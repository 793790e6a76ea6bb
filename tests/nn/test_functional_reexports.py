"""``F.softmax`` / ``F.log_softmax`` / ``F.softmin`` against torch, including the implicit dim."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
@pytest.mark.parametrize("shape,dim", [((3, 4), 1), ((2, 3, 4), -1), ((5,), 0)])
def test_softmax_family(name, shape, dim):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    e = getattr(F, name)(ember.tensor(x), dim=dim)
    t = getattr(TF, name)(torch.tensor(x), dim=dim)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, atol=1e-6)


def test_implicit_dim_warns_like_torch():
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        e = F.softmax(ember.tensor(x))
    with pytest.warns(UserWarning):
        t = TF.softmax(torch.tensor(x))
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, atol=1e-6)
    e = F.log_softmax(ember.tensor(x), dim=1, dtype=ember.float64)
    assert e.dtype is ember.float64


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, -1), (3.0, 0)])
def test_normalize_matches_torch(p, dim):
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float64)
    x[1] = 0.0  # a zero row: eps guards the division
    e = ember.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    ye, yt = F.normalize(e, p=p, dim=dim), TF.normalize(t, p=p, dim=dim)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = np.random.default_rng(3).standard_normal((3, 4))
    ye.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)

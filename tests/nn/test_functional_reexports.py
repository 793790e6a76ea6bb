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

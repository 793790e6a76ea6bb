"""``ember.linalg`` against ``torch.linalg``."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("ord", [2, 1, float("inf"), -float("inf"), 0, 3.5])
@pytest.mark.parametrize("dim", [None, 1, (0, 1)])
def test_vector_norm(ord, dim):
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    e = ember.linalg.vector_norm(ember.tensor(x), ord, dim)
    t = torch.linalg.vector_norm(torch.tensor(x), ord, dim)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)


def test_vecdot_and_matmul():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 4))
    e = ember.linalg.vecdot(ember.tensor(a), ember.tensor(b))
    t = torch.linalg.vecdot(torch.tensor(a), torch.tensor(b))
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12)
    assert ember.linalg.matmul is ember.matmul
    with pytest.raises(NotImplementedError, match=r"linalg.eig"):
        ember.linalg.eig

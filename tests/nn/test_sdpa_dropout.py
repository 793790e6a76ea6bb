"""SDPA with dropout draws its mask from the Philox stream like ``F.dropout`` does."""

from __future__ import annotations

import math

import numpy as np

import ember
import ember.nn.functional as F


def test_sdpa_dropout_equals_composition_with_dropout():
    rng = np.random.default_rng(0)
    q, k, v = (ember.tensor(rng.standard_normal((2, 3, 5, 4)).astype(np.float32))
               for _ in range(3))
    ember.manual_seed(123)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
    ember.manual_seed(123)
    attn = ember.softmax(q @ k.transpose(-2, -1) / math.sqrt(4), dim=-1)
    expected = F.dropout(attn, 0.3) @ v
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    ember.manual_seed(124)
    other = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
    assert not np.allclose(other.numpy(), out.numpy())


def test_sdpa_dropout_gradient_flows():
    rng = np.random.default_rng(1)
    q = ember.tensor(rng.standard_normal((1, 4, 3)).astype(np.float64), requires_grad=True)
    k = ember.tensor(rng.standard_normal((1, 6, 3)).astype(np.float64))
    v = ember.tensor(rng.standard_normal((1, 6, 2)).astype(np.float64))
    ember.manual_seed(7)
    F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).sum().backward()
    assert q.grad is not None and q.grad.shape == q.shape
    assert np.isfinite(q.grad.numpy()).all()

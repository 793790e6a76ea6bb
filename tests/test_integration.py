"""Whole PyTorch-style scripts run on ember and torch give the same numbers."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _train_mlp(lib, data, steps=20):
    F = lib.nn.functional
    x, y, w1, b1, w2, b2 = data
    X, Y = lib.tensor(x), lib.tensor(y)
    params = [lib.tensor(p, requires_grad=True) for p in (w1, b1, w2, b2)]
    losses = []
    for _ in range(steps):
        h = F.relu(F.linear(X, params[0], params[1]))
        h = F.layer_norm(h, (h.shape[-1],))
        logits = F.linear(F.dropout(h, 0.0), params[2], params[3])
        loss = F.cross_entropy(logits, Y, label_smoothing=0.1)
        loss.backward()
        with lib.no_grad():
            for p in params:
                p -= 0.5 * p.grad
                p.grad.zero_()
        losses.append(loss.item())
    return losses, [p.detach().numpy() for p in params]


def test_mlp_training_matches_torch():
    rng = np.random.default_rng(0)
    data = (rng.standard_normal((64, 10)).astype(np.float32),
            rng.integers(0, 3, 64).astype(np.int64),
            (rng.standard_normal((32, 10)) * 0.3).astype(np.float32),
            np.zeros(32, np.float32),
            (rng.standard_normal((3, 32)) * 0.3).astype(np.float32),
            np.zeros(3, np.float32))
    le, pe = _train_mlp(ember, data)
    lt, pt = _train_mlp(torch, data)
    np.testing.assert_allclose(le, lt, rtol=1e-4, atol=1e-5)
    assert le[-1] < le[0] * 0.8  # it learns
    for a, b in zip(pe, pt):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


def _attention_block(lib, x, wq, wk, wv, wo):
    F = lib.nn.functional
    B, T, C = x.shape
    H = 2
    q, k, v = (F.linear(x, w).view(B, T, H, C // H).transpose(1, 2) for w in (wq, wk, wv))
    mask = lib.ones(T, T, dtype=lib.bool)
    mask = lib.where(lib.arange(T)[:, None] >= lib.arange(T)[None, :], mask, ~mask)
    att = (q @ k.transpose(-2, -1)) * (1.0 / (C // H) ** 0.5)
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
    y2 = F.scaled_dot_product_attention(*(t for t in (q, k, v)), is_causal=True)
    y2 = y2.transpose(1, 2).reshape(B, T, C)
    return F.linear(F.gelu(y), wo) + F.linear(y2, wo)


def test_causal_attention_block_matches_torch():
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((2, 5, 8)).astype(np.float64)] + \
        [(rng.standard_normal((8, 8)) * 0.3).astype(np.float64) for _ in range(4)]
    outs, grads = [], []
    for lib in (ember, torch):
        ts = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = _attention_block(lib, *ts)
        (out * out).sum().backward()
        outs.append(out.detach().numpy())
        grads.append([t.grad.numpy() for t in ts])
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-10, atol=1e-12)
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)

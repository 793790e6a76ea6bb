"""Batch, instance and group norm compiled with the C backend: ``layer_norm`` over dims that are
not the trailing ones (a batch norm's statistics over ``(N, H, W)`` per channel, with its
``(C, 1, 1)`` weight and bias) is one C kernel, not an eager extern; forward values, running
statistics and gradients match PyTorch's, statically and with ``dynamic=True``."""

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend

nn = ember.nn

MODULES = {
    "batchnorm1d_2d_input": (lambda m: m.BatchNorm1d(6), (8, 6)),
    "batchnorm1d_3d_input": (lambda m: m.BatchNorm1d(6), (4, 6, 9)),
    "batchnorm2d": (lambda m: m.BatchNorm2d(6), (4, 6, 5, 7)),
    "batchnorm3d": (lambda m: m.BatchNorm3d(3), (2, 3, 4, 5, 3)),
    "instancenorm2d_affine": (lambda m: m.InstanceNorm2d(6, affine=True), (4, 6, 5, 7)),
    "groupnorm": (lambda m: m.GroupNorm(3, 6), (4, 6, 5, 7)),
}


def _pair(name):
    torch = pytest.importorskip("torch")
    make, shape = MODULES[name]
    em, tm = make(nn), make(torch.nn)
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for (k, p), (_, q) in zip(em.named_parameters(), tm.named_parameters()):
            v = rng.standard_normal(tuple(p.shape)).astype(np.float32)
            p.data = ember.tensor(v)
            q.copy_(torch.tensor(v))
    return torch, em, tm, shape


def _run(name, dynamic, monkeypatch) -> list:
    """Two batch sizes through the compiled norm (+ in-place ReLU where the norm's output is
    not a view), checked against torch; the externs the C backend reported."""
    torch, em, tm, shape = _pair(name)
    externs: list = []
    monkeypatch.setattr(cbackend, "warn_fallbacks", externs.extend)
    # group norm's output is a view (of its (N, G, -1) form): an in-place op on it records
    # as_strided_backward, which reaches C as a reshape (its decomposition) only with static
    # sizes, so the dynamic case takes the out-of-place relu
    inplace = not (dynamic and name == "groupnorm")
    f = ember.compile(lambda x: (em(x).relu_() if inplace else em(x).relu()).square().sum(),
                      backend="c", dynamic=dynamic)
    rng = np.random.default_rng(1)
    for n in (shape[0], shape[0] + 3):
        xa = (rng.standard_normal((n,) + shape[1:]) * 2 + 0.5).astype(np.float32)
        x = ember.tensor(xa, requires_grad=True)
        em.zero_grad()
        got = f(x)
        got.backward()
        tx = torch.tensor(xa, requires_grad=True)
        tm.zero_grad()
        want = torch.relu(tm(tx)).square().sum()
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
        for (k, p), (_, q) in zip(em.named_parameters(), tm.named_parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-4,
                                       err_msg=k)
        for (k, b), (_, c) in zip(em.named_buffers(), tm.named_buffers()):
            np.testing.assert_allclose(b.numpy(), c.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    return externs


@pytest.mark.parametrize("name", sorted(MODULES))
def test_channel_norm_training_compiles_to_c_and_matches_torch(name, monkeypatch):
    assert _run(name, False, monkeypatch) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_channel_norm_training_dynamic_compiles_to_c_and_matches_torch(name, monkeypatch):
    """Under dynamic=True the (C, 1, 1) view's 1s stay literal (ints of 0 and 1 specialize,
    as in PyTorch), so the norm still knows its broadcast dims."""
    assert _run(name, True, monkeypatch) == []

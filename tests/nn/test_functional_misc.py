"""nn.functional behaviour the OpInfo table does not express: warnings, legacy reduction flags,
in-place identity and version counters, low-precision gradients."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def test_size_mismatch_warns_and_broadcasts():
    x, y = np.random.default_rng(0).random((2, 3, 4))
    for name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
        with pytest.warns(UserWarning, match="Using a target size .* different to the input"):
            out = getattr(F, name)(ember.tensor(x), ember.tensor(y[0]))
        with pytest.warns(UserWarning):
            ref = getattr(TF, name)(torch.tensor(x), torch.tensor(y[0]))
        np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-12)


def test_kl_div_mean_warns():
    x = ember.zeros(2, 3)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(x, x.exp())


@pytest.mark.parametrize("size_average,reduce", [(None, False), (False, None), (True, True),
                                                 (False, True)])
def test_legacy_reduction_flags(size_average, reduce):
    rng = np.random.default_rng(1)
    x, t = rng.standard_normal((4, 5)), rng.integers(0, 5, 4)
    kw = {"size_average": size_average, "reduce": reduce}
    with pytest.warns(UserWarning):
        out = F.cross_entropy(ember.tensor(x), ember.tensor(t), **kw)
    with pytest.warns(UserWarning):
        ref = TF.cross_entropy(torch.tensor(x), torch.tensor(t), **kw)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["relu", "relu6", "leaky_relu", "hardtanh", "elu", "selu",
                                  "celu", "silu", "mish", "hardsigmoid", "hardswish"])
def test_inplace_returns_input_and_bumps_version(name):
    x = ember.tensor([-2.0, -0.5, 0.0, 0.5, 3.0, 7.0])
    base = x.clone()
    view = x.view(2, 3)
    v0 = x._version
    out = getattr(F, name)(x, inplace=True)
    assert out is x
    assert x._version == v0 + 1
    ref = getattr(TF, name)(torch.tensor(base.numpy()))
    np.testing.assert_allclose(x.numpy(), ref.numpy(), rtol=1e-6)
    np.testing.assert_allclose(view.numpy().reshape(-1), ref.numpy(), rtol=1e-6)


def test_saved_input_modified_in_place_is_detected():
    x = ember.tensor([-1.0, 2.0], requires_grad=True)
    y = x * 1.0
    z = F.gelu(y)
    F.relu(y, inplace=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_lowp_cross_entropy_grad_matches_torch(dtype):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 7)).astype(np.float32)
    t = rng.integers(0, 7, 6)
    xe = ember.tensor(x).to(getattr(ember, dtype)).requires_grad_()
    xt = torch.tensor(x).to(getattr(torch, dtype)).requires_grad_()
    F.cross_entropy(xe, ember.tensor(t), label_smoothing=0.1).backward()
    TF.cross_entropy(xt, torch.tensor(t), label_smoothing=0.1).backward()
    assert xe.grad.dtype is getattr(ember, dtype)
    tol = 1e-3 if dtype == "float16" else 1e-2
    np.testing.assert_allclose(xe.grad.float().numpy(), xt.grad.float().numpy(), rtol=tol,
                               atol=tol)


def test_third_derivative_is_refused_clearly():
    x = ember.tensor([0.3, -0.2], requires_grad=True)
    (g,) = ember.autograd.grad(F.gelu(x).sum(), x, create_graph=True)
    (h,) = ember.autograd.grad(g.sum(), x, create_graph=True)
    with pytest.raises(NotImplementedError, match=r"\[gelu\] derivatives of order 3"):
        ember.autograd.grad(h.sum(), x)

"""Every norm layer followed by every in-place activation, in training mode, against torch:
the norms' backward reads their input and statistics, never their output (PyTorch's
``native_batch_norm``/``native_layer_norm`` do the same), so an in-place op may follow them."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

NORMS = {
    "BatchNorm1d": (lambda m: m.BatchNorm1d(4), (6, 4, 5)),
    "BatchNorm1d_2d": (lambda m: m.BatchNorm1d(4), (6, 4)),
    "BatchNorm2d": (lambda m: m.BatchNorm2d(4), (3, 4, 5, 5)),
    "BatchNorm3d": (lambda m: m.BatchNorm3d(4), (2, 4, 3, 3, 2)),
    "InstanceNorm1d": (lambda m: m.InstanceNorm1d(4, affine=True, track_running_stats=True),
                       (3, 4, 7)),
    "InstanceNorm2d": (lambda m: m.InstanceNorm2d(4, affine=True), (3, 4, 5, 5)),
    "GroupNorm": (lambda m: m.GroupNorm(2, 4), (3, 4, 5, 5)),
    "LayerNorm": (lambda m: m.LayerNorm([5, 5]), (3, 4, 5, 5)),
}
ACTS = {
    "ReLU": lambda m: m.ReLU(inplace=True),
    "ReLU6": lambda m: m.ReLU6(inplace=True),
    "LeakyReLU": lambda m: m.LeakyReLU(0.2, inplace=True),
    "ELU": lambda m: m.ELU(inplace=True),
    "CELU": lambda m: m.CELU(inplace=True),
    "SELU": lambda m: m.SELU(inplace=True),
    "Hardtanh": lambda m: m.Hardtanh(-0.5, 0.5, inplace=True),
    "SiLU": lambda m: m.SiLU(inplace=True),
    "Mish": lambda m: m.Mish(inplace=True),
    "Hardswish": lambda m: m.Hardswish(inplace=True),
    "Hardsigmoid": lambda m: m.Hardsigmoid(inplace=True),
    "Threshold": lambda m: m.Threshold(0.1, -1.0, inplace=True),
}


def _pair(norm: str, act: str):  # noqa: ANN202
    make, shape = NORMS[norm]
    e = ember.nn.Sequential(make(ember.nn), ACTS[act](ember.nn))
    t = torch.nn.Sequential(make(torch.nn), ACTS[act](torch.nn)).double()
    e = e.double()
    rng = np.random.default_rng(0)
    with torch.no_grad():  # non-trivial affine parameters, the same in both
        for (_, pt), (_, pe) in zip(t.named_parameters(), e.named_parameters()):
            v = rng.standard_normal(tuple(pt.shape)) * 0.5 + 1.0
            pt.copy_(torch.from_numpy(v))
            with ember.no_grad():
                pe.copy_(ember.tensor(v))
    x = rng.standard_normal(shape) * 2 + 0.3
    return e, t, x


def _run(e, t, x, step):  # noqa: ANN001, ANN202
    xe = ember.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    # a non-leaf input, so the in-place op's target is a real intermediate
    ye, yt = step(e)(xe * 1.0), t(xt * 1.0)
    g = np.random.default_rng(1).standard_normal(tuple(yt.shape))
    ye.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    return xe, xt, ye, yt


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("norm", sorted(NORMS))
def test_norm_then_inplace_activation(norm: str, act: str) -> None:
    e, t, x = _pair(norm, act)
    e.train()
    t.train()
    xe, xt, ye, yt = _run(e, t, x, lambda m: m)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-10)
    # torch's float64 hardsigmoid backward multiplies by the float32 constant 1/6 (its CPU
    # kernel's ``1.0f / 6.0f``), 3e-8 away from ember's exact 1/6
    rtol = 1e-7 if act == "Hardsigmoid" else 1e-8
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=rtol, atol=1e-10)
    for (n, pt), (_, pe) in zip(t.named_parameters(), e.named_parameters()):
        np.testing.assert_allclose(pe.grad.numpy(), pt.grad.numpy(), rtol=rtol, atol=1e-10,
                                   err_msg=n)
    for (n, bt), (_, be) in zip(t.named_buffers(), e.named_buffers()):
        np.testing.assert_allclose(be.numpy(), bt.numpy(), rtol=1e-10, atol=1e-12, err_msg=n)


@pytest.mark.parametrize("norm", ["BatchNorm2d", "GroupNorm", "LayerNorm"])
def test_norm_then_inplace_relu_compiled(norm: str) -> None:
    """The compiled training step (forward + backward) gives eager's numbers."""
    e, t, x = _pair(norm, "ReLU")
    e.train()
    xe, xt, ye, yt = _run(e, t, x, lambda m: ember.compile(m))
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-8, atol=1e-10)
    for (n, pt), (_, pe) in zip(t.named_parameters(), e.named_parameters()):
        np.testing.assert_allclose(pe.grad.numpy(), pt.grad.numpy(), rtol=1e-8, atol=1e-10,
                                   err_msg=n)
    for (n, bt), (_, be) in zip(t.named_buffers(), e.named_buffers()):
        np.testing.assert_allclose(be.numpy(), bt.numpy(), rtol=1e-10, atol=1e-12, err_msg=n)


def test_layer_norm_output_modified_in_place_still_differentiable_twice() -> None:
    """Double backward still reaches the statistics' terms with y no longer saved."""
    x = np.random.default_rng(2).standard_normal((4, 3, 5))
    xe = ember.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    for mod, xx in ((ember, xe), (torch, xt)):
        y = mod.nn.functional.batch_norm(xx, None, None, training=True)
        (g,) = mod.autograd.grad((y * y * y).sum(), xx, create_graph=True)
        (g * g).sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-8, atol=1e-10)

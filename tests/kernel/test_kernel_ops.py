"""Kernel-language examples as ``triton_op``s: eager values and gradients against torch,
compiled graphs that place the kernels in their C (0 externs), export's contract."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import Tensor
from ember.compiler.c.backend import last_compiled
from ember.library import kernel_op, triton_op, wrap_kernel, wrap_triton
from tests.kernel.conftest import load_example

torch = pytest.importorskip("torch")
sm = load_example("softmax")
ln = load_example("layer_norm")
mm = load_example("matmul")


@triton_op("kernel_tests::softmax", mutates_args=())
def k_softmax(x: Tensor) -> Tensor:
    rows, cols = x.shape
    out = ember.empty_like(x)
    wrap_triton(sm.softmax_kernel)[(rows,)](out, x, x.stride(0), out.stride(0), cols,
                                           BLOCK=sm.next_power_of_2(cols))
    return out


def _sm_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _sm_backward(ctx, grad):
    y, = ctx.saved_tensors
    return y * (grad - (grad * y).sum(-1, keepdim=True))


k_softmax.register_autograd(_sm_backward, setup_context=_sm_setup)


@kernel_op("kernel_tests::layer_norm", mutates_args=())
def k_layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    rows, cols = x.shape
    y = ember.empty_like(x)
    wrap_kernel(ln.layer_norm_kernel)[(rows,)](x, weight, bias, y, x.stride(0), cols, eps,
                                               BLOCK=ln.next_power_of_2(cols))
    return y


def _ln_setup(ctx, inputs, output):
    x, w, b, eps = inputs
    ctx.save_for_backward(x, w, b)
    ctx.eps = eps


def _ln_backward(ctx, grad):
    x, w, b = ctx.saved_tensors
    with ember.enable_grad():
        xd, wd, bd = (t.detach().requires_grad_() for t in (x, w, b))
        y = ember.nn.functional.layer_norm(xd, (x.shape[-1],), wd, bd, ctx.eps)
        return (*ember.autograd.grad(y, (xd, wd, bd), grad), None)


k_layer_norm.register_autograd(_ln_backward, setup_context=_ln_setup)


@triton_op("kernel_tests::linear_relu", mutates_args=())
def k_linear_relu(a: Tensor, b: Tensor, bias: Tensor) -> Tensor:
    return mm.matmul_bias_act(a, b, bias, "relu")


def _mm_setup(ctx, inputs, output):
    a, b, _ = inputs
    ctx.save_for_backward(a, b, output)


def _mm_backward(ctx, grad):
    a, b, out = ctx.saved_tensors
    g = grad * (out > 0)
    return g @ b.T, a.T @ g, g.sum(0)


k_linear_relu.register_autograd(_mm_backward, setup_context=_mm_setup)


def _t(x):
    return torch.from_numpy(x.detach().numpy().copy()).requires_grad_(x.requires_grad)


def test_softmax_values_and_grad(mode):
    x = ember.randn(7, 33, requires_grad=True)
    w = ember.randn(7, 33)
    y = k_softmax(x)
    (y * w).sum().backward()
    tx = _t(x)
    ty = torch.softmax(tx, -1)
    (ty * _t(w)).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_layer_norm_values_and_grads(mode):
    x = ember.randn(5, 48, requires_grad=True)
    w = ember.randn(48, requires_grad=True)
    b = ember.randn(48, requires_grad=True)
    g = ember.randn(5, 48)
    y = k_layer_norm(x, w, b, 1e-5)
    (y * g).sum().backward()
    tx, tw, tb = _t(x), _t(w), _t(b)
    ty = torch.nn.functional.layer_norm(tx, (48,), tw, tb, 1e-5)
    (ty * _t(g)).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    for e, t in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_matmul_epilogue_values_and_grads(mode):
    a, b = ember.randn(45, 70, requires_grad=True), ember.randn(70, 33, requires_grad=True)
    bias = ember.randn(33, requires_grad=True)
    g = ember.randn(45, 33)
    got = k_linear_relu(a, b, bias)
    (got * g).sum().backward()
    ta, tb, tbias = _t(a), _t(b), _t(bias)
    ref = torch.relu(ta @ tb + tbias)
    (ref * _t(g)).sum().backward()
    np.testing.assert_allclose(got.detach().numpy(), ref.detach().numpy(), rtol=1e-4,
                               atol=1e-4)
    for e, t in ((a, ta), (b, tb), (bias, tbias)):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_compiled_graph_places_kernels_in_its_c():
    def f(x, w, b, a, m, bias):
        h = k_layer_norm(x * 2, w, b, 1e-5)
        return k_softmax(h) + k_linear_relu(a, m, bias).sum()

    args = (ember.randn(6, 40), ember.randn(40), ember.randn(40), ember.randn(20, 24),
            ember.randn(24, 16), ember.randn(16))
    got = ember.compile(f, fullgraph=True)(*args)
    lc = last_compiled()
    assert lc.extern_count == 0, lc.externs
    src = lc.source
    assert "ek_softmax_kernel_" in src and "ek_layer_norm_kernel_" in src and \
        "ek_matmul_kernel_" in src
    ta = [_t(a) for a in args]
    ref = torch.softmax(torch.nn.functional.layer_norm(ta[0] * 2, (40,), ta[1], ta[2]), -1) \
        + torch.relu(ta[3] @ ta[4] + ta[5]).sum()
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)


def test_compiled_backward_through_a_kernel_op():
    x = ember.randn(4, 20, requires_grad=True)
    w = ember.randn(4, 20)
    f = ember.compile(lambda x: (k_softmax(x * 3) * w).sum(), fullgraph=True)
    f(x).backward()
    tx = _t(x)
    (torch.softmax(tx * 3, -1) * _t(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_export_keeps_the_op_unless_asked():
    class M(ember.nn.Module):
        def forward(self, x):
            return k_softmax(x) * 3

    ep = ember.export.export(M(), (ember.randn(4, 10),))
    targets = [getattr(n.target, "name", "") for n in ep.graph.nodes if n.op == "call_function"]
    assert "kernel_tests.softmax.default" in targets
    ep2 = ep.run_decompositions(decompose_custom_triton_ops=True)
    targets2 = [getattr(n.target, "name", "") for n in ep2.graph.nodes
                if n.op == "call_function"]
    assert "kernel_launch" in targets2 and "kernel_tests.softmax.default" not in targets2
    x = ember.randn(4, 10)
    ref = torch.softmax(_t(x), -1) * 3
    for prog in (ep, ep2):
        np.testing.assert_allclose(prog.module()(x).numpy(), ref.numpy(), rtol=1e-5,
                                   atol=1e-6)
    kept = ep.run_decompositions()
    assert "kernel_tests.softmax.default" in [getattr(n.target, "name", "")
                                              for n in kept.graph.nodes]


def test_wrap_triton_rejects_plain_functions():
    with pytest.raises(RuntimeError, match="wrap_triton only works on functions annotated"):
        wrap_triton(lambda x: x)


def test_a_kernel_that_does_not_compile_raises_with_its_line():
    import ember.kernel as tl

    @tl.jit
    def bad(x_ptr, out_ptr):
        tl.store(out_ptr, tl.load(x_ptr + 0.5))

    @triton_op("kernel_tests::bad", mutates_args=())
    def bad_op(x: Tensor) -> Tensor:
        out = ember.empty_like(x)
        wrap_triton(bad)[(1,)](x, out)
        return out

    with pytest.raises(TypeError, match=r"bad line \d+: pointer arithmetic needs integer"):
        bad_op(ember.randn(3))


def test_a_mutating_kernel_op_eager_and_compiled():
    import ember.kernel as tl

    @tl.jit
    def add_into(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
                 mask=m)

    @triton_op("kernel_tests::add_", mutates_args={"x"})
    def add_(x: Tensor, y: Tensor) -> None:
        n = x.numel()
        wrap_triton(add_into)[(tl.cdiv(n, 64),)](x, y, n, BLOCK=64)

    x0, y = ember.randn(100), ember.randn(100)
    x = x0.clone()
    add_(x, y)
    np.testing.assert_allclose(x.numpy(), x0.numpy() + y.numpy(), rtol=1e-6)

    def f(x, y):
        add_(x, y)
        return x * 2

    x = x0.clone()
    out = ember.compile(f, fullgraph=True)(x, y)
    assert last_compiled().extern_count == 0, last_compiled().externs
    np.testing.assert_allclose(x.numpy(), x0.numpy() + y.numpy(), rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), 2 * (x0.numpy() + y.numpy()), rtol=1e-6)

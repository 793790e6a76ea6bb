"""Pointwise fusion into a kernel op's loads and stores (``ember/compiler/c/kernel_fusion.py``):
compiled values against torch, and the compiled program's kernels and buffers (fused: one
kernel and no temporaries; not legal: the pointwise kernels stay)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.kernel as tl
from ember import Tensor
from ember.compiler.c.backend import last_compiled
from ember.compiler.c.ir.kernels import UserKernel
from ember.library import triton_op, wrap_triton
from tests.kernel.conftest import load_example

torch = pytest.importorskip("torch")
sm = load_example("softmax")
ln = load_example("layer_norm")


@triton_op("kernel_fusion_tests::softmax", mutates_args=())
def k_softmax(x: Tensor) -> Tensor:
    rows, cols = x.shape
    out = ember.empty_like(x)
    wrap_triton(sm.softmax_kernel)[(rows,)](out, x, x.stride(0), out.stride(0), cols,
                                           BLOCK=sm.next_power_of_2(cols))
    return out


@triton_op("kernel_fusion_tests::layer_norm", mutates_args=())
def k_layer_norm(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    rows, cols = x.shape
    y = ember.empty_like(x)
    wrap_triton(ln.layer_norm_kernel)[(rows,)](x, w, b, y, x.stride(0), cols, 1e-5,
                                               BLOCK=ln.next_power_of_2(cols))
    return y


@tl.jit
def _accumulate(acc_ptr, x_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(acc_ptr + offs, tl.load(acc_ptr + offs, mask=m) + tl.load(x_ptr + offs, mask=m),
             mask=m)


@triton_op("kernel_fusion_tests::acc", mutates_args=())
def k_acc(a: Tensor, x: Tensor) -> Tensor:
    out = a.clone()   # not fresh, and the kernel reads what it stores: no epilogue fusion
    n = x.numel()
    wrap_triton(_accumulate)[(tl.cdiv(n, 64),)](out, x, n, BLOCK=64)
    return out


def _program():
    lc = last_compiled()
    assert lc.extern_count == 0, lc.externs
    kernels = [k for s in lc.program.segments() for k in s.kernels]
    bufs = [b for s in lc.program.segments() for b in s.buffers()]
    return kernels, [b for b in bufs if b.role == "temp"]


def _t(x):
    return torch.from_numpy(x.numpy().copy())


def test_producer_and_consumer_fuse_into_a_softmax_kernel():
    x, s, b = ember.randn(6, 50), ember.randn(6, 1), ember.randn(50)
    f = ember.compile(lambda x, s, b: ember.relu(k_softmax(x * s + b) - 0.01) * 3,
                      fullgraph=True)
    got = f(x, s, b)
    kernels, temps = _program()
    assert len(kernels) == 1 and isinstance(kernels[0], UserKernel), kernels
    assert len(temps) == 1  # the graph's output only: no materialized input or output
    assert "mul" in kernels[0].ops and "add" in kernels[0].ops and "relu" in kernels[0].ops
    ref = torch.relu(torch.softmax(_t(x) * _t(s) + _t(b), -1) - 0.01) * 3
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


def test_layer_norm_fuses_one_input_and_its_output():
    x, w, b = ember.randn(5, 33), ember.randn(33), ember.randn(33)
    f = ember.compile(lambda x, w, b: ember.tanh(k_layer_norm(x * 0.5, w, b)), fullgraph=True)
    got = f(x, w, b)
    kernels, temps = _program()
    assert len(kernels) == 1 and len(temps) == 1, kernels
    ref = torch.tanh(torch.nn.functional.layer_norm(_t(x) * 0.5, (33,), _t(w), _t(b)))
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


def test_the_benchmark_graph_is_one_kernel():
    x = ember.randn(8, 40)
    got = ember.compile(lambda x: k_softmax(x * 2) + 1, fullgraph=True)(x)
    kernels, temps = _program()
    assert len(kernels) == 1 and len(temps) == 1
    # the launch's int arguments (strides, n_cols = 40) are literals in the graph's C
    assert "((int64_t)40LL)" in last_compiled().source
    np.testing.assert_allclose(got.numpy(), (torch.softmax(_t(x) * 2, -1) + 1).numpy(),
                               rtol=1e-6)


def test_values_used_elsewhere_are_not_fused():
    # the producer is also returned and the kernel's output is also returned: both stay in
    # memory, so the pointwise kernels stay kernels of their own
    x = ember.randn(4, 20)
    f = ember.compile(lambda x: (x * 2, k_softmax(x * 2), k_softmax(x * 2) + 1), fullgraph=True)
    h, y, z = f(x)
    kernels, _ = _program()
    assert sum(isinstance(k, UserKernel) for k in kernels) == 2
    assert len(kernels) > 2
    ref = torch.softmax(_t(x) * 2, -1)
    np.testing.assert_allclose(h.numpy(), x.numpy() * 2, rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-6)
    np.testing.assert_allclose(z.numpy(), (ref + 1).numpy(), rtol=1e-6)


def test_a_kernel_that_reads_what_it_stores_keeps_its_consumer_apart():
    a, x = ember.randn(100), ember.randn(100)
    got = ember.compile(lambda a, x: k_acc(a, x * 2) * 3, fullgraph=True)(a, x)
    kernels, _ = _program()
    u = next(k for k in kernels if isinstance(k, UserKernel))
    assert "mul" in u.ops   # x * 2 fuses into the load of x_ptr (read only)
    # the consumer * 3 stays a kernel of its own: acc_ptr is loaded and stored
    assert any(not isinstance(k, UserKernel) and k.ops == ["mul"] for k in kernels), kernels
    np.testing.assert_allclose(got.numpy(), (a.numpy() + 2 * x.numpy()) * 3, rtol=1e-6)


def test_low_precision_and_random_producers_are_not_fused():
    x = ember.randn(4, 24)
    f = ember.compile(lambda x: k_softmax((x * 2).to(ember.bfloat16).float()), fullgraph=True)
    got = f(x)
    ref = torch.softmax((_t(x) * 2).to(torch.bfloat16).float(), -1)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-6)
    ember.manual_seed(0)
    drop = ember.compile(lambda x: k_softmax(ember.nn.functional.dropout(x, 0.5)),
                         fullgraph=True)(x)
    kernels, _ = _program()
    assert len(kernels) == 2  # dropout reads the kernel's flat index: stays a kernel
    ember.manual_seed(0)
    eager = ember.softmax(ember.nn.functional.dropout(x, 0.5), -1)
    np.testing.assert_allclose(drop.numpy(), eager.numpy(), rtol=1e-6)


def test_backward_through_a_fused_kernel_op():
    x = ember.randn(4, 20, requires_grad=True)
    w = ember.randn(4, 20)

    def setup(ctx, inputs, output):
        ctx.save_for_backward(output)

    def backward(ctx, grad):
        y, = ctx.saved_tensors
        return y * (grad - (grad * y).sum(-1, keepdim=True))

    k_softmax.register_autograd(backward, setup_context=setup)
    try:
        f = ember.compile(lambda x: (k_softmax(x * 3) * w).sum(), fullgraph=True)
        f(x).backward()
    finally:
        k_softmax._backward = None
    tx = _t(x.detach()).requires_grad_()
    (torch.softmax(tx * 3, -1) * _t(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_a_bfloat16_operand_is_not_fused():
    x = ember.randn(4, 24)
    got = ember.compile(lambda x: k_softmax((x * 2).to(ember.bfloat16)), fullgraph=True)(x)
    kernels, _ = _program()
    assert len(kernels) == 2  # a bfloat16 value rounds when stored: it stays in memory
    assert got.dtype == ember.bfloat16
    ref = torch.softmax((_t(x) * 2).to(torch.bfloat16), -1)
    np.testing.assert_allclose(got.float().numpy(), ref.float().numpy(), rtol=1e-2, atol=1e-3)


def test_a_lifted_python_scalar_keeps_the_producer_apart():
    x = ember.randn(4, 24)
    f = ember.compile(lambda x, s: k_softmax(x * s), fullgraph=True)
    for s in (2.0, 3.0, 0.5):
        got = f(x, s)
        np.testing.assert_allclose(got.numpy(), torch.softmax(_t(x) * s, -1).numpy(),
                                   rtol=1e-6)


@tl.jit
def _axpy(out_ptr, x_ptr, a, n, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=m) + a * tl.load(x_ptr + offs, mask=m),
             mask=m)


@triton_op("kernel_fusion_tests::weighted_sum", mutates_args=())
def k_weighted_sum(xs: list[Tensor], weights: list[float]) -> Tensor:
    out = ember.zeros_like(xs[0])
    n = out.numel()
    for x, a in zip(xs, weights):
        wrap_triton(_axpy)[(tl.cdiv(n, 64),)](out, x, a, n, BLOCK=64)
    return out


def test_a_kernel_op_with_list_arguments():
    assert k_weighted_sum.schema == "(Tensor[] xs, float[] weights) -> Tensor"
    xs = [ember.randn(100) for _ in range(3)]
    ref = 0.5 * _t(xs[0]) - 2.0 * _t(xs[1]) + 3.0 * _t(xs[2])
    np.testing.assert_allclose(k_weighted_sum(xs, [0.5, -2.0, 3.0]).numpy(), ref.numpy(),
                               rtol=1e-5, atol=1e-6)
    got = ember.compile(lambda a, b, c: k_weighted_sum([a, b, c], [0.5, -2.0, 3.0]),
                        fullgraph=True)(*xs)
    kernels, _ = _program()
    assert sum(isinstance(k, UserKernel) for k in kernels) == 3
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


def test_a_producer_that_also_stores_a_graph_output_keeps_that_store():
    x = ember.randn(4, 30)
    h, y = ember.compile(lambda x: (x * 2, k_softmax(x * 2 + 1)), fullgraph=True)(x)
    kernels, _ = _program()
    u = next(k for k in kernels if isinstance(k, UserKernel))
    assert "add" in u.ops and len(kernels) == 2  # x * 2 + 1 in the load; x * 2 still stored
    np.testing.assert_allclose(h.numpy(), x.numpy() * 2, rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), torch.softmax(_t(x) * 2 + 1, -1).numpy(), rtol=1e-6)


def test_an_eager_launch_gets_an_unmasked_body_for_full_blocks():
    # ``cols < n_cols`` with n_cols a runtime int: a second program body for n_cols >= BLOCK
    # (all-true masks) is chosen at run time; both bodies must give torch's values
    for cols in (64, 50, 1):
        x = ember.randn(3, cols)
        out = ember.empty_like(x)
        sm.softmax_kernel[(3,)](out, x, x.stride(0), out.stride(0), cols, BLOCK=64)
        np.testing.assert_allclose(out.numpy(), torch.softmax(_t(x), -1).numpy(), rtol=1e-6)
    bound = sm.softmax_kernel.bind((out, x, 1, 1, 1), {"BLOCK": 64})
    src = sm.softmax_kernel.compiled(bound).source
    assert "_full(" in src and "if ((a_n_cols >= 64))" in src

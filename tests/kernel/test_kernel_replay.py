"""A kernel op inside ``ember.compile`` on cache hits: its body's recorded nodes are replayed
instead of running its Python (PyTorch's triton_op contract; torch.compile does not rerun the
body either).  Values follow the inputs on every call, a changed argument, shape or layout runs
the body again, gradients still flow, and nothing recompiles."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.kernel as tl
from ember import Tensor
from ember.compiler.frontend.backends import lookup_backend
from ember.library import triton_op, wrap_triton

torch = pytest.importorskip("torch")

RUNS = {"axpy": 0, "swap": 0, "const": 0}


@tl.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, a, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
             mask=m)


@triton_op("kernel_replay_tests::axpy", mutates_args=())
def axpy(x: Tensor, y: Tensor, a: float) -> Tensor:
    RUNS["axpy"] += 1
    out = ember.empty_like(x)
    n = x.numel()
    wrap_triton(axpy_kernel)[(tl.cdiv(n, 32),)](x, y, out, n, a, BLOCK=32)
    return out


def _axpy_backward(ctx, grad):
    return grad * ctx.a, grad, None


def _axpy_setup(ctx, inputs, output):
    ctx.a = inputs[2]


axpy.register_autograd(_axpy_backward, setup_context=_axpy_setup)


@triton_op("kernel_replay_tests::swap", mutates_args=())
def swap_first(x: Tensor, y: Tensor) -> Tensor:
    """Touches ``y`` before ``x``: graph inputs are registered in the body's order."""
    RUNS["swap"] += 1
    y2 = y * 1.0
    out = ember.empty_like(x)
    n = x.numel()
    wrap_triton(axpy_kernel)[(tl.cdiv(n, 32),)](x, y2, out, n, 3.0, BLOCK=32)
    return out


@triton_op("kernel_replay_tests::with_const", mutates_args=())
def with_const(x: Tensor) -> Tensor:
    """Makes a tensor of its own (a graph input): never replayed, still correct."""
    RUNS["const"] += 1
    ones = ember.ones(x.shape)
    out = ember.empty_like(x)
    n = x.numel()
    wrap_triton(axpy_kernel)[(tl.cdiv(n, 32),)](x, ones, out, n, 2.0, BLOCK=32)
    return out


class CountingC:
    def __init__(self):
        self.count = 0
        self.c = lookup_backend("c")

    def __call__(self, graph, example_inputs):
        self.count += 1
        return self.c(graph, example_inputs)


def _t(x):
    return torch.from_numpy(x.detach().numpy().copy())


def test_values_follow_the_inputs_and_the_body_runs_only_while_tracing():
    cb = CountingC()
    f = ember.compile(lambda x, y: axpy(x * 2, y, 1.5) + 1, backend=cb)
    RUNS["axpy"] = 0
    for _ in range(5):
        x, y = ember.randn(70), ember.randn(70)
        ref = (1.5 * (_t(x) * 2) + _t(y)) + 1
        np.testing.assert_allclose(f(x, y).numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    # the first call compiles, the second records what the body did, later calls replay it
    assert RUNS["axpy"] == 2 and cb.count == 1


def test_a_changed_argument_or_shape_runs_the_body_again():
    cb = CountingC()
    f = ember.compile(lambda x, y, a: axpy(x, y, a), backend=cb, dynamic=False)
    RUNS["axpy"] = 0
    for n, a in ((40, 2.0), (40, 2.0), (40, 2.0), (40, -1.0), (90, -1.0), (40, 2.0)):
        x, y = ember.randn(n), ember.randn(n)
        np.testing.assert_allclose(f(x, y, a).numpy(), (a * _t(x) + _t(y)).numpy(),
                                   rtol=1e-6, atol=1e-6)
    assert RUNS["axpy"] >= 4  # calls 1, 2, and the ones whose a or n changed


def test_inputs_registered_in_the_bodys_order_no_recompile():
    cb = CountingC()
    f = ember.compile(lambda x, y: swap_first(x, y), backend=cb)
    RUNS["swap"] = 0
    for _ in range(4):
        x, y = ember.randn(50), ember.randn(50)
        np.testing.assert_allclose(f(x, y).numpy(), (3 * _t(x) + _t(y)).numpy(), rtol=1e-6,
                                   atol=1e-6)
    assert cb.count == 1 and RUNS["swap"] == 2


def test_a_body_with_its_own_tensors_is_not_replayed():
    f = ember.compile(lambda x: with_const(x))
    RUNS["const"] = 0
    for _ in range(4):
        x = ember.randn(33)
        np.testing.assert_allclose(f(x).numpy(), (2 * _t(x) + 1).numpy(), rtol=1e-6)
    assert RUNS["const"] == 4


def test_gradients_on_replayed_calls():
    f = ember.compile(lambda x, y: (axpy(x, y, 2.5) * 3).sum())
    RUNS["axpy"] = 0
    for _ in range(4):
        x = ember.randn(45, requires_grad=True)
        y = ember.randn(45, requires_grad=True)
        f(x, y).backward()
        np.testing.assert_allclose(x.grad.numpy(), np.full(45, 7.5), rtol=1e-6)
        np.testing.assert_allclose(y.grad.numpy(), np.full(45, 3.0), rtol=1e-6)
    assert RUNS["axpy"] == 2


def test_two_calls_of_one_op_in_a_graph():
    f = ember.compile(lambda x, y: axpy(axpy(x, y, 2.0), x, -1.0))
    RUNS["axpy"] = 0
    for _ in range(4):
        x, y = ember.randn(64), ember.randn(64)
        ref = -1.0 * (2.0 * _t(x) + _t(y)) + _t(x)
        np.testing.assert_allclose(f(x, y).numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    assert RUNS["axpy"] == 4  # two per traced call

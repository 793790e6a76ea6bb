"""Compiled autograd: the backward of graphs recorded in compiled code is recorded lazily and
realized as one graph when the engine finishes (ARCHITECTURE.md §4).

Case A: ``loss.backward()`` inside the compiled function (the active trace records it).
Case B: the forward is compiled, ``loss.backward()`` runs outside; the autograd nodes remember
that they came from compiled code and the engine runs under a trace of its own.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from tests.compiler.helpers import Counting


def _mlp():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


def _data(n=3):
    ember.manual_seed(1)
    return [(ember.randn(5, 4), ember.randint(0, 3, (5,))) for _ in range(n)]


def _loss(m, x, y):
    return F.cross_entropy(m(x), y)


def _grads_equal(m1, m2):
    for (n, p), q in zip(m1.named_parameters(), m2.parameters()):
        assert (p.grad is None) == (q.grad is None), n
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy(), err_msg=n)


def test_backward_outside_runs_as_one_graph():
    be = Counting()
    m1, m2 = _mlp(), _mlp()
    cf = ember.compile(_loss, backend=be)
    kinds = []
    for x, y in _data(4):
        _loss(m1, x, y).backward()
        loss = cf(m2, x, y)
        n_graphs, n_runs = len(be.graphs), be.runs
        loss.backward()
        kinds.append((len(be.graphs) - n_graphs, be.runs - n_runs))
        _grads_equal(m1, m2)
    # one backward graph per call; compiled for the first call (grads None) and the second
    # (grads accumulate), then reused
    assert kinds == [(1, 1), (1, 1), (0, 1), (0, 1)]
    ops = be.graphs[1].ops()
    assert "cross_entropy_backward" in ops and "matmul" in ops
    for p in m2.parameters():
        assert isinstance(p.grad._data, np.ndarray)


def test_backward_outside_explain_counters():
    m = _mlp()
    (x, y), = _data(1)
    out = {}

    def fwd_and_bwd(m, x, y):
        loss = ember.compile(_loss)(m, x, y)
        loss.backward()
        out["loss"] = loss

    ex = ember.compiler.explain(fwd_and_bwd)(m, x, y)
    # explain compiles fwd_and_bwd itself, so the backward is recorded by its trace (case A)
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    assert "cross_entropy_backward" in ex.ops_per_graph[0]


def test_backward_inside_compiled_function():
    m1, m2 = _mlp(), _mlp()

    def step(m, x, y):
        loss = _loss(m, x, y)
        loss.backward()
        return loss

    for x, y in _data(2):
        a = step(m1, x, y)
        b = ember.compile(step)(m2, x, y)
        assert a.item() == b.item()
        _grads_equal(m1, m2)
    ex = ember.compiler.explain(step)(m2, *_data(1)[0])
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_retain_grad_and_hooks_inside():
    def f(x):
        y = x * 2
        y.retain_grad()
        y.register_hook(lambda g: g * 3)
        seen = []
        x.register_hook(lambda g: seen.append(g.shape))
        (y.sin()).sum().backward()
        return y.grad * 1, len(seen)

    a = ember.arange(4.0).requires_grad_()
    b = ember.arange(4.0).requires_grad_()
    ra, rb = f(a), ember.compile(f)(b)
    np.testing.assert_array_equal(ra[0].numpy(), rb[0].numpy())
    assert ra[1] == rb[1] == 1
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
    ex = ember.compiler.explain(f)(ember.arange(4.0).requires_grad_())
    assert ex.graph_break_count == 0


def test_hooks_and_retain_grad_backward_outside():
    def fwd(x):
        y = x.exp()
        y.retain_grad()
        y.register_hook(lambda g: g * 2)
        return (y * y).sum(), y

    a = ember.arange(3.0).requires_grad_()
    b = ember.arange(3.0).requires_grad_()
    la, ya = fwd(a)
    lb, yb = ember.compile(fwd)(b)
    la.backward()
    lb.backward()
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
    np.testing.assert_array_equal(ya.grad.numpy(), yb.grad.numpy())
    assert isinstance(yb.grad._data, np.ndarray)


def test_hook_reading_values_breaks_the_backward_graph():
    be = Counting()
    seen = []

    def fwd(x):
        y = x * x
        y.register_hook(lambda g: seen.append(g.sum().item()))
        return (y * 3).sum()

    a = ember.arange(3.0).requires_grad_()
    loss = ember.compile(fwd, backend=be)(a)
    n = len(be.graphs)
    loss.backward()
    assert seen == [9.0]
    assert len(be.graphs) - n == 2  # the graph before the hook's .item(), then the rest
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 6.0, 12.0])


def test_autograd_grad_outside():
    be = Counting()

    def fwd(x, w):
        return ((x @ w).tanh() ** 2).sum()

    ember.manual_seed(0)
    x, w = ember.randn(3, 4), ember.randn(4, 2, requires_grad=True)
    ref = ember.autograd.grad(fwd(x, w), w)
    loss = ember.compile(fwd, backend=be)(x, w)
    n = len(be.graphs)
    got = ember.autograd.grad(loss, w)
    assert len(be.graphs) - n == 1
    np.testing.assert_array_equal(ref[0].numpy(), got[0].numpy())
    assert isinstance(got[0]._data, np.ndarray) and w.grad is None


def test_double_backward_outside():
    def fwd(x):
        return (x ** 3).sum()

    a = ember.arange(3.0).requires_grad_()
    b = ember.arange(3.0).requires_grad_()
    (ga,) = ember.autograd.grad(fwd(a), a, create_graph=True)
    (gb,) = ember.autograd.grad(ember.compile(fwd)(b), b, create_graph=True)
    np.testing.assert_array_equal(ga.detach().numpy(), gb.detach().numpy())
    assert gb.grad_fn is not None
    ga.sum().backward()
    gb.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_backward_with_inputs_and_retain_graph_outside():
    def fwd(x, w):
        return (x * w).sum() * 2

    w1, w2 = ember.ones(3, requires_grad=True), ember.ones(3, requires_grad=True)
    x1, x2 = ember.arange(3.0).requires_grad_(), ember.arange(3.0).requires_grad_()
    la, lb = fwd(x1, w1), ember.compile(fwd)(x2, w2)
    la.backward(inputs=[w1], retain_graph=True)
    lb.backward(inputs=[w2], retain_graph=True)
    assert x1.grad is None and x2.grad is None
    np.testing.assert_array_equal(w1.grad.numpy(), w2.grad.numpy())
    la.backward()
    lb.backward()
    np.testing.assert_array_equal(w1.grad.numpy(), w2.grad.numpy())
    np.testing.assert_array_equal(x1.grad.numpy(), x2.grad.numpy())


def test_backward_through_in_place_on_a_view_outside():
    def fwd(x):
        y = x * 2
        y[0] = 1.0
        y[:, 1].mul_(3)
        return (y.exp() * x).sum()

    ember.manual_seed(0)
    a = ember.randn(3, 4, requires_grad=True)
    b = a.detach().clone().requires_grad_()
    fwd(a).backward()
    loss = ember.compile(fwd)(b)
    assert loss.grad_fn._compiled_by is not None
    loss.backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)


def test_backward_twice_without_retain_graph_errors():
    def fwd(x):
        return (x.sin() * x).sum()

    loss = ember.compile(fwd)(ember.arange(3.0).requires_grad_())
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_eager_backward_is_unchanged():
    be = Counting()
    x = ember.arange(3.0).requires_grad_()
    (x * x).sum().backward()
    assert be.graphs == [] and x.grad.tolist() == [0.0, 2.0, 4.0]
    assert not ember.compiler.is_compiling()


def test_backward_cache_is_per_forward_and_reset():
    be = Counting()

    def f1(x):
        return (x * x).sum()

    def f2(x):
        return x.exp().sum()

    x = ember.arange(3.0).requires_grad_()
    for _ in range(2):
        ember.compile(f1, backend=be)(x).backward()
        ember.compile(f2, backend=be)(x).backward()
    n = len(be.graphs)
    ember.compile(f1, backend=be)(x).backward()
    assert len(be.graphs) == n  # cached
    ember.compiler.reset()
    ember.compile(f1, backend=be)(x).backward()
    assert len(be.graphs) == n + 2  # forward and backward compiled again


class _Square(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


@pytest.mark.parametrize("where", ["inside", "outside", "function-only"])
def test_custom_function_backward(where):
    be = Counting()

    def fwd(x):
        return _Square.apply(x.sin()).sum()

    def step(x):
        loss = fwd(x)
        loss.backward()
        return loss

    def only(x):
        return _Square.apply(x)

    a = ember.arange(3.0).requires_grad_()
    b = ember.arange(3.0).requires_grad_()
    if where == "inside":
        step(a)
        ember.compile(step, backend=be)(b)
        assert len(be.graphs) == 1
    elif where == "outside":
        fwd(a).backward()
        loss = ember.compile(fwd, backend=be)(b)
        loss.backward()
        assert len(be.graphs) == 2
    else:  # the only node between the eager loss and the leaf comes from a custom Function
        only(a).sum().backward()
        y = ember.compile(only, backend=be)(b)
        y.sum().backward()
        assert len(be.graphs) == 2
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())

"""The autograd engine: accumulation, retain_graph, grad(), double backward, hooks, version
counters, grad modes, Function, gradcheck.  Compared with PyTorch where it is the oracle."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.autograd import Function

torch = pytest.importorskip("torch")


def both(values, requires_grad=True):
    return (ember.tensor(values, dtype=ember.float64, requires_grad=requires_grad),
            torch.tensor(values, dtype=torch.float64, requires_grad=requires_grad))


def close(e, t):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_grad_accumulates_across_backward_calls():
    for lib, x in zip((ember, torch), both([1.0, 2.0, 3.0])):
        for _ in range(2):
            (x * x).sum().backward()
    e, t = both([1.0, 2.0, 3.0])
    for _ in range(2):
        (e * e).sum().backward()
        (t * t).sum().backward()
    close(e.grad, t.grad)


def test_second_backward_without_retain_graph_raises():
    e, _ = both([1.0, 2.0])
    y = (e * e).sum()
    y.backward(retain_graph=True)
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_nonscalar_backward_needs_gradient():
    e, t = both([1.0, 2.0])
    with pytest.raises(RuntimeError, match="implicitly created only for scalar outputs"):
        (e * 2).backward()
    (e * e).backward(gradient=ember.tensor([1.0, 0.5], dtype=ember.float64))
    (t * t).backward(gradient=torch.tensor([1.0, 0.5], dtype=torch.float64))
    close(e.grad, t.grad)


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        ember.tensor([1.0]).sum().backward()


def test_autograd_grad_and_double_backward():
    e, t = both([0.5, -1.5, 2.0])
    ge, = ember.autograd.grad((e * e * e).sum(), e, create_graph=True)
    gt, = torch.autograd.grad((t * t * t).sum(), t, create_graph=True)
    close(ge, gt)
    assert e.grad is None  # grad() does not accumulate
    gge, = ember.autograd.grad(ge.sum(), e)
    ggt, = torch.autograd.grad(gt.sum(), t)
    close(gge, ggt)  # 6x


def test_double_backward_through_saved_output():
    e, t = both([0.5, -1.0])
    ge, = ember.autograd.grad(e.exp().sum(), e, create_graph=True)
    gt, = torch.autograd.grad(t.exp().sum(), t, create_graph=True)
    (ge * ge).sum().backward()
    (gt * gt).sum().backward()
    close(e.grad, t.grad)


def test_allow_unused_and_materialize():
    a, _ = both([1.0])
    b, _ = both([2.0])
    with pytest.raises(RuntimeError, match="not have been used"):
        ember.autograd.grad((a * 2).sum(), [a, b])
    ga, gb = ember.autograd.grad((a * 2).sum(), [a, b], allow_unused=True)
    assert gb is None and ga.item() == 2.0
    ga, gb = ember.autograd.grad((a * 2).sum(), [a, b], materialize_grads=True)
    assert gb.tolist() == [0.0]


def test_grad_of_nonleaf_and_backward_inputs():
    e, t = both([1.0, 2.0])
    ye, yt = e * 3, t * 3
    g1, = ember.autograd.grad((ye * ye).sum(), ye)
    g2, = torch.autograd.grad((yt * yt).sum(), yt)
    close(g1, g2)
    a, _ = both([1.0])
    b, _ = both([2.0])
    (a * b).sum().backward(inputs=[a])
    assert a.grad.item() == 2.0 and b.grad is None


def test_tensor_hooks_modify_grad_and_remove():
    e, t = both([1.0, 2.0])
    he = e.register_hook(lambda g: g * 10)
    t.register_hook(lambda g: g * 10)
    (e * e).sum().backward()
    (t * t).sum().backward()
    close(e.grad, t.grad)
    he.remove()
    e.grad = None
    (e * e).sum().backward()
    assert e.grad.tolist() == [2.0, 4.0]


def test_nonleaf_hook_and_retain_grad():
    e, t = both([1.0, 2.0])
    ye, yt = e * 2, t * 2
    seen = []
    ye.register_hook(lambda g: seen.append(g.tolist()))
    ye.retain_grad()
    yt.retain_grad()
    (ye * ye).sum().backward()
    (yt * yt).sum().backward()
    assert seen == [yt.grad.tolist()]
    close(ye.grad, yt.grad)
    close(e.grad, t.grad)
    assert ye.retains_grad and not e.retains_grad


def test_hook_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ember.tensor([1.0]).register_hook(lambda g: g)


def test_version_counter_error():
    e, t = both([1.0, 2.0])
    ye = e * 1
    ze = ye * ye
    ye.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
        ze.sum().backward()
    assert "is at version 1; expected version 0 instead" in str(info.value)
    assert ye._version == 1


def test_views_share_the_version_counter():
    x = ember.zeros(4)
    v = x.view(2, 2)
    v.add_(1)
    assert x._version == v._version == 1
    assert x.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_inplace_on_leaf_requiring_grad_raises():
    e, _ = both([1.0])
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        e.mul_(2)
    with ember.no_grad():
        e.mul_(2)
    assert e.item() == 2.0


def test_inplace_rebases_history_like_torch():
    e, t = both([1.0, 2.0, 3.0])
    ye, yt = e * 2, t * 2
    ye.mul_(ye)
    yt.mul_(yt) if False else yt.mul_(yt.detach())
    ye2, yt2 = e * 2, t * 2
    ye2.mul_(3).add_(ye2)
    yt2.mul_(3).add_(yt2)
    ye2.sum().backward()
    yt2.sum().backward()
    close(e.grad, t.grad)


def test_inplace_through_view_uses_copyslices():
    e, t = both([1.0, 2.0, 3.0, 4.0])
    for x, lib in ((e, ember), (t, torch)):
        y = x * 1
        y.view(2, 2).permute(1, 0).mul_(x.view(2, 2) * 0 + 3)
        (y * lib.tensor([1.0, 2.0, 3.0, 4.0], dtype=lib.float64)).sum().backward()
    close(e.grad, t.grad)


def test_grad_modes():
    x = ember.tensor([1.0], requires_grad=True)
    with ember.no_grad():
        assert not (x * 2).requires_grad
        with ember.enable_grad():
            assert (x * 2).requires_grad
    with ember.set_grad_enabled(False):
        assert not ember.is_grad_enabled()
    assert ember.is_grad_enabled()
    ember.set_grad_enabled(False)
    assert not (x * 2).requires_grad
    ember.set_grad_enabled(True)

    @ember.no_grad()
    def f(a):
        return a * 2

    assert not f(x).requires_grad
    with ember.inference_mode():
        y = x * 2
        assert not y.requires_grad and y.is_inference() and ember.is_inference_mode_enabled()
    assert not x.is_inference()


def test_detach_shares_memory_and_requires_grad_rules():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.is_leaf
    d.add_(1)
    assert x.tolist() == [2.0, 3.0] and x._version == 1
    with pytest.raises(RuntimeError, match="floating point"):
        ember.tensor([1, 2]).requires_grad_()
    y = x * 2
    assert not y.is_leaf and y.grad_fn.name() == "MulBackward0"
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad = False
    assert y.grad_fn.next_functions[0][0].name() == "AccumulateGrad"


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


def test_function_forward_backward_and_double_backward():
    e, t = both([1.0, -2.0])
    y = Cube.apply(e)
    assert y.grad_fn.name() == "CubeBackward"
    g, = ember.autograd.grad(y.sum(), e, create_graph=True)
    g.sum().backward()
    gt, = torch.autograd.grad((t * t * t).sum(), t, create_graph=True)
    gt.sum().backward()
    close(g, gt)
    close(e.grad, t.grad)
    assert ember.autograd.gradcheck(Cube.apply, (ember.tensor([0.3, 0.7], dtype=ember.float64,
                                                              requires_grad=True),))
    assert ember.autograd.gradgradcheck(Cube.apply, (ember.tensor(
        [0.3, 0.7], dtype=ember.float64, requires_grad=True),))


def test_function_ctx_features():
    seen = {}

    class Scale(Function):
        @staticmethod
        def forward(ctx, x, w, k):
            seen["needs"] = ctx.needs_input_grad
            ctx.k = k
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(w)
            return x * w, (x * 0).detach()

        @staticmethod
        def backward(ctx, g, g2):
            seen["g2"] = g2
            (w,) = ctx.saved_tensors
            return g * w * ctx.k, None, None

    x = ember.tensor([1.0, 2.0], requires_grad=True)
    w = ember.tensor([3.0, 4.0])
    out, aux = Scale.apply(x, w, 2)
    out.sum().backward()
    assert seen["needs"] == (True, False, False)
    assert seen["g2"] is None
    assert x.grad.tolist() == [6.0, 8.0]

    class AddOneInPlace(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    a = ember.tensor([1.0], requires_grad=True)
    b = a * 1
    c = AddOneInPlace.apply(b)
    assert c is b and b._version == 1
    c.sum().backward()
    assert a.grad.tolist() == [1.0]


def test_function_saved_tensor_version_check():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    z = Cube.apply(y)
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_gradcheck_catches_a_wrong_gradient():
    class Wrong(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = ember.tensor([0.5], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False) is False
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        ember.autograd.gradcheck(Wrong.apply, (x,))


def test_diamond_graph_and_shared_inputs_match_torch():
    e, t = both([0.3, 0.6])
    for x in (e, t):
        a = x * 2
        b = a * a
        c = a * 3
        ((b + c) * a).sum().backward()
    close(e.grad, t.grad)


def test_stale_view_after_base_write_matches_torch():
    e, t = both([1.0, 2.0, 3.0, 4.0])
    for x, lib in ((e, ember), (t, torch)):
        z = x * 1
        row = z.view(2, 2)[1]
        z.mul_(x)  # the base changes; row must see the new history
        (row * lib.tensor([1.0, 10.0], dtype=lib.float64)).sum().backward()
    close(e.grad, t.grad)


def test_linear_bias_grad_only():
    # a frozen weight and an input that does not require grad: only the bias gets a gradient
    # (nothing is saved for the backward)
    rng = np.random.default_rng(0)
    xs, ws, bs = (rng.standard_normal(s) for s in ((4, 3), (2, 3), (2,)))
    grads = []
    for lib, F in ((ember, ember.nn.functional), (torch, torch.nn.functional)):
        x, w = lib.tensor(xs), lib.tensor(ws)
        b = lib.tensor(bs, requires_grad=True)
        (F.linear(x, w, b) ** 2).sum().backward()
        grads.append(b.grad)
    close(grads[0], grads[1])


@pytest.mark.parametrize("expr", ["a + b", "(a + b).sum()", "a - b + a"])
def test_leaf_grads_do_not_share_memory(expr):
    # one gradient handed to two leaves (add's backward) must become two .grad tensors, and
    # a broadcast gradient must be writable: in-place clipping of one leaf's .grad (as
    # clip_grad_norm_ does) must not change the other's, as in PyTorch
    results = []
    for lib in (ember, torch):
        a = lib.ones(3, dtype=lib.float64, requires_grad=True)
        b = lib.full((3,), 2.0, dtype=lib.float64, requires_grad=True)
        out = eval(expr, {"a": a, "b": b})
        (out if out.dim() == 0 else out.sum()).backward()
        a.grad.mul_(0.5)
        results.append((a.grad, b.grad))
    close(results[0][0], results[1][0])
    close(results[0][1], results[1][1])

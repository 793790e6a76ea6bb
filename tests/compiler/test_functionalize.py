"""In-place writes and views inside compiled code (functionalization, ARCHITECTURE.md §4).

Every case runs a function eagerly and compiled on identical fresh arguments and compares the
outputs, the arguments afterwards (values, version counters), gradients, and memory sharing
between returned views and their bases.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn


def _fresh(spec):
    ember.manual_seed(0)
    out = []
    for s in spec:
        if s == "param":
            out.append(nn.Parameter(ember.randn(3, 4)))
        elif s == "grad":
            out.append(ember.randn(3, 4, requires_grad=True))
        elif s == "grad4":
            out.append(ember.randn(4, requires_grad=True))
        elif s == "idx":
            out.append(ember.tensor([0, 2]))
        elif s == "mask":
            out.append(ember.arange(12).reshape(3, 4) % 3 == 0)
        elif s == "int":
            out.append(ember.arange(12).reshape(3, 4))
        else:
            out.append(ember.randn(*s))
    return out


def _eq(a, b, what):
    if isinstance(a, ember.Tensor):
        assert isinstance(b, ember.Tensor), what
        assert a.shape == b.shape and a.dtype == b.dtype, what
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=what)
        assert a._version == b._version, f"{what}: version {a._version} vs {b._version}"
        assert a.requires_grad == b.requires_grad, what
        assert (a.grad_fn is None) == (b.grad_fn is None), what
        assert (a.grad is None) == (b.grad is None), what
        if a.grad is not None:
            np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy(), err_msg=what)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), what
        for i, (x, y) in enumerate(zip(a, b)):
            _eq(x, y, f"{what}[{i}]")
    else:
        assert a == b, what


def _run_both(fn, spec):
    a, b = _fresh(spec), _fresh(spec)
    ra = fn(*a)
    rb = ember.compile(fn)(*b)
    _eq(ra, rb, "outputs")
    _eq(a, b, "inputs")
    return a, ra, b, rb


def _set0(x):
    x[0] = 5.0
    return x * 2


def _col_add(x):
    x[:, 1].add_(1)
    return x.sum()


def _t_mul(x):
    x.t().mul_(2)
    return x


def _view_before_write(x):
    v = x[1]
    x.add_(1)
    return v + 0


def _view_after_write(x):
    x.add_(1)
    return x[1:] * 1


def _intermediate(x):
    y = x * 2
    v = y[:, 0]
    y.mul_(3)
    w = y[1]
    return v * 1, w * 1, y * 1


def _copy(x, y):
    x.copy_(y)
    return x


def _copy_broadcast(x, y):
    x[1:].copy_(y[0])
    return x.sum(0)


def _zero(x):
    x[1].zero_()
    return x * 1


def _fill(x):
    x.fill_(2.5)
    x[1].fill_(1.0)
    return x.sum()


def _detach_alias(x):
    d = x.detach()
    d.add_(1)
    return x * 1


def _data_alias(x):
    x.data.add_(1)
    return x * 1


def _no_grad_sub(p, g):
    with ember.no_grad():
        p.sub_(0.1 * g)
    return p * 1


def _param_data(p, g):
    p.data.add_(g)
    return p.sum()


def _chain(x):
    v = x[0]
    v.mul_(2)
    x.add_(1)
    return v * 1, x._version, v._version


def _clone_writes(x):
    y = x.clone()
    y[0, 0] = 1.0
    y.t()[1].zero_()
    return y


def _view_of_view(x):
    v = x.view(12)[2:10].view(2, 4)
    v[1].mul_(-1)
    x[0].add_(10)
    return v * 1, x * 1


def _aliased_args(x, y):
    # y is a view of x (made by the caller below)
    y.mul_(2)
    return x.sum()


def _int_write(x):
    x[1] += 7
    x.mul_(2)
    return x + 0


def _read_after_each(x):
    outs = []
    for i in range(3):
        x[i].add_(i)
        outs.append(x.sum())
    return outs


def _overwrite_intermediate_with_grad(x):
    y = x * 2
    y[0] = 0.0
    y.t()[1].mul_(3)
    z = (y * y).sum()
    z.backward()
    return z


def _chunk(x):
    a, b = x.chunk(2)
    a.mul_(2)
    b.add_(a)
    return x


def _strided_setitem(x):
    y = x.unsqueeze(0).squeeze(0).reshape(2, 6)
    y[:, ::2] = 0
    return x


def _index_write(x, idx):
    x[idx] = 1.0
    x.index_add_(0, idx, ember.ones(2, 4))
    return x


def _diagonal(x):
    x.diagonal().zero_()
    x.transpose(0, 1)[0].fill_(2)
    return x


def _masked_fill(x, m):
    x.masked_fill_(m, 0.0)
    return x


def _chained(x):
    x.clamp_(min=0).mul_(2).add_(1)
    x.relu_()
    return x


def _setitem_tensor(x, v):
    x[0] = v
    x[1:] = v * 2
    x[:, 2] = x[:, 0]
    return x


def _setitem_with_grad(x, v):
    y = x * 2
    y[0] = v.sin()
    loss = y.sum()
    loss.backward()
    return loss


def _metadata_inplace(x):
    x.t_()
    x.add_(1)
    y = x[0]
    y.mul_(10)
    x.unsqueeze_(0)
    return x * 1


CASES = {
    "setitem": (_set0, [(3, 4)]),
    "column add_": (_col_add, [(3, 4)]),
    "t().mul_": (_t_mul, [(3, 4)]),
    "view before write": (_view_before_write, [(3, 4)]),
    "view after write": (_view_after_write, [(3, 4)]),
    "intermediate views": (_intermediate, [(3, 4)]),
    "copy_": (_copy, [(3, 4), (3, 4)]),
    "copy_ broadcast into view": (_copy_broadcast, [(3, 4), (3, 4)]),
    "zero_": (_zero, [(3, 4)]),
    "fill_": (_fill, [(3, 4)]),
    "detach alias": (_detach_alias, [(3, 4)]),
    ".data alias": (_data_alias, [(3, 4)]),
    "no_grad p.sub_": (_no_grad_sub, ["param", (3, 4)]),
    "p.data.add_": (_param_data, ["param", (3, 4)]),
    "versions of chain": (_chain, [(3, 4)]),
    "clone then write": (_clone_writes, [(3, 4)]),
    "view of view": (_view_of_view, [(3, 4)]),
    "integer tensor": (_int_write, ["int"]),
    "read after each write": (_read_after_each, [(3, 4)]),
    "in-place on a non-leaf, backward inside": (_overwrite_intermediate_with_grad, ["grad"]),
    "chunk": (_chunk, [(4, 3)]),
    "strided setitem": (_strided_setitem, [(3, 4)]),
    "index_put and index_add_": (_index_write, [(3, 4), "idx"]),
    "diagonal": (_diagonal, [(4, 4)]),
    "masked_fill_": (_masked_fill, [(3, 4), "mask"]),
    "chained in-place": (_chained, [(3, 4)]),
    "t_ and unsqueeze_ then writes": (_metadata_inplace, [(3, 4)]),
    "setitem with tensors": (_setitem_tensor, [(3, 4), (4,)]),
    "setitem from a graph value, backward": (_setitem_with_grad, ["grad", "grad4"]),
}


def _break_then_write_intermediate(x):
    y = x * 2
    v = y[0]
    s = y.sum().item()
    y.mul_(2)
    return v * 1, y, s


def _write_break_write(x):
    y = x * 2
    y.mul_(3)
    v = y[1]
    s = y.sum().item()
    y.add_(1)
    w = y.t()
    v.mul_(-1)
    return v * 1, w * 1, s


def _input_write_break(x):
    v = x[0]
    x.add_(1)
    if x.sum() > 0:
        x.mul_(2)
    v.sub_(1)
    return v * 1


def _loop_breaks(x):
    y = x.clone()
    outs = []
    for i in range(3):
        y[i] = y[i] * 2
        outs.append(y[i].sum().item())
    return y, outs


BREAK_CASES = {
    "write an intermediate after a break": (_break_then_write_intermediate, [(3, 4)], 1),
    "write, break, write through views": (_write_break_write, [(3, 4)], 1),
    "input written around a data-dependent if": (_input_write_break, [(3, 4)], 1),
    "writes in a loop with breaks": (_loop_breaks, [(3, 4)], 3),
}


@pytest.mark.parametrize("name", list(BREAK_CASES))
def test_matches_eager_across_graph_breaks(name):
    fn, spec, n_breaks = BREAK_CASES[name]
    _run_both(fn, spec)
    ex = ember.compiler.explain(fn)(*_fresh(spec))
    assert ex.graph_break_count == n_breaks


@pytest.mark.parametrize("name", list(CASES))
def test_matches_eager(name):
    fn, spec = CASES[name]
    _run_both(fn, spec)
    ex = ember.compiler.explain(fn)(*_fresh(spec))
    assert ex.graph_break_count == 0, [b.reason for b in ex.break_reasons]
    assert ex.graph_count == 1


def test_aliased_arguments():
    def make():
        ember.manual_seed(0)
        x = ember.randn(3, 4)
        return x, x[1]
    a, b = make(), make()
    ra, rb = _aliased_args(*a), ember.compile(_aliased_args)(*b)
    _eq(ra, rb, "out")
    _eq(list(a), list(b), "inputs")


def test_write_into_a_view_argument_reaches_its_base():
    def f(v):
        v.add_(1)
        return v * 2
    base = ember.zeros(4, 3)
    ember.compile(f)(base[1:3])
    np.testing.assert_array_equal(base.numpy()[1:3], 1)
    np.testing.assert_array_equal(base.numpy()[[0, 3]], 0)
    assert base._version == 1


def test_input_storage_is_written_in_place():
    x = ember.randn(3, 4)
    ptr = x.data_ptr()
    v = x[1]
    ember.compile(_set0)(x)
    assert x.data_ptr() == ptr
    assert x[0].tolist() == [5.0] * 4
    x[1, 0] = 42.0
    assert v[0].item() == 42.0  # a view made before the call still aliases the input


def test_returned_views_share_memory_with_returned_base():
    def f(x):
        y = x * 1
        v = y[1:]         # made before the write
        y.mul_(2)
        u = y.view(-1)    # made after it
        return y, v, u
    y, v, u = ember.compile(f)(ember.randn(3, 4))
    storage = y.untyped_storage().data_ptr()
    assert v.untyped_storage().data_ptr() == storage
    assert u.untyped_storage().data_ptr() == storage
    assert v.storage_offset() == 4 and u.storage_offset() == 0
    y.add_(1)
    np.testing.assert_array_equal(v.numpy(), y.numpy()[1:])
    np.testing.assert_array_equal(u.numpy(), y.numpy().reshape(-1))
    assert v._version == y._version == u._version


def test_returned_view_of_input_shares_memory():
    def f(x):
        v = x.t()
        x.mul_(2)
        return v
    x = ember.randn(3, 4)
    v = ember.compile(f)(x)
    assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert v.stride() == (1, 4)
    x.zero_()
    assert not v.numpy().any()


def test_unwritten_views_of_intermediates_share_memory():
    def f(x):
        y = x + 1
        return y, y[0], y.t()
    y, r, t = ember.compile(f)(ember.randn(3, 4))
    assert r.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    assert t.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    y.fill_(3.0)
    assert r.tolist() == [3.0] * 4 and t[0].tolist() == [3.0] * 3


def test_zero_dim_results_stay_zero_dim():
    def f(x):
        s = x.sum()
        s.add_(1)
        return s, x.mean()
    s, m = ember.compile(f)(ember.ones(3))
    assert s.shape == () and m.shape == ()
    assert s.item() == 4.0


def test_modified_saved_tensor_error_as_in_eager():
    def f(x):
        y = x * 2
        z = y.sin()
        y.add_(1)
        z.sum().backward()
    msg = "modified by an inplace operation"
    with pytest.raises(RuntimeError, match=msg):
        f(ember.randn(3, requires_grad=True))
    with pytest.raises(RuntimeError, match=msg):
        ember.compile(f)(ember.randn(3, requires_grad=True))


def test_modified_saved_tensor_error_backward_outside():
    def f(x):
        y = x * 2
        z = y.sin()
        y.add_(1)
        return z.sum()
    loss = ember.compile(f)(ember.randn(3, requires_grad=True))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_leaf_in_place_error_as_in_eager():
    def f(x):
        x.add_(1)
    for fn in (f, ember.compile(f)):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            fn(ember.randn(3, requires_grad=True))


def test_batchnorm_running_stats_in_train_mode():
    def make(momentum):
        ember.manual_seed(0)
        return nn.BatchNorm1d(4, momentum=momentum)
    for momentum in (0.1, None):
        bn1, bn2 = make(momentum), make(momentum)
        cbn = ember.compile(bn2)
        for i in range(3):
            ember.manual_seed(i)
            x = ember.randn(8, 4)
            np.testing.assert_array_equal(bn1(x).detach().numpy(), cbn(x).detach().numpy())
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            np.testing.assert_array_equal(getattr(bn1, name).numpy(), getattr(bn2, name).numpy(),
                                          err_msg=name)
        assert bn2.num_batches_tracked.item() == 3
        ex = ember.compiler.explain(bn2)(ember.randn(8, 4))
        assert ex.graph_break_count == 0


def test_write_then_graph_break_then_write():
    def f(x):
        x.add_(1)
        s = x.sum().item()  # a graph break: the first write is flushed
        x.mul_(2)
        return x + s
    a, b = ember.randn(3), None
    b = a.clone()
    ra = f(a)
    ex = ember.compiler.explain(f)(b.clone())
    assert ex.graph_break_count == 1
    rb = ember.compile(f)(b)
    np.testing.assert_array_equal(ra.numpy(), rb.numpy())
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert a._version == b._version == 2


def test_write_back_runs_in_the_graph():
    # the write-back is an output of the one graph, not a separate eager step
    def f(x, p):
        with ember.no_grad():
            p.mul_(0.5)
        x[0] = 1.0
        return x.sum()
    ex = ember.compiler.explain(f)(ember.randn(3, 4), ember.randn(4))
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_grad_zero_in_place_in_compiled_code():
    def f(p):
        (p * p).sum().backward()
        p.grad.zero_()
        (p * 3).sum().backward()
        return p.grad * 1
    a = nn.Parameter(ember.arange(3.0))
    b = nn.Parameter(ember.arange(3.0))
    _eq(f(a), ember.compile(f)(b), "grad")
    _eq(a.grad, b.grad, "p.grad")


def test_data_assignment_in_compiled_code():
    def f(p, x):
        (p * x).sum().backward()
        p.data = p.data - 0.1 * p.grad
        return p * 1

    def make():
        ember.manual_seed(0)
        return nn.Parameter(ember.randn(3)), ember.randn(3)

    a, b = make(), make()
    _eq(f(*a), ember.compile(f)(*b), "out")
    _eq(list(a), list(b), "inputs")
    assert isinstance(b[0]._data, np.ndarray)


@pytest.mark.parametrize("layout", ["fortran", "permuted"])
def test_write_into_input_with_non_c_order_memory(layout):
    def make():
        a = np.arange(24.0).reshape(2, 3, 4)
        a = np.asfortranarray(a) if layout == "fortran" else a.transpose(1, 2, 0).copy(order="K")
        return ember.from_numpy(a)

    def f(x):
        v = x[0]
        x.add_(1)
        x[:, 1].mul_(3)
        return x * 2, v * 1

    a, b = make(), make()
    _eq(f(a), ember.compile(f)(b), "out")
    _eq(a, b, "input")
    ex = ember.compiler.explain(f)(make())
    assert ex.graph_break_count == 0


def test_writes_before_an_exception_are_applied():
    def f(x):
        x.add_(1)
        x[0].mul_(2)
        x @ ember.ones(5)  # a shape error after the writes

    a, b = ember.zeros(2, 3), ember.zeros(2, 3)
    with pytest.raises(RuntimeError):
        f(a)
    with pytest.raises(RuntimeError):
        ember.compile(f)(b)
    _eq(a, b, "input")


def test_fresh_results_keep_the_kernels_layout():
    def f(x):
        return x.t() * 2, (x.t() * 3)[0]

    x = ember.randn(3, 4)
    (a, av), (b, bv) = f(x), ember.compile(f)(x)
    assert a.stride() == b.stride()
    np.testing.assert_array_equal(av.numpy(), bv.numpy())

"""``Tensor.__getitem__``/``__setitem__`` against PyTorch: values, view-vs-copy, writes through
views, setitem results, autograd through indexed writes, and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

# expressions over x = arange(60).reshape(3, 4, 5); ``lib`` is ember or torch
GETITEM = [
    "x[1]", "x[-1]", "x[0, 1]", "x[0, 1, 2]", "x[-3, -4, -5]",
    "x[:]", "x[1:]", "x[:2]", "x[::2]", "x[1::2, ::3]", "x[0:3:2, 1:4:2, ::4]",
    "x[-2:]", "x[:-1, -3:-1]", "x[5:]", "x[2:1]", "x[:, 10:20]", "x[-10:2]",
    "x[...]", "x[..., 0]", "x[0, ...]", "x[0, ..., 1]", "x[..., 1:3]",
    "x[None]", "x[:, None]", "x[..., None]", "x[None, 0, None, 1:3]", "x[None, ..., None]",
    "x[lib.tensor(1)]", "x[lib.tensor(-1), 2]", "x[1, lib.tensor(2, dtype=lib.int32)]",
    "x[lib.tensor(1):3]", "x[:, :lib.tensor(2)]",
    "x[[0, 2]]", "x[[2, 2, 0]]", "x[[-1]]", "x[[]]", "x[[[0, 1], [2, 0]]]",
    "x[lib.tensor([0, 2])]", "x[lib.tensor([[1], [0]])]", "x[lib.tensor([1, 0], dtype=lib.int32)]",
    "x[np.array([2, 0])]", "x[range(2)]", "x[:, range(1, 4, 2)]",
    "x[[0, 1], [1, 2]]", "x[[0, 1], [1, 2], [3, 4]]", "x[[[0], [1]], [1, 2, 3]]",
    "x[:, [0, 3]]", "x[:, [0, 3], 1]", "x[1, [0, 3]]", "x[1, :, [0, 3]]",
    "x[[0, 2], :, [1, 4]]", "x[[0, 2], 1:3, [1, 4]]", "x[[0, 2], None, [1, 3]]",
    "x[..., [1, 4]]", "x[None, [1, 2]]", "x[:, [1, 2], None]",
    "x[lib.tensor(1), :, [0, 1]]", "x[[1], :, 1]",
    "x[m]", "x[m2]", "x[:, m1]", "x[:, :, m0]", "x[..., m0]", "x[m2, [0, 4, 4, 1, 2]]",
    "x[1, m1, None]",
    "x[lib.tensor([True, False, True])]", "x[[True, False, True]]",
    "x[lib.tensor([True, False, True]), 1]", "x[lib.tensor([True, False, True]), :, [0, 4]]",
    "x[lib.zeros(3, dtype=lib.bool)]",
    "x[True]", "x[False]", "x[None, True]", "x[lib.tensor(True)]", "x[0, False]",
    "x[[0, 1], True]",
]


_RNG = np.random.default_rng(7)
MASKS = {"m": _RNG.random((3, 4, 5)) < 0.4, "m2": np.array([[1, 0, 1, 1], [0, 0, 0, 1],
                                                            [1, 0, 0, 0]], bool),
         "m1": np.array([True, False, False, True]), "m0": np.array([0, 1, 1, 0, 1], bool)}


def _env(lib, **kw):
    env = {"lib": lib, "np": np}
    env.update({k: lib.from_numpy(v.copy()) for k, v in MASKS.items()})
    env.update(kw)
    return env


def _x(lib):
    return lib.arange(60).reshape(3, 4, 5)


def _run(expr, lib, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return eval(expr, _env(lib, x=x))


def _check(actual, expected, what):
    assert tuple(actual.shape) == tuple(expected.shape), (what, actual.shape, expected.shape)
    assert str(actual.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1], what
    np.testing.assert_array_equal(actual.numpy(), expected.numpy(), err_msg=what)


@pytest.mark.parametrize("expr", GETITEM)
def test_getitem_values_and_views(expr):
    ex, tx = _x(ember), _x(torch)
    er, tr = _run(expr, ember, ex), _run(expr, torch, tx)
    _check(er, tr, expr)
    t_view = tr._base is not None
    assert (er._base is not None) == t_view, f"{expr}: view {er._base is not None} vs {t_view}"
    # a write into the result shows in the base exactly when torch's does
    if er.numel():
        er.fill_(-7)
        tr.fill_(-7)
    _check(ex, tx, f"{expr} after writing into the result")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "uint8", "bool",
                                   "float64", "int64"])
def test_getitem_dtypes(dtype):
    ex = ember.arange(24).reshape(2, 3, 4).to(getattr(ember, dtype))
    tx = torch.arange(24).reshape(2, 3, 4).to(getattr(torch, dtype))
    for expr in ("x[1]", "x[:, ::2]", "x[[1, 0]]", "x[..., [1, 3]]", "x[m2[:2, :3]]"):
        er, tr = _run(expr, ember, ex), _run(expr, torch, tx)
        assert tuple(er.shape) == tuple(tr.shape)
        assert er.dtype.name == str(tr.dtype).split(".")[-1]
        np.testing.assert_array_equal(er.to(ember.float32).numpy(), tr.float().numpy())


# statements on x = arange(60).reshape(3, 4, 5) (int64) and xf (its float32 copy)
SETITEM = [
    "x[0] = 7", "x[-1] = -1", "x[0, 1] = lib.arange(5)", "x[0, 1, 2] = 100",
    "x[:, 1] = lib.arange(5)", "x[::2, 1:3] = lib.tensor([[1], [2]])",
    "x[..., 0] = 9", "x[...] = 3", "x[None, 1] = 4", "x[lib.tensor(2)] = 5",
    "x[1] = lib.ones(1, 1, 5, dtype=lib.int64)",
    "x[0] = 2.7", "x[0] = lib.arange(5) * 1.5", "x[1] = lib.tensor(True)",
    "x[[0, 2]] = -3", "x[[0, 0]] = lib.tensor([[[1]], [[2]]])", "x[[0, 1], [1, 2]] = 8",
    "x[[0, 1], [1, 2], [3, 4]] = lib.tensor([10, 20])", "x[:, [0, 3]] = lib.arange(5)",
    "x[1:, [0, 3], 2] = lib.tensor([[1, 2], [3, 4]])", "x[1, [0, 3]] = 0",
    "x[[0, 2], :, [1, 4]] = lib.arange(4)", "x[[0, 2], None, [1, 3]] = 6",
    "x[m] = 0", "x[m] = lib.arange(int(m.sum()))", "x[m2] = -1",
    "x[:, m1] = lib.arange(5)", "x[m2, 2] = lib.arange(int(m2.sum()))",
    "x[lib.tensor([True, False, True])] = 1",
    "x[True] = 2", "x[False] = 2", "x[lib.tensor(True)] = 11", "x[[0, 1], 1] = 2.5",
    "xf[0] = lib.tensor(1.5, dtype=lib.float64)", "xf[[1]] = 3", "xf[m] = float('inf')",
    "xf[..., [1, 2]] = lib.tensor([[0.5], [1.5], [2.5], [3.5]])",
]


@pytest.mark.parametrize("stmt", SETITEM)
def test_setitem_matches_torch(stmt):
    envs = []
    for lib in (ember, torch):
        x = _x(lib)
        xf = x.to(lib.float32)
        v0 = x._version
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(stmt, _env(lib, x=x, xf=xf))
        envs.append((x, xf, x._version > v0 or xf._version > 0))
    (ex, exf, ev), (tx, txf, tv) = envs
    _check(ex, tx, stmt)
    _check(exf, txf, stmt)
    assert ev == tv, f"{stmt}: version bumped {ev} vs torch {tv}"


SETITEM_ERRORS = [
    ("x[5] = 1", IndexError, r"index 5 is out of bounds for dimension 0 with size 3"),
    ("x[:, [4]] = 1", IndexError, r"index 4 is out of bounds for dimension 0 with size 4"),
    ("x[0] = lib.arange(3)", RuntimeError, r"The expanded size of the tensor \(5\) must match"),
    ("x[[0]] = lib.ones(5)", RuntimeError, r"Index put requires the source and destination "
                                           r"dtypes match, got Long for the destination and "
                                           r"Float for the source"),
    ("x[m2] = lib.arange(3)", RuntimeError, r"shape mismatch: value tensor of shape \[3(, 1)?\] "
                                            r"cannot be broadcast to indexing result of shape "
                                            r"\[5, 5\]"),
    ("x.to(lib.uint8)[0] = 300", RuntimeError, r"value cannot be converted to type uint8_t "
                                               r"without overflow"),
    ("x[0.5] = 1", IndexError, r"only integers, slices"),
    ("x[0] = [1, 2, 3, 4, 5]", TypeError, r"can't assign a list to a"),
    ("x[0] = np.ones(5)", TypeError, r"can't assign a numpy.ndarray to a"),
]


@pytest.mark.parametrize("stmt,exc,match", SETITEM_ERRORS)
def test_setitem_errors(stmt, exc, match):
    with pytest.raises(exc, match=match):
        exec(stmt, _env(torch, x=_x(torch)))
    with pytest.raises(exc, match=match) as info:
        exec(stmt, _env(ember, x=_x(ember)))
    assert isinstance(info.value, ember.EmberError)


GETITEM_ERRORS = [
    ("x[3]", IndexError, r"index 3 is out of bounds for dimension 0 with size 3"),
    ("x[0, -5]", IndexError, r"index -5 is out of bounds for dimension 1 with size 4"),
    ("x[[0, 3]]", IndexError, r"index 3 is out of bounds for dimension 0 with size 3"),
    ("x[0, 0, 0, 0]", IndexError, r"too many indices for tensor of dimension 3"),
    ("x[::-1]", ValueError, r"step must be greater than zero"),
    ("x[lib.tensor([1.0])]", IndexError, r"tensors used as indices must be long, int, byte or "
                                         r"bool tensors"),
    ("x[lib.tensor([True, False])]", IndexError, r"The shape of the mask \[2\] at index 0 does "
                                                 r"not match"),
    ("x[[0, 1], [0, 1, 2]]", IndexError, r"shape mismatch: indexing tensors could not be "
                                         r"broadcast together with shapes \[2\], \[3\]"),
    ("lib.tensor(1.)[0]", IndexError, r"invalid index of a 0-dim tensor"),
]


@pytest.mark.parametrize("expr,exc,match", GETITEM_ERRORS)
def test_getitem_errors(expr, exc, match):
    with pytest.raises(exc, match=match):
        _run(expr, torch, _x(torch))
    with pytest.raises(exc, match=match) as info:
        _run(expr, ember, _x(ember))
    assert isinstance(info.value, ember.EmberError)


# ------------------------------------------------------------------------------ autograd
def _grads(lib, fn, *arrays):
    ts = [lib.tensor(a, dtype=lib.float64, requires_grad=True) for a in arrays]
    out = fn(lib, *ts)
    g = np.random.default_rng(0).standard_normal(tuple(out.shape))
    out.backward(lib.tensor(g, dtype=lib.float64))
    return [t.grad for t in ts]


def _compare_grads(fn, *arrays):
    eg, tg = _grads(ember, fn, *arrays), _grads(torch, fn, *arrays)
    for a, b in zip(eg, tg):
        if b is None:
            assert a is None or not a.numpy().any()
            continue
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)


def _assign_row(lib, x, y):
    z = x * 2
    z[0] = y
    return z * 3


def _assign_adv(lib, x, y):
    z = x * 2
    z[[0, 2, 0], 1] = y  # duplicate target: one write wins, PyTorch's grads
    return z


def _assign_mask_then_read(lib, x, y):
    z = x * 1
    z[lib.from_numpy(MASKS["m2"].copy())] = 0.0
    z[:, 1:3] = y
    return z.sum(0)


def _view_then_write(lib, x, y):
    z = x + 0
    row = z[1]
    row[::2] = y[0, ::2]
    return z * row.sum()


def _dup_advanced_read(lib, x, y):
    return x[[0, 0, 2, 0]] * 2 + x[:, [1, 1]].sum()


def _mixed(lib, x, y):
    return x[[2, 0], 1:3] + x[1, None, ::2].sum() + x[lib.from_numpy(MASKS["m2"].copy())].sum()


@pytest.mark.parametrize("fn", [_assign_row, _assign_adv, _assign_mask_then_read,
                                _view_then_write, _dup_advanced_read, _mixed])
def test_indexing_grads_match_torch(fn):
    rng = np.random.default_rng(3)
    shape_y = {"_assign_row": (4,), "_assign_adv": (3,), "_assign_mask_then_read": (3, 2),
               "_view_then_write": (3, 4)}.get(fn.__name__, (1,))
    _compare_grads(fn, rng.standard_normal((3, 4)), rng.standard_normal(shape_y))


def test_setitem_on_leaf_requiring_grad_raises():
    x = ember.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[0] = 1.0
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[[0]] = 1.0


def test_setitem_bumps_version_and_invalidates_saved():
    for lib in (torch, ember):
        x = lib.ones(3, requires_grad=True)
        y = x * 1
        z = y.exp()  # exp saves its output
        v = z._version
        z[0] = 2.0
        assert z._version == v + 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()


def test_basic_index_result_shares_version_counter():
    x = ember.arange(6.0).reshape(2, 3)
    r = x[1, ::2]
    assert r._version_counter is x._version_counter
    r.fill_(0)
    assert x._version == 1
    assert x.tolist() == [[0.0, 1.0, 2.0], [0.0, 4.0, 0.0]]
    adv = x[[1]]
    assert adv._base is None
    adv.fill_(9)
    assert x.tolist() == [[0.0, 1.0, 2.0], [0.0, 4.0, 0.0]]


def test_where_one_argument_is_nonzero_tuple():
    from ember._frontend.indexing import nonzero_tuple
    c = np.array([[1, 0], [0, 2]])
    er = nonzero_tuple(ember.tensor(c))
    tr = torch.where(torch.tensor(c))
    assert len(er) == len(tr)
    for a, b in zip(er, tr):
        _check(a, b, "where(cond)")


def test_nonzero_is_data_dependent():
    from ember.ops import REGISTRY
    assert "data_dependent" in REGISTRY["nonzero"].tags
    assert REGISTRY["basic_index"].kind == "view"


# ------------------------------------------------------------------------------ more grads
@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_select_grads_with_ties(reduce, include_self):
    """amax/amin split the grad evenly between ties (PyTorch's formula)."""
    x = np.array([[1.0, 5.0, 2.0, 2.0], [0.0, 3.0, 3.0, -1.0]])
    src = np.array([[5.0, 4.0, 2.0], [3.0, 3.0, -2.0]])
    index = np.array([[1, 1, 3], [2, 1, 3]])

    def fn(lib, a, b):
        return a.scatter_reduce(1, lib.from_numpy(index.copy()), b, reduce,
                                include_self=include_self)

    _compare_grads(fn, x, src)


def _setitem_fn(lib, x, s):
    y = x * x
    y[0, [0, 2]] = s[0, :2] * s[0, 1:]
    return y * s


DOUBLE_BACKWARD = {
    "basic": lambda lib, x, s: x[1:, ::2] * x[0, None, 1:] * s[:, :2],
    "advanced dup": lambda lib, x, s: x[[0, 0, 1]] * x[[1, 1, 1]] * s,
    "gather": lambda lib, x, s: x.gather(1, lib.tensor([[0, 0], [2, 1]])) * x[:, :2] * s[:, 1:],
    "scatter_add": lambda lib, x, s: x.scatter_add(0, lib.tensor([[1, 1, 0]]), s * s) * x,
    "scatter": lambda lib, x, s: x.scatter(0, lib.tensor([[1, 0, 0]]), s * s) * x,
    "index_put acc": lambda lib, x, s: x.index_put((lib.tensor([0, 0]),), (s * s).expand(2, 3),
                                                   accumulate=True) * x,
    "masked_fill": lambda lib, x, s: x.masked_fill(lib.tensor([True, False, True]), 0.0) * x * s,
    "setitem": _setitem_fn,
}


@pytest.mark.parametrize("name", list(DOUBLE_BACKWARD))
def test_double_backward_matches_torch(name):
    """Second derivatives (grad of <grad, v>) against PyTorch."""
    fn = DOUBLE_BACKWARD[name]
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((2, 3)), rng.standard_normal((1, 3))]
    results = []
    for lib in (ember, torch):
        x, s = (lib.tensor(a, dtype=lib.float64, requires_grad=True) for a in arrays)
        out = fn(lib, x, s)
        go = lib.tensor(np.random.default_rng(2).standard_normal(tuple(out.shape)),
                        dtype=lib.float64)
        gx, gs = lib.autograd.grad([out], [x, s], [go], create_graph=True)
        v = [lib.tensor(np.random.default_rng(3 + i).standard_normal(tuple(g.shape)),
                        dtype=lib.float64) for i, g in enumerate((gx, gs))]
        total = (gx * v[0]).sum() + (gs * v[1]).sum()
        results.append(lib.autograd.grad([total], [x, s], allow_unused=True))
    for a, b in zip(*results):
        if b is None:
            assert a is None or not a.numpy().any(), name
            continue
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=name)


def test_masked_fill_inplace_cannot_broadcast_self():
    x = ember.zeros(3, 4)
    with pytest.raises(RuntimeError, match=r"output with shape \[3, 4\] doesn't match the "
                                           r"broadcast shape \[2, 3, 4\]"):
        x.masked_fill_(ember.ones(2, 3, 4, dtype=ember.bool), 2.0)


@pytest.mark.parametrize("expr", ["x[None]", "x[:, None]", "x[0, None, 1:]", "x[..., None]",
                                  "x[::2, None]", "x[None, None, 1]", "x[1:, None, ::2]",
                                  "x[None, ..., None]"])
def test_new_axis_strides_match_torch(expr):
    e = eval(expr, {"x": ember.zeros(3, 4)})
    t = eval(expr, {"x": torch.zeros(3, 4)})
    assert e.stride() == t.stride() and e.storage_offset() == t.storage_offset()

"""Movement ops as C copy kernels (``ember/compiler/c/lower/copy.py``), against eager ember.

clone, flip, roll, repeat, tril/triu, constant_pad, the view backwards select_backward,
narrow_backward and diagonal_backward, and the storage ops of functionalized in-place writes
(storage_write; storage_read is a view) lower to plain kernels (a fill and/or a strided copy):
values are copied exactly, so every result must be bit-identical to eager, with eager's shape,
dtype and strides, for contiguous, transposed, sliced and broadcast operands.  The graphs must
have no extern for these ops.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.ir.loop_ir import Geometry
from ember.compiler.c.lower.copy import _keep_order, _layout
from ember.config import config

# the ops lower/copy.py lowers as movement kernels, and the functionalized storage ops
MOVE_OPS = frozenset({"clone", "flip", "roll", "repeat", "tril", "triu", "constant_pad",
                      "select_backward", "narrow_backward", "diagonal_backward"})
STORAGE_OPS = frozenset({"storage_read", "storage_write"})

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

F = ember.nn.functional

DTYPES = [ember.float32, ember.float64, ember.float16, ember.bfloat16, ember.int64, ember.int32,
          ember.int16, ember.int8, ember.uint8, ember.bool]


def _value(dtype, shape=(4, 5, 6), seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * 4
    if dtype is ember.bool:
        return ember.tensor(a > 0)
    t = ember.tensor(a)
    if dtype.is_floating_point:
        return t.to(dtype)
    return t.to(ember.int64).to(dtype)


def _check(fn, *args, dynamic=None):
    """``fn`` compiled with the C backend equals eager bit for bit (values, dtype, shape,
    strides) and its graph runs no movement op as an extern; returns the CompiledGraph."""
    got = ember.compile(fn, backend="c", fullgraph=True, dynamic=dynamic)(*args)
    cg = cbackend.last_compiled()
    want = fn(*args)
    bad = [f for f in cg.stats.fallbacks if f.split(":")[0] in MOVE_OPS]
    assert not bad, bad
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        assert g.stride() == w.stride(), (g.stride(), w.stride())
        a, b = g.numpy(), w.numpy()
        if a.dtype.kind == "f" or a.dtype.name == "bfloat16":   # bits: -0.0 and NaNs too
            a, b = a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")
        np.testing.assert_array_equal(a, b)
    return cg


CASES = {
    "clone": lambda x: x.clone(),
    "clone_transposed": lambda x: x.transpose(0, 2).clone(),
    "clone_sliced": lambda x: x[:, ::2, 1:].clone(),
    "clone_broadcast": lambda x: x[:, 1].expand(3, 4, 6).clone(),
    "clone_permuted_broadcast": lambda x: x[1].unsqueeze(1).expand(5, 3, 6).permute(2, 1, 0)
    .clone(),
    "contiguous_transposed": lambda x: x.transpose(1, 2).contiguous(),
    "flip": lambda x: x.flip(0, -1),
    "flip_transposed": lambda x: x.transpose(0, 1).flip(-1),
    "flip_sliced": lambda x: x[::2, :, 1:4].flip(1),
    "roll": lambda x: x.roll(2, 1),
    "roll_two_dims": lambda x: x.roll((1, -2), (0, -1)),
    "roll_flat": lambda x: x.roll(7),
    "roll_transposed": lambda x: x.transpose(0, 2).roll(-3, 0),
    "repeat": lambda x: x.repeat(2, 1, 3),
    "repeat_new_dims": lambda x: x[:, 1].repeat(2, 1, 3),
    "repeat_transposed": lambda x: x.transpose(0, 1).repeat(1, 2, 1),
    "tril": lambda x: x.tril(),
    "tril_negative": lambda x: x.tril(-2),
    "triu_transposed": lambda x: x.transpose(1, 2).triu(1),
    "triu_sliced": lambda x: x[:, 1:, ::2].triu(-1),
    "pad": lambda x: F.pad(x, (1, 2, 0, 3), value=1.5),
    "pad_int_value": lambda x: F.pad(x, (2, 0), value=-3),
    "pad_and_crop": lambda x: F.pad(x, (-1, 2, 0, -3)),
    "crop_transposed": lambda x: F.pad(x.transpose(0, 2), (-1, -2)),
    "crop_to_empty": lambda x: F.pad(x, (-6, 0)),
    "tril_broadcast": lambda x: x[:, 1:2].expand(4, 5, 6).tril(),
    "clone_size1_permuted": lambda x: x[:, :1].permute(2, 1, 0).clone(),
    "flip_size1_permuted": lambda x: x[:, :1].permute(2, 1, 0).flip(0),
    "clone_0d": lambda x: x[1, 2, 3].clone(),
    "flip_1d": lambda x: x[1, 2].flip(0),
    "repeat_zero": lambda x: x.repeat(0, 1, 1),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_movement_equals_eager(case, dtype):
    _check(CASES[case], _value(dtype))


@pytest.mark.parametrize("case", ["clone", "flip", "roll", "repeat", "tril", "pad"])
def test_threaded_sizes(case):
    # sizes above OMP_MIN_ITERATIONS: the loops are split over two threads
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        _check(CASES[case], _value(ember.float32, (64, 96, 80)))
    finally:
        ember.set_num_threads(before)


def test_special_values_copied_bitwise():
    x = ember.tensor(np.array([[-0.0, np.nan, np.inf], [-np.inf, 1e-45, -1e-40]], np.float32))
    _check(lambda x: (x.clone(), x.flip(1), x.roll(1, 0), x.triu(), F.pad(x, (1, 1))), x)
    _check(lambda x: (x.clone(), x.flip(1), x.tril()), x.to(ember.float16))


def test_empty():
    x = _value(ember.float32, (0, 3, 4))
    _check(lambda x: (x.clone(), x.flip(0), x.roll(1, 1), x.repeat(2, 1, 1), x.tril(),
                      F.pad(x, (1, 1))), x)
    _check(lambda x: x.repeat(1, 0, 2), _value(ember.float32, (2, 3, 4)))


def test_fused_with_pointwise_neighbours():
    # a copy kernel between two fusion groups: its input is stored by the first group
    x = _value(ember.float32)
    cg = _check(lambda x: (x * 2).flip(1).tril() + 1, x)
    assert cg.stats.externs == 0


DYNAMIC = {
    "clone": lambda x: x.clone() * 2,
    "contiguous": lambda x: (x + 1).transpose(0, 2).contiguous() * 2,
    "flip": lambda x: x.flip(0, 2) * 2,
    "roll": lambda x: x.roll(2, 1) * 2,
    "roll_two_dims": lambda x: x.roll((-7, 3), (0, 2)) * 2,
    "tril": lambda x: x.tril(1) * 2,
    "triu": lambda x: x.triu(-1) * 2,
    "repeat": lambda x: x.repeat(1, 2, 3) * 2,
    "pad": lambda x: F.pad(x, (1, 2, 0, 1), value=0.5) * 2,
    "crop": lambda x: F.pad(x, (-1, -1)) * 2,
    "pad_and_crop": lambda x: F.pad(x, (-1, 2)) * 2,
}


@pytest.mark.parametrize("case", list(DYNAMIC), ids=list(DYNAMIC))
def test_dynamic_sizes(case):
    # one size-generic library serves every shape (sizes and parameters are runtime values)
    fn = DYNAMIC[case]
    compiled = ember.compile(fn, backend="c", fullgraph=True, dynamic=True)
    for k, shape in enumerate([(4, 5, 6), (3, 7, 9), (2, 3, 4)]):
        x = _value(ember.float32, shape, seed=k)
        got, want = compiled(x), fn(x)
        cg = cbackend.last_compiled()
        assert cg.stats.externs == 0, cg.stats.fallbacks
        assert got.stride() == want.stride()
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_dynamic_layout_unknown_stays_an_extern_with_a_reason():
    # clone keeps a permuted layout, which symbolic strides do not tell: an extern, logged
    x = _value(ember.float32, (5, 7))
    got = ember.compile(lambda x: x.t().clone() + 1, backend="c", dynamic=True)(x)
    cg = cbackend.last_compiled()
    assert cg.stats.fallbacks == ["clone: dynamic sizes of a non-contiguous source (eager's "
                                  "layout unknown)"]
    np.testing.assert_array_equal(got.numpy(), (x.t().clone() + 1).numpy())


GRADS = {
    "select": lambda x: ember.select(x, 1, 2),
    "select_negative": lambda x: ember.select(x, -1, -1),
    "narrow": lambda x: ember.narrow(x, 0, 1, 2),
    "narrow_negative_dim": lambda x: ember.narrow(x, -1, 2, 3),
    "unbind": lambda x: ember.unbind(x, 1)[3],
    "diagonal": lambda x: ember.diagonal(x, 0, 1, 2),
    "diagonal_offset": lambda x: ember.diagonal(x, -1, -1, 0),
    "flip": lambda x: x.flip(0),
    "roll": lambda x: x.roll(1, -1),
    "tril": lambda x: x.tril(1),
    "pad": lambda x: F.pad(x, (1, -2, 2, 0)),
    "clone": lambda x: x.transpose(0, 1).clone(),
}


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("case", list(GRADS), ids=list(GRADS))
def test_backward_equals_eager(case, dtype):
    rng = np.random.default_rng(4)
    x = ember.tensor(rng.standard_normal((4, 5, 6))).to(dtype).requires_grad_()

    def f(x):
        y = GRADS[case](x)
        (y * y).sum().backward()
        return x.grad

    want = f(x).numpy().copy()
    x.grad = None
    got = ember.compile(f, backend="c", fullgraph=True)(x)
    cg = cbackend.last_compiled()
    bad = [f for f in cg.stats.fallbacks if f.split(":")[0] in MOVE_OPS]
    assert not bad, bad
    a = got.numpy()
    np.testing.assert_array_equal(a.view(f"u{a.dtype.itemsize}"),
                                  want.view(f"u{want.dtype.itemsize}"))


def test_backward_graph_has_view_backwards():
    # the gradient graph holds select_backward / narrow_backward nodes, lowered to kernels
    x = _value(ember.float32).requires_grad_()

    def f(x):
        (ember.select(x, 0, 1).sum() + ember.narrow(x, 2, 1, 3).sum()).backward()
        return x.grad

    want = f(x).numpy().copy()
    x.grad = None
    got = ember.compile(f, backend="c", fullgraph=True)(x)
    cg = cbackend.last_compiled()
    ops = {o for k in cg.program.kernels() for o in getattr(k, "ops", [])}
    assert {"select_backward", "narrow_backward"} <= ops, ops
    assert not [f for f in cg.stats.fallbacks if f.split(":")[0] in MOVE_OPS]
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("seed", range(40))
def test_keep_order_layout_matches_numpy(seed):
    # the "K" order of a copy (eager's clone/flip) and the allocation that reproduces it
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(1, 5))
    shape = tuple(int(n) for n in rng.integers(1, 4, nd))
    base = np.zeros(shape)
    perm = rng.permutation(nd)
    a = base.transpose(perm)
    if rng.random() < 0.5:
        a = np.broadcast_to(a[tuple(slice(0, 1) if rng.random() < 0.3 else slice(None)
                                    for _ in range(nd))], a.shape)
    geom = Geometry(a.shape, tuple(s // 8 for s in a.strides), 0)
    want = tuple(s // 8 for s in np.array(a, copy=True, order="K").strides)
    assert _keep_order(geom) == want
    lay = _layout(a.shape, want)
    assert lay is not None and lay[1] == want


def _write_into_clone(x):
    y = x.clone()
    y[:, 1] = 5
    y[0] += 1
    return y * 2


def _mul_slice_of_input(x):
    x[1:3].mul_(2)
    return x.t() + 1


def _add_row_of_transpose(x):
    v = x.t()
    v[2].add_(1)
    return v * 1


INPLACE = {"write_into_clone": _write_into_clone, "mul_slice_of_input": _mul_slice_of_input,
           "add_row_of_transpose": _add_row_of_transpose}


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.int32],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("case", list(INPLACE), ids=list(INPLACE))
def test_functionalized_inplace_writes(case, dtype):
    # storage_write / storage_read of in-place writes: no externs, and the input is mutated
    # exactly as eager mutates it
    fn = INPLACE[case]
    a, b = _value(dtype, (4, 5)), _value(dtype, (4, 5))
    got = ember.compile(fn, backend="c", fullgraph=True)(a)
    cg = cbackend.last_compiled()
    assert "storage_write" in {n.op.name for n in cg.graph.nodes}
    bad = [f for f in cg.stats.fallbacks if f.split(":")[0] in STORAGE_OPS]
    assert not bad, bad
    want = fn(b)
    assert got.stride() == want.stride()
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(a.numpy(), b.numpy())


DIAGONAL = {
    "pointwise": lambda x, off: ember.diagonal(x, off, 1, 2) * 2,
    "sum": lambda x, off: ember.diagonal(x, off, 0, 2).sum(0),
    "softmax": lambda x, off: F.softmax(ember.diagonal(x, off, 0, 1), -1),
    "transposed": lambda x, off: ember.diagonal(x.transpose(0, 2), off, -1, 0) + 1,
}


SIZED = {
    **DIAGONAL,
    "narrow": lambda x, n: x.narrow(1, 0, 1 + abs(n)) * 2,
    "slice": lambda x, n: x[:, : 1 + abs(n)] + 1,
    "expand": lambda x, n: x[:, :1].expand(-1, 1 + abs(n), -1) * x[:, : 1 + abs(n)],
}


@pytest.mark.parametrize("case", list(SIZED), ids=list(SIZED))
def test_a_lifted_scalar_that_decides_a_size(case):
    # one compiled function called with offsets / lengths that change the output's sizes: once
    # the number changes, a static graph lifts it to a runtime scalar, and the result must take
    # each call's sizes (the recorded specs are the first call's)
    fn = SIZED[case]
    x = _value(ember.float32)
    compiled = ember.compile(fn, backend="c", fullgraph=True)
    for off in [0, 1, -2, 1, 0]:
        got = compiled(x, off)
        want = fn(x, off)
        assert tuple(got.shape) == tuple(want.shape), (off, got.shape, want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=0)


@pytest.mark.parametrize("case", list(INPLACE), ids=list(INPLACE))
def test_functionalized_inplace_writes_dynamic(case):
    fn = INPLACE[case]
    compiled = ember.compile(fn, backend="c", fullgraph=True, dynamic=True)
    for k, shape in enumerate([(4, 5), (6, 7), (5, 3)]):
        a, b = _value(ember.float32, shape, seed=k), _value(ember.float32, shape, seed=k)
        got = compiled(a)
        cg = cbackend.last_compiled()
        assert not [f for f in cg.stats.fallbacks if f.split(":")[0] in STORAGE_OPS], \
            cg.stats.fallbacks
        np.testing.assert_array_equal(got.numpy(), fn(b).numpy())
        np.testing.assert_array_equal(a.numpy(), b.numpy())

"""``gather``/``scatter``/``scatter_add`` (``DimIndexKernel``), advanced indexing and
``index_put`` (``AdvIndexKernel``) and ``masked_fill`` (a select in the pointwise group) as C,
lowered by ``ember/compiler/c/lower/index.py``.

Each graph must run without externs, equal PyTorch (float32/float64/int64) and be bit-identical
to eager ember in every dtype: the kernels copy values, and the writes run serially in eager's
order (duplicates: the last write wins, sums in index order, in the result's dtype).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.config import config
from ember.errors import EmberIndexError, EmberNotImplementedError, EmberRuntimeError

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

DTYPES = [ember.float32, ember.float64, ember.float16, ember.bfloat16, ember.int64, ember.int32,
          ember.uint8, ember.bool]


@pytest.fixture(autouse=True)
def _two_threads():
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    yield
    ember.set_num_threads(before)


def _idx(rng, hi, shape):
    return rng.integers(0, hi, shape)


# (name, fn(t, x, i, s, m), index bound along the indexed dim, index shape)
CASES = [
    ("gather", lambda t, x, i, s, m: t.gather(x, 1, i), 7, (5, 4)),
    ("gather_dim0", lambda t, x, i, s, m: t.gather(x, 0, i), 5, (3, 7)),
    ("scatter", lambda t, x, i, s, m: t.scatter(x, 1, i, s), 7, (5, 4)),
    ("scatter_add", lambda t, x, i, s, m: t.scatter_add(x, 1, i, s), 7, (5, 4)),
    ("index", lambda t, x, i, s, m: x[i[:, 0] % 5, i[:, 1]], 7, (5, 4)),
    ("index_select", lambda t, x, i, s, m: t.index_select(x, 1, i[0]), 7, (5, 4)),
    ("index_put", lambda t, x, i, s, m: x.index_put((i[:, 0] % 5,), s[:, :1].expand(5, 7)
                                                    .contiguous()), 7, (5, 4)),
    ("index_put_acc", lambda t, x, i, s, m: x.index_put(
        (i[:, 0] % 5, i[:, 1]), s[:, 0], accumulate=True), 7, (5, 4)),
    ("masked_fill", lambda t, x, i, s, m: x.masked_fill(m, 3), 7, (5, 4)),
]


def _args(mod, dtype, ishape, hi, rng):
    xs = rng.standard_normal((5, 7)) * 4
    ss = rng.standard_normal((5, 7)) * 4
    ms = rng.random((5, 7)) < 0.5
    idx = _idx(rng, hi, ishape)
    if mod is torch:
        td = getattr(torch, dtype.name)
        return (torch.tensor(xs).to(td), torch.tensor(idx), torch.tensor(ss).to(td),
                torch.tensor(ms))
    return (ember.tensor(xs).to(dtype), ember.tensor(idx, dtype=ember.int64),
            ember.tensor(ss).to(dtype), ember.tensor(ms))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name,fn,hi,ishape", CASES, ids=[c[0] for c in CASES])
def test_lowered_without_externs(name, fn, hi, ishape, dtype):
    args = _args(ember, dtype, ishape, hi, np.random.default_rng(0))
    want = fn(ember, *args)
    got = ember.compile(lambda *a: fn(ember, *a), backend="c")(*args)
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0, cg.stats.fallbacks
    np.testing.assert_array_equal(got.numpy(), want.numpy())   # bit-identical to eager
    if dtype in (ember.float32, ember.float64, ember.int64):
        ref = fn(torch, *_args(torch, dtype, ishape, hi, np.random.default_rng(0)))
        np.testing.assert_array_equal(got.numpy(), ref.numpy())


def test_duplicates_resolve_as_eager_threaded():
    # many duplicate targets, sizes above the threading threshold
    rng = np.random.default_rng(1)
    x = ember.tensor(rng.standard_normal((64, 300)).astype(np.float32))
    i = ember.tensor(rng.integers(0, 3, (64, 300)), dtype=ember.int64)
    s = ember.tensor(rng.standard_normal((64, 300)).astype(np.float32))

    def f(x, i, s):
        return ember.scatter_add(x, 1, i, s), ember.scatter(x, 1, i, s), x.index_put(
            (i[:, 0],), s, accumulate=True)

    want = f(x, i, s)
    got = ember.compile(f, backend="c")(x, i, s)
    assert cbackend.last_compiled().stats.externs == 0
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    tx, ti, ts = (torch.tensor(v.numpy()) for v in (x, i, s))
    ref = torch.zeros_like(tx).index_put_((ti[:, 0],), ts, accumulate=True) + tx
    np.testing.assert_allclose(got[2].numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


def test_strided_operands():
    rng = np.random.default_rng(2)
    x = ember.tensor(rng.standard_normal((7, 5)).astype(np.float32))
    i = ember.tensor(rng.integers(0, 5, (4, 6)), dtype=ember.int64)

    def f(x, i):   # a transposed input and a transposed, sliced index
        return ember.gather(x.t(), 1, i.t()[:5]) + 1, x.t()[i[0], 1:3] * 2

    want = f(x, i)
    got = ember.compile(f, backend="c")(x, i)
    assert cbackend.last_compiled().stats.externs == 0
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("fn,exc", [
    (lambda x, i: ember.gather(x, 1, i) * 1, EmberRuntimeError),
    (lambda x, i: ember.scatter_add(x, 1, i, x[:, :3]) * 1, EmberRuntimeError),
    (lambda x, i: x[:, i[0]] * 1, EmberIndexError),
    (lambda x, i: x.index_put((i[0],), x[:3], accumulate=True) * 1, EmberIndexError),
], ids=["gather", "scatter_add", "index", "index_put"])
@pytest.mark.parametrize("bad", [9, -9], ids=["past_the_end", "negative"])
def test_out_of_range_raises_as_eager(fn, exc, bad):
    x = ember.randn(4, 4)
    i = ember.tensor([[1, bad, 0]] * 4, dtype=ember.int64)
    with pytest.raises(exc) as eager:
        fn(x, i)
    with pytest.raises(exc) as compiled:
        ember.compile(fn, backend="c")(x, i)
    assert str(compiled.value) == str(eager.value)


def test_negative_advanced_index_counts_from_the_end():
    x = ember.arange(20.0).reshape(4, 5)
    i = ember.tensor([-1, 0, -5], dtype=ember.int64)
    got = ember.compile(lambda x, i: x[:, i] * 1, backend="c")(x, i)
    assert cbackend.last_compiled().stats.externs == 0
    np.testing.assert_array_equal(got.numpy(), x.numpy()[:, [-1, 0, -5]])


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16],
                         ids=lambda d: d.name)
def test_gradients_lower(dtype):
    # gather's backward is a scatter_add, index's an index_put(accumulate), masked_fill's itself
    rng = np.random.default_rng(3)
    x = ember.tensor(rng.standard_normal((6, 5))).to(dtype).requires_grad_()
    i = ember.tensor(rng.integers(0, 5, (6, 8)), dtype=ember.int64)
    m = ember.tensor(rng.random((6, 5)) < 0.3)

    def f(x, i, m):
        y = ember.gather(x, 1, i).sum() + x[i[:, 0], i[:, 1]].sum() + x.masked_fill(m, 0.5).sum()
        y.backward()
        return x.grad

    want = f(x, i, m).float().numpy().copy()
    x.grad = None
    got = ember.compile(f, backend="c")(x, i, m)
    cg = cbackend.last_compiled()
    assert not [f for f in cg.stats.fallbacks
                if f.split(":")[0] in ("gather", "scatter_add", "index", "index_put",
                                       "masked_fill")], cg.stats.fallbacks
    tol = {"float16": 2e-3, "bfloat16": 2e-2}.get(dtype.name, 1e-6)
    np.testing.assert_array_equal(got.float().numpy(), want)   # sums as eager
    tx = torch.tensor(x.detach().float().numpy(), requires_grad=True)
    ti, tm = torch.tensor(i.numpy()), torch.tensor(m.numpy())
    (tx.gather(1, ti).sum() + tx[ti[:, 0], ti[:, 1]].sum() + tx.masked_fill(tm, 0.5).sum()
     ).backward()
    np.testing.assert_allclose(got.float().numpy(), tx.grad.numpy(), rtol=tol, atol=tol)


def test_masked_fill_dynamic_shapes():
    def f(x, m):
        return x.masked_fill(m, -1.0) * 2

    fc = ember.compile(f, backend="c", dynamic=True)
    for n in (3, 5, 8):
        x = ember.randn(n, 4)
        m = x > 0
        got = fc(x, m)
        assert cbackend.last_compiled().stats.externs == 0
        np.testing.assert_array_equal(got.numpy(), f(x, m).numpy())


def test_masked_fill_tensor_value_and_lowp_rounding():
    # a 0-d tensor value (read with zero strides) and a Python value rounded once to float16
    x = ember.randn(3, 4).to(ember.float16)
    m = ember.tensor(np.random.default_rng(4).random((3, 4)) < 0.5)
    v = ember.tensor(0.1).to(ember.float16)

    def f(x, m, v):
        return x.masked_fill(m, v) + x.masked_fill(~m, 0.1)

    got = ember.compile(f, backend="c")(x, m, v)
    assert cbackend.last_compiled().stats.externs == 0
    np.testing.assert_array_equal(got.numpy(), f(x, m, v).numpy())


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.bfloat16, ember.int64,
                                   ember.bool], ids=lambda d: d.name)
@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin", "mean"])
@pytest.mark.parametrize("include_self", [True, False], ids=["self", "noself"])
def test_scatter_reduce(reduce, include_self, dtype):
    rng = np.random.default_rng(5)
    xs, ss = rng.standard_normal((4, 6)) * 3, rng.standard_normal((4, 5)) * 3
    if dtype.is_floating_point:
        ss[1, 2] = np.nan   # maximum/minimum propagate NaN
    x, s = ember.tensor(xs).to(dtype), ember.tensor(ss).to(dtype)
    i = ember.tensor(rng.integers(0, 3, (4, 5)), dtype=ember.int64)   # many duplicates

    def f(x, i, s):
        return ember.scatter_reduce(x, 1, i, s, reduce, include_self=include_self)

    if reduce == "mean" and dtype is ember.bool:   # as PyTorch: not implemented for Bool
        with pytest.raises(EmberNotImplementedError, match="not implemented for 'Bool'"):
            ember.compile(f, backend="c", dynamic=False)(x, i, s)
        return
    got = ember.compile(f, backend="c", dynamic=False)(x, i, s)
    assert cbackend.last_compiled().stats.externs == 0, cbackend.last_compiled().stats.fallbacks
    np.testing.assert_array_equal(got.double().numpy(), f(x, i, s).double().numpy())
    if dtype in (ember.float32, ember.int64):
        td = getattr(torch, dtype.name)
        ref = torch.tensor(xs).to(td).scatter_reduce(1, torch.tensor(i.numpy()),
                                                     torch.tensor(ss).to(td), reduce,
                                                     include_self=include_self)
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-6)

"""Ops that used to run as eager externs inside C graphs (issue 14, docs/compiler.md "Integer
division, more random ops, empty and 0-d inputs, digamma in C"): each graph here must lower
with no extern and give eager's values (and PyTorch's, where PyTorch has the op); random ops
give eager's values under the same seed; an integer division by zero raises eager's error from
the compiled function."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.config import config

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

INTS = ("int64", "int32", "int16", "int8", "uint8")


def _c(fn, *args):
    """``fn`` compiled with the C backend on ``args``: (result, the CompiledGraph)."""
    ember.compiler.reset()
    out = ember.compile(fn, backend="c")(*args)
    cg = cbackend.last_compiled()
    assert cg.extern_count == 0, cg.externs
    return out, cg


def _np(t):
    return t.float().numpy() if t.dtype is ember.bfloat16 else t.numpy()


def _same(got, want):
    """Equal values, dtypes and shapes (NaN equals NaN)."""
    assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(_np(got), _np(want))


def _torch(t):
    return torch.from_numpy(np.ascontiguousarray(_np(t)))


# ----------------------------------------------------------------------------- integer division
def _int_operands(dtype: str) -> tuple:
    a = np.array([[7, -7, 5, 100], [-128, 0, 13, -1]])
    b = np.array([[2, 3, -1, 7], [-1, 5, -4, 3]])
    if dtype == "uint8":
        a, b = np.abs(a) % 256, np.abs(b)
    return (ember.tensor(a).to(getattr(ember, dtype)), ember.tensor(b).to(getattr(ember, dtype)))


_DIV_OPS = {
    "floor_divide": (lambda m: lambda a, b: m.floor_divide(a, b) + 1),
    "div_trunc": (lambda m: lambda a, b: m.div(a, b, rounding_mode="trunc") * 2),
    "div_floor": (lambda m: lambda a, b: m.div(a, b, rounding_mode="floor") - a),
    "remainder": (lambda m: lambda a, b: m.remainder(a, b) * 3),
    "fmod": (lambda m: lambda a, b: m.fmod(a, b) + b),
    "floordiv_operator": (lambda m: lambda a, b: a // b),
    "mod_operator": (lambda m: lambda a, b: a % b),
    "scalar_divisor": (lambda m: lambda a, b: (a + b) // 3 + (a % 5)),
}


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("name", list(_DIV_OPS))
def test_integer_division_runs_c_with_eager_and_torch_values(name, dtype):
    a, b = _int_operands(dtype)
    fn = _DIV_OPS[name](ember)
    got, cg = _c(fn, a, b)
    assert cg.stats.kernels >= 1
    _same(got, fn(a, b))
    want = _DIV_OPS[name](torch)(_torch(a), _torch(b))
    np.testing.assert_array_equal(_np(got), want.numpy())


@pytest.mark.parametrize("dtype", ("int64", "int32", "int8", "uint8"))
@pytest.mark.parametrize("name", [n for n in _DIV_OPS if n != "scalar_divisor"])
def test_integer_division_by_zero_raises_eagers_error(name, dtype):
    a, b = _int_operands(dtype)
    fn = _DIV_OPS[name](ember)
    ember.compiler.reset()
    cf = ember.compile(fn, backend="c")
    cf(a, b)  # builds the C graph: no extern
    assert cbackend.last_compiled().extern_count == 0
    z = b.clone()
    z[1, 2] = 0
    with pytest.raises(ember.errors.EmberRuntimeError) as want:
        fn(a, z)
    with pytest.raises(ember.errors.EmberRuntimeError) as got:
        cf(a, z)
    assert str(got.value) == str(want.value)
    assert "ZeroDivisionError" in str(got.value)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):  # PyTorch's type and message
        _DIV_OPS[name](torch)(_torch(a), _torch(z))
    _same(cf(a, b), fn(a, b))  # the compiled function still runs C afterwards


def test_division_by_zero_inside_a_fused_reduction_raises():
    a = ember.tensor([[7, -7, 9], [4, 5, 6]])
    b = ember.tensor([[2, 3, 4], [1, 2, 3]])

    def f(a, b):
        return (a // b).sum(1) + (a % b).amax()

    got, _ = _c(f, a, b)
    _same(got, f(a, b))
    cf = ember.compile(f, backend="c")
    with pytest.raises(ember.errors.EmberRuntimeError, match=r"\[div\] ZeroDivisionError"):
        cf(a, b * 0)


def test_float_division_by_zero_is_not_checked():
    a = ember.tensor([1.0, -1.0, 0.0])
    b = ember.tensor([0.0, 0.0, 0.0])

    def f(a, b):
        return ember.floor_divide(a, b), ember.remainder(a, b), ember.fmod(a, b)

    got, _ = _c(f, a, b)
    for g, w in zip(got, f(a, b)):
        _same(g, w)


@pytest.mark.parametrize("dtype", INTS)
def test_integer_pow_with_negative_exponents_and_overflow(dtype):
    a = np.array([2, -1, 1, 0, 3, 5, -2, 7])
    b = np.array([3, -3, -2, -1, 40, 0, 5, 2])
    if dtype == "uint8":
        a, b = np.abs(a), np.abs(b)
    a, b = (ember.tensor(v).to(getattr(ember, dtype)) for v in (a, b))
    got, _ = _c(lambda x, y: x ** y, a, b)
    _same(got, a ** b)
    np.testing.assert_array_equal(_np(got), (_torch(a) ** _torch(b)).numpy())


# ----------------------------------------------------------------------------- count_nonzero
@pytest.mark.parametrize("dtype", ("float32", "float64", "float16", "bfloat16", "int32", "bool"))
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 2)])
def test_count_nonzero_decomposes_to_c(dtype, dim):
    v = np.array([[[0.0, 1.0, np.nan], [-0.0, 2.0, 0.0]], [[3.0, 0.0, -1.0], [0.0, 0.0, 5.0]]])
    if dtype in ("int32", "bool"):
        v = np.nan_to_num(v)
    x = ember.tensor(v).to(getattr(ember, dtype))
    got, _ = _c(lambda t: ember.count_nonzero(t, dim=dim), x)
    _same(got, ember.count_nonzero(x, dim=dim))
    np.testing.assert_array_equal(got.numpy(), torch.count_nonzero(_torch(x), dim=dim).numpy())


@pytest.mark.parametrize("dtype", ("float32", "float64", "float16", "bfloat16"))
@pytest.mark.parametrize("dim", [None, 1])
def test_prod_gradient_with_zeros_decomposes_to_c(dtype, dim):
    """prod's gradient where the input holds zeros is ``_red_prod_others`` (a decomposition:
    exclusive cumprods from both ends)."""
    v = np.array([[1.5, 0.0, -2.0, 3.0], [0.5, 0.0, 0.0, 2.0], [1.0, 2.0, 3.0, -1.0]])

    def f(x):
        x = x.detach().requires_grad_(True)
        y = x.prod() if dim is None else x.prod(dim)
        (g,) = ember.autograd.grad(y.sum(), x)
        return g

    x = ember.tensor(v).to(getattr(ember, dtype))
    ember.compiler.reset()
    got = ember.compile(f, backend="c")(x)
    cg = cbackend.last_compiled()  # the graph after has_zero's break: the gradient
    assert "_red_prod_others" in [n.op.name for n in cg.source_graph.nodes]
    assert cg.extern_count == 0, cg.externs
    _same(got, f(x))
    t = _torch(x).requires_grad_(True)
    (t.prod() if dim is None else t.prod(dim)).sum().backward()
    np.testing.assert_allclose(_np(got), t.grad.float().numpy(), rtol=1e-2)


# ----------------------------------------------------------------------------- random ops
_FLOATS = ("float32", "float64", "float16", "bfloat16")
_DRAWS = {
    "exponential": lambda x: x.clone().exponential_(2.0),
    "cauchy": lambda x: x.clone().cauchy_(1.0, 2.0),
    "log_normal": lambda x: x.clone().log_normal_(0.5, 0.25),
    "geometric": lambda x: x.clone().geometric_(0.3),
}


def _seeded(fn, *args, seed=7):
    ember.manual_seed(seed)
    return [fn(*args), fn(*args)]  # two draws: the generator advances between them


def _assert_draws(got, want):
    for g, w in zip(got, want):
        if g.dtype is ember.float64:  # libm's log/tan/exp vs NumPy's last bit
            np.testing.assert_array_max_ulp(g.numpy(), w.numpy(), maxulp=4)
        else:
            _same(g, w)


@pytest.mark.parametrize("name,dtype", [(n, d) for n in _DRAWS for d in _FLOATS] + [
    ("geometric", d) for d in ("int64", "int8", "uint8")])
def test_random_draws_equal_eager_under_the_same_seed(name, dtype):
    x = ember.zeros((33, 7), dtype=getattr(ember, dtype))
    want = _seeded(_DRAWS[name], x)
    ember.compiler.reset()
    cf = ember.compile(_DRAWS[name], backend="c")
    got = _seeded(cf, x)
    cg = cbackend.last_compiled()
    assert cg.extern_count == 0, cg.externs
    _assert_draws(got, want)
    assert not np.array_equal(_np(got[0]), _np(got[1]))


def _randint_cases() -> list:
    """(dtype, low, high) within each dtype's range; spans over 2**32 draw two words."""
    out = []
    for d in _FLOATS + INTS + ("bool",):
        for lo, hi in [(0, 2), (-5, 100), (-2**40, 2**41), (3, 4)]:
            if (d == "bool" and (lo, hi) != (0, 2)) or (lo < 0 and d == "uint8") or (
                    hi > 2**31 and d in INTS[1:]):
                continue
            out.append((d, lo, hi))
    return out


@pytest.mark.parametrize("dtype,low,high", _randint_cases())
def test_randint_equals_eager_under_the_same_seed(dtype, low, high):
    def f():
        return ember.randint(low, high, (41, 3), dtype=getattr(ember, dtype))

    want = _seeded(f)
    ember.compiler.reset()
    got = _seeded(ember.compile(f, backend="c"))
    cg = cbackend.last_compiled()
    assert cg.extern_count == 0, cg.externs
    _assert_draws(got, want)


@pytest.mark.parametrize("dtype", ("int64", "int32", "float32", "float64"))
@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_randperm_equals_eager_under_the_same_seed(dtype, n):
    def f():
        return ember.randperm(n, dtype=getattr(ember, dtype))

    want = _seeded(f)
    ember.compiler.reset()
    got = _seeded(ember.compile(f, backend="c"))
    cg = cbackend.last_compiled()
    assert cg.extern_count == 0, cg.externs
    for g, w in zip(got, want):
        _same(g, w)
        assert sorted(g.tolist()) == list(range(n))


# ----------------------------------------------------------------------------- 0-d and empty
def _check(fn, torch_fn, *arrays):
    xs = [ember.tensor(a) for a in arrays]
    got, _ = _c(fn, *xs)
    want = fn(*xs)
    tw = torch_fn(*[torch.tensor(a) for a in arrays])
    got, want, tw = ((v,) if not isinstance(v, tuple) else v for v in (got, want, tw))
    for g, w, t in zip(got, want, tw):
        _same(g, w)
        np.testing.assert_array_equal(_np(g), t.numpy())
        assert tuple(g.shape) == tuple(t.shape)


_ZERO_D = {
    "sort": (lambda m: lambda x: tuple(m.sort(x, descending=True))),
    "topk": (lambda m: lambda x: tuple(m.topk(x, 1))),
    "kthvalue": (lambda m: lambda x: tuple(m.kthvalue(x, 1))),
    "median": (lambda m: lambda x: m.median(x)),
    "median_dim": (lambda m: lambda x: tuple(m.median(x, 0))),
}


@pytest.mark.parametrize("name", list(_ZERO_D))
def test_sorting_ops_on_a_0d_input(name):
    _check(_ZERO_D[name](ember), _ZERO_D[name](torch), np.array(2.5, np.float32))


_EMPTY = {
    "sort": (lambda m: lambda x: tuple(m.sort(x, 1))),
    "topk_k0": (lambda m: lambda x: tuple(m.topk(x[:, :3], 0, 1))),
    "topk_empty_rows": (lambda m: lambda x: tuple(m.topk(x, 2, 1))),
    "kthvalue_empty_rows": (lambda m: lambda x: tuple(m.kthvalue(x, 2, 1))),
    "cat": (lambda m: lambda x: m.cat([x, x * 2], 1)),
    "searchsorted_empty_values": (lambda m: lambda x: m.searchsorted(x[0, :], x[:, :0])),
}


@pytest.mark.parametrize("name", list(_EMPTY))
def test_empty_results_need_no_kernel_work(name):
    x = np.zeros((0, 15), np.float32) if "rows" in name or name in ("sort", "cat") else \
        np.arange(15, dtype=np.float32).reshape(3, 5)
    _check(_EMPTY[name](ember), _EMPTY[name](torch), x)


def test_median_of_an_empty_float_input_is_nan():
    _check(lambda x: ember.median(x) + 1, lambda x: torch.median(x) + 1,
           np.zeros(0, np.float32))


@pytest.mark.parametrize("dtype", INTS)
def test_median_of_an_empty_integer_input_is_eagers_constant(dtype):
    x = ember.zeros(0, dtype=getattr(ember, dtype))
    got, _ = _c(lambda t: ember.median(t), x)
    _same(got, ember.median(x))
    if dtype == "int64":  # NaN cast to int64 on x86, as PyTorch's
        assert got.item() == torch.median(torch.zeros(0, dtype=torch.int64)).item()


def test_searchsorted_with_0d_values_and_an_empty_sequence():
    seq = np.array([1.0, 3.0, 5.0], np.float32)
    _check(lambda s, v: ember.searchsorted(s, v), lambda s, v: torch.searchsorted(s, v),
           seq, np.array(4.0, np.float32))
    _check(lambda s, v: ember.searchsorted(s, v, right=True),
           lambda s, v: torch.searchsorted(s, v, right=True),
           np.zeros(0, np.float32), np.array([4.0, -1.0], np.float32))


def test_index_and_index_put_without_any_index():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    empty = np.zeros(0, np.int64)
    _check(lambda a, i: a[i] * 2, lambda a, i: a[i] * 2, x, empty)
    _check(lambda a, i: a[:, i] + 1, lambda a, i: a[:, i] + 1, x, empty)
    _check(lambda a, i: a.index_put((i,), a[0, :0].reshape(0, 1) + 1) * 2,
           lambda a, i: a.index_put((i,), a[0, :0].reshape(0, 1) + 1) * 2, x, empty)
    _check(lambda a, i: a.index_put((i,), a[0, :0].reshape(0, 1), accumulate=True),
           lambda a, i: a.index_put((i,), a[0, :0].reshape(0, 1), accumulate=True), x, empty)


# ----------------------------------------------------------------------------- digamma, trigamma
@pytest.mark.parametrize("dtype", _FLOATS)
@pytest.mark.parametrize("name", ["digamma", "trigamma"])
def test_digamma_and_trigamma_in_c(name, dtype):
    rng = np.random.default_rng(3)
    v = np.concatenate([rng.uniform(0.05, 30.0, 200), rng.uniform(-8.0, 0.0, 50),
                        [0.0, -0.0, 1.0, 10.0, -2.0, np.inf, -np.inf, np.nan, 1e-3, 1e6]])
    x = ember.tensor(v).to(getattr(ember, dtype))

    def fn(t):
        return ember.digamma(t) if name == "digamma" else ember.polygamma(1, t)

    got, _ = _c(fn, x)
    want = fn(x)
    if dtype == "float64":  # libm's tan/log/sin vs NumPy's, through the same double steps
        np.testing.assert_array_max_ulp(got.numpy()[v > 0], want.numpy()[v > 0], maxulp=4)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    else:  # computed in double and rounded once: last-bit differences vanish
        _same(got, want)
    # PyTorch computes float32 in float: compared where the functions are well conditioned
    tw = (torch.digamma if name == "digamma" else lambda t: torch.polygamma(1, t))(_torch(x))
    pos = v > 0.5
    np.testing.assert_allclose(_np(got)[pos], tw.double().numpy()[pos], atol=1e-6,
                               rtol={"float64": 1e-10, "float32": 1e-5}.get(dtype, 1e-2))

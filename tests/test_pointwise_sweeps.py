"""Broad conformance sweeps of pointwise ops against PyTorch: every binary op over every pair
of dtypes (dim and 0-d tensors, Python scalars on either side), unary ops over every dtype, and
in-place methods over every dtype.  Each case must either match torch's dtype and values or
raise an error of torch's exception type.  The OpInfo table covers values, gradients and
messages in depth; this checks the promotion and dtype-support matrix exhaustively."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from tests.opinfo.core import ALL, make, to_ember, to_numpy, to_torch

torch = pytest.importorskip("torch")

BINARY = {
    "add": lambda t, a, b: t.add(a, b), "sub": lambda t, a, b: t.sub(a, b),
    "mul": lambda t, a, b: t.mul(a, b), "div": lambda t, a, b: t.div(a, b),
    "div_trunc": lambda t, a, b: t.div(a, b, rounding_mode="trunc"),
    "floor_divide": lambda t, a, b: t.floor_divide(a, b),
    "remainder": lambda t, a, b: t.remainder(a, b), "fmod": lambda t, a, b: t.fmod(a, b),
    "pow": lambda t, a, b: t.pow(a, b), "atan2": lambda t, a, b: t.atan2(a, b),
    "maximum": lambda t, a, b: t.maximum(a, b), "fmin": lambda t, a, b: t.fmin(a, b),
    "eq": lambda t, a, b: t.eq(a, b), "lt": lambda t, a, b: t.lt(a, b),
    "logical_and": lambda t, a, b: t.logical_and(a, b),
    "bitwise_and": lambda t, a, b: t.bitwise_and(a, b),
    "left_shift": lambda t, a, b: t.bitwise_left_shift(a, b),
    "right_shift": lambda t, a, b: t.bitwise_right_shift(a, b),
    "xlogy": lambda t, a, b: t.xlogy(a, b), "copysign": lambda t, a, b: t.copysign(a, b),
    "hypot": lambda t, a, b: t.hypot(a, b), "logaddexp": lambda t, a, b: t.logaddexp(a, b),
    "where": lambda t, a, b: t.where(a > 1 if hasattr(a, "shape") else b > 1, a, b),
    "clamp_min": lambda t, a, b: t.clamp(a, b), "lerp": lambda t, a, b: t.lerp(a, b, 0.3),
    "isclose": lambda t, a, b: t.isclose(a, b),
    "addcmul": lambda t, a, b: t.addcmul(a, b, b, value=2),
}

UNARY_NAMES = [
    "abs", "neg", "sign", "sgn", "reciprocal", "square", "exp", "exp2", "expm1", "log", "log2",
    "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
    "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "erf", "erfc", "erfinv", "floor",
    "ceil", "round", "trunc", "fix", "frac", "isnan", "isinf", "isfinite", "isposinf",
    "isneginf", "nan_to_num", "logical_not", "bitwise_not", "deg2rad", "rad2deg", "logit",
    "positive",
]
UNARY = {n: (lambda n: lambda t, x: getattr(t, n)(x))(n) for n in UNARY_NAMES}
UNARY.update({
    "round_decimals": lambda t, x: t.round(x, decimals=1),
    "clamp_scalars": lambda t, x: t.clamp(x, 0, 1), "clamp_float": lambda t, x: t.clamp(x, 0.5),
    "pow_2": lambda t, x: x ** 2, "pow_half": lambda t, x: x ** 0.5,
    "rpow": lambda t, x: 2 ** x, "rpow_float": lambda t, x: 1.5 ** x,
    "floordiv": lambda t, x: x // 2, "rfloordiv": lambda t, x: 7 // x,
    "mod": lambda t, x: x % 2, "rmod": lambda t, x: 5 % x, "rsub": lambda t, x: 1 - x,
    "rdiv": lambda t, x: 1 / x, "invert": lambda t, x: ~x, "lshift": lambda t, x: x << 1,
    "rlshift": lambda t, x: 1 << x, "and_int": lambda t, x: x & 1,
    "xor_bool": lambda t, x: x ^ True, "eq_int": lambda t, x: x == 1,
    "gt_float": lambda t, x: x > 0.5, "where_scalar": lambda t, x: t.where(x > 1, x, 0),
    "mul_float": lambda t, x: x * 1.5, "add_bool": lambda t, x: x + True,
    "sub_alpha": lambda t, x: t.sub(x, x, alpha=2), "addcdiv": lambda t, x: t.addcdiv(x, x, x),
    "float_power": lambda t, x: t.float_power(x, 2),
    "div_floor_float": lambda t, x: t.div(x, 1.5, rounding_mode="floor"),
})

INPLACE_UNARY = [n + "_" for n in UNARY_NAMES if n not in (
    "isnan", "isinf", "isfinite", "isposinf", "isneginf", "positive", "bitwise_not")] + [
    "bitwise_not_", "arcsin_", "arccos_", "arctan_", "arcsinh_", "arccosh_", "arctanh_"]
INPLACE_BINARY = [
    "add_", "sub_", "mul_", "div_", "floor_divide_", "remainder_", "fmod_", "pow_", "atan2_",
    "hypot_", "xlogy_", "copysign_", "eq_", "lt_", "logical_and_", "bitwise_and_",
    "bitwise_left_shift_", "clamp_min_", "clamp_max_",
]
INPLACE = [(m, ()) for m in INPLACE_UNARY] + [
    (m, (o,)) for m in INPLACE_BINARY for o in ("T", 2, 1.5)] + [
    ("clamp_", (0, 2)), ("clip_", (0.5, None)), ("lerp_", ("T", 0.5)), ("addcmul_", ("T", "T")),
    ("addcdiv_", ("T", "T"))]


def _run(fn, arrays):
    """(dtype name, values) from torch and ember, or the exception types."""
    res = []
    for lib, conv in ((torch, lambda v: to_torch(v, torch)), (ember, to_ember)):
        try:
            out = fn(lib, conv, arrays)
            res.append((str(out.dtype).split(".")[-1], to_numpy(out)))
        except Exception as e:  # noqa: BLE001 - we compare exception types
            res.append(type(e))
    return res


def _check(t, e, what):
    if isinstance(t, type):
        assert isinstance(e, type), f"{what}: torch raised {t.__name__}, ember returned {e[0]}"
        assert issubclass(e, t) and issubclass(e, ember.EmberError), (
            f"{what}: torch raised {t.__name__}, ember {e.__name__}")
        return
    assert not isinstance(e, type), f"{what}: ember raised {e.__name__}, torch returned {t[0]}"
    assert t[0] == e[0], f"{what}: dtype {e[0]} vs torch {t[0]}"
    assert t[1].shape == e[1].shape, f"{what}: shape {e[1].shape} vs torch {t[1].shape}"
    np.testing.assert_allclose(e[1].astype(np.float64), t[1].astype(np.float64), rtol=2e-2,
                               atol=1e-3, equal_nan=True, err_msg=what)


def _operand_desc(v):
    return f"{v.dtype}{v.shape}" if isinstance(v, np.ndarray) else type(v).__name__


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_promotion_matrix(name):
    fn = BINARY[name]
    rng = np.random.default_rng(0)
    for da in ALL:
        a = make((3,), da, rng, 1, 4, exclude_zero=True)
        others = [make(s, d, rng, 1, 4, exclude_zero=True) for d in ALL for s in ((3,), ())]
        pairs = [(a, b) for b in others]
        pairs += [p for s in (2, 2.5, True) for p in ((a, s), (s, a))]
        for x, y in pairs:
            t, e = _run(lambda lib, conv, xy: fn(lib, conv(xy[0]), conv(xy[1])), (x, y))
            _check(t, e, f"{name}({_operand_desc(x)}, {_operand_desc(y)})")


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_dtype_matrix(name):
    fn = UNARY[name]
    rng = np.random.default_rng(1)
    for d in ALL:
        for shape in ((4,), ()):
            x = make(shape, d, rng, 1, 4, exclude_zero=True)
            t, e = _run(lambda lib, conv, v: fn(lib, conv(v)), x)
            _check(t, e, f"{name}({d}{shape})")


@pytest.mark.parametrize("method,extra", INPLACE, ids=[f"{m}{e}" for m, e in INPLACE])
def test_inplace_dtype_matrix(method, extra):
    rng = np.random.default_rng(2)
    for d in ALL:
        x = make((4,), d, rng, 1, 4, exclude_zero=True)
        y = make((4,), "float32" if d == "bool" else d, rng, 1, 4, exclude_zero=True)

        def fn(lib, conv, v):
            a = conv(v).clone()
            out = getattr(a, method)(*[conv(y) if o == "T" else o for o in extra])
            assert out is a, f"{method} returned a new object"
            return out
        t, e = _run(fn, x)
        _check(t, e, f"{d}.{method}{extra}")

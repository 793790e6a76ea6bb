"""OpInfo entries for pointwise arithmetic: add/sub/mul/div, rounded division, remainders,
pow, neg/abs/sign/square, their operators and in-place variants, and promotion."""

from __future__ import annotations

import numpy as np

import ember
from tests.opinfo.core import (
    ALL,
    FLOATS,
    INTS,
    SIGNED_INTS,
    ErrorCase,
    OpInfo,
    Sample,
    make,
    np_dtype,
    standard_shapes,
)


def binary_samples(low=-3.0, high=3.0, exclude_zero_rhs=False, scalars=True, lhs_scalar=False,
                   bool_scalar=True):
    def gen(dtype, rng):
        ez = exclude_zero_rhs
        for shape in standard_shapes():
            yield Sample((make(shape, dtype, rng, low, high),
                          make(shape, dtype, rng, low, high, exclude_zero=ez)),
                         desc=f"same shape {shape}")
        yield Sample((make((3, 1), dtype, rng, low, high),
                      make((1, 4), dtype, rng, low, high, exclude_zero=ez)),
                     desc="broadcast (3,1)x(1,4)")
        yield Sample((make((2, 3, 4), dtype, rng, low, high),
                      make((4,), dtype, rng, low, high, exclude_zero=ez)),
                     desc="broadcast (2,3,4)x(4,)")
        yield Sample((make((3, 4), dtype, rng, low, high, noncontig=True),
                      make((3, 4), dtype, rng, low, high, noncontig=True, exclude_zero=ez)),
                     desc="non-contiguous", noncontig=True)
        yield Sample((make((3, 4), dtype, rng, low, high),
                      make((), dtype, rng, low, high, exclude_zero=ez)), desc="0-d rhs")
        yield Sample((make((), dtype, rng, low, high),
                      make((3, 4), dtype, rng, low, high, exclude_zero=ez)), desc="0-d lhs")
        if scalars:
            yield Sample((make((3, 4), dtype, rng, low, high), 2), desc="int scalar rhs")
            yield Sample((make((3, 4), dtype, rng, low, high), 1.5), desc="float scalar rhs")
            if bool_scalar:
                yield Sample((make((3, 4), dtype, rng, low, high), True),
                             desc="bool scalar rhs", grad=False)
        if lhs_scalar:
            yield Sample((3, make((3, 4), dtype, rng, low, high, exclude_zero=ez)),
                         desc="int scalar lhs")
            yield Sample((2.5, make((3, 4), dtype, rng, low, high, exclude_zero=ez)),
                         desc="float scalar lhs")
    return gen


def mixed_dtype_samples(dtype, rng):
    """Promotion: the op's dtype against other tensors, 0-d tensors and scalars."""
    a = make((3, 4), dtype, rng, 1, 3)
    for other in ("float32", "int64", "bool", "float16", "bfloat16", "int32", "uint8", "int8"):
        yield Sample((a, make((3, 4), other, rng, 1, 3, exclude_zero=True)), desc=f"vs {other}",
                     grad=False)
    yield Sample((a, make((), "float64", rng, 1, 3)), desc="vs 0-d float64", grad=False)
    yield Sample((a, make((), "int64", rng, 1, 3, exclude_zero=True)), desc="vs 0-d int64",
                 grad=False)
    yield Sample((make((), dtype, rng, 1, 3), make((3,), "int8", rng, 1, 3, exclude_zero=True)),
                 desc="0-d vs int8 tensor", grad=False)
    yield Sample((a, 2.5), desc="vs python float", grad=False)
    yield Sample((a, 3), desc="vs python int", grad=False)
    yield Sample((a, True), desc="vs python bool", grad=False)


def unary_samples(low=-3.0, high=3.0, exclude_zero=False):
    def gen(dtype, rng):
        for shape in standard_shapes():
            yield Sample((make(shape, dtype, rng, low, high, exclude_zero=exclude_zero),),
                         desc=f"{shape}")
        yield Sample((make((3, 4), dtype, rng, low, high, noncontig=True,
                           exclude_zero=exclude_zero),), desc="non-contiguous", noncontig=True)
    return gen


SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-3, -1e-3, 0.5, -0.5, 1.0, -1.0, 1.5, -2.5,
            2.5, 7.0, -7.0, 100.0, -100.0]


def special_values(dtype):
    """NaN, infinities, signed zeros and halves (float dtypes only; no gradient)."""
    return np.array(SPECIALS, dtype=np.float64).astype(np_dtype(dtype))


def with_specials(gen, binary=False):
    def wrapped(dtype, rng):
        yield from gen(dtype, rng)
        if dtype in FLOATS:
            s = special_values(dtype)
            if binary:
                yield Sample((s[:, None], s[None, :]), desc="special x special", grad=False)
            else:
                yield Sample((s,), desc="special values", grad=False)
    return wrapped


def _category(x):
    if isinstance(x, np.ndarray):
        d = ember.dtypes.from_numpy_dtype(x.dtype)  # bfloat16's NumPy kind is "V"
        return 0 if d is ember.bool else 2 if d.is_floating_point else 1
    return 0 if isinstance(x, bool) else 1 if isinstance(x, int) else 2


def inplace_ok(gen):
    """Samples whose first argument already has the broadcast shape (usable in place)."""
    def wrapped(dtype, rng):
        for s in gen(dtype, rng):
            shapes = [a.shape for a in s.args if isinstance(a, np.ndarray)]
            if not isinstance(s.args[0], np.ndarray) or \
                    np.broadcast_shapes(*shapes) != s.args[0].shape:
                continue
            if any(_category(a) > _category(s.args[0]) for a in s.args[1:]):
                continue   # the result could not be cast back into the input
            yield s
    return wrapped


def inplace(method):
    """``x.clone().method(*args)``; checks that the returned object is the input."""
    def fn(t, x, *args, **kwargs):
        y = x.clone()
        out = getattr(y, method)(*args, **kwargs)
        assert out is y, f"{method} returned a new object"
        return out
    return fn


def _int_pow_samples(dtype, rng):
    yield Sample((make((3, 4), dtype, rng, -3, 3), make((3, 4), dtype, rng, 0, 3)),
                 desc="tensor ** tensor")
    yield Sample((make((3, 4), dtype, rng, -3, 3), 3), desc="tensor ** 3")
    yield Sample((make((3, 4), dtype, rng, -3, 3), 0), desc="tensor ** 0")
    yield Sample((2, make((3, 4), dtype, rng, 0, 5)), desc="2 ** tensor")
    yield Sample((make((3, 4), dtype, rng, 0, 20), 7), desc="overflow wraps")
    if dtype in SIGNED_INTS:
        yield Sample((np.array([-2, -1, 0, 1, 2, 3], np_dtype(dtype)),
                      np.array([-1, -3, -2, -1, -2, -1], np_dtype(dtype))),
                     desc="negative tensor exponents")
    yield Sample((make((3, 4), dtype, rng, 0, 3), 2.5), desc="int ** float -> float")


def _pow_zero_samples(dtype, rng, grad=True):
    """Zero bases: PyTorch's gradient conventions (finite differences are meaningless)."""
    yield Sample((np.array([0.0, 0.0, 1.0, 2.0], np_dtype(dtype)),
                  np.array([2.0, 0.0, 0.0, 3.0], np_dtype(dtype))), desc="zero base", grad=grad)
    yield Sample((np.array([0.0, 1.0, 2.0], np_dtype(dtype)), 2), desc="zero base ** 2",
                 grad=grad)
    yield Sample((np.array([0.0, 1.0, 2.0], np_dtype(dtype)), 0), desc="zero base ** 0",
                 grad=grad)
    yield Sample((0.0, np.array([1.0, 2.0, 0.5], np_dtype(dtype))), desc="0 ** tensor",
                 grad=grad)


def _pow_samples(dtype, rng):
    if dtype in INTS:
        yield from _int_pow_samples(dtype, rng)
        return
    if dtype == "bool":
        yield Sample((make((3, 4), dtype, rng), 2), desc="bool ** 2 -> int64")
        yield Sample((make((3, 4), dtype, rng), True), desc="bool ** True")
        yield Sample((make((3, 4), dtype, rng), False), desc="bool ** False")
        yield Sample((make((3, 4), dtype, rng), 1.5), desc="bool ** float")
        yield Sample((3, make((3, 4), dtype, rng)), desc="3 ** bool")
        return
    for shape in standard_shapes():
        yield Sample((make(shape, dtype, rng, 0.5, 2), make(shape, dtype, rng, -2, 2)),
                     desc=f"tensor ** tensor {shape}")
    yield Sample((make((3, 1), dtype, rng, 0.5, 2), make((1, 4), dtype, rng, -2, 2)),
                 desc="broadcast")
    yield Sample((make((3, 4), dtype, rng, 0.5, 2, noncontig=True),
                  make((3, 4), dtype, rng, -2, 2, noncontig=True)), desc="noncontig")
    for e in (2, 3, 0.5, -1, -2, 0, 1.7, -0.5):
        yield Sample((make((3, 4), dtype, rng, 0.5, 2), e), desc=f"tensor ** {e}")
    yield Sample((make((3, 4), dtype, rng, -2, 2), 2), desc="negative base ** 2")
    yield Sample((2.5, make((3, 4), dtype, rng, -2, 2)), desc="2.5 ** tensor")
    yield Sample((2, make((3, 4), dtype, rng, -2, 2)), desc="2 ** tensor")
    yield from _pow_zero_samples(dtype, rng, grad=False)
    yield Sample((make((3, 4), dtype, rng, 0.5, 2), make((), "float64", rng, 1, 2)),
                 desc="0-d float64 exponent", grad=False)
    s = special_values(dtype)
    yield Sample((s[:, None], s[None, :]), desc="special x special", grad=False)


def _divmod_samples(dtype, rng):
    yield from binary_samples(exclude_zero_rhs=True, scalars=False)(dtype, rng)
    yield Sample((make((3, 4), dtype, rng, -9, 9), 3), desc="scalar rhs")
    yield Sample((make((3, 4), dtype, rng, -9, 9), -4), desc="negative scalar rhs")
    yield Sample((make((3, 4), dtype, rng, -9, 9), make((3, 4), dtype, rng, -4, 4,
                                                         exclude_zero=True)), desc="wide lhs")
    if dtype in FLOATS:
        yield Sample((make((3, 4), dtype, rng), 2.5), desc="float scalar rhs")
        s = special_values(dtype)
        yield Sample((s[:, None], s[None, :]), desc="special x special (incl. / 0)", grad=False)


def _bad_broadcast(name):
    def cases():
        return [ErrorCase((np.zeros((3, 4), np.float32), np.zeros((5,), np.float32)),
                          exc=RuntimeError, match=rf"\[{name}\].*(3, 4).*\(5,\)")]
    return cases


def _int_zero_div(name):
    def cases():
        return [ErrorCase((np.array([1, 2], np.int64), np.array([1, 0], np.int64)),
                          exc=RuntimeError, match=r"\[(div|remainder|fmod)\] ZeroDivisionError")]
    return cases


def _errors_sub():
    b = np.array([True, False])
    return [
        ErrorCase((b, b), exc=RuntimeError, match=r"\[sub\].*two bool tensors"),
        ErrorCase((np.array([1, 2]), b), exc=RuntimeError, match=r"\[sub\].*with a bool tensor"),
        ErrorCase((np.array([1.0]), True), exc=RuntimeError, match=r"\[sub\].*bool"),
    ]


def _errors_add():
    i = np.array([1, 2], np.int64)
    return _bad_broadcast("add")() + [
        ErrorCase((i, i), {"alpha": 1.5}, exc=RuntimeError,
                  match=r"\[add\] For integral input tensors, argument alpha"),
        ErrorCase((np.array([1.0]), np.array([1.0])), {"alpha": True}, exc=RuntimeError,
                  match=r"\[add\] Boolean alpha only supported for Boolean results"),
    ]


def _errors_pow():
    i = np.array([1, 2], np.int64)
    return [
        ErrorCase((i, -1), exc=RuntimeError,
                  match=r"\[pow\] Integers to negative integer powers are not allowed\."),
        ErrorCase((np.array([True]), -2), exc=RuntimeError,
                  match=r"\[pow\] Integers to negative integer powers are not allowed\."),
        ErrorCase((np.array([1, 2], np.uint8), 300), exc=RuntimeError,
                  match=r"\[pow\] value cannot be converted to type uint8_t without overflow"),
        ErrorCase((np.array([True]), np.array([True])), exc=NotImplementedError,
                  match=r"\[pow\] \"pow\" not implemented for 'Bool'"),
    ]


def _errors_inplace_cast():
    i = np.array([1, 2], np.int64)
    return [ErrorCase((i, 1.5), exc=RuntimeError,
                      match=r"\[add_\] result type Float can't be cast to the desired output "
                            r"type Long"),
            ErrorCase((np.zeros(3, np.float32), np.zeros((2, 3), np.float32)), exc=RuntimeError,
                      match=r"\[add_\] output with shape \[3\] doesn't match the broadcast "
                            r"shape \[2, 3\]")]


def _alpha_samples(dtype, rng):
    yield from binary_samples(scalars=False)(dtype, rng)
    yield Sample((make((3, 4), dtype, rng), 2), desc="scalar other")


_ALPHA = {"bool": True}

OPINFOS = [
    OpInfo("add", lambda t, x, y, **kw: t.add(x, y, **kw), binary_samples(lhs_scalar=True),
           dtypes=ALL,
           errors=_errors_add),
    OpInfo("add_operator", lambda t, x, y: x + y, binary_samples(), dtypes=ALL),
    OpInfo("radd_scalar", lambda t, x: 3 + x, unary_samples(), dtypes=ALL),
    OpInfo("add_alpha", lambda t, x, y: t.add(x, y, alpha=2), _alpha_samples,
           dtypes=INTS + FLOATS),
    OpInfo("add_alpha_float", lambda t, x, y: x.add(y, alpha=-0.5),
           binary_samples(scalars=False), dtypes=FLOATS),
    OpInfo("add_promote", lambda t, x, y: x + y, mixed_dtype_samples, dtypes=ALL, grad=False),
    OpInfo("add_", inplace("add_"), inplace_ok(binary_samples(lhs_scalar=False)),
           dtypes=INTS + FLOATS,
           errors=_errors_inplace_cast),
    OpInfo("iadd", inplace("__iadd__"), inplace_ok(binary_samples(scalars=False)), dtypes=ALL),
    OpInfo("sub", lambda t, x, y: t.sub(x, y), binary_samples(lhs_scalar=True, bool_scalar=False),
           dtypes=INTS + FLOATS, errors=_errors_sub),
    OpInfo("sub_operator", lambda t, x, y: x - y, binary_samples(bool_scalar=False),
           dtypes=INTS + FLOATS),
    OpInfo("sub_alpha", lambda t, x, y: t.subtract(x, y, alpha=3),
           binary_samples(scalars=False), dtypes=INTS + FLOATS),
    OpInfo("rsub_scalar", lambda t, x: 3 - x, unary_samples(), dtypes=INTS + FLOATS),
    OpInfo("rsub", lambda t, x, y: t.rsub(x, y, alpha=2), binary_samples(bool_scalar=False),
           dtypes=INTS + FLOATS),
    OpInfo("sub_promote", lambda t, x, y: x - y,
           lambda d, r: (s for s in mixed_dtype_samples(d, r)
                         if not (isinstance(s.args[1], bool)
                                 or getattr(s.args[1], "dtype", None) == np.bool_)),
           dtypes=INTS + FLOATS, grad=False),
    OpInfo("sub_", inplace("sub_"), inplace_ok(binary_samples(bool_scalar=False)),
           dtypes=INTS + FLOATS),
    OpInfo("isub", inplace("__isub__"), inplace_ok(binary_samples(scalars=False)),
           dtypes=INTS + FLOATS),
    OpInfo("mul", lambda t, x, y: t.mul(x, y), binary_samples(lhs_scalar=True), dtypes=ALL),
    OpInfo("mul_operator", lambda t, x, y: x * y, binary_samples(), dtypes=ALL),
    OpInfo("rmul_scalar", lambda t, x: 2.5 * x, unary_samples(), dtypes=ALL),
    OpInfo("mul_promote", lambda t, x, y: t.multiply(x, y), mixed_dtype_samples, dtypes=ALL,
           grad=False),
    OpInfo("mul_", inplace("mul_"), inplace_ok(binary_samples(scalars=False)), dtypes=ALL),
    OpInfo("imul", inplace("__imul__"), inplace_ok(binary_samples(scalars=False)), dtypes=ALL),
    OpInfo("div", lambda t, x, y: x / y, binary_samples(exclude_zero_rhs=True, lhs_scalar=True),
           dtypes=ALL),
    OpInfo("div_special", lambda t, x, y: t.div(x, y),
           lambda d, r: (Sample((special_values(d)[:, None], special_values(d)[None, :]),
                                grad=False),), dtypes=FLOATS, grad=False),
    OpInfo("div_promote", lambda t, x, y: t.div(x, y), mixed_dtype_samples, dtypes=ALL,
           grad=False),
    OpInfo("true_divide", lambda t, x, y: t.true_divide(x, y),
           binary_samples(exclude_zero_rhs=True), dtypes=INTS + FLOATS),
    OpInfo("rdiv_scalar", lambda t, x: 2 / x, unary_samples(0.5, 3.0), dtypes=FLOATS + INTS),
    OpInfo("div_", inplace("div_"), inplace_ok(binary_samples(exclude_zero_rhs=True)),
           dtypes=FLOATS,
           errors=lambda: [ErrorCase((np.array([1, 2]), np.array([1, 2])), exc=RuntimeError,
                                     match=r"\[div_\] result type Float can't be cast")]),
    OpInfo("itruediv", inplace("__itruediv__"), inplace_ok(binary_samples(exclude_zero_rhs=True,
                                                               scalars=False)), dtypes=FLOATS),
    OpInfo("div_trunc", lambda t, x, y, rounding_mode="trunc": t.div(x, y,
                                                                    rounding_mode=rounding_mode),
           _divmod_samples,
           dtypes=INTS + FLOATS, errors=lambda: _int_zero_div("div")() + [
               ErrorCase((np.array([1.0]), np.array([1.0])), {"rounding_mode": "round"},
                         exc=RuntimeError, match=r"\[div\] expected rounding_mode")]),
    OpInfo("div_floor", lambda t, x, y: x.div(y, rounding_mode="floor"), _divmod_samples,
           dtypes=INTS + FLOATS),
    OpInfo("div_floor_bool", lambda t, x, y, **kw: t.div(x, y, rounding_mode="floor"),
           lambda d, r: [Sample((make((3,), d, r), 2), desc="bool // int scalar")],
           dtypes=("bool",), grad=False,
           errors=lambda: [ErrorCase((np.array([True]), np.array([True])),
                                     {"rounding_mode": "floor"}, exc=NotImplementedError,
                                     match=r"\[div_floor\] \"div_floor_cpu\" not implemented "
                                           r"for 'Bool'")]),
    OpInfo("div_rounded_promote", lambda t, x, y: t.div(x, y, rounding_mode="trunc"),
           lambda d, r: (s for s in mixed_dtype_samples(d, r) if d != "bool"),
           dtypes=INTS + FLOATS, grad=False),
    OpInfo("div_trunc_", inplace("div_"),
           lambda d, r: (Sample(s.args, {"rounding_mode": "trunc"}, desc=s.desc)
                         for s in inplace_ok(binary_samples(exclude_zero_rhs=True,
                                                            scalars=False))(d, r)),
           dtypes=INTS + FLOATS),
    OpInfo("floor_divide", lambda t, x, y: t.floor_divide(x, y), _divmod_samples,
           dtypes=INTS + FLOATS, grad=False, errors=_int_zero_div("floor_divide")),
    OpInfo("floordiv_operator", lambda t, x, y: x // y, _divmod_samples, dtypes=INTS + FLOATS,
           grad=False),
    OpInfo("rfloordiv_scalar", lambda t, x: 7 // x, unary_samples(1, 4), dtypes=INTS + FLOATS,
           grad=False),
    OpInfo("ifloordiv", inplace("__ifloordiv__"), inplace_ok(_divmod_samples), dtypes=INTS + FLOATS,
           grad=False),
    OpInfo("remainder", lambda t, x, y: t.remainder(x, y), _divmod_samples, dtypes=INTS + FLOATS,
           errors=_int_zero_div("remainder")),
    OpInfo("mod_operator", lambda t, x, y: x % y, _divmod_samples, dtypes=INTS + FLOATS),
    OpInfo("rmod_scalar", lambda t, x: 7 % x, unary_samples(1, 4), dtypes=INTS + FLOATS,
           grad=False),
    OpInfo("remainder_scalar_self", lambda t, x: t.remainder(-7, x), unary_samples(1, 4),
           dtypes=INTS + FLOATS, grad=False),
    OpInfo("remainder_promote", lambda t, x, y: t.remainder(x, y),
           lambda d, r: (s for s in mixed_dtype_samples(d, r) if d != "bool"),
           dtypes=INTS + FLOATS, grad=False),
    OpInfo("imod", inplace("__imod__"), inplace_ok(_divmod_samples), dtypes=INTS + FLOATS),
    OpInfo("fmod", lambda t, x, y: t.fmod(x, y), _divmod_samples, dtypes=INTS + FLOATS,
           errors=_int_zero_div("fmod")),
    OpInfo("fmod_", inplace("fmod_"), inplace_ok(_divmod_samples), dtypes=INTS + FLOATS),
    OpInfo("pow", lambda t, x, y: t.pow(x, y), _pow_samples, dtypes=ALL, errors=_errors_pow),
    OpInfo("pow_zero_base", lambda t, x, y: t.pow(x, y), _pow_zero_samples, dtypes=FLOATS,
           fd_check=False),
    OpInfo("pow_operator", lambda t, x, y: x ** y, _pow_samples, dtypes=INTS + FLOATS),
    OpInfo("rpow_scalar", lambda t, x: 2 ** x, unary_samples(0, 3), dtypes=ALL),
    OpInfo("pow_promote", lambda t, x, y: t.pow(x, y),
           lambda d, r: (s for s in mixed_dtype_samples(d, r)
                         if not (d == "bool" and "bool" in s.desc)),
           dtypes=ALL, grad=False),
    OpInfo("pow_", inplace("pow_"),
           lambda d, r: (s for s in _pow_samples(d, r)
                         if not isinstance(s.args[0], (int, float)) and s.args[0].ndim >= (
                             s.args[1].ndim if isinstance(s.args[1], np.ndarray) else 0)
                         and not (isinstance(s.args[1], float) and d in INTS)
                         and s.desc != "0-d float64 exponent" and "broadcast" not in s.desc
                         and "special" not in s.desc),
           dtypes=INTS + FLOATS),
    OpInfo("ipow", inplace("__ipow__"), lambda d, r: [Sample((make((3, 4), d, r, 0.5, 2), 2))],
           dtypes=FLOATS),
    OpInfo("square", lambda t, x: t.square(x), unary_samples(), dtypes=ALL),
    OpInfo("square_", inplace("square_"), unary_samples(), dtypes=INTS + FLOATS),
    OpInfo("neg", lambda t, x: -x, with_specials(unary_samples()), dtypes=INTS + FLOATS,
           errors=lambda: [ErrorCase((np.array([True]),), exc=RuntimeError,
                                     match=r"\[neg\] Negation, the `-` operator, on a bool")]),
    OpInfo("negative", lambda t, x: t.negative(x), unary_samples(), dtypes=INTS + FLOATS),
    OpInfo("neg_", inplace("neg_"), unary_samples(), dtypes=INTS + FLOATS),
    OpInfo("abs", lambda t, x: t.abs(x), with_specials(unary_samples(exclude_zero=True)),
           dtypes=INTS + FLOATS,
           errors=lambda: [ErrorCase((np.array([True]),), exc=NotImplementedError,
                                     match=r"\[abs\] \"abs_cpu\" not implemented for 'Bool'")]),
    OpInfo("abs_operator", lambda t, x: abs(x), unary_samples(exclude_zero=True),
           dtypes=INTS + FLOATS),
    OpInfo("abs_at_zero", lambda t, x: x.absolute(),
           lambda d, r: [Sample((np.array([-1.0, 0.0, 2.0], np_dtype(d)),))], dtypes=FLOATS,
           fd_check=False),
    OpInfo("abs_", inplace("abs_"), unary_samples(exclude_zero=True), dtypes=INTS + FLOATS),
    OpInfo("sign", lambda t, x: t.sign(x), with_specials(unary_samples()), dtypes=ALL),
    OpInfo("sign_", inplace("sign_"), unary_samples(), dtypes=ALL),
    # PyTorch's sgn gradient is a ZeroTensor, which cannot be compared
    OpInfo("sgn", lambda t, x: t.sgn(x), unary_samples(), dtypes=("int64", "float32", "float64"),
           grad=False),
    OpInfo("numpy_scalars",
           lambda t, x: (np.float64(2.0) * x, np.float32(2.5) + x, x * np.int64(3),
                         x > np.float32(1.5), np.bool_(True) * x, x ** np.int64(2)),
           unary_samples(0, 3), dtypes=INTS + FLOATS, grad=False),
    OpInfo("pos", lambda t, x: +x, unary_samples(), dtypes=INTS + FLOATS,
           errors=lambda: [ErrorCase((np.array([True]),), exc=RuntimeError,
                                     match=r"\[positive\] The `\+` operator, on a bool")]),
]

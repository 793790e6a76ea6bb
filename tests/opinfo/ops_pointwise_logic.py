"""OpInfo entries for comparisons, logical and bitwise ops, shifts, classification
(isnan, ...), nan_to_num, maximum/minimum/fmax/fmin, where, clamp and closeness."""

from __future__ import annotations

import numpy as np

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
)
from tests.opinfo.ops_pointwise import (
    binary_samples,
    inplace,
    inplace_ok,
    mixed_dtype_samples,
    special_values,
    unary_samples,
    with_specials,
)

FLOAT_SET = ("float32", "float64")
INT_BOOL = ("bool",) + INTS


def _cmp_samples(dtype, rng):
    # small integer-valued ranges so that equal elements occur
    yield from with_specials(binary_samples(-2, 2), binary=True)(dtype, rng)
    yield Sample((make((3, 4), dtype, rng, 0, 3), 300), desc="scalar out of the dtype's range")


def _cmp_infos():
    out = []
    for name, sym in (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"),
                      ("ge", ">=")):
        out.append(OpInfo(name, lambda t, x, y, n=name: getattr(t, n)(x, y), _cmp_samples,
                          dtypes=ALL, grad=False))
        op = {"==": lambda x, y: x == y, "!=": lambda x, y: x != y, "<": lambda x, y: x < y,
              "<=": lambda x, y: x <= y, ">": lambda x, y: x > y, ">=": lambda x, y: x >= y}[sym]
        out.append(OpInfo(f"{name}_operator", lambda t, x, y, op=op: op(x, y),
                          binary_samples(-2, 2), dtypes=ALL, grad=False))
        out.append(OpInfo(f"{name}_promote", lambda t, x, y, n=name: getattr(x, n)(y),
                          mixed_dtype_samples, dtypes=ALL, grad=False))
        out.append(OpInfo(f"{name}_", inplace(f"{name}_"),
                          inplace_ok(binary_samples(-2, 2, scalars=False)), dtypes=ALL,
                          grad=False))
    for alias in ("greater", "greater_equal", "less", "less_equal", "not_equal"):
        out.append(OpInfo(alias, lambda t, x, y, n=alias: getattr(t, n)(x, y),
                          binary_samples(-2, 2), dtypes=("int64", "float32"), grad=False))
    return out


def _eq_non_tensor(t, x):
    return (x == None, x != None, x == "a", x.eq(1))  # noqa: E711


def _logical_samples(dtype, rng):
    yield from binary_samples(-1, 1, scalars=False)(dtype, rng)
    yield Sample((make((3, 4), dtype, rng, -1, 1), make((3, 4), "float32", rng, -1, 1)),
                 desc="vs float32")
    yield Sample((make((3, 4), dtype, rng, -1, 1), make((3, 4), "bool", rng)), desc="vs bool")
    if dtype in FLOATS:
        s = special_values(dtype)
        yield Sample((s[:, None], s[None, :]), desc="special (NaN is true)")


def _bitwise_samples(dtype, rng):
    yield from binary_samples(-100, 100, scalars=False)(dtype, rng)
    yield Sample((make((3, 4), dtype, rng, -100, 100), 5 if dtype != "bool" else True),
                 desc="scalar rhs")
    yield Sample((make((3, 4), dtype, rng, -100, 100), make((3, 4), "int64", rng, 0, 50)),
                 desc="vs int64")
    if dtype != "bool":
        yield Sample((make((3, 4), dtype, rng, -100, 100), True), desc="bool scalar rhs")


def _shift_samples(dtype, rng):
    bits = np.dtype(np_dtype(dtype)).itemsize * 8
    yield Sample((make((3, 4), dtype, rng, -50, 50), make((3, 4), dtype, rng, 0, bits - 1)),
                 desc="in range")
    lo = -3 if dtype in SIGNED_INTS else 0
    amounts = np.array([lo, 0, 1, bits - 1, bits, bits + 3, min(127, 2 * bits)])
    vals = np.array([-7, -1, 1, 5, 100, -128, 3])
    if dtype == "uint8":
        vals = np.array([7, 1, 255, 5, 100, 128, 3])
    yield Sample((vals.astype(np_dtype(dtype)), amounts.astype(np_dtype(dtype))),
                 desc="negative / too-large amounts")
    yield Sample((make((3, 4), dtype, rng, -50, 50), 2), desc="scalar amount")
    yield Sample((make((3, 1), dtype, rng, -50, 50), make((1, 4), dtype, rng, 0, 5)),
                 desc="broadcast")


def _bit_float_error(name, sym, kernel):
    def cases():
        f = np.array([1.0], np.float32)
        return [ErrorCase((f, f), exc=NotImplementedError,
                          match=rf"\[{name}\] \"{kernel}\" not implemented for 'Float'")]
    return cases


def _classify_samples(dtype, rng):
    yield from unary_samples()(dtype, rng)
    if dtype in FLOATS:
        yield Sample((special_values(dtype),), desc="special")


def _nan_to_num_samples(dtype, rng):
    yield from _classify_samples(dtype, rng)
    if dtype in FLOATS:
        s = special_values(dtype)
        yield Sample((s,), {"nan": 1.5}, desc="nan=1.5")
        yield Sample((s,), {"nan": 0.0, "posinf": 10.0, "neginf": -20.0}, desc="all given")
        yield Sample((s,), {"posinf": 1e10}, desc="posinf overflows half")
        yield Sample((make((3, 4), dtype, rng),), {"nan": 2.0}, desc="finite values")


def _minmax_samples(dtype, rng):
    # integer-valued small ranges give ties (PyTorch splits the gradient)
    yield from binary_samples(-2, 2, scalars=False)(dtype, rng)
    if dtype in FLOATS:
        s = special_values(dtype)
        yield Sample((s[:, None], s[None, :]), desc="special x special", grad=False)
        yield Sample((make((3, 4), dtype, rng), make((), "float64", rng)), desc="vs 0-d f64",
                     grad=False)


def _minmax_tie_samples(dtype, rng):
    a = make((3, 4), dtype, rng)
    b = a.copy()
    b[0] += 1
    yield Sample((a, b), desc="ties")
    n = np.array([np.nan, 1.0, np.nan, 2.0], np_dtype(dtype))
    m = np.array([1.0, np.nan, np.nan, 2.0], np_dtype(dtype))
    yield Sample((n, m), desc="nan and ties")


def _minmax_infos():
    out = []
    for name in ("maximum", "minimum", "fmax", "fmin"):
        out.append(OpInfo(name, lambda t, x, y, n=name: getattr(t, n)(x, y), _minmax_samples,
                          dtypes=ALL, fd_check=False,
                          errors=lambda n=name: [
                              ErrorCase((np.zeros(3, np.float32), 1.5), exc=TypeError,
                                        match=rf"\[{n}\] argument 'other'")]))
        out.append(OpInfo(f"{name}_ties", lambda t, x, y, n=name: getattr(x, n)(y),
                          _minmax_tie_samples, dtypes=FLOAT_SET, fd_check=False))
    return out


def _where_samples(dtype, rng):
    c = make((3, 4), "bool", rng)
    yield Sample((c, make((3, 4), dtype, rng), make((3, 4), dtype, rng)), desc="same shape")
    yield Sample((make((3, 1), "bool", rng), make((1, 4), dtype, rng), make((4,), dtype, rng)),
                 desc="broadcast all")
    yield Sample((make((), "bool", rng), make((2, 3), dtype, rng), make((2, 3), dtype, rng)),
                 desc="0-d condition")
    yield Sample((make((0, 3), "bool", rng), make((0, 3), dtype, rng), make((3,), dtype, rng)),
                 desc="empty")
    yield Sample((make((3, 4), "bool", rng, noncontig=True),
                  make((3, 4), dtype, rng, noncontig=True), make((3, 4), dtype, rng)),
                 desc="noncontig", noncontig=True)
    yield Sample((c, make((3, 4), dtype, rng), 0), desc="int scalar other")
    yield Sample((c, 1.5, make((3, 4), dtype, rng)), desc="float scalar input")
    yield Sample((c, make((3, 4), dtype, rng), make((3, 4), "float64", rng)),
                 desc="promote vs float64", grad=False)
    yield Sample((c, make((3, 4), dtype, rng), make((), "int64", rng)), desc="vs 0-d int64",
                 grad=False)


def _where_scalars(dtype, rng):
    c = make((3, 4), "bool", rng)
    yield Sample((c, 1.0, 2.0), desc="float scalars")
    yield Sample((c, 1, 2), desc="int scalars")
    yield Sample((c, True, False), desc="bool scalars")


def _where_errors():
    f = np.zeros(3, np.float32)
    return [ErrorCase((f, f, f), exc=RuntimeError,
                      match=r"\[where\] expected condition to be a boolean tensor, but got a "
                            r"tensor with dtype Float"),
            ErrorCase((np.zeros(3, bool), f, np.zeros(4, np.float32)), exc=RuntimeError,
                      match=r"\[where\]")]


def _clamp_samples(dtype, rng):
    lo, hi = (-1, 1) if dtype not in ("bool", "uint8") else (0, 1)
    for shape in ((), (0,), (5,), (3, 4)):
        yield Sample((make(shape, dtype, rng),), {"min": lo, "max": hi}, desc=f"both {shape}")
    x = make((3, 4), dtype, rng)
    yield Sample((x,), {"min": lo}, desc="min only")
    yield Sample((x,), {"max": hi}, desc="max only")
    yield Sample((x,), {"min": 0.5}, desc="float min promotes", grad=False)
    yield Sample((x,), {"min": hi, "max": lo}, desc="min > max")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"min": lo, "max": hi},
                 desc="noncontig", noncontig=True)
    if dtype == "bool":
        # PyTorch clamps bool only against one tensor bound
        yield Sample((x, make((3, 4), dtype, rng)), desc="bool tensor min")
        yield Sample((x, None, make((4,), dtype, rng)), desc="bool tensor max")
        return
    yield Sample((x, make((3, 4), dtype, rng), make((4,), dtype, rng, 1, 3)),
                 desc="tensor bounds")
    yield Sample((x, make((3, 1), dtype, rng)), desc="tensor min only")
    yield Sample((x, None, make((), "float64", rng)), desc="0-d float64 max", grad=False)
    if dtype in FLOATS:
        yield Sample((special_values(dtype),), {"min": -1.0, "max": 2.0}, desc="special",
                     grad=False)


def _clamp_tensor_grad_samples(dtype, rng):
    """Gradients with respect to tensor bounds (finite differences skip the kinks)."""
    x = make((3, 4), dtype, rng)
    yield Sample((x, make((3, 4), dtype, rng, -3, 0), make((3, 4), dtype, rng, 0, 3)),
                 desc="tensor bounds")
    yield Sample((x, make((3, 4), dtype, rng, 0, 3), make((3, 4), dtype, rng, -3, 0)),
                 desc="min > max")
    b = np.array([-1.0, 0.0, 1.0, 2.0], np_dtype(dtype))
    yield Sample((b, np.full(4, -1.0, np_dtype(dtype)), np.full(4, 1.0, np_dtype(dtype))),
                 desc="on the boundaries")


def _clamp_errors():
    b = np.array([True, False])
    return [ErrorCase((np.zeros(3, np.float32),), exc=RuntimeError,
                      match=r"\[clamp\] At least one of 'min' or 'max' must not be None"),
            ErrorCase((b, b, b), exc=NotImplementedError,
                      match=r"\[clamp\] \"clamp_cpu\" not implemented for 'Bool'"),
            ErrorCase((b, True, False), exc=NotImplementedError,
                      match=r"\[clamp\] \"clamp_scalar_cpu\" not implemented for 'Bool'"),
            ErrorCase((b, True), exc=NotImplementedError,
                      match=r"\[clamp\] \"clamp_min_scalar_cpu\" not implemented")]


def _isclose_samples(dtype, rng):
    a = make((3, 4), dtype, rng)
    b = a.copy()
    if dtype in FLOATS:
        b = (b.astype(np.float64) * (1 + rng.uniform(-2e-5, 2e-5, b.shape))).astype(b.dtype)
    yield Sample((a, b), desc="near")
    yield Sample((a, make((3, 4), dtype, rng)), desc="random")
    yield Sample((a, make((4,), dtype, rng)), desc="broadcast")
    yield Sample((a, b), {"rtol": 0.0, "atol": 0.0}, desc="exact")
    yield Sample((a, b), {"rtol": 1e-2, "atol": 1.0}, desc="loose")
    if dtype in FLOATS:
        s = special_values(dtype)
        yield Sample((s[:, None], s[None, :]), desc="special")
        yield Sample((s[:, None], s[None, :]), {"equal_nan": True}, desc="equal_nan")


def _equal_samples(dtype, rng):
    a = make((3, 4), dtype, rng)
    yield Sample((a, a.copy()), desc="same")
    b = a.copy()
    b.flat[3] = not b.flat[3] if dtype == "bool" else b.flat[3] + 1
    yield Sample((a, b), desc="one differs")
    yield Sample((a, make((4, 3), dtype, rng)), desc="shapes differ")
    yield Sample((a, a.astype(np.float64)), desc="vs float64 copy")
    if dtype in FLOATS:
        s = special_values(dtype)
        yield Sample((s, s.copy()), desc="nan never equal")


OPINFOS = _cmp_infos() + _minmax_infos() + [
    OpInfo("cmp_reflected", lambda t, x: (1 < x, 1 >= x, 0 == x, 2 != x), unary_samples(),
           dtypes=ALL, grad=False),
    OpInfo("eq_scalar_input_error", lambda t, x, y: t.eq(x, y), lambda d, r: (), dtypes=(),
           grad=False, errors=lambda: [
               ErrorCase((2, np.array([1, 2])), exc=TypeError,
                         match=r"\[eq\] argument 'input' must be a Tensor")]),
    OpInfo("eq_non_tensor", _eq_non_tensor, lambda d, r: [Sample((make((3,), d, r),))],
           dtypes=("int64", "float32"), grad=False),
    OpInfo("logical_and", lambda t, x, y: t.logical_and(x, y), _logical_samples, dtypes=ALL,
           grad=False, errors=lambda: [
               ErrorCase((np.array([True]), True), exc=TypeError,
                         match=r"\[logical_and\] argument 'other' must be a Tensor")]),
    OpInfo("logical_or", lambda t, x, y: x.logical_or(y), _logical_samples, dtypes=ALL,
           grad=False),
    OpInfo("logical_xor", lambda t, x, y: t.logical_xor(x, y), _logical_samples, dtypes=ALL,
           grad=False),
    OpInfo("logical_not", lambda t, x: t.logical_not(x), with_specials(unary_samples(-1, 1)),
           dtypes=ALL, grad=False),
    OpInfo("logical_and_", inplace("logical_and_"), inplace_ok(_logical_samples), dtypes=ALL,
           grad=False),
    OpInfo("logical_not_", inplace("logical_not_"), unary_samples(-1, 1), dtypes=ALL,
           grad=False),
    OpInfo("bitwise_and", lambda t, x, y: t.bitwise_and(x, y), _bitwise_samples,
           dtypes=INT_BOOL, grad=False,
           errors=_bit_float_error("bitwise_and", "&", "bitwise_and_cpu")),
    OpInfo("bitwise_or", lambda t, x, y: x | y, _bitwise_samples, dtypes=INT_BOOL, grad=False,
           errors=_bit_float_error("bitwise_or", "|", "bitwise_or_cpu")),
    OpInfo("bitwise_xor", lambda t, x, y: x ^ y, _bitwise_samples, dtypes=INT_BOOL, grad=False),
    OpInfo("rand_scalar", lambda t, x: 6 & x, unary_samples(0, 9), dtypes=INTS, grad=False),
    OpInfo("ror_scalar", lambda t, x: True | x, unary_samples(0, 9), dtypes=INT_BOOL,
           grad=False),
    OpInfo("bitwise_and_", inplace("bitwise_and_"), inplace_ok(_bitwise_samples),
           dtypes=INT_BOOL, grad=False),
    OpInfo("iand", inplace("__iand__"), inplace_ok(_bitwise_samples), dtypes=INT_BOOL,
           grad=False),
    OpInfo("ior", inplace("__ior__"), inplace_ok(_bitwise_samples), dtypes=INT_BOOL,
           grad=False),
    OpInfo("ixor", inplace("__ixor__"), inplace_ok(_bitwise_samples), dtypes=INT_BOOL,
           grad=False),
    OpInfo("bitwise_not", lambda t, x: t.bitwise_not(x), unary_samples(-100, 100),
           dtypes=INT_BOOL, grad=False, errors=lambda: [
               ErrorCase((np.array([1.0], np.float32),), exc=NotImplementedError,
                         match=r"\[bitwise_not\] \"bitwise_not_cpu\" not implemented")]),
    OpInfo("invert", lambda t, x: ~x, unary_samples(-100, 100), dtypes=INT_BOOL, grad=False,
           errors=lambda: [ErrorCase((np.array([1.0], np.float32),), exc=TypeError,
                                     match=r"\[bitwise_not\] ~ \(operator.invert\) is only")]),
    OpInfo("bitwise_not_", inplace("bitwise_not_"), unary_samples(-100, 100), dtypes=INT_BOOL,
           grad=False),
    OpInfo("left_shift", lambda t, x, y: t.bitwise_left_shift(x, y), _shift_samples,
           dtypes=INTS, grad=False,
           errors=lambda: [ErrorCase((np.array([True]), np.array([True])),
                                     exc=NotImplementedError,
                                     match=r"\"lshift_cpu\" not implemented for 'Bool'")]),
    OpInfo("lshift_operator", lambda t, x, y: x << y, _shift_samples, dtypes=INTS, grad=False),
    OpInfo("lshift_bool_scalar", lambda t, x: x << 1, unary_samples(), dtypes=("bool",),
           grad=False),
    OpInfo("rlshift_scalar", lambda t, x: 3 << x, unary_samples(0, 5), dtypes=INTS, grad=False),
    OpInfo("right_shift", lambda t, x, y: t.bitwise_right_shift(x, y), _shift_samples,
           dtypes=INTS, grad=False),
    OpInfo("rshift_operator", lambda t, x, y: x >> y, _shift_samples, dtypes=INTS, grad=False),
    OpInfo("rrshift_scalar", lambda t, x: 100 >> x, unary_samples(0, 5), dtypes=INTS,
           grad=False),
    OpInfo("ilshift", inplace("__ilshift__"), inplace_ok(_shift_samples), dtypes=INTS,
           grad=False),
    OpInfo("irshift", inplace("__irshift__"), inplace_ok(_shift_samples), dtypes=INTS,
           grad=False),
    # classification
    OpInfo("isnan", lambda t, x: t.isnan(x), _classify_samples, dtypes=ALL, grad=False),
    OpInfo("isinf", lambda t, x: x.isinf(), _classify_samples, dtypes=ALL, grad=False),
    OpInfo("isfinite", lambda t, x: t.isfinite(x), _classify_samples, dtypes=ALL, grad=False),
    OpInfo("isposinf", lambda t, x: t.isposinf(x), _classify_samples, dtypes=ALL, grad=False),
    OpInfo("isneginf", lambda t, x: t.isneginf(x), _classify_samples, dtypes=ALL, grad=False),
    OpInfo("nan_to_num", lambda t, x, **kw: t.nan_to_num(x, **kw), _nan_to_num_samples,
           dtypes=ALL),
    OpInfo("nan_to_num_", inplace("nan_to_num_"), _nan_to_num_samples, dtypes=FLOATS),
    # selection
    OpInfo("where", lambda t, c, x, y: t.where(c, x, y), _where_samples, dtypes=ALL,
           errors=_where_errors),
    OpInfo("where_scalars", lambda t, c, x, y: t.where(c, x, y), _where_scalars,
           dtypes=("bool",), grad=False),
    OpInfo("where_method", lambda t, c, x, y: x.where(c, y),
           lambda d, r: (s for s in _where_samples(d, r) if not np.isscalar(s.args[1])),
           dtypes=FLOAT_SET),
    OpInfo("clamp", lambda t, x, *a, **kw: t.clamp(x, *a, **kw), _clamp_samples, dtypes=ALL,
           fd_check=False, errors=_clamp_errors),
    OpInfo("clamp_tensor_grads", lambda t, x, lo, hi: t.clamp(x, lo, hi),
           _clamp_tensor_grad_samples, dtypes=FLOAT_SET, fd_check=False),
    OpInfo("clip", lambda t, x, *a, **kw: t.clip(x, *a, **kw), _clamp_samples, dtypes=FLOAT_SET,
           fd_check=False),
    OpInfo("clamp_min", lambda t, x: t.clamp_min(x, 0.5), unary_samples(), dtypes=FLOATS),
    OpInfo("clamp_max", lambda t, x: x.clamp_max(-0.5), unary_samples(), dtypes=FLOATS),
    OpInfo("clamp_", inplace("clamp_"),
           lambda d, r: (s for s in _clamp_samples(d, r) if s.grad and "tensor" not in s.desc),
           dtypes=INTS + FLOATS, fd_check=False),
    OpInfo("clip_", inplace("clip_"), lambda d, r: [Sample((make((3, 4), d, r),),
                                                           {"min": -1, "max": 1})],
           dtypes=FLOATS),
    OpInfo("clamp_min_", inplace("clamp_min_"),
           lambda d, r: [Sample((make((3, 4), d, r), 0))], dtypes=INTS + FLOATS),
    OpInfo("clamp_max_", inplace("clamp_max_"),
           lambda d, r: [Sample((make((3, 4), d, r), 1))], dtypes=INTS + FLOATS),
    # closeness
    OpInfo("isclose", lambda t, x, y, **kw: t.isclose(x, y, **kw), _isclose_samples,
           dtypes=ALL, grad=False, errors=lambda: [
               ErrorCase((np.zeros(3, np.float32), np.zeros(3, np.float64)), exc=RuntimeError,
                         match=r"\[isclose\] Float did not match Double")]),
    OpInfo("allclose", lambda t, x, y, **kw: t.allclose(x, y, **kw), _isclose_samples,
           dtypes=ALL, grad=False),
    OpInfo("allclose_method", lambda t, x, y, **kw: x.allclose(y, **kw), _isclose_samples,
           dtypes=FLOAT_SET, grad=False),
    OpInfo("equal", lambda t, x, y: t.equal(x, y), _equal_samples, dtypes=ALL, grad=False),
]

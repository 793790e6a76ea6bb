"""OpInfo entries for float math (exp/log/trig/erf family, sigmoid, logit), rounding, and the
float binary functions atan2, hypot, xlogy, copysign and lerp."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import ALL, FLOATS, INTS, ErrorCase, OpInfo, Sample, make, np_dtype
from tests.opinfo.ops_pointwise import (
    binary_samples,
    inplace,
    inplace_ok,
    special_values,
    unary_samples,
    with_specials,
)

# name -> (low, high) of the sample values (inside the domain, away from poles)
UNARY_FLOAT = {
    "exp": (-3, 3), "exp2": (-3, 3), "expm1": (-3, 3), "log": (0.1, 5), "log2": (0.1, 5),
    "log10": (0.1, 5), "log1p": (-0.9, 5), "sqrt": (0.1, 5), "rsqrt": (0.1, 5),
    "reciprocal": (0.2, 3), "sin": (-3, 3), "cos": (-3, 3), "tan": (-1.2, 1.2),
    "asin": (-0.95, 0.95), "acos": (-0.95, 0.95), "atan": (-3, 3), "sinh": (-3, 3),
    "cosh": (-3, 3), "tanh": (-3, 3), "asinh": (-3, 3), "acosh": (1.1, 4),
    "atanh": (-0.9, 0.9), "sigmoid": (-6, 6), "erf": (-3, 3), "erfc": (-3, 3),
    "erfinv": (-0.95, 0.95), "deg2rad": (-180, 180), "rad2deg": (-3, 3),
}
# PyTorch: "the derivative for 'inplace version of asinh' is not implemented"
NO_INPLACE_GRAD = {"asinh", "acosh", "atanh"}
ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
           "arccosh": "acosh", "arctanh": "atanh"}


def _func(name):
    return lambda t, x: getattr(t, name)(x)


def _method(name):
    return lambda t, x: getattr(x, name)()


def _erf_tail_samples(dtype, rng):
    """Arguments where erf is near +-1 and erfc is tiny (relative accuracy matters)."""
    if dtype not in FLOATS:
        return
    yield Sample((np.array([-6.0, -4.0, -2.6, -1.6, 0.3, 1.4, 1.6, 2.4, 2.6, 4.0, 6.0, 10.0,
                            26.0], np_dtype(dtype)),), desc="tails", grad=False)


def _erfinv_edge_samples(dtype, rng):
    if dtype not in FLOATS:
        return
    yield Sample((np.array([-1.0, 1.0, -0.999, 0.9999, 0.5, 0.51, 1e-5, 1.5, -2.0],
                           np_dtype(dtype)),), desc="edges", grad=False)


def _extra(name):
    if name in ("erf", "erfc"):
        return _erf_tail_samples
    if name == "erfinv":
        return _erfinv_edge_samples
    return lambda d, r: ()


def _unary_float_infos():
    out = []
    for name, (lo, hi) in UNARY_FLOAT.items():
        base = with_specials(unary_samples(lo, hi))
        extra = _extra(name)

        def samples(d, r, base=base, extra=extra):
            yield from base(d, r)
            yield from extra(d, r)
        out.append(OpInfo(name, _func(name), samples, dtypes=ALL))
        out.append(OpInfo(f"{name}_method", _method(name), unary_samples(lo, hi),
                          dtypes=("int64", "float32"), grad=False))
        out.append(OpInfo(f"{name}_", inplace(f"{name}_"), unary_samples(lo, hi), dtypes=FLOATS,
                          errors=_inplace_int_error if name == "sqrt" else lambda: (),
                          grad=name not in NO_INPLACE_GRAD))
    for alias, name in ALIASES.items():
        lo, hi = UNARY_FLOAT[name]
        out.append(OpInfo(alias, _func(alias), unary_samples(lo, hi), dtypes=FLOAT_SET))
        out.append(OpInfo(f"{alias}_", inplace(f"{alias}_"), unary_samples(lo, hi),
                          dtypes=FLOAT_SET, grad=name not in NO_INPLACE_GRAD))
    return out


FLOAT_SET = ("float32", "float64")


def _inplace_int_error():
    return [ErrorCase((np.array([1, 4], np.int64),), exc=RuntimeError,
                      match=r"\[sqrt_\] result type Float can't be cast to the desired output "
                            r"type Long")]


# ------------------------------------------------------------------------------ rounding
HALVES = [-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, -0.49999997, 2.675, 1234.5]


def _round_samples(dtype, rng):
    yield from with_specials(unary_samples(-10, 10))(dtype, rng)
    if dtype in FLOATS:
        yield Sample((np.array(HALVES, np_dtype(dtype)),), desc="halves", grad=False)


def _round_decimals_samples(dtype, rng):
    for dec in (1, 2, -1, 0):
        yield Sample((make((3, 4), dtype, rng, -100, 100),), {"decimals": dec},
                     desc=f"decimals={dec}")
        yield Sample((np.array(HALVES, np_dtype(dtype)),), {"decimals": dec},
                     desc=f"halves decimals={dec}", grad=False)


def _bool_error(name, kernel):
    def cases():
        return [ErrorCase((np.array([True, False]),), exc=NotImplementedError,
                          match=rf"\[{name}\] \"{kernel}\" not implemented for 'Bool'")]
    return cases


# ------------------------------------------------------------------------------ binary
def _float_binary_samples(low=-3.0, high=3.0, scalars=False):
    def gen(dtype, rng):
        yield from binary_samples(low, high, scalars=scalars)(dtype, rng)
        if dtype in FLOATS:
            s = special_values(dtype)
            yield Sample((s[:, None], s[None, :]), desc="special x special", grad=False)
    return gen


def _promo_samples(dtype, rng):
    a = make((3, 4), dtype, rng, 1, 3)
    for other in ("float32", "int64", "float64", "bool", "bfloat16"):
        yield Sample((a, make((3, 4), other, rng, 1, 3)), desc=f"vs {other}", grad=False)
    yield Sample((a, make((), "float64", rng, 1, 3)), desc="vs 0-d float64", grad=False)


def _xlogy_samples(dtype, rng):
    yield from binary_samples(0.1, 3, scalars=False, lhs_scalar=False)(dtype, rng)
    yield Sample((make((3, 4), dtype, rng, 0.1, 3), 2.5), desc="scalar other")
    yield Sample((2.0, make((3, 4), dtype, rng, 0.1, 3)), desc="scalar self")
    if dtype in FLOATS:
        z = np.array([0.0, 0.0, 0.0, 1.0, 2.0, 0.0], np_dtype(dtype))
        y = np.array([0.0, -1.0, np.nan, 0.0, -1.0, 2.0], np_dtype(dtype))
        yield Sample((z, y), desc="zeros and nan", grad=False)


def _xlogy_zero_grad_samples(dtype, rng):
    yield Sample((np.array([0.0, 0.0, 1.0, 2.0], np_dtype(dtype)),
                  np.array([0.0, 2.0, 3.0, 0.5], np_dtype(dtype))), desc="x == 0")


def _copysign_samples(dtype, rng):
    yield from binary_samples(exclude_zero_rhs=True, scalars=False)(dtype, rng)
    yield Sample((make((3, 4), dtype, rng, exclude_zero=True), -1.0), desc="scalar other")
    if dtype in FLOATS:
        s = special_values(dtype)
        # the sign bit of a NaN ``other`` depends on how each library converted it
        yield Sample((s[:, None], s[None, 1:]), desc="special x special", grad=False)


def _lerp_samples(dtype, rng):
    for shape in ((), (0,), (5,), (3, 4)):
        yield Sample((make(shape, dtype, rng), make(shape, dtype, rng), 0.3),
                     desc=f"scalar weight {shape}")
        yield Sample((make(shape, dtype, rng), make(shape, dtype, rng),
                      make(shape, dtype, rng, -0.5, 1.5)), desc=f"tensor weight {shape}")
    yield Sample((make((3, 1), dtype, rng), make((1, 4), dtype, rng), make((4,), dtype, rng)),
                 desc="broadcast")
    yield Sample((make((3, 4), dtype, rng, noncontig=True), make((3, 4), dtype, rng),
                  0.75), desc="noncontig, weight >= 0.5", noncontig=True)
    yield Sample((make((3, 4), dtype, rng), make((3, 4), dtype, rng), 2), desc="int weight")


def _lerp_errors():
    f32, f64 = np.zeros(3, np.float32), np.zeros(3, np.float64)
    return [
        ErrorCase((f32, f64, 0.5), exc=RuntimeError,
                  match=r"\[lerp\] expected dtype float for `end` but got dtype double"),
        ErrorCase((f32, f32, f64), exc=RuntimeError,
                  match=r"\[lerp\] expected dtype float for `weight` but got dtype double"),
        ErrorCase((np.zeros(3, np.int64), np.zeros(3, np.int64), 0.5), exc=NotImplementedError,
                  match=r"\[lerp\] \"lerp_kernel_scalar\" not implemented for 'Long'"),
        ErrorCase((f32, np.zeros(4, np.float32), 0.5), exc=RuntimeError, match=r"\[lerp\]"),
    ]


def _addc_samples(low=-3.0, high=3.0):
    def gen(dtype, rng):
        for shape in ((), (0,), (3, 4)):
            yield Sample((make(shape, dtype, rng), make(shape, dtype, rng),
                          make(shape, dtype, rng, low, high, exclude_zero=True)),
                         desc=f"{shape}")
        yield Sample((make((3, 4), dtype, rng), make((3, 1), dtype, rng),
                      make((4,), dtype, rng, low, high, exclude_zero=True)), desc="broadcast")
        yield Sample((make((3, 4), dtype, rng), make((3, 4), dtype, rng),
                      make((3, 4), dtype, rng, low, high, exclude_zero=True)), {"value": 2},
                     desc="value=2")
        if dtype != "uint8":
            yield Sample((make((3, 4), dtype, rng), make((3, 4), dtype, rng),
                          make((3, 4), dtype, rng, low, high, exclude_zero=True)),
                         {"value": -1.5}, desc="value=-1.5 (truncated for integers)")
        if dtype in FLOATS:
            yield Sample((make((3, 4), dtype, rng), make((3, 4), dtype, rng),
                          make((3, 4), dtype, rng, low, high, exclude_zero=True)),
                         {"value": -0.5}, desc="value=-0.5")
    return gen


def _float_power_samples(dtype, rng):
    yield Sample((make((3, 4), dtype, rng, 0.5, 2), make((3, 4), dtype, rng, -2, 2)),
                 desc="tensor ** tensor")
    yield Sample((make((3, 4), dtype, rng, 0.5, 2), 2), desc="tensor ** 2")
    yield Sample((2, make((3, 4), dtype, rng, -2, 2)), desc="2 ** tensor")


def _logit_samples(dtype, rng):
    yield from unary_samples(0.05, 0.95)(dtype, rng)
    yield Sample((make((3, 4), dtype, rng, -0.2, 1.2),), {"eps": 0.1}, desc="eps clamps")
    yield Sample((make((3, 4), dtype, rng, 0.05, 0.95),), {"eps": 1e-6}, desc="small eps")
    if dtype in FLOATS:
        yield Sample((np.array([-0.5, 0.0, 1.0, 1.5, np.nan], np_dtype(dtype)),),
                     desc="outside (0, 1)", grad=False)


OPINFOS = _unary_float_infos() + [
    OpInfo("sigmoid_extreme", lambda t, x: t.sigmoid(x),
           lambda d, r: [Sample((np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], np_dtype(d)),))],
           dtypes=FLOATS),
    OpInfo("logit", lambda t, x, **kw: t.logit(x, **kw), _logit_samples, dtypes=ALL),
    OpInfo("logit_", inplace("logit_"), _logit_samples, dtypes=FLOATS),
    # rounding
    OpInfo("floor", lambda t, x: t.floor(x), _round_samples, dtypes=INTS + FLOATS,
           errors=_bool_error("floor", "floor_vml_cpu")),
    OpInfo("ceil", lambda t, x: t.ceil(x), _round_samples, dtypes=INTS + FLOATS,
           errors=_bool_error("ceil", "ceil_vml_cpu")),
    OpInfo("trunc", lambda t, x: t.trunc(x), _round_samples, dtypes=INTS + FLOATS,
           errors=_bool_error("trunc", "trunc_vml_cpu")),
    OpInfo("fix", lambda t, x: t.fix(x), _round_samples, dtypes=("int32", "float32")),
    OpInfo("round", lambda t, x: t.round(x), _round_samples, dtypes=INTS + FLOATS,
           errors=_bool_error("round", "round_vml_cpu")),
    OpInfo("round_decimals", lambda t, x, **kw: t.round(x, **kw), _round_decimals_samples,
           dtypes=FLOATS, errors=lambda: [
               ErrorCase((np.array([1, 2]),), {"decimals": 1}, exc=NotImplementedError,
                         match=r"\[round\] \"round_cpu\" not implemented for 'Long'")]),
    OpInfo("frac", lambda t, x: t.frac(x), _round_samples, dtypes=FLOATS,
           errors=lambda: [ErrorCase((np.array([1, 2]),), exc=NotImplementedError,
                                     match=r"\[frac\] \"frac_cpu\" not implemented for 'Long'")]),
    OpInfo("floor_", inplace("floor_"), unary_samples(), dtypes=INTS + FLOATS),
    OpInfo("ceil_", inplace("ceil_"), unary_samples(), dtypes=INTS + FLOATS),
    OpInfo("trunc_", inplace("trunc_"), unary_samples(), dtypes=INTS + FLOATS),
    OpInfo("fix_", inplace("fix_"), unary_samples(), dtypes=FLOAT_SET),
    OpInfo("round_", inplace("round_"), unary_samples(), dtypes=INTS + FLOATS),
    OpInfo("round_decimals_", lambda t, x: x.clone().round_(decimals=1), unary_samples(),
           dtypes=FLOATS),
    OpInfo("frac_", inplace("frac_"), unary_samples(), dtypes=FLOATS),
    # binary float functions
    OpInfo("atan2", lambda t, x, y: t.atan2(x, y), _float_binary_samples(), dtypes=ALL),
    OpInfo("arctan2", lambda t, x, y: x.arctan2(y), binary_samples(scalars=False),
           dtypes=FLOAT_SET),
    OpInfo("atan2_promote", lambda t, x, y: t.atan2(x, y), _promo_samples, dtypes=ALL,
           grad=False),
    OpInfo("atan2_", inplace("atan2_"), inplace_ok(binary_samples(scalars=False)),
           dtypes=FLOATS),
    OpInfo("hypot", lambda t, x, y: t.hypot(x, y),
           _float_binary_samples(),
           dtypes=FLOATS, errors=lambda: [
               ErrorCase((np.array([3]), np.array([4])), exc=NotImplementedError,
                         match=r"\[hypot\] \"hypot_cpu\" not implemented for 'Long'")]),
    OpInfo("hypot_", inplace("hypot_"), inplace_ok(binary_samples(scalars=False)),
           dtypes=FLOATS),
    OpInfo("xlogy", lambda t, x, y: t.xlogy(x, y), _xlogy_samples, dtypes=ALL),
    OpInfo("xlogy_zero_grad", lambda t, x, y: t.xlogy(x, y), _xlogy_zero_grad_samples,
           dtypes=FLOAT_SET, fd_check=False),
    OpInfo("xlogy_promote", lambda t, x, y: t.xlogy(x, y), _promo_samples, dtypes=ALL,
           grad=False),
    OpInfo("xlogy_", inplace("xlogy_"), inplace_ok(_xlogy_samples), dtypes=FLOATS),
    OpInfo("copysign", lambda t, x, y: t.copysign(x, y), _copysign_samples, dtypes=ALL),
    OpInfo("copysign_promote", lambda t, x, y: t.copysign(x, y), _promo_samples, dtypes=ALL,
           grad=False),
    OpInfo("copysign_", inplace("copysign_"), inplace_ok(_copysign_samples), dtypes=FLOATS),
    OpInfo("lerp", lambda t, x, y, w: t.lerp(x, y, w), _lerp_samples, dtypes=FLOATS,
           errors=_lerp_errors),
    OpInfo("lerp_", inplace("lerp_"), inplace_ok(_lerp_samples), dtypes=FLOATS),
    OpInfo("logaddexp", lambda t, x, y: t.logaddexp(x, y), _float_binary_samples(),
           dtypes=FLOATS, errors=lambda: [
               ErrorCase((np.array([3]), np.array([4])), exc=NotImplementedError,
                         match=r"\[logaddexp\] \"logaddexp_cpu\" not implemented for 'Long'")]),
    OpInfo("float_power", lambda t, x, y: t.float_power(x, y), _float_power_samples,
           dtypes=ALL),
    OpInfo("addcmul", lambda t, x, a, b, **kw: t.addcmul(x, a, b, **kw), _addc_samples(),
           dtypes=INTS + FLOATS),
    OpInfo("addcmul_bool_error", lambda t, x, a, b: t.addcmul(x, a, b), lambda d, r: (),
           dtypes=(), grad=False, errors=lambda: [
               ErrorCase((np.array([True]),) * 3, exc=NotImplementedError,
                         match=r"\[addcmul\] \"addcmul_cpu_out\" not implemented for 'Bool'")]),
    OpInfo("addcmul_", inplace("addcmul_"), inplace_ok(_addc_samples()), dtypes=FLOATS),
    OpInfo("addcdiv", lambda t, x, a, b, **kw: x.addcdiv(a, b, **kw), _addc_samples(0.5, 3),
           dtypes=FLOATS, errors=lambda: [
               ErrorCase((np.zeros(2, np.float32), np.array([1, 2]), np.array([1, 2])),
                         exc=RuntimeError, match=r"\[addcdiv\] Integer division with addcdiv")]),
    OpInfo("addcdiv_", inplace("addcdiv_"), inplace_ok(_addc_samples(0.5, 3)), dtypes=FLOATS),
]

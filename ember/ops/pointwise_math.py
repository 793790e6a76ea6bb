"""Floating-point math primitives: exponentials, logs, roots, trigonometry, erf family,
sigmoid/logit, and the float binary functions (atan2, hypot, xlogy, copysign, lerp).

All accept floating dtypes only; the frontend computes integer and bool inputs in the default
float dtype, as PyTorch does.  float16/bfloat16 compute in float32 and round (``lowp``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import dtypes as dt
from ember.ops import _special
from ember.ops._fma import fma
from ember.ops._util import lowp
from ember.ops.pointwise import FLOAT_ONLY, binary, meta, unary, where_
from ember.ops.registry import OpDef, bind, register

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0


def _float_unary(name: str, fn, vjp, *, save=(0,), save_output=False, c_expr=None,  # noqa: ANN001
                 grad_name: str = "") -> OpDef:
    return unary(name, lowp(fn), vjp, save=save, save_output=save_output, c_expr=c_expr,
                 grad_name=grad_name)


def _x(ctx):  # noqa: ANN001, ANN202
    return ctx.inputs[0]


def _y(ctx):  # noqa: ANN001, ANN202
    return ctx.outputs[0]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # no overflow for large |x|: exp of a non-positive number only
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


_OUT = {"save": (), "save_output": True}

EXP = _float_unary("exp", np.exp, lambda c, g: (g * _y(c),), c_expr="ember_exp({0})", **_OUT)
EXP2 = _float_unary("exp2", np.exp2, lambda c, g: (g * (_y(c) * _LN2),), c_expr="ember_exp2({0})",
                    **_OUT)
EXPM1 = _float_unary("expm1", np.expm1, lambda c, g: (g * (_y(c) + 1),), c_expr="ember_expm1({0})",
                     **_OUT)
LOG = _float_unary("log", np.log, lambda c, g: (g / _x(c),), c_expr="ember_log({0})")
LOG2 = _float_unary("log2", np.log2, lambda c, g: (g / (_x(c) * _LN2),), c_expr="ember_log2({0})")
LOG10 = _float_unary("log10", np.log10, lambda c, g: (g / (_x(c) * _LN10),),
                     c_expr="ember_log10({0})")
LOG1P = _float_unary("log1p", np.log1p, lambda c, g: (g / (_x(c) + 1),), c_expr="ember_log1p({0})")
SQRT = _float_unary("sqrt", np.sqrt, lambda c, g: (g / (2 * _y(c)),), c_expr="ember_sqrt({0})",
                    **_OUT)
RSQRT = _float_unary("rsqrt", lambda x: 1.0 / np.sqrt(x),
                     lambda c, g: (-0.5 * g * _y(c).pow(3),), c_expr="(1 / ember_sqrt({0}))",
                     **_OUT)
RECIPROCAL = _float_unary("reciprocal", lambda x: 1.0 / x, lambda c, g: (-g * (_y(c) * _y(c)),),
                          c_expr="(1 / {0})", **_OUT)
SIN = _float_unary("sin", np.sin, lambda c, g: (g * _x(c).cos(),), c_expr="ember_sin({0})")
COS = _float_unary("cos", np.cos, lambda c, g: (g * -_x(c).sin(),), c_expr="ember_cos({0})")
TAN = _float_unary("tan", np.tan, lambda c, g: (g * (1 + _y(c) * _y(c)),), c_expr="ember_tan({0})",
                   **_OUT)
ASIN = _float_unary("asin", np.arcsin, lambda c, g: (g * (1 - _x(c) * _x(c)).rsqrt(),),
                    c_expr="ember_asin({0})")
ACOS = _float_unary("acos", np.arccos, lambda c, g: (g * -(1 - _x(c) * _x(c)).rsqrt(),),
                    c_expr="ember_acos({0})")
ATAN = _float_unary("atan", np.arctan, lambda c, g: (g / (_x(c) * _x(c) + 1),),
                    c_expr="ember_atan({0})")
SINH = _float_unary("sinh", np.sinh, lambda c, g: (g * _x(c).cosh(),), c_expr="ember_sinh({0})")
COSH = _float_unary("cosh", np.cosh, lambda c, g: (g * _x(c).sinh(),), c_expr="ember_cosh({0})")
TANH = _float_unary("tanh", np.tanh, lambda c, g: (g * (1 - _y(c) * _y(c)),),
                    c_expr="ember_tanh({0})", **_OUT)
SIGMOID = _float_unary("sigmoid", _sigmoid, lambda c, g: (g * (_y(c) * (1 - _y(c))),),
                       c_expr="ember_sigmoid({0})", **_OUT)
ERF = _float_unary("erf", _special.erf,
                   lambda c, g: (g * (_TWO_OVER_SQRT_PI * (-_x(c) * _x(c)).exp()),),
                   c_expr="ember_erf({0})")
ERFC = _float_unary("erfc", _special.erfc,
                    lambda c, g: (g * (-_TWO_OVER_SQRT_PI * (-_x(c) * _x(c)).exp()),),
                    c_expr="ember_erfc({0})")
ERFINV = _float_unary("erfinv", _special.erfinv,
                      lambda c, g: (g * (_SQRT_PI_OVER_2 * (_y(c) * _y(c)).exp()),),
                      c_expr="ember_erfinv({0})", **_OUT)
ASINH = _float_unary("asinh", np.arcsinh, lambda c, g: (g * (_x(c) * _x(c) + 1).rsqrt(),),
                     c_expr="ember_asinh({0})")
ACOSH = _float_unary("acosh", np.arccosh, lambda c, g: (g * (_x(c) * _x(c) - 1).rsqrt(),),
                     c_expr="ember_acosh({0})")
ATANH = _float_unary("atanh", np.arctanh, lambda c, g: (g / (1 - _x(c) * _x(c)),),
                     c_expr="ember_atanh({0})")
DEG2RAD = _float_unary("deg2rad", lambda x: x * x.dtype.type(math.pi / 180.0),
                       lambda c, g: (g * (math.pi / 180.0),), save=(),
                       c_expr="({0} * ember_like({0}, 0.017453292519943295))")
RAD2DEG = _float_unary("rad2deg", lambda x: x * x.dtype.type(180.0 / math.pi),
                       lambda c, g: (g * (180.0 / math.pi),), save=(),
                       c_expr="({0} * ember_like({0}, 57.29577951308232))")


# ---------------------------------------------------------------------------------- logit
def _logit_eager(x: np.ndarray, *, eps: float | None = None) -> np.ndarray:
    src = x.dtype
    if src.kind == "f" and src.itemsize >= 4:
        if eps is not None:
            x = np.clip(x, src.type(eps), src.type(1.0 - eps))
        return np.log(x / (1 - x))
    # float16/bfloat16: PyTorch rounds after each step (1 - x, the quotient, the log)
    f = np.float32
    x = x.astype(f)
    if eps is not None:
        x = np.clip(x, f(eps), f(1.0 - eps)).astype(src).astype(f)
    one_minus = (1 - x).astype(src).astype(f)
    return np.log((x / one_minus).astype(src).astype(f)).astype(src)


def _logit_vjp(ctx, g):  # noqa: ANN001
    x = ctx.inputs[0]
    eps = ctx.params.get("eps")
    d = g / (x * (1 - x))
    if eps is None:
        return (where_((x < 0) | (x > 1), math.nan, d),)
    return (where_((x < eps) | (x > 1 - eps), 0.0, d),)


def _logit_meta(x, *, eps: float | None = None) -> tuple:  # noqa: ANN001
    return x.shape, x.dtype


LOGIT = register(OpDef("logit", "pointwise", _logit_meta, _logit_eager, _logit_vjp,
                       save=(0,), c_expr="ember_logit({0}, {eps})"))


# ---------------------------------------------------------------------------------- binary
def _atan2_vjp(ctx, g):  # noqa: ANN001
    a, b = ctx.inputs
    n0, n1 = ctx.needs_input_grad
    recip = (a * a + b * b).reciprocal()
    return (g * b * recip if n0 else None, g * -a * recip if n1 else None)


def _hypot_vjp(ctx, g):  # noqa: ANN001
    a, b = ctx.inputs
    r = ctx.outputs[0]
    n0, n1 = ctx.needs_input_grad
    return (g * a / r if n0 else None, g * b / r if n1 else None)


def _xlogy_eager(x: Any, y: Any) -> np.ndarray:
    arr = x if isinstance(x, np.ndarray) else y
    out = np.where(np.asarray(x) == 0, 0, np.multiply(x, np.log(y)))
    out = np.where(np.isnan(y), np.nan, out)
    return np.broadcast_to(out, arr.shape).astype(arr.dtype)


def _xlogy_vjp(ctx, g):  # noqa: ANN001
    x, y = ctx.inputs
    n0, n1 = ctx.needs_input_grad
    gx = gy = None
    if n0:
        gx = where_((x == 0) & (y <= 0), 0.0, bind(XLOGY, g, y))
    if n1:
        gy = g * x / y
    return (gx, gy)


def _copysign_vjp(ctx, g):  # noqa: ANN001
    a = ctx.inputs[0]
    n0, n1 = ctx.needs_input_grad
    ga = None
    if n0:
        ratio = ctx.outputs[0] / a
        ga = g * where_(a == 0, 0.0, ratio)
    return (ga, g.new_zeros(tuple(g.shape)) if n1 else None)


def _logaddexp_eager(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    m = np.maximum(a, b)
    out = m + np.log1p(np.exp(-np.abs(a - b)))
    # equal infinities: a - b is NaN, the answer is that infinity
    return np.where(np.isinf(a) & (a == b), a, out).astype(a.dtype, copy=False)


def _logaddexp_vjp(ctx, g):  # noqa: ANN001
    a, b = ctx.inputs
    n0, n1 = ctx.needs_input_grad
    return (g * (a - b).sigmoid() if n0 else None, g * (b - a).sigmoid() if n1 else None)


LOGADDEXP = binary("logaddexp", lowp(_logaddexp_eager), _logaddexp_vjp, reject=FLOAT_ONLY,
                   c_expr="ember_logaddexp({0}, {1})")
ATAN2 = binary("atan2", lowp(np.arctan2), _atan2_vjp, c_expr="ember_atan2({0}, {1})")
HYPOT = binary("hypot", lowp(np.hypot), _hypot_vjp, save_output=True, reject=FLOAT_ONLY,
               c_expr="ember_hypot({0}, {1})")
XLOGY = binary("xlogy", lowp(_xlogy_eager), _xlogy_vjp, save_for={0: (0, 1), 1: (0, 1)},
               c_expr="ember_xlogy({0}, {1})")
COPYSIGN = binary("copysign", lowp(np.copysign), _copysign_vjp, save=(0,), save_output=True,
                  c_expr="ember_copysign({0}, {1})")


# ---------------------------------------------------------------------------------- addc*
def _addc_meta(x, a, b, *, value: Any) -> tuple:  # noqa: ANN001
    return _ADDC_BASE(x, a, b)


def _addcmul_eager(x: Any, a: Any, b: Any, *, value: Any) -> Any:
    if not isinstance(x, np.ndarray) or x.dtype.kind != "f":
        return x + value * a * b      # integers: exact (wrapping) arithmetic
    return fma(value * a, b, x)


def _addcmul_vjp(ctx, g):  # noqa: ANN001
    _, a, b = ctx.inputs
    v = ctx.params["value"]
    n0, n1, n2 = ctx.needs_input_grad
    return (g if n0 else None, g * (b * v) if n1 else None, g * (a * v) if n2 else None)


def _addcdiv_vjp(ctx, g):  # noqa: ANN001
    _, a, b = ctx.inputs
    v = ctx.params["value"]
    n0, n1, n2 = ctx.needs_input_grad
    return (g if n0 else None, g * (v / b) if n1 else None,
            -g * (v * a) / (b * b) if n2 else None)


_ADDC_BASE = meta("addcmul", reject=frozenset({dt.bool}), kernel="addcmul_cpu_out")
# PyTorch's kernels: ``fma(value * a, b, x)`` (``value * a`` rounded, then one rounding for
# the rest: the vectorized loop's fmadd) for addcmul; ``x + value * a / b`` for addcdiv;
# float16/bfloat16 computed in float and rounded once at the end
ADDCMUL = register(OpDef(
    "addcmul", "pointwise", _addc_meta, lowp(_addcmul_eager),
    _addcmul_vjp, save=(1, 2), c_expr="ember_fma(ember_like({0}, {value}) * {1}, {2}, {0})",
))
ADDCDIV = register(OpDef(
    "addcdiv", "pointwise", _addc_meta, lowp(lambda x, a, b, *, value: x + value * a / b),
    _addcdiv_vjp, save=(1, 2), c_expr="({0} + ember_like({0}, {value}) * {1} / {2})",
))


# ---------------------------------------------------------------------------------- lerp
def _lerp_eager(start: np.ndarray, end: np.ndarray, weight: Any) -> np.ndarray:
    # PyTorch's kernel: fma(w, end - start, start) for |w| < 0.5, else
    # fma(start - end, 1 - w, end): one rounding after the difference
    diff = end - start
    w = np.asarray(weight, dtype=start.dtype)
    small = np.abs(w) < 0.5
    if small.ndim == 0:
        return fma(w, diff, start) if small else fma(-diff, w.dtype.type(1) - w, end)
    return np.where(small, fma(w, diff, start), fma(-diff, w.dtype.type(1) - w, end))


def _lerp_vjp(ctx, g):  # noqa: ANN001
    start, end, w = ctx.inputs
    n0, n1, n2 = ctx.needs_input_grad
    gs = g * (1 - w) if n0 else None
    ge = g * w if n1 else None
    gw = g * (end - start) if n2 else None
    return (gs, ge, gw)


LERP = binary("lerp", lowp(_lerp_eager), _lerp_vjp, save=(0, 1, 2), reject=FLOAT_ONLY,
              kernel="lerp_kernel_scalar",
              c_expr="(ember_abs({2}) < 0.5 ? ember_fma({2}, {1} - {0}, {0})"
                     " : ember_fma({0} - {1}, 1 - {2}, {1}))")

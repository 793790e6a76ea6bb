"""``lgamma``, ``digamma`` and ``trigamma`` (``polygamma(1, x)``) pointwise primitives.

``lgamma`` is C's ``lgamma`` (``math.lgamma``, the libm function PyTorch's CPU kernel calls)
per element, with PyTorch's values at the poles (``inf``).  ``digamma`` and ``trigamma`` follow
PyTorch's ``calc_digamma``/``calc_trigamma`` (``aten/src/ATen/native/Math.h``: reflection below
zero, recurrence up to 10 (digamma) or 6 steps (trigamma), then the asymptotic series), in
float64.  float16/bfloat16/float32 compute in float64 and round.
"""

from __future__ import annotations

import math

import numpy as np

from ember.errors import EmberNotImplementedError
from ember.ops.pointwise import unary

_PSI_10 = 2.25175258906672110764
_A = (8.33333333333333333333e-2, -2.10927960927960927961e-2, 7.57575757575757575758e-3,
      -4.16666666666666666667e-3, 3.96825396825396825397e-3, -8.33333333333333333333e-3,
      8.33333333333333333333e-2)


def _lgamma_scalar(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:   # a pole (0, -1, -2, ...)
        return math.inf


_LGAMMA_U = np.frompyfunc(_lgamma_scalar, 1, 1)


def _lgamma(x: np.ndarray) -> np.ndarray:
    """``log|Gamma(x)|`` elementwise (inf at the poles, inf at -inf, NaN stays NaN)."""
    out = _LGAMMA_U(x.astype(np.float64)).astype(np.float64)
    return np.asarray(out, dtype=x.dtype)


def _digamma64(x: np.ndarray) -> np.ndarray:
    x = np.array(x, dtype=np.float64)
    out = np.empty_like(x)
    zero = x == 0
    neg_int = (x < 0) & (x == np.floor(x))
    neg = (x < 0) & ~neg_int
    reflect = np.zeros_like(x)
    if neg.any():
        r = x[neg] - np.trunc(x[neg])          # the signed fractional part (modf), as ATen
        reflect[neg] = math.pi / np.tan(math.pi * r)
    z = np.where(neg, 1 - x, x)
    z = np.where(zero | neg_int, 1.0, z)
    acc = np.zeros_like(z)
    for _ in range(10):
        small = z < 10
        if not small.any():
            break
        acc = np.where(small, acc - 1 / z, acc)
        z = np.where(small, z + 1, z)
    zz = 1 / (z * z)
    poly = np.zeros_like(z)
    for c in _A:
        poly = poly * zz + c
    series = np.where(z < 1e17, zz * poly, 0.0)
    res = np.where(z == 10, acc + _PSI_10, acc + np.log(z) - 0.5 / z - series)
    out[...] = np.where(neg, res - reflect, res)
    out[zero] = np.copysign(np.inf, -x[zero])
    out[neg_int] = np.nan
    out[np.isposinf(x)] = np.inf
    out[np.isneginf(x)] = np.nan
    return out


def _digamma(x: np.ndarray) -> np.ndarray:
    """``psi(x) = d/dx log Gamma(x)`` elementwise (-inf at +0, NaN at negative integers)."""
    return np.asarray(_digamma64(x), dtype=x.dtype)


def _trigamma(x: np.ndarray) -> np.ndarray:
    """``psi'(x)`` elementwise (PyTorch's ``calc_trigamma``)."""
    z = np.array(x, dtype=np.float64)
    sign = np.ones_like(z)
    res = np.zeros_like(z)
    low = z < 0.5
    if low.any():
        s = np.sin(math.pi * z[low])
        res[low] = -(math.pi * math.pi) / (s * s)
        sign[low] = -1.0
        z[low] = 1 - z[low]
    for _ in range(6):
        res += 1 / (z * z)
        z = z + 1
    ixx = 1 / (z * z)
    res += (1 + 1 / (2 * z) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / z
    return np.asarray(sign * res, dtype=x.dtype)


def _lowp64(fn):  # noqa: ANN001, ANN202
    """Compute in float64 for every floating dtype (as PyTorch's accurate CPU kernels)."""
    def run(x: np.ndarray) -> np.ndarray:
        return np.asarray(fn(x.astype(np.float64)), dtype=x.dtype)
    run.__doc__ = fn.__doc__
    return run


def _trigamma_vjp(ctx, g):  # noqa: ANN001
    raise EmberNotImplementedError("[polygamma] the derivative of polygamma(1, x) (polygamma "
                                   "of order 2) is not implemented in ember")


# C: the prelude's ember_digamma/ember_trigamma, the same steps in double (libm's tan/log/sin)
TRIGAMMA = unary("trigamma", _lowp64(_trigamma), _trigamma_vjp, doc=_trigamma.__doc__,
                 c_expr="ember_trigamma({0})")
DIGAMMA = unary("digamma", _lowp64(_digamma),
                lambda c, g: (g * _bind_trigamma(c.inputs[0]),), doc=_digamma.__doc__,
                c_expr="ember_digamma({0})")
LGAMMA = unary("lgamma", _lowp64(_lgamma), lambda c, g: (g * _bind_digamma(c.inputs[0]),),
               doc=_lgamma.__doc__)


def _bind_trigamma(x):  # noqa: ANN001, ANN202
    from ember.ops.registry import bind
    return bind(TRIGAMMA, x)


def _bind_digamma(x):  # noqa: ANN001, ANN202
    from ember.ops.registry import bind
    return bind(DIGAMMA, x)

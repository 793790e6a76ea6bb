"""Vectorised erf, erfc and erfinv in NumPy (NumPy has none; SciPy is not a dependency).

erf uses the everywhere-positive series ``erf(x) = 2/sqrt(pi) * x * exp(-x^2) *
sum_n (2x^2)^n / (2n+1)!!`` for small |x| (no cancellation), and erfc the Laplace continued
fraction for larger |x|, evaluated bottom-up with a fixed depth.  ``exp(-x^2)`` is computed as
``exp(-h^2) * exp(-(x-h)(x+h))`` with ``h`` the high half of ``x``'s mantissa, so the square is
exact and erfc keeps its relative accuracy far into the tail.  Relative error is about 1e-15.
erfinv starts from Winitzki's closed-form approximation and takes Halley steps on erf (or erfc
near +-1, where ``1 - |y|`` is exact and erf would cancel).
"""

from __future__ import annotations

import math

import numpy as np

_SERIES_MAX = 2.5      # erf: |x| below this: series; above: continued fraction
_ERFC_CF_MIN = 1.5     # erfc: continued fraction from here (keeps relative accuracy)
_SERIES_TERMS = 48
_CF_DEPTH = 90
_HALLEY_STEPS = 2      # cubic convergence from Winitzki's ~1e-4 start: 1e-12, then 1e-16
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)


def _exp_neg_square(x: np.ndarray) -> np.ndarray:
    """exp(-x*x) without the rounding error of forming x*x."""
    hi = (x.view(np.uint64) & np.uint64(0xFFFFFFFFF8000000)).view(np.float64)
    return np.exp(-hi * hi) * np.exp(-(x - hi) * (x + hi))


def _erf_series(x: np.ndarray) -> np.ndarray:
    if x.size == 0:
        return x.copy()
    z = 2.0 * x * x
    # enough terms for the largest |x| here: the terms fall below 1e-17 of the first
    zmax, n_terms, t = float(z.max()), 1, 1.0
    while t > 1e-17 and n_terms < _SERIES_TERMS:
        t *= zmax / (2 * n_terms + 1)
        n_terms += 1
    # Horner form: 1 + z/3 (1 + z/5 (1 + z/7 (...)))
    s = np.ones_like(x)
    for n in range(n_terms - 1, 0, -1):
        s *= z
        s *= 1.0 / (2 * n + 1)
        s += 1.0
    return _TWO_OVER_SQRT_PI * x * _exp_neg_square(x) * s


def _erfc_cf(x: np.ndarray) -> np.ndarray:
    """erfc(x) for x >= 1.5: exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/...)))."""
    f = x.copy()
    for k in range(_CF_DEPTH, 0, -1):
        f = x + (k / 2.0) / f
    return _INV_SQRT_PI * _exp_neg_square(x) / f


def erf(x: np.ndarray) -> np.ndarray:
    """Elementwise erf in float64 (other float dtypes are computed in float64)."""
    src = x.dtype
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    small = ax < _SERIES_MAX
    out = np.empty_like(x)
    out[small] = _erf_series(x[small])
    big = ~small & ~np.isnan(x)
    out[big] = np.copysign(1.0 - _erfc_cf(np.minimum(ax[big], 30.0)), x[big])
    out[np.isnan(x)] = np.nan
    return out.astype(src, copy=False)


def erfc(x: np.ndarray) -> np.ndarray:
    """Elementwise erfc in float64, accurate relative to the (tiny) result for large x."""
    src = x.dtype
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    small = np.abs(x) < _ERFC_CF_MIN
    out[small] = 1.0 - _erf_series(x[small])
    pos = (x >= _ERFC_CF_MIN)
    out[pos] = _erfc_cf(np.minimum(x[pos], 40.0))
    out[pos & (x > 27.3)] = 0.0  # below the smallest subnormal
    neg = x <= -_ERFC_CF_MIN
    out[neg] = 2.0 - _erfc_cf(np.minimum(-x[neg], 30.0))
    out[np.isnan(x)] = np.nan
    return out.astype(src, copy=False)


def _halley(x: np.ndarray, f: np.ndarray) -> np.ndarray:
    """One Halley step for erf(x) = y given f = erf(x) - y (f'' = -2 x f')."""
    step = f / (_TWO_OVER_SQRT_PI * _exp_neg_square(x))
    return x - step / (1.0 + x * step)


def erfinv(y: np.ndarray) -> np.ndarray:
    """Elementwise inverse of erf on [-1, 1]; +-inf at +-1, NaN outside."""
    src = y.dtype
    y = np.asarray(y, dtype=np.float64)
    ay = np.abs(y)
    inside = ay < 1.0
    a = 0.147
    w = np.log1p(-np.where(inside, ay * ay, 0.0))
    t = 2.0 / (math.pi * a) + 0.5 * w
    x = np.sqrt(np.sqrt(t * t - w / a) - t)
    x = np.where(inside, x, 0.0)
    tail = ay > 0.5
    xt, xc = x[tail], x[~tail]
    rest = 1.0 - ay[tail]              # exact for |y| > 0.5 (Sterbenz)
    ac = ay[~tail]
    for _ in range(_HALLEY_STEPS):
        # f(x) = erf(x) - |y|; near |y| = 1 written with erfc, which keeps its accuracy
        xt = _halley(xt, rest - erfc(xt))
        xc = _halley(xc, erf(xc) - ac)
    x = np.empty_like(y)
    x[tail] = xt
    x[~tail] = xc
    out = np.copysign(x, y)
    out = np.where(ay == 1.0, np.copysign(np.inf, y), out)
    out = np.where((ay > 1.0) | np.isnan(y), np.nan, out)
    return out.astype(src, copy=False)

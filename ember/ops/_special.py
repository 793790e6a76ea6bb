"""Special functions NumPy lacks, vectorised: ``erf_np`` / ``erfc_np``.

W. J. Cody's rational Chebyshev approximations (CALERF, Math. Comp. 1969), the algorithm behind
most libm ``erf``s: relative error below 1e-15 in float64 on the whole real line.  Three
ranges: ``|x| <= 0.46875`` (erf directly), ``0.46875 < |x| <= 4`` and ``|x| > 4`` (erfc via
``exp(-x*x)`` times a rational function, with the square split to keep ``exp`` exact).
"""

from __future__ import annotations

import math

import numpy as np

from ember.ops import _parallel

_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
      3.20937758913846947e03, 1.85777706184603153e-1)
_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
      2.84423683343917062e03)
_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
      2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
      2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)
_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
      1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
      3.43936767414372164e03, 1.23033935480374942e03)
_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
      1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)
_Q = (2.56852019228982242e00, 1.87295284992346725e00, 5.27905102951428412e-1,
      6.05183413124413191e-2, 2.33520497626869185e-3)
_SQRPI = 5.6418958354775628695e-1  # 1 / sqrt(pi)
_THRESH = 0.46875


def _ratio(z: np.ndarray, num_c: tuple, den_c: tuple, lead: float) -> np.ndarray:
    """Horner evaluation of ``(lead*z^k + num_c[0] z^(k-1) ... ) / (z^k + den_c[0] ...)``, in
    place on two buffers (large temporaries are the main cost of these kernels)."""
    num = np.multiply(z, lead)
    den = z.copy()
    for a, b in zip(num_c[:-1], den_c[:-1]):
        num += a
        num *= z
        den += b
        den *= z
    num += num_c[-1]
    den += den_c[-1]
    num /= den
    return num


def _erf_small(x: np.ndarray) -> np.ndarray:
    r = _ratio(x * x, _A[:4], _B, _A[4])
    r *= x
    return r


def _erfc_mid(y: np.ndarray) -> np.ndarray:
    return _ratio(y, _C[:8], _D, _C[8])


def _erfc_big(y: np.ndarray) -> np.ndarray:
    z = y * y
    np.divide(1.0, z, out=z)
    r = _ratio(z, _P[:5], _Q, _P[5])
    r *= z
    np.subtract(_SQRPI, r, out=r)
    r /= y
    return r


def _erfc_pos(y: np.ndarray) -> np.ndarray:
    """erfc(y) for y > 0.46875 (1-d array); each range is evaluated on its elements only."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        mid = y <= 4.0
        if mid.all():
            r = _erfc_mid(y)
        else:
            r = np.empty_like(y)
            r[mid] = _erfc_mid(y[mid])
            big = ~mid
            r[big] = _erfc_big(y[big])
        # exp(-y*y) computed as exp(-s*s) * exp(-(y-s)(y+s)) with s = y rounded to 1/16
        s = y * 16.0
        np.trunc(s, out=s)
        s /= 16.0
        d = y - s
        t = y + s
        d *= t
        np.negative(d, out=d)
        np.exp(d, out=d)
        r *= d
        s *= s
        np.negative(s, out=s)
        np.exp(s, out=s)
        r *= s
        r[y >= 27.3] = 0.0  # underflow; NaN stays NaN
        return r


def erf_np(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise, in ``x``'s float dtype (float32/float64)."""
    x = np.asarray(x)
    out = _parallel.map_blocks(_erf_serial, x)
    return _erf_serial(x) if out is None else out


def _erf_serial(x: np.ndarray) -> np.ndarray:
    flat = x.reshape(-1)
    y = np.abs(flat)
    small = y <= _THRESH
    if small.all():
        return _erf_small(x)
    out = np.empty_like(flat)
    out[small] = _erf_small(flat[small])
    rest = ~small
    out[rest] = np.copysign(1.0 - _erfc_pos(y[rest]), flat[rest])
    return out.reshape(x.shape)


def erfc_np(x: np.ndarray) -> np.ndarray:
    """The complementary error function ``1 - erf(x)`` without cancellation for large x."""
    x = np.asarray(x)
    out = _parallel.map_blocks(_erfc_serial, x)
    return _erfc_serial(x) if out is None else out


def _erfc_serial(x: np.ndarray) -> np.ndarray:
    flat = x.reshape(-1)
    y = np.abs(flat)
    small = y <= _THRESH
    out = np.empty_like(flat)
    out[small] = 1.0 - _erf_small(flat[small])
    rest = ~small
    tail = _erfc_pos(y[rest])
    out[rest] = np.where(flat[rest] < 0, 2.0 - tail, tail)
    return out.reshape(x.shape)


# ------------------------------------------------------------------------------ float32 Phi
# erfc(z) = t R(t) exp(-z*z) with t = 1 / (1 + z/2) (Numerical Recipes' variable, t in (0, 1]) and
# R(t) = erfcx(z) / t a degree-10 polynomial (minimax relative error 5.2e-8 with these float32
# coefficients, fitted to SciPy's erfcx).  z*z = x*x / 2 comes from x itself with the rounding
# error of the float32 square (x*x = hi + lo exactly), so the lower tail keeps its relative
# accuracy (max ~6 float32 ulp of Phi over the whole line; a rounded z*z in the exp argument
# would cost ~z*z ulp).  The C prelude's ember_normal_cdff is the same formula, its Horner steps
# fma (within 6 ulp of this; 3 without fma).
_PHI_R = (0.043112155, -0.017949885, -0.07641655, 0.054717857, 0.097762525, -0.10372387,
          -0.17201036, 0.1457698, 0.5589422, 0.6871607, 0.51079136)   # in t - 1/2


def normal_cdf_f32(x: np.ndarray) -> np.ndarray:
    """Phi(x) = erfc(-x / sqrt(2)) / 2 for a float32 block, with relative error ~6 float32 ulp
    also in the lower tail (where ``(1 + erf(x / sqrt(2))) / 2`` cancels)."""
    a = np.abs(x)
    np.minimum(a, 15.0, out=a)                       # exp(-112.5) rounds to 0; NaN stays
    t = np.multiply(a, 0.35355338)
    t += 1.0
    np.divide(1.0, t, out=t)                         # 1 / (1 + z/2), z = |x| / sqrt 2
    v = np.subtract(t, 0.5)
    poly = np.multiply(v, _PHI_R[0])                 # Horner in t - 1/2 (the C kernel: fma)
    for c in _PHI_R[1:-1]:
        poly += c
        poly *= v
    poly += _PHI_R[-1]                               # R(t)
    hi = np.multiply(a, a)
    lo = np.square(a, dtype=np.float64)
    lo -= hi
    lo = lo.astype(np.float32)                       # a*a - hi, exact in float32
    hi *= -0.5
    ex = np.exp(hi)
    lo *= -0.5
    lo *= ex
    ex += lo                                         # exp(-a*a / 2) = exp(-hi/2) (1 - lo/2)
    ex *= t
    poly *= ex                                       # erfc(a / sqrt 2) = (t exp) R
    np.subtract(2.0, poly, out=poly, where=x > 0)    # erfc(u) = 2 - erfc(-u), u = -x/sqrt 2
    poly *= 0.5
    return poly


# ------------------------------------------------------------------------------ erfinv
# Winitzki's closed-form start refined by Halley steps on erf (or erfc near +-1, where 1 - |y|
# is exact and erf would cancel).
_HALLEY_STEPS = 2      # cubic convergence from Winitzki's ~1e-4 start: 1e-12, then 1e-16
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erf(x: np.ndarray) -> np.ndarray:
    """erf in float64 precision, returned in ``x``'s dtype."""
    return erf_np(np.asarray(x, dtype=np.float64)).astype(np.asarray(x).dtype, copy=False)


def erfc(x: np.ndarray) -> np.ndarray:
    """erfc in float64 precision, returned in ``x``'s dtype."""
    return erfc_np(np.asarray(x, dtype=np.float64)).astype(np.asarray(x).dtype, copy=False)


def _exp_neg_square(x: np.ndarray) -> np.ndarray:
    """exp(-x*x) without the rounding error of forming x*x."""
    hi = (x.view(np.uint64) & np.uint64(0xFFFFFFFFF8000000)).view(np.float64)
    return np.exp(-hi * hi) * np.exp(-(x - hi) * (x + hi))



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

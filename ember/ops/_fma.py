"""``a * b + c`` with one rounding, on NumPy arrays, as PyTorch's CPU kernels compute
``add(x, y, alpha=)`` (``fma(alpha, y, x)``), ``sub(alpha=)`` and ``addcmul``
(``fma(value * t1, t2, x)``): their vectorized loops use the FMA instruction, and two
roundings (NumPy's ``c + a * b``) differ in the last bit for about a tenth of float32 values.

float32 is exact: the product of two float32 values is exact in float64, and the float64 sum
rounded *to odd* (53 >= 24 + 2 bits) then to float32 rounds once (Boldo and Melquiond, "When
double rounding is odd", 2005).  float64 uses their emulated fma: an exact product split in
two (Dekker), an exact sum (Knuth), and the round-to-odd sum of the low parts.  That is exact
unless a partial result underflows or overflows (then ``c + a * b`` is used where the emulation
is not finite).  float16/bfloat16 go through float32 (``lowp``), as PyTorch's opmath does.

``fma`` runs the fma instruction through a small C kernel (``_fma_c``: one pass over memory,
several times faster) when the system C compiler could build it, and this emulation
(``fma_numpy``) otherwise; both give the same bits (tests/test_fma.py).

>>> import numpy as np
>>> a, b, c = np.float32([0.1]), np.float32([3.0]), np.float32([-0.3])
>>> bool(fma(a, b, c)[0] == np.float32(np.float64(a[0]) * 3.0 + np.float64(c[0])))
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.ops import _fma_c, _parallel

_SPLIT = 134217729.0    # 2**27 + 1: Veltkamp's splitter for float64


def _two_sum(a: Any, b: Any) -> tuple:
    """(s, e) with s = fl(a + b) and a + b = s + e exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _to_odd(s: np.ndarray, e: Any) -> np.ndarray:
    """``s`` (a float64 array that ``e`` is the rounding error of) rounded to odd instead:
    where the sum was inexact and ``s`` has an even last bit, the neighbour towards the exact
    value, which has an odd one."""
    s = np.array(s, dtype=np.float64, copy=True)
    bits = s.view(np.int64)
    fix = (e != 0) & ((bits & 1) == 0) & np.isfinite(s)
    if np.any(fix):
        step = np.where((e > 0) == (s > 0), 1, -1)
        bits[fix] += step[fix]
    return s


# float64 bits of a value that lies halfway between two float32 neighbours: its 29 bits below
# float32's precision are 1000...0 (only there can rounding twice differ from rounding once);
# and float32 results at or below the smallest normal, which round at a higher bit
_LOW29, _HALF29 = (1 << 29) - 1, 1 << 28
_EXP32, _MIN_NORMAL32 = 0x7F800000, 0x00800000


def _fma32(a: Any, b: Any, c: Any) -> np.ndarray:
    shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c))
    if isinstance(a, np.ndarray) and a.shape == shape:
        p = a.astype(np.float64)               # (faster than np.multiply's casting loop)
        p *= b                                 # exact: 24 + 24 bits
    else:
        p = np.asarray(np.multiply(a, b, dtype=np.float64))
    s = np.add(p, c, out=p) if p.shape == shape else np.asarray(np.add(p, c, dtype=np.float64))
    r = s.astype(np.float32)
    risky = (s.view(np.int64) & _LOW29) == _HALF29
    risky |= (r.view(np.int32) & _EXP32) <= _MIN_NORMAL32
    if risky.any():    # rare: redo those elements with the sum rounded to odd
        idx = np.flatnonzero(risky)
        ai, bi, ci = (np.broadcast_to(v, shape).reshape(-1)[idx] for v in (a, b, c))
        ss, e = _two_sum(ci.astype(np.float64), np.multiply(ai, bi, dtype=np.float64))
        r.reshape(-1)[idx] = _to_odd(ss, e).astype(np.float32)
    return r


def _split(x: np.ndarray) -> tuple:
    t = _SPLIT * x
    hi = t - (t - x)
    return hi, x - hi


def _fma64(a: Any, b: Any, c: Any) -> np.ndarray:
    a, b, c = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
    uh = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    ul = ((ah * bh - uh) + ah * bl + al * bh) + al * bl      # a * b = uh + ul exactly
    th, tl = _two_sum(c, uh)
    v, ve = _two_sum(tl, ul)
    out = th + _to_odd(v, ve)
    bad = ~np.isfinite(out)
    if np.any(bad):   # inf/nan operands, or an overflow inside the emulation
        # (an infinite c wins over a finite product that overflows only when rounded)
        keep_c = np.isinf(c) & np.isfinite(a) & np.isfinite(b)
        out = np.where(bad, np.where(keep_c, c, c + uh), out)
    return out


def fma(a: Any, b: Any, c: Any, out: np.ndarray | None = None) -> np.ndarray:
    """``a * b + c`` rounded once, elementwise (float32 or float64; the dtype of the array
    operands, Python scalars taking it); written into ``out`` too when given (an array of
    the result's shape and dtype, which may be one of the operands)."""
    c_fma = _fma_c.kernel()
    if c_fma is not None:     # the instruction: one pass instead of several float64 passes
        return c_fma(a, b, c, out)
    res = fma_numpy(a, b, c)
    if out is not None:
        out[...] = res
        return out
    return res


def native_fma() -> bool:
    """Whether ``fma`` runs the C kernel (the instruction) rather than the NumPy emulation."""
    return _fma_c.kernel() is not None


def fma_numpy(a: Any, b: Any, c: Any) -> np.ndarray:
    """``fma`` emulated with NumPy (no C compiler needed)."""
    with np.errstate(invalid="ignore", over="ignore"):
        # large operands block by block on every thread: the float64 temporaries stay in cache
        out = _parallel.map_blocks_n(_fma, (a, b, c))
        return _fma(a, b, c) if out is None else out


def _fma(a: Any, b: Any, c: Any) -> np.ndarray:
    typed = [v.dtype for v in (a, b, c) if isinstance(v, (np.ndarray, np.generic))]
    dtype = np.result_type(*typed) if typed else np.dtype(np.float64)
    if dtype == np.float32:
        a, b, c = (v if isinstance(v, (np.ndarray, np.generic)) else np.float32(v)
                   for v in (a, b, c))
        return _fma32(a, b, c)
    assert dtype == np.float64, dtype
    return _fma64(a, b, c)


__all__ = ["fma", "fma_numpy", "native_fma"]

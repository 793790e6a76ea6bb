"""The int8 dynamic Linear of ``ember.ao`` in C (``csrc/qlinear_eager.c``): a weight packed
once into 16-column blocks (``pack_weight``), the input quantized to uint8 row tile by row tile
inside the product, ``vpdpbusd`` (AVX512-VNNI / AVX-VNNI) or ``vpmaddubsw``/``vpmaddwd``
(AVX-512BW / AVX2) register tiles, a scalar loop elsewhere; built and cached by ``_native``.
Rows (or, for a few rows, columns) are split over ember's threads (ctypes releases the GIL).
Integer sums are exact and the epilogue is one ``fmaf``, so the bits are those of the NumPy path
(blocked float32 BLAS, ``ember/ao/quantization``), which runs when this kernel is off
(EMBER_EAGER_C=0) or could not be built.

>>> import numpy as np
>>> w = pack_weight(np.array([[3, -4]], np.int8))
>>> y = run(np.float32([[1, 2]]), 1.0, 0, 127, w, np.float32([0.5]), None)
>>> y is None or y.tolist() == [[-2.5]]
True
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from ember.ops import _native, _parallel

_P, _I, _F = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
_NATIVE = _native.Native(
    "qlinear", _native.csrc("qlinear_eager.c"),
    {"ember_eager_qlinear_packed": (ctypes.c_int, [_P, _I, _I, _I, _I, _P, _P, _P, _F, _P, _I,
                                                   _P, _P, _P, _P, _I, _I, _I]),
     "ember_eager_minmax": (ctypes.c_int, [_P, _I, _P, _P]),
     "ember_eager_minmax_rows": (ctypes.c_int64, [_P, _I, _I, _I, _P, _P]),
     "ember_eager_quantize_u8": (None, [_P, _I, _F, _F, _F, _P])})
_state = _NATIVE.state
set_enabled = _NATIVE.set_enabled
BLOCK = 16                      # output columns per packed block
MPAD = 48                       # packed columns: a multiple of every register tile's width
ROWS_PER_TASK = 64              # rows a thread quantizes and multiplies at least


def available() -> bool:
    """Whether ``run`` uses the C kernel (on, and built)."""
    return _NATIVE.lib() is not None


@dataclass(frozen=True)
class Packed:
    """An int8 weight (M, K) in the kernel's layout: ``data`` (M/16, K/4, 16, 4) int8, M
    padded to a multiple of 48 (whole register tiles) and K to a multiple of 4 with zeros;
    ``colsum`` (padded M,) int32: the row sums of the codes (for the activation zero point)."""

    data: np.ndarray
    colsum: np.ndarray
    m: int
    k: int

    @property
    def kp(self) -> int:
        return self.data.shape[1] * 4


def pack_weight(codes: np.ndarray) -> Packed:
    """Pack int8 ``codes`` (M, K) once (at quantize time) for ``run``."""
    m, k = codes.shape
    mp, kp = -(-m // MPAD) * MPAD, -(-max(k, 1) // 4) * 4
    pad = np.zeros((mp, kp), np.int8)
    pad[:m, :k] = codes
    data = np.ascontiguousarray(pad.reshape(mp // BLOCK, BLOCK, kp // 4, 4).transpose(0, 2, 1, 3))
    return Packed(data, pad.sum(axis=1, dtype=np.int64).astype(np.int32), m, k)


def unpack_weight(w: Packed) -> np.ndarray:
    """The int8 codes (M, K) of a packed weight (the NumPy path's operand)."""
    nb, k4 = w.data.shape[:2]
    return w.data.transpose(0, 2, 1, 3).reshape(nb * BLOCK, k4 * 4)[:w.m, :w.k]


def minmax(x: np.ndarray) -> tuple[float, float] | None:
    """(min, max) of a C-contiguous float32 array with at least one element, NaN-propagating
    like NumPy's, or None when the kernel is off."""
    lib = _NATIVE.lib()
    if lib is None:
        return None
    lo, hi = ctypes.c_float(), ctypes.c_float()
    if lib.ember_eager_minmax(_native.ptr(x), x.size, ctypes.byref(lo), ctypes.byref(hi)):
        return float("nan"), float("nan")
    return lo.value, hi.value


def minmax_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-row (min, max) float32 arrays of a C-contiguous 2-d float32 array with at least
    one column, NaN-propagating like NumPy's, or None when the kernel is off."""
    lib = _NATIVE.lib()
    if lib is None:
        return None
    n, k = x.shape
    lo, hi = np.empty(n, np.float32), np.empty(n, np.float32)
    if lib.ember_eager_minmax_rows(_native.ptr(x), n, k, k, lo.ctypes.data, hi.ctypes.data):
        return x.min(axis=1), x.max(axis=1)
    return lo, hi


def quantize_u8(x: np.ndarray, scale: np.float32, zero_point: int, qmax: int) -> np.ndarray | None:
    """fbgemm's ``Quantize`` of a C-contiguous float32 ``x`` to uint8 codes in [0, qmax] (the
    same bits as ``ember.ao.quantization.qtensor.quantize_array``), or None when off."""
    lib = _NATIVE.lib()
    if lib is None:
        return None
    out = np.empty(x.shape, np.uint8)
    inv = np.float32(1.0) / np.float32(scale)
    lib.ember_eager_quantize_u8(x.ctypes.data, x.size, float(inv), float(zero_point), float(qmax),
                                out.ctypes.data)
    return out


def _pad(v: np.ndarray | None, mp: int) -> np.ndarray | None:
    if v is None:
        return None
    out = np.zeros(mp, np.float32)
    out[:v.shape[0]] = v
    return out


def run(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, qmax: int, w: Packed,
        wscale: np.ndarray, bias: np.ndarray | None) -> np.ndarray | None:
    """``fma(float32(xq @ codes.T - zx * colsum), float32(sx * wscale), bias)`` (N, M) float32
    with ``xq`` the uint8 codes of float32 ``x`` (N, K) at its rows' ``scale``/``zero_point``
    ((N,) float32 / int: the same value in every row for per-tensor quantization) clamped to
    [0, qmax] (127: PyTorch's reduce_range; 255: the full range, which the ``vpmaddubsw``
    paths split in two halves so that nothing saturates); or None when the kernel is off.
    ``wscale``/``bias``: (M,) float32 (bias may be None)."""
    lib = _NATIVE.lib()
    if lib is None:
        return None
    x = np.ascontiguousarray(x, np.float32)
    n, k = x.shape
    m, mp = w.m, w.data.shape[0] * BLOCK
    wsp = _pad(np.broadcast_to(np.asarray(wscale, np.float32), (m,)), mp)
    biasp = _pad(bias, mp)
    out = np.empty((n, m), np.float32)
    rscale = np.ascontiguousarray(np.broadcast_to(np.asarray(scale, np.float32), (n,)))
    rinv = np.float32(1.0) / rscale
    rzp = np.ascontiguousarray(np.broadcast_to(np.asarray(zero_point, np.float32), (n,)))
    args = (rinv.ctypes.data, rzp.ctypes.data, rscale.ctypes.data, float(qmax),
            w.data.ctypes.data, w.kp, w.colsum.ctypes.data, wsp.ctypes.data,
            None if biasp is None else biasp.ctypes.data, out.ctypes.data, m)
    xp = x.ctypes.data
    threads = _parallel.get_num_threads()
    fails: list[int] = []

    def part(n0: int, n1: int, m0: int, m1: int) -> None:
        if lib.ember_eager_qlinear_packed(xp, k, n0, n1, k, *args, m0, m1):
            fails.append(1)

    if threads > 1 and n >= 2 * ROWS_PER_TASK:
        parts = min(threads, n // ROWS_PER_TASK)
        step = -(-n // parts)
        tasks = [lambda a=a: part(a, min(n, a + step), 0, m) for a in range(0, n, step)]
    elif threads > 1 and mp >= 2 * MPAD:
        step = -(-(mp // MPAD) // min(threads, mp // MPAD)) * MPAD
        tasks = [lambda a=a: part(0, n, a, min(m, a + step)) for a in range(0, m, step)]
    else:
        tasks = [lambda: part(0, n, 0, m)]
    _parallel._run(tasks)
    if fails:
        raise MemoryError("[quantized.dynamic.Linear] out of memory for the quantized input")
    return out


__all__ = ["Packed", "available", "minmax", "minmax_rows", "pack_weight", "quantize_u8", "run",
           "set_enabled", "unpack_weight"]

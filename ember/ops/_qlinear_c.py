"""The int8 x uint8 -> int32 product of ``ember.ao``'s dynamic quantized Linear in C
(``csrc/qlinear_eager.c``: AVX2 ``vpmaddubsw``/``vpmaddwd`` where the CPU has them, a scalar
loop otherwise), built and cached by ``_native``; output columns are split over ember's threads
(ctypes releases the GIL).  Integer sums are exact, and the epilogue is one ``fmaf``, so the
bits are those of the NumPy path (blocked float32 BLAS, ``ember/ao/quantization``), which runs
when this kernel is off (EMBER_EAGER_C=0) or could not be built.

>>> import numpy as np
>>> x = np.array([[1, 2]], np.uint8); w = np.array([[3, -4]], np.int8)
>>> y = run(x, w, np.array([-1], np.int32), np.float32([0.5]), None, 0)
>>> y is None or y.tolist() == [[-2.5]]
True
"""

from __future__ import annotations

import ctypes

import numpy as np

from ember.ops import _native, _parallel

_P, _I = ctypes.c_void_p, ctypes.c_int64
_NATIVE = _native.Native(
    "qlinear", _native.csrc("qlinear_eager.c"),
    {"ember_eager_qlinear": (None, [_P, _P, _P, _P, _P, ctypes.c_int32, _P, _P, _I, _I, _I, _I,
                                    _I]),
     "ember_eager_quantize_u8": (None, [_P, _I, ctypes.c_float, ctypes.c_float, ctypes.c_float,
                                        _P])})
_state = _NATIVE.state
set_enabled = _NATIVE.set_enabled


def available() -> bool:
    """Whether ``run`` uses the C kernel (on, and built)."""
    return _NATIVE.lib() is not None


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


def run(xq: np.ndarray, w: np.ndarray, colsum: np.ndarray, mult: np.ndarray,
        bias: np.ndarray | None, zx: int) -> np.ndarray | None:
    """``fma(float32(xq @ w.T - zx * colsum), mult, bias)`` (N, M) float32, or None when the
    kernel is off or not built.  ``xq`` (N, K) uint8 in [0, 127], ``w`` (M, K) int8, ``colsum``
    (M,) int32 (row sums of ``w``), ``mult``/``bias`` (M,) float32."""
    lib = _NATIVE.lib()
    if lib is None:
        return None
    n, k = xq.shape
    m = w.shape[0]
    xq, w = np.ascontiguousarray(xq), np.ascontiguousarray(w)
    colsum = np.ascontiguousarray(colsum, np.int32)
    mult = np.ascontiguousarray(np.broadcast_to(mult, (m,)), np.float32)
    bias = None if bias is None else np.ascontiguousarray(bias, np.float32)
    out = np.empty((n, m), np.float32)
    acc = np.empty((n, m), np.int32)
    ptrs = [a.ctypes.data for a in (xq, w, colsum, mult)]
    bptr = None if bias is None else bias.ctypes.data
    parts = max(1, min(_parallel.get_num_threads(), m // 64))
    step = -(-m // parts)
    step = -(-step // 64) * 64

    def part(m0: int) -> None:
        lib.ember_eager_qlinear(*ptrs, bptr, int(zx), acc.ctypes.data, out.ctypes.data, n, k, m,
                                m0, min(m, m0 + step))

    _parallel._run([lambda m0=m0: part(m0) for m0 in range(0, m, step)])
    return out


__all__ = ["available", "quantize_u8", "run", "set_enabled"]

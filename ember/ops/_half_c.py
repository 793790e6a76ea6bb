"""Fast float16/bfloat16 <-> float32 conversions for eager ops (``csrc/half_eager.c``).

NumPy's float16 cast is a scalar loop (~4 ns a value) and ml_dtypes' bfloat16 cast costs about
as much, so an eager half elementwise op (convert its inputs to float32, compute, round back:
PyTorch's CPU semantics) ran at 0.1-0.15x its float32 speed.  The C kernels convert with
F16C/AVX-512 (``vcvtph2ps``/``vcvtps2ph``) or a shift (bfloat16), split over ember's threads;
``ufunc_blocks`` runs a whole float16/bfloat16 ufunc block by block on every thread (convert a
block, the float32 ufunc, round it back: the float32 temporaries stay in cache).

Same bits as NumPy's / ml_dtypes' casts, except that float16 signalling NaNs come out quiet
(as from torch's vectorized conversions).  Without a C compiler (or ``EMBER_EAGER_C=0``) every
function returns None and the caller keeps NumPy's casts.

>>> import numpy as np
>>> x = np.arange(5, dtype=np.float16)
>>> y = to_float32(x)
>>> y is None or y.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
True
"""

from __future__ import annotations

import ctypes
import math
import threading
from typing import Any

import ml_dtypes
import numpy as np

from ember.ops import _native, _parallel

_SIG = (None, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64])
_NATIVE = _native.Native("half", _native.csrc("half_eager.c"),
                         {f"ember_eager_{n}": _SIG for n in
                          ("f16_to_f32", "f32_to_f16", "bf16_to_f32", "f32_to_bf16")})
_state = _NATIVE.state
set_enabled = _NATIVE.set_enabled
_F16, _BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
_NAMES = {_F16.num: "f16", _BF16.num: "bf16"}
MIN_ELEMENTS = 4096      # below this NumPy's cast is as fast (the ctypes call costs ~1 µs)
BLOCK = 1 << 16          # elements per block of ``ufunc_blocks`` (3 x 256 KiB of float32)


def _convert(fn: Any, dst: np.ndarray, src: np.ndarray) -> None:
    n = src.size
    d, s = dst.reshape(-1), src.reshape(-1)
    threads = _parallel.get_num_threads()
    # never from a task of the pool itself (its workers would wait on each other)
    if threads < 2 or n < _parallel.MIN_ELEMENTS or \
            threading.current_thread().name.startswith("ember"):
        fn(_native.ptr(d), s.ctypes.data, n)
        return
    _parallel._run([lambda lo=lo, hi=hi: fn(_native.ptr(d[lo:hi]), s[lo:].ctypes.data, hi - lo)
                    for lo, hi in _parallel._bounds(n, threads)])


def convert_into(dst: np.ndarray, src: np.ndarray, threaded: bool = True) -> bool:
    """``dst[...] = src`` for C-contiguous arrays of one shape, float16/bfloat16 -> float32 or
    float32 -> float16/bfloat16 (round to nearest even); False (nothing written) when that
    does not hold or there is no C kernel.  ``threaded``: split over ember's threads (not
    from inside a task that already runs on them)."""
    if src.shape != dst.shape or src.size < MIN_ELEMENTS or not (
            src.flags.c_contiguous and dst.flags.c_contiguous and dst.flags.writeable):
        return False
    if dst.dtype == np.float32:
        fname = _NAMES.get(src.dtype.num)
        fname = fname and f"{fname}_to_f32"
    elif src.dtype == np.float32:
        fname = _NAMES.get(dst.dtype.num)
        fname = fname and f"f32_to_{fname}"
    else:
        return False
    lib = _NATIVE.lib() if fname else None
    if lib is None:
        return False
    fn = getattr(lib, f"ember_eager_{fname}")
    if threaded:
        _convert(fn, dst, src)
    else:
        fn(dst.ctypes.data, src.ctypes.data, src.size)
    return True


def to_float32(a: np.ndarray) -> np.ndarray | None:
    """``a.astype(float32)`` for a C-contiguous float16/bfloat16 array, or None (small,
    strided, another dtype, or no C kernel)."""
    name = _NAMES.get(a.dtype.num)
    if name is None or a.size < MIN_ELEMENTS or not a.flags.c_contiguous:
        return None
    lib = _NATIVE.lib()
    if lib is None:
        return None
    out = np.empty(a.shape, np.float32)
    _convert(getattr(lib, f"ember_eager_{name}_to_f32"), out, a)
    return out


def from_float32(a: np.ndarray, dtype: np.dtype) -> np.ndarray | None:
    """``a.astype(dtype)`` (float16/bfloat16, round to nearest even) for a C-contiguous
    float32 array, or None."""
    name = _NAMES.get(dtype.num)
    if name is None or a.dtype != np.float32 or a.size < MIN_ELEMENTS or \
            not a.flags.c_contiguous:
        return None
    lib = _NATIVE.lib()
    if lib is None:
        return None
    out = np.empty(a.shape, dtype)
    _convert(getattr(lib, f"ember_eager_f32_to_{name}"), out, a)
    return out


def widen(a: np.ndarray) -> np.ndarray:
    """``a.astype(float32)`` for any float16/bfloat16 array: a strided one is first copied
    contiguous in its own dtype (a plain 2-byte copy), then converted in C."""
    if a.size >= MIN_ELEMENTS and a.dtype.num in _NAMES:
        if not a.flags.c_contiguous:
            # a permuted view of contiguous memory (attention's (B, H, L, E) heads of a
            # (B, L, H * E) projection): converted in memory order, the result permuted back
            # (astype's order="K" layout), without the 2-byte copy
            order = sorted(range(a.ndim), key=lambda d: -a.strides[d])
            t = a.transpose(order)
            if t.flags.c_contiguous:
                fast = to_float32(t)
                if fast is not None:
                    return fast.transpose(np.argsort(order))
        fast = to_float32(a if a.flags.c_contiguous else np.ascontiguousarray(a))
        if fast is not None:
            return fast
    return a.astype(np.float32)


def narrow(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``a.astype(dtype)`` (float32 to float16/bfloat16, nearest even) through C when it can."""
    fast = from_float32(a, dtype) if a.flags.c_contiguous else None
    return a.astype(dtype) if fast is None else fast


def ufunc_blocks(fn: np.ufunc, arrays: tuple, src: np.dtype) -> np.ndarray | None:
    """``fn`` of float16/bfloat16 ``arrays`` computed in float32 and rounded to ``src`` once
    (what ``lowp`` does), block by block on every thread; None unless the array operands are
    C-contiguous, of dtype ``src`` and one shape (scalars pass whole) and the output is float32."""
    name = _NAMES.get(src.num)
    shape = None
    for a in arrays:
        if isinstance(a, np.ndarray):
            if shape is None:
                shape = a.shape
            if a.shape != shape or a.dtype != src or not a.flags.c_contiguous:
                return None
    if name is None or shape is None or math.prod(shape) < MIN_ELEMENTS:
        return None
    lib = _NATIVE.lib()
    if lib is None or fn.nout != 1:
        return None
    flat = [a.reshape(-1) if isinstance(a, np.ndarray) else a for a in arrays]
    probe = fn(*(a[:1].astype(np.float32) if isinstance(a, np.ndarray) else a for a in flat))
    if probe.dtype != np.float32:
        return None
    load, store = (getattr(lib, f"ember_eager_{name}_to_f32"),
                   getattr(lib, f"ember_eager_f32_to_{name}"))
    n = math.prod(shape)
    out = np.empty(n, src)
    blocks = _parallel._bounds(n, -(-n // BLOCK))
    threads = min(_parallel.get_num_threads(), len(blocks))
    if threading.current_thread().name.startswith("ember"):
        threads = 1          # already a task of the pool

    addr = [a.ctypes.data if isinstance(a, np.ndarray) else None for a in flat]
    out_addr, isz = out.ctypes.data, src.itemsize

    def work(k: int) -> None:
        bufs = [np.empty(BLOCK, np.float32) if a is not None else None for a in addr]
        bptr = [None if b is None else b.ctypes.data for b in bufs]
        res = np.empty(BLOCK, np.float32)
        rptr = res.ctypes.data
        for lo, hi in blocks[k::threads]:
            m = hi - lo
            ins: list = []
            for j, (a, b, ap, bp) in enumerate(zip(flat, bufs, addr, bptr)):
                if b is None:
                    ins.append(a)
                elif j and a is flat[0]:   # x + x: one conversion
                    ins.append(ins[0])
                else:
                    load(bp, ap + lo * isz, m)
                    ins.append(b[:m])
            fn(*ins, out=res[:m])
            store(out_addr + lo * isz, rptr, m)

    if threads < 2:
        work(0)
    else:
        _parallel._run([lambda k=k: work(k) for k in range(threads)])
    return out.reshape(shape)


__all__ = ["convert_into", "from_float32", "narrow", "set_enabled", "to_float32",
           "ufunc_blocks", "widen"]

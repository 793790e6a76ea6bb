"""The fused multiply-add instruction for eager ``_fma.fma``: a small C kernel built once with
the system C compiler (``config.cc``), cached in ``config.cache_dir/eager`` and called through
ctypes.  C's ``fma``/``fmaf`` round once by definition (the instruction where the CPU has it,
libm's exact software fma otherwise), so the bits are those of the NumPy emulation in
``_fma.py`` and of PyTorch's kernels, at the cost of one pass over memory instead of several
float64 passes.

Built, cached and loaded by ``_native.Native``: when the build fails (no compiler, no ctypes,
a read-only cache) ``kernel()`` returns None once and for all and ``_fma.fma`` keeps the NumPy
path.  ``config.eager_c_fma`` (EMBER_EAGER_C_FMA=0) turns this kernel off, ``config.eager_c``
(EMBER_EAGER_C=0) every eager C kernel; tests switch it with ``set_enabled``.

>>> import numpy as np
>>> k = kernel()
>>> k is None or bool(k(np.float32([0.1]), np.float32([3.0]), np.float32([-0.3]))[0]
...                   == np.float32(np.float64(np.float32(0.1)) * 3 + np.float64(np.float32(-0.3))))
True
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

from ember.config import config
from ember.ops import _native, _parallel

# the C source: csrc/fma_eager.c
_SOURCE = _native.csrc("fma_eager.c")
_NATIVE = _native.Native(
    "fma", _SOURCE,
    {name: (None, [ctypes.c_int] + [ctypes.c_void_p] * 4 + [ctypes.c_ssize_t]
            + [ctypes.c_double] * 3) for name in ("ember_eager_fma_f32", "ember_eager_fma_f64")},
    enabled=config.eager_c_fma)
_state = _NATIVE.state          # enabled / tried / lib (tests patch it)
set_enabled = _NATIVE.set_enabled
_ptr = _native.ptr


def _dtype(a: Any, b: Any, c: Any) -> np.dtype:
    typed = [v.dtype for v in (a, b, c) if type(v) is np.ndarray or isinstance(v, np.generic)]
    if not typed:
        return np.dtype(np.float64)
    if typed.count(typed[0]) == len(typed):
        return typed[0]
    return np.result_type(*typed)


def _scalar(v: Any, dtype: np.dtype) -> float:
    """One value rounded to ``dtype``, as a Python float (which holds it exactly)."""
    if type(v) is dtype.type:
        return float(v)
    return float(np.asarray(v, dtype=dtype).reshape(()))


def _call(fn: Any, dtype: np.dtype, args: tuple, out: np.ndarray | None) -> np.ndarray:
    shape = None
    for v in args:
        if type(v) is np.ndarray and v.size != 1:
            shape = v.shape if shape is None or shape == v.shape else \
                np.broadcast_shapes(shape, v.shape)
    if shape is None:
        shape = np.broadcast_shapes(*(np.shape(v) for v in args))
    mode, ptrs, scalars = 0, [None, None, None], [0.0, 0.0, 0.0]
    for k, v in enumerate(args):
        if type(v) is np.ndarray and v.size != 1:
            if v.dtype != dtype or v.shape != shape or not v.flags.c_contiguous:
                v = np.ascontiguousarray(np.broadcast_to(v.astype(dtype, copy=False), shape))
            mode |= 1 << k
            ptrs[k] = v
        else:   # one value: rounded to the dtype, passed exactly as a double
            scalars[k] = _scalar(v, dtype)
    if out is not None and out.dtype == dtype and out.shape == shape and out.flags.c_contiguous:
        res = out
    else:
        res = np.empty(shape, dtype=dtype)
    n = res.size
    if n:
        addr = [None if p is None else _ptr(p) for p in ptrs]
        threads = _parallel.get_num_threads()
        if n < _parallel.MIN_ELEMENTS or threads < 2:
            fn(mode, *addr, _ptr(res), n, *scalars)
        else:   # ctypes releases the GIL: one slice per thread
            size, dst = dtype.itemsize, _ptr(res)
            _parallel._run([
                lambda lo=lo, hi=hi: fn(mode, *(None if p is None else p + lo * size
                                                for p in addr),
                                        dst + lo * size, hi - lo, *scalars)
                for lo, hi in _parallel._bounds(n, threads)])
    if out is not None and res is not out:
        out[...] = res
        return out
    return res


def kernel() -> Callable[..., np.ndarray] | None:
    """``k(a, b, c, out=None)`` computing ``a * b + c`` rounded once with the C kernel, in the
    dtype of the array operands (float32 or float64); None when the kernel is off or could not
    be built."""
    lib = _NATIVE.lib()
    if lib is None:
        return None

    def run(a: Any, b: Any, c: Any, out: np.ndarray | None = None) -> np.ndarray:
        dtype = _dtype(a, b, c)
        if not dtype.isnative:
            dtype = dtype.newbyteorder("=")
        assert dtype in (np.float32, np.float64), dtype
        fn = lib.ember_eager_fma_f32 if dtype == np.float32 else lib.ember_eager_fma_f64
        return _call(fn, dtype, (a, b, c), out)

    return run


__all__ = ["kernel", "set_enabled"]

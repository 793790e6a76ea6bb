"""The fused multiply-add instruction for eager ``_fma.fma``: a small C kernel built once with
the system C compiler (``config.cc``), cached in ``config.cache_dir/eager`` and called through
ctypes.  C's ``fma``/``fmaf`` round once by definition (the instruction where the CPU has it,
libm's exact software fma otherwise), so the bits are those of the NumPy emulation in
``_fma.py`` and of PyTorch's kernels, at the cost of one pass over memory instead of several
float64 passes.

Eager must run without a C compiler: when the build fails (no compiler, no ctypes, a read-only
cache) ``kernel()`` returns None once and for all and ``_fma.fma`` keeps the NumPy path.
``config.eager_c_fma`` (EMBER_EAGER_C_FMA=0) turns the kernel off; tests switch it with
``set_enabled``.

>>> import numpy as np
>>> k = kernel()
>>> k is None or k(np.float32([0.1]), np.float32([3.0]), np.float32([-0.3]))[0] == np.float32(
...     np.float64(np.float32(0.1)) * 3.0 + np.float64(np.float32(-0.3)))
True
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess
import tempfile
import threading
from typing import Any, Callable

import numpy as np

from ember.config import config
from ember.ops import _parallel

# one loop per operand layout (m: bit 0/1/2 set when a/b/c is a full array, else a scalar), so
# the compiler vectorizes each with the fma instruction
_SOURCE = r"""
#include <math.h>
#include <stddef.h>
#define LOOP(T, F, A, B, C) for (ptrdiff_t i = 0; i < n; i++) out[i] = F(A, B, C);
#define KERNEL(NAME, T, F) \
void NAME(int m, const T *restrict a, const T *restrict b, const T *restrict c, \
          T *restrict out, ptrdiff_t n) { \
    const T a0 = a[0], b0 = b[0], c0 = c[0]; \
    switch (m) { \
    case 0: { T r = F(a0, b0, c0); for (ptrdiff_t i = 0; i < n; i++) out[i] = r; } break; \
    case 1: LOOP(T, F, a[i], b0, c0) break; \
    case 2: LOOP(T, F, a0, b[i], c0) break; \
    case 3: LOOP(T, F, a[i], b[i], c0) break; \
    case 4: LOOP(T, F, a0, b0, c[i]) break; \
    case 5: LOOP(T, F, a[i], b0, c[i]) break; \
    case 6: LOOP(T, F, a0, b[i], c[i]) break; \
    default: LOOP(T, F, a[i], b[i], c[i]) break; \
    } \
}
KERNEL(ember_eager_fma_f32, float, fmaf)
KERNEL(ember_eager_fma_f64, double, fma)
"""
_FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared")

_state: dict[str, Any] = {"enabled": config.eager_c_fma, "lib": None, "tried": False}
_lock = threading.Lock()


def set_enabled(flag: bool) -> bool:
    """Use the C kernel (True) or the NumPy emulation (False); returns the previous setting."""
    old = _state["enabled"]
    _state["enabled"] = bool(flag)
    return old


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln for ln in f if ln.startswith(("flags", "Features"))), "")
    except OSError:
        return ""


def _library_path() -> str:
    key = "\0".join((_SOURCE, " ".join(_FLAGS), config.cc, platform.machine(), _cpu_flags()))
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return os.path.join(config.cache_dir, "eager", f"fma-{digest}.so")


def _build(path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
    os.close(fd)
    try:
        src = tmp[:-3] + ".c"
        with open(src, "w") as f:
            f.write(_SOURCE)
        try:
            subprocess.run([*config.cc.split(), *_FLAGS, src, "-o", tmp, "-lm"], check=True,
                           capture_output=True, timeout=120)
        finally:
            os.unlink(src)
        os.replace(tmp, path)     # atomic: concurrent processes never load a partial file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _load() -> Any:
    with _lock:
        if not _state["tried"]:
            _state["tried"] = True
            try:
                path = _library_path()
                if not os.path.exists(path):
                    _build(path)
                lib = ctypes.CDLL(path)
                for name in ("ember_eager_fma_f32", "ember_eager_fma_f64"):
                    fn = getattr(lib, name)
                    fn.restype = None
                    fn.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 4 + [ctypes.c_ssize_t]
                _state["lib"] = lib
            except (OSError, subprocess.SubprocessError, AttributeError, ValueError):
                _state["lib"] = None
    return _state["lib"]


def _operand(v: Any, dtype: np.dtype, shape: tuple) -> tuple[np.ndarray, bool]:
    """(contiguous array of ``dtype``, is it a full array (else one value, broadcast))."""
    arr = np.asarray(v, dtype=dtype)
    if arr.size == 1:
        return arr.reshape(1), False
    if arr.shape != shape:
        arr = np.broadcast_to(arr, shape)
    return np.ascontiguousarray(arr).reshape(-1), True


def _call(fn: Any, dtype: np.dtype, a: Any, b: Any, c: Any, out: np.ndarray | None
          ) -> np.ndarray:
    shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c))
    ops = [_operand(v, dtype, shape) for v in (a, b, c)]
    mode = sum(1 << k for k, (_, full) in enumerate(ops) if full)
    if out is None or out.dtype != dtype or out.shape != shape or not out.flags.c_contiguous:
        res = np.empty(shape, dtype=dtype)
    else:
        res = out
    flat = res.reshape(-1)
    n = flat.shape[0]
    if n == 0:                # (the kernel reads its scalar operands before the loop)
        return res
    ptr = [arr.ctypes.data for arr, _ in ops]
    size = dtype.itemsize
    threads = _parallel.get_num_threads()
    if n < _parallel.MIN_ELEMENTS or threads < 2:
        fn(mode, *ptr, flat.ctypes.data, n)
    else:   # ctypes releases the GIL: one slice per thread
        def part(lo: int, hi: int) -> None:
            fn(mode, *(p + lo * size if full else p for p, (_, full) in zip(ptr, ops)),
               flat.ctypes.data + lo * size, hi - lo)
        _parallel._run([lambda lo=lo, hi=hi: part(lo, hi)
                        for lo, hi in _parallel._bounds(n, threads)])
    if out is not None and res is not out:
        out[...] = res
        return out
    return res


def kernel() -> Callable[..., np.ndarray] | None:
    """``k(a, b, c, out=None)`` computing ``a * b + c`` rounded once with the C kernel, in the
    dtype of the array operands (float32 or float64); None when the kernel is off or could not
    be built."""
    if not _state["enabled"]:
        return None
    lib = _state["lib"] if _state["tried"] else _load()
    if lib is None:
        return None

    def run(a: Any, b: Any, c: Any, out: np.ndarray | None = None) -> np.ndarray:
        typed = [v.dtype for v in (a, b, c) if isinstance(v, (np.ndarray, np.generic))]
        dtype = np.result_type(*typed) if typed else np.dtype(np.float64)
        fn = lib.ember_eager_fma_f32 if dtype == np.float32 else lib.ember_eager_fma_f64
        assert dtype in (np.float32, np.float64), dtype
        return _call(fn, np.dtype(dtype), a, b, c, out)

    return run


__all__ = ["kernel", "set_enabled"]

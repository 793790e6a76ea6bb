"""Eager GELU, last-dim softmax/log_softmax and float16/bfloat16 add/sub/mul/div in C
(``csrc/act_eager.c``).

NumPy runs GELU's erf-based Phi as ~20 passes over memory (130-220 ms for 2^24 float32 values,
18x torch), and a half op as widen / compute / round passes.  These kernels make one pass:
the element is loaded (float16 by ``vcvtph2ps``, bfloat16 by a shift, in blocks of 128), the
float32 math runs in vector registers and the result is rounded once (PyTorch's per-op
rounding for reduced floats).  The C source is the C backend's prelude (``ember_prelude.h``,
read as text: ``ember_normal_cdff``, ``ember_expf``) plus ``half_block.h`` and ``row_exp.h``
(softmax's exp pass), so eager GELU and softmax give the compiled kernels' bits.  Work is
split over ember's threads (ctypes releases the GIL).  Every function returns None where it
does not apply (another dtype, a strided array, no C compiler, ``EMBER_EAGER_C=0``) and the
caller keeps its NumPy path.

>>> import numpy as np
>>> y = gelu(np.zeros(3, np.float32))
>>> y is None or y.tolist() == [0.0, 0.0, 0.0]
True
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable

import ml_dtypes
import numpy as np

from ember.ops import _native, _parallel

_P, _I = ctypes.c_void_p, ctypes.c_int64
_SYMBOLS: dict = {}
for _s in ("f32", "f16", "bf16"):
    _SYMBOLS[f"ember_eager_gelu_{_s}"] = (None, [_P, _P, _I])
    _SYMBOLS[f"ember_eager_softmax_{_s}"] = (None, [_P, _P, _I, _I, _P, ctypes.c_int])
    _SYMBOLS[f"ember_eager_log_softmax_{_s}"] = (None, [_P, _P, _I, _I] + ([_P] if _s != "f32"
                                                                           else []))
for _s in ("f16", "bf16"):
    _SYMBOLS[f"ember_eager_binary_{_s}"] = (None, [_P, _P, _P, ctypes.c_float,
                                                   ctypes.c_float, _I, ctypes.c_int])

SOURCE = (_native.compiler_csrc("ember_prelude.h") + _native.compiler_csrc("half_block.h")
          + _native.compiler_csrc("row_exp.h") + _native.compiler_csrc("stream_store.h")
          + _native.csrc("act_eager.c"))
_NATIVE = _native.Native("act", SOURCE, _SYMBOLS, flags=_native.wide_vectors())
set_enabled = _NATIVE.set_enabled
_NAMES = {np.dtype(np.float32).num: "f32", np.dtype(np.float16).num: "f16",
          np.dtype(ml_dtypes.bfloat16).num: "bf16"}
_BINARY = {np.add: 0, np.subtract: 1, np.multiply: 2, np.divide: 3}
CHUNK = 1 << 15       # elements per task when split over threads (a few tasks per thread)
STREAM_BYTES = 16 << 20   # softmax outputs this large are streamed (codegen/stream.py's default)
ROW_MAX = 1 << 20     # softmax rows up to this many columns (a float scratch row per thread)


def _split(n: int, run: Callable[[int, int], None], grain: int = CHUNK) -> None:
    """``run(lo, hi)`` over [0, n): one call when small or already inside the thread pool,
    else chunks handed to whichever of ember's threads is free."""
    threads = _parallel.get_num_threads()
    if threads < 2 or n <= grain or threading.current_thread().name.startswith("ember"):
        run(0, n)
        return
    # about four tasks per thread, in multiples of ``grain`` (a task's Python, ctypes call and
    # scratch row cost a few µs: 512 tasks of 32 rows made 2^24-value softmax Python-bound)
    grain *= max(1, -(-n // (4 * threads * grain)))
    todo = iter([(lo, min(lo + grain, n)) for lo in range(0, n, grain)])

    def work() -> None:
        for lo, hi in todo:
            run(lo, hi)

    _parallel._run([work for _ in range(min(threads, -(-n // grain)))])


def _lib(a: np.ndarray) -> tuple:
    """(library, dtype suffix) for a C-contiguous float32/float16/bfloat16 array, else (None,)."""
    sfx = _NAMES.get(a.dtype.num)
    if sfx is None or not a.flags.c_contiguous or a.size == 0:
        return None, None
    return _NATIVE.lib(), sfx


def gelu(x: np.ndarray) -> np.ndarray | None:
    """``x * Phi(x)`` (exact GELU) in x's dtype, float32 math, one rounding; or None."""
    lib, sfx = _lib(x)
    if lib is None:
        return None
    fn, out = getattr(lib, f"ember_eager_gelu_{sfx}"), np.empty_like(x)
    isz, xa, ya = x.itemsize, x.ctypes.data, out.ctypes.data
    _split(x.size, lambda lo, hi: fn(ya + lo * isz, xa + lo * isz, hi - lo))
    return out


def softmax_last(x: np.ndarray) -> np.ndarray | None:
    """Softmax over the last dim of ``x`` (float32 accumulation, one rounding for half), or
    None."""
    return _rows("softmax", x)


def log_softmax_last(x: np.ndarray) -> np.ndarray | None:
    """log_softmax over the last dim of ``x`` (float32 math; half keeps the row sum and its
    log in the dtype, as PyTorch's kernel; one rounding), or None."""
    return _rows("log_softmax", x)


def _rows(op: str, x: np.ndarray) -> np.ndarray | None:
    lib, sfx = _lib(x)
    if lib is None or x.ndim == 0 or x.shape[-1] > ROW_MAX:
        return None
    cols = x.shape[-1]
    rows = x.size // cols
    fn, out = getattr(lib, f"ember_eager_{op}_{sfx}"), np.empty_like(x)
    isz, xa, ya = x.itemsize, x.ctypes.data, out.ctypes.data

    stream = int(op == "softmax" and out.nbytes >= STREAM_BYTES)

    def run(lo: int, hi: int) -> None:
        args = [ya + lo * cols * isz, xa + lo * cols * isz, hi - lo, cols]
        if sfx != "f32" or op == "softmax":
            w = np.empty(2 * cols, np.float32)   # the float row and the output row
            args.append(w.ctypes.data)
        fn(*args, *([stream] if op == "softmax" else []))

    _split(rows, run, max(1, CHUNK // cols))
    return out


def _operand(a: Any, src: np.dtype, shape: Any) -> tuple | None:
    """(address or None, scalar) of one operand of ``binary``, or None if it does not fit."""
    if isinstance(a, np.ndarray):
        ok = a.dtype == src and a.shape == shape and a.flags.c_contiguous
        return (a.ctypes.data, 0.0) if ok else None
    if type(a) in (int, float, bool):   # a Python number meets a float32 array as float32
        return None, float(np.float32(a))
    return None


def binary(fn: np.ufunc, arrays: tuple, src: np.dtype) -> np.ndarray | None:
    """``fn(a, b)`` (add/subtract/multiply/divide) of float16/bfloat16 arrays (or one Python
    number) of one shape, in float32 and rounded once to ``src``; or None."""
    op = _BINARY.get(fn)
    sfx = _NAMES.get(src.num)
    if op is None or len(arrays) != 2 or sfx in (None, "f32"):
        return None
    ref = next((a for a in arrays if isinstance(a, np.ndarray)), None)
    if ref is None or ref.size == 0:
        return None
    got = [_operand(a, src, ref.shape) for a in arrays]
    if None in got:
        return None
    lib = _NATIVE.lib()
    if lib is None:
        return None
    (pa, sa), (pb, sb) = got
    c_fn, out = getattr(lib, f"ember_eager_binary_{sfx}"), np.empty(ref.shape, src)
    ya, isz = out.ctypes.data, 2

    def run(lo: int, hi: int) -> None:
        c_fn(ya + lo * isz, None if pa is None else pa + lo * isz,
             None if pb is None else pb + lo * isz, sa, sb, hi - lo, op)

    _split(ref.size, run)
    return out


__all__ = ["SOURCE", "binary", "gelu", "log_softmax_last", "set_enabled", "softmax_last"]

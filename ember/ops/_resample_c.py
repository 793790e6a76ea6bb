"""Eager ``resample`` / ``resample_backward`` (``nn_resize``) through a small C kernel
(``csrc/resample_eager.c``, built and cached by ``_native``): each (batch, channel) plane runs
through its separable passes in two scratch planes that stay in cache, with eager's own
index/weight tables (``nn_resize.taps``, ``transposed_taps``) and eager's rounding order, so the
bits are those of the NumPy path, which runs when the kernel is off (EMBER_EAGER_C=0) or could
not be built.  The planes are split over ember's threads (ctypes releases the GIL).

>>> import numpy as np
>>> x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
>>> tables = [(np.array([[0, 0, 1, 1]]), None)] * 2      # nearest, 2x
>>> y = run(x, 2, tables, range(1, -1, -1), (4, 4))
>>> y is None or y[0, 0, :, 0].tolist() == [0.0, 0.0, 2.0, 2.0]
True
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from ember.ops import _native, _parallel

_BODY = _native.csrc("resample_eager.c")
_TYPES = {"float32": ("float", "f32"), "float64": ("double", "f64")}
_SOURCE = "#include <stdint.h>\n#include <string.h>\n" + "".join(
    f"#define T {ct}\n#define FN(name) name##_{s}\n{_BODY}\n#undef T\n#undef FN\n"
    for ct, s in _TYPES.values())
_ARGS = ([ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * 5
         + [ctypes.c_void_p] * 4 + [ctypes.c_int64])
_NATIVE = _native.Native("resample", _SOURCE,
                         {f"ember_eager_resample_{s}": (None, _ARGS) for _, s in _TYPES.values()})
_state = _NATIVE.state          # enabled / tried / lib (tests patch it)
set_enabled = _NATIVE.set_enabled


def available() -> bool:
    """Whether ``run`` uses the C kernel (on, and built)."""
    return _NATIVE.lib() is not None


class _Key:
    """Hash a table pair by identity (NumPy arrays are unhashable)."""

    __slots__ = ("idx", "w")

    def __init__(self, idx: np.ndarray, w: np.ndarray | None) -> None:
        self.idx, self.w = idx, w

    def __hash__(self) -> int:
        return hash((id(self.idx), id(self.w)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and self.idx is other.idx and self.w is other.w


@functools.lru_cache(maxsize=512)
def _table(key: _Key, dtype: str) -> tuple:
    """A table as the kernel reads it: contiguous int64 indices, weights in ``dtype`` (keyed by
    the identity of ``nn_resize``'s cached tables, which the key keeps alive)."""
    idx = np.ascontiguousarray(key.idx, dtype=np.int64)
    w = None if key.w is None else np.ascontiguousarray(key.w, dtype=dtype)
    return idx, w


def _plan(x2: np.ndarray, tables: list, order: range) -> tuple:
    """``(geom, idx pointers, w pointers, arrays kept alive, scratch elements per half)``."""
    cur = list(x2.shape[1:])
    geom, ips, wps, keep, smax = [], [], [], [], 1
    dtype = x2.dtype.name
    for d in order:
        idx, w = _table(_Key(*tables[d]), dtype)
        keep += [idx, w]
        n_out = idx.shape[1]
        geom += [math.prod(cur[:d]), cur[d], n_out, math.prod(cur[d + 1:]), idx.shape[0]]
        ips.append(idx.ctypes.data)
        wps.append(None if w is None else w.ctypes.data)
        cur[d] = n_out
        smax = max(smax, math.prod(cur))
    g = np.array(geom, dtype=np.int64)
    keep.append(g)
    return g, (ctypes.c_void_p * len(ips))(*ips), (ctypes.c_void_p * len(wps))(*wps), keep, smax


def run(x: np.ndarray, nd: int, tables: list, order: range, size: tuple) -> np.ndarray | None:
    """``nn_resize._separable(x, nd, tables, order, size)`` in C; None when the kernel is off,
    not built, or ``x`` is not float32/float64 (the caller then runs NumPy)."""
    if x.dtype.name not in _TYPES or not x.dtype.isnative:
        return None
    lib = _NATIVE.lib()
    if lib is None:
        return None
    fn = getattr(lib, f"ember_eager_resample_{_TYPES[x.dtype.name][1]}")
    lead = x.shape[:x.ndim - nd]
    rows = math.prod(lead)
    x2 = np.ascontiguousarray(x).reshape((rows,) + x.shape[x.ndim - nd:])
    out = np.empty((rows,) + tuple(size), x.dtype)
    if rows == 0 or out.size == 0:
        return out.reshape(lead + tuple(size))
    geom, ips, wps, keep, smax = _plan(x2, tables, order)
    in_plane, out_plane = math.prod(x2.shape[1:]), math.prod(size)
    src, dst = x2.ctypes.data, out.ctypes.data
    threads = min(_parallel.get_num_threads(), rows)
    if x.size + out.size < _parallel.MIN_ELEMENTS:
        threads = 1
    per = max(1, min(_parallel.BLOCK // max(smax, out_plane, 1), -(-rows // threads)))
    todo = iter(range(0, rows, per))   # shared: blocks of planes go to whichever thread is free

    def work() -> None:
        scratch = np.empty(2 * smax, x.dtype)
        sp = scratch.ctypes.data
        for lo in todo:
            fn(src, dst, lo, min(lo + per, rows), in_plane, out_plane, len(order),
               geom.ctypes.data, ips, wps, sp, smax)

    if threads > 1:
        _parallel._run([work] * threads)
    else:
        work()
    del keep
    return out.reshape(lead + tuple(size))


__all__ = ["available", "run", "set_enabled"]

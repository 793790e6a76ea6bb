"""Eager float16/bfloat16 products of at most ``_hgemm_c.SMALL_M`` rows in C
(``csrc/hsmall_eager.c``): a decode step's ``linear`` (one to four rows against a weight).

The weight is read once in its own dtype and widened in registers, block by block, into an L1
buffer (no float32 copy of it, which the widen + BLAS path makes on every call); the sums are
float32 sums of exact products, the bias is added in float32, and each result is rounded once.
So a result is within float32 summation error of the widen + BLAS path (another summation
order; at most one ulp of the half dtype apart), as the half GEMM kernels' are.  Large
products split their columns (or batch entries) over ember's threads.

Returns None where it does not apply (more rows, a B with neither unit stride, no C
compiler, ``EMBER_EAGER_C=0``); the caller keeps the widen + BLAS path.

>>> import numpy as np
>>> a = np.ones((2, 3), np.float16)
>>> y = matmul(a, np.ones((3, 5), np.float16))
>>> y is None or y.tolist() == [[3.0] * 5] * 2
True
"""

from __future__ import annotations

import ctypes
import math
import threading

import ml_dtypes
import numpy as np

from ember.ops import _native, _parallel
from ember.ops._hgemm_c import SMALL_M

_P, _I = ctypes.c_void_p, ctypes.c_int64
_SYMBOLS = {f"ember_eager_hsmall_{s}": (ctypes.c_int, [_P, _P, _P, _P, _P, _I, _I, _I, _I])
            for s in ("h", "b")}
_SRC = {np.dtype(np.float16).num: "h", np.dtype(ml_dtypes.bfloat16).num: "b"}
SOURCE = "\n".join(["#include <stdlib.h>\n#include <string.h>",
                    _native.compiler_csrc("ember_prelude.h"),
                    _native.compiler_csrc("half_block.h"), _native.csrc("hsmall_eager.c")])
_NATIVE = _native.Native("hsmall", SOURCE, _SYMBOLS,
                         flags=("-fopenmp-simd", *_native.wide_vectors()))
set_enabled = _NATIVE.set_enabled
_SPLIT_VALUES = 1 << 18    # B values from which a product is split over threads


def _batched(x: np.ndarray) -> np.ndarray | None:
    """``x`` as (batch, rows, cols) without a copy, or None (batch dims that do not collapse
    into one stride, strides that are not whole elements)."""
    if any(s % x.itemsize for s in x.strides):
        return None
    dims = [(n, s) for n, s in zip(x.shape[:-2], x.strides[:-2]) if n != 1]
    if any(s0 != s1 * n1 for (_, s0), (n1, s1) in zip(dims, dims[1:])):
        return None
    return np.lib.stride_tricks.as_strided(
        x, (math.prod(x.shape[:-2]), *x.shape[-2:]),
        (dims[-1][1] if dims else 0, *x.strides[-2:]), writeable=False)


def matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray | None:
    """``a @ b (+ bias)`` for float16/bfloat16 ``a`` of at most ``SMALL_M`` rows, ``b`` (and
    ``bias``) of its dtype and equal batch dims; or None where the C path does not apply."""
    src = _SRC.get(a.dtype.num)
    if (src is None or b.dtype != a.dtype or a.ndim < 2 or a.shape[:-2] != b.shape[:-2]
            or a.shape[-2] > SMALL_M or (bias is not None and bias.dtype != a.dtype)):
        return None
    (m, k), n = a.shape[-2:], b.shape[-1]
    out = np.empty(a.shape[:-1] + (n,), a.dtype)
    if out.size == 0 or k == 0:
        out[...] = 0 if bias is None else bias
        return out
    a3, b3 = _batched(a), _batched(b)
    if a3 is None or b3 is None:
        return None
    isz = a.itemsize
    brs, bcs = b3.strides[1] // isz, b3.strides[2] // isz
    brs, bcs = (1 if k == 1 else brs), (1 if n == 1 else bcs)
    if brs != 1 and bcs != 1:
        return None
    lib = _NATIVE.lib()
    if lib is None:
        return None
    if bias is not None:
        bias = np.ascontiguousarray(bias)
    batch = a3.shape[0]
    prm = np.array([m, n, k, a3.strides[1] // isz, a3.strides[2] // isz, a3.strides[0] // isz,
                    brs, bcs, b3.strides[0] // isz], np.int64)
    fn = getattr(lib, f"ember_eager_hsmall_{src}")
    args = (prm.ctypes.data, a3.ctypes.data, b3.ctypes.data, out.ctypes.data,
            None if bias is None else bias.ctypes.data)
    threads = _parallel.get_num_threads()
    if threads < 2 or threading.current_thread().name.startswith("ember") or \
            n * k * batch < _SPLIT_VALUES:
        _check(fn(*args, 0, batch, 0, n))
    elif batch >= threads:
        _parallel._run([lambda lo=lo, hi=hi: _check(fn(*args, lo, hi, 0, n))
                        for lo, hi in _parallel._bounds(batch, threads)])
    else:
        cuts = [min(n, (-(-n * i // threads) + 15) // 16 * 16) for i in range(threads + 1)]
        _parallel._run([lambda e=e, lo=lo, hi=hi: _check(fn(*args, e, e + 1, lo, hi))
                        for e in range(batch) for lo, hi in zip(cuts, cuts[1:]) if hi > lo])
    return out


def _check(rc: int) -> None:
    if rc != 0:
        raise MemoryError("[matmul] out of memory for a float16/bfloat16 product's buffers")


__all__ = ["SOURCE", "matmul", "set_enabled"]

"""Eager float16/bfloat16 products in C (``csrc/hgemm_eager.c``): the compiled GEMM template's
half kernels, run by eager's threads.

``matmul_lowp`` used to widen both operands to float32 copies and call float32 BLAS; now a
product of more than ``SMALL_M`` rows packs its half operands directly: bfloat16 on the AMX
tiles where the CPU and kernel allow them, else each value widened exactly to float32 as its
panel is packed and the float32 FMA micro-kernel.  The C pieces are the C backend's own
(``ember/compiler/c/codegen/csrc``: ``gemm_half.h.in``, ``gemm_half_pack.h.in``,
``gemm_half_amx.h.in``, ``gemm_micro.h.in``, ``half_block.h``, the prelude), read as text
(``_native.compiler_csrc``) with the tile filled in here, so eager never imports the compiler
and runs the same kernels (same tile, same k blocking: the same float32 sums).

Results: float32 accumulation of exact products, the bias added in float32, one rounding to
the dtype.  Within float32 summation error of the widen + BLAS path (not bit for bit: another
summation order).  Every function returns None where it does not apply (small products, no C
compiler, ``EMBER_EAGER_C=0``) and the caller keeps the widen + BLAS path.

>>> import numpy as np
>>> a = np.ones((8, 3), np.float16)
>>> y = matmul(a, a.T.copy())
>>> y is None or y.tolist() == [[3.0] * 8] * 8
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

SMALL_M = 4   # products of at most this many rows keep widen + BLAS (no packing pays there)
_P, _I = ctypes.c_void_p, ctypes.c_int64
_SYMBOLS = {f"ember_eager_hgemm_{s}": (ctypes.c_int, [_P, _P, _P, _P, _P, _I, _I, _P, _P, _P])
            for s in ("h", "b")}
_SYMBOLS["ember_eager_hgemm_panel_bytes"] = (_I, [_I, _I])
_SYMBOLS["ember_eager_hgemm_amx"] = (ctypes.c_int, [])
# float32 results (the sums unrounded: ``gemm3(..., out=float32)``)
_SYMBOLS.update({f"ember_eager_hgemm_{s}_f": _SYMBOLS[f"ember_eager_hgemm_{s}"] for s in "hb"})
_SRC = {np.dtype(np.float16).num: "h", np.dtype(ml_dtypes.bfloat16).num: "b"}
# the float32 template's tile per ISA (codegen/gemm.py _TILES, the default first)
_TILES = (("defined(__AVX512F__)", 14, 32), ("1", 6, 16))


def _tile_pieces(mr: int, nr: int) -> str:
    """The float micro-kernel, the float32 B packing (for transposed B) and the
    float16/bfloat16 packing functions of one tile, with the names hgemm_eager.c calls
    (EH_*)."""
    micro = _native.compiler_csrc("gemm_micro.h.in").format(T="float", s="f", S="F", mr=mr,
                                                            nr=nr)
    pack = _native.compiler_csrc("gemm_half_pack.h.in")
    pack_b = _native.compiler_csrc("gemm_pack_b.h.in").format(T="float", s="f", nr=nr)
    parts = [micro, pack_b, f"#define EH_PACK_B_F ember_pack_b_{nr}_f"]
    for src in "hb":
        parts.append(pack.replace("@MR@", str(mr)).replace("@NR@", str(nr))
                     .replace("@SRC@", src).replace("@TS@", "uint16_t"))
        parts.append(f"#define EH_PACK_A_{src} ember_hpack_a_{mr}_{src}\n"
                     f"#define EH_SLIVER_{src} ember_hsliver_{nr}_{src}")
    parts.append(f"#define EH_MICRO ember_micro_{mr}x{nr}_f\n#define EH_MR {mr}\n"
                 f"#define EH_NR {nr}")
    return "\n".join(parts)


def _source() -> str:
    head = ("#include <pthread.h>\n#include <sched.h>\n#include <stdlib.h>\n"
            "#include <string.h>\n")
    tiles = []
    for i, (cond, mr, nr) in enumerate(_TILES):
        tiles += [f"#{'if' if i == 0 else 'elif'} {cond}", _tile_pieces(mr, nr)]
    amx = (_native.compiler_csrc("gemm_half_amx.h.in").replace("@SRC@", "b")
           .replace("@TS@", "uint16_t"))
    return "\n".join([head, _native.compiler_csrc("ember_prelude.h"),
                      _native.compiler_csrc("half_block.h"),
                      _native.compiler_csrc("gemm_half.h.in"), *tiles, "#endif", amx,
                      _native.csrc("hgemm_eager.c")])


SOURCE = _source()
_NATIVE = _native.Native("hgemm", SOURCE, _SYMBOLS,
                         flags=("-fopenmp-simd", *_native.wide_vectors()))
set_enabled = _NATIVE.set_enabled


def uses_amx() -> bool:
    """Whether eager bfloat16 products run on AMX tiles here (False without the C kernels)."""
    lib = _NATIVE.lib()
    return bool(lib is not None and lib.ember_eager_hgemm_amx())


def _flat3(x: np.ndarray) -> np.ndarray:
    """``x`` as (batch, rows, cols) without a copy where its batch dims collapse, else a
    C-contiguous copy; strides must be whole elements."""
    if any(s % x.itemsize for s in x.strides):
        x = np.ascontiguousarray(x)
    lead = x.shape[:-2]
    dims = [(n, s) for n, s in zip(lead, x.strides[:-2]) if n != 1]
    for (_, s0), (n1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * n1:
            x = np.ascontiguousarray(x)
            break
    return np.lib.stride_tricks.as_strided(
        x, (math.prod(lead), *x.shape[-2:]),
        (dims[-1][1] if dims else 0, *x.strides[-2:]), writeable=False)


def matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray | None:
    """``a @ b (+ bias)`` for float16/bfloat16 ``a``, ``b`` (and ``bias``) of one dtype and
    equal batch dims, float32 accumulation, one rounding; or None where the C path does not
    apply."""
    src = _SRC.get(a.dtype.num)
    if (src is None or b.dtype != a.dtype or a.ndim < 2 or a.shape[:-2] != b.shape[:-2]
            or a.shape[-2] <= SMALL_M or (bias is not None and bias.dtype != a.dtype)):
        return None
    lib = _NATIVE.lib()
    if lib is None:
        return None
    (m, k), n = a.shape[-2:], b.shape[-1]
    out = np.empty(a.shape[:-1] + (n,), a.dtype)
    if out.size == 0:
        return out
    a3, b3 = _flat3(a), _flat3(b)
    if bias is not None:
        bias = np.ascontiguousarray(bias)
    isz = a.itemsize
    batch = a3.shape[0]
    threads = _parallel.get_num_threads()
    if threading.current_thread().name.startswith("ember") or \
            2 * m * n * k * batch < _parallel.MATMUL_MIN_FLOPS:
        threads = 1
    prm = np.array([m, n, k, a3.strides[1] // isz, a3.strides[2] // isz, a3.strides[0] // isz,
                    b3.strides[1] // isz, b3.strides[2] // isz, b3.strides[0] // isz, threads],
                   np.int64)
    fn = getattr(lib, f"ember_eager_hgemm_{src}")
    args = (prm.ctypes.data, a3.ctypes.data, b3.ctypes.data, out.ctypes.data,
            None if bias is None else bias.ctypes.data)
    if threads < 2 or batch >= threads:
        _batches(fn, args, batch, threads)
    else:
        _shared(lib, fn, args, batch, threads, n, k)
    return out


def gemm3(a3: np.ndarray, b3: np.ndarray, out: np.ndarray,
          bias: np.ndarray | None = None) -> bool:
    """``out[e] = a3[e] @ b3[e] (+ bias)`` for 3-d float16/bfloat16 ``a3`` (batch, m, k) and
    ``b3`` (batch, k, n) of one dtype and any whole-element strides (a batch stride of 0
    shares one operand: a convolution's weight), into a C-contiguous ``out`` (batch, m, n) of
    their dtype (float32 sums rounded once) or float32 (the sums unrounded, for a caller that
    adds several up before its one rounding).  False (nothing written) where the C path does
    not apply: ``m <= SMALL_M``, no C compiler, ``EMBER_EAGER_C=0``.

    >>> import numpy as np
    >>> a = np.ones((1, 8, 3), np.float16)
    >>> out = np.empty((1, 8, 8), np.float32)
    >>> not gemm3(a, a.transpose(0, 2, 1), out) or float(out.sum()) == 192.0
    True
    """
    src = _SRC.get(a3.dtype.num)
    batch, m, k = a3.shape
    n = b3.shape[2]
    if (src is None or b3.dtype != a3.dtype or m <= SMALL_M or b3.shape[:2] != (batch, k)
            or out.shape != (batch, m, n) or not out.flags.c_contiguous
            or out.dtype not in (a3.dtype, np.float32) or (bias is not None and (
                bias.dtype != a3.dtype or out.dtype == np.float32))
            or any(s % a3.itemsize for s in a3.strides + b3.strides)):
        return False
    lib = _NATIVE.lib()
    if lib is None:
        return False
    if out.size == 0:
        return True
    if bias is not None:
        bias = np.ascontiguousarray(bias)
    threads = _parallel.get_num_threads()
    if threading.current_thread().name.startswith("ember") or \
            2 * m * n * k * batch < _parallel.MATMUL_MIN_FLOPS:
        threads = 1
    isz = a3.itemsize
    prm = np.array([m, n, k, a3.strides[1] // isz, a3.strides[2] // isz, a3.strides[0] // isz,
                    b3.strides[1] // isz, b3.strides[2] // isz, b3.strides[0] // isz, threads],
                   np.int64)
    fn = getattr(lib, f"ember_eager_hgemm_{src}" + ("_f" if out.dtype == np.float32 else ""))
    args = (prm.ctypes.data, a3.ctypes.data, b3.ctypes.data, out.ctypes.data,
            None if bias is None else bias.ctypes.data)
    if threads < 2 or batch >= threads:
        _batches(fn, args, batch, threads)
    else:
        _shared(lib, fn, args, batch, threads, n, k)
    return True


def _check(rc: int) -> None:
    if rc != 0:
        raise MemoryError("[matmul] out of memory for the float16/bfloat16 product's panels")


def _batches(fn: Any, args: tuple, batch: int, threads: int) -> None:
    """Batch entries split over the threads, each call with its own panels."""
    if threads < 2:
        _check(fn(*args, 0, batch, None, None, None))
        return
    todo = iter(_parallel._bounds(batch, min(batch, 4 * threads)))

    def work() -> None:
        for lo, hi in todo:
            _check(fn(*args, lo, hi, None, None, None))

    _parallel._run([work] * threads)


def _shared(lib: Any, fn: Any, args: tuple, batch: int, threads: int, n: int, k: int) -> None:
    """Each batch entry by all threads together: B's panels packed once, units claimed from a
    shared counter (as the compiled template's OpenMP threads)."""
    nbytes = lib.ember_eager_hgemm_panel_bytes(n, k)
    raw = np.empty(nbytes + 64, np.uint8)
    pb = raw.ctypes.data + (-raw.ctypes.data) % 64
    for e in range(batch):
        rdy = np.zeros(n // 16 + 2, np.int32)
        nxt = np.zeros(1, np.int64)
        call = (*args, e, e + 1, pb, rdy.ctypes.data, nxt.ctypes.data)
        _parallel._run([lambda call=call: _check(fn(*call))] * threads)


__all__ = ["SMALL_M", "SOURCE", "gemm3", "matmul", "set_enabled", "uses_amx"]

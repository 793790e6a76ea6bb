"""Splitting large NumPy kernels across threads.

NumPy's ufuncs and reductions release the GIL but run on one core.  For large inputs ember
splits the work along the first axis (or the flattened array) into ``num_threads`` chunks, runs
them on a small thread pool and writes into one preallocated output, so elementwise ops and
reductions use every core like PyTorch's do.  Small inputs take the plain path (the split costs a
few microseconds).  ``ember.set_num_threads`` sets the count (shared with NumPy's BLAS).
"""

from __future__ import annotations

import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import ml_dtypes
import numpy as np

MIN_ELEMENTS = 1 << 18  # below this a split does not pay for itself

_state: dict[str, Any] = {"threads": max(1, os.cpu_count() or 1), "pool": None}


def get_num_threads() -> int:
    return _state["threads"]


def _blas_threads(n: int) -> None:
    """Set NumPy's bundled OpenBLAS thread count (best effort: other BLAS builds are left
    alone)."""
    import ctypes
    import glob
    libdir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in glob.glob(os.path.join(libdir, "libscipy_openblas*.so")):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                     "openblas_set_num_threads"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                return


_listeners: list[Callable[[int], None]] = []


def on_num_threads_change(fn: Callable[[int], None]) -> None:
    """Call ``fn(n)`` whenever ``set_num_threads(n)`` runs (the compiled runtime passes the count
    on to generated OpenMP code this way)."""
    _listeners.append(fn)


def set_num_threads(n: int) -> None:
    """Threads used by ember's kernels and NumPy's BLAS."""
    n = max(1, int(n))
    _blas_threads(n)
    if n != _state["threads"]:
        pool = _state["pool"]
        if pool is not None:
            pool.shutdown(wait=True)
        _state["pool"] = None
        _state["threads"] = n
    for fn in _listeners:
        fn(n)


def _forget_pool_after_fork() -> None:
    # a forked child inherits the pool object but not its threads; work submitted to it would
    # wait forever, so the child starts a new pool on first use
    _state["pool"] = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _pool() -> ThreadPoolExecutor:
    pool = _state["pool"]
    if pool is None:
        pool = _state["pool"] = ThreadPoolExecutor(_state["threads"] - 1,
                                                   thread_name_prefix="ember")
    return pool


def _bounds(n: int, parts: int) -> list[tuple[int, int]]:
    step = -(-n // parts)
    return [(i, min(i + step, n)) for i in range(0, n, step)]


def _run(tasks: list[Callable[[], Any]]) -> list:
    futures = [_pool().submit(t) for t in tasks[1:]]
    first = tasks[0]()
    return [first] + [f.result() for f in futures]


def _splittable(arrays: tuple) -> tuple | None:
    """(shape, split axis) if the array inputs share a large shape; None otherwise."""
    shape = None
    for a in arrays:
        if isinstance(a, np.ndarray):
            if shape is None:
                shape = a.shape
            elif a.shape != shape:
                return None
    if shape is None or len(shape) == 0:
        return None
    n = 1
    for s in shape:
        n *= s
    if n < MIN_ELEMENTS or _state["threads"] < 2:
        return None
    return shape


def ufunc(fn: np.ufunc, arrays: tuple, kwargs: dict) -> np.ndarray | None:
    """``fn(*arrays)`` on several threads, or None when the plain call is the better one."""
    if kwargs or _state["threads"] < 2:
        return None
    shape = _splittable(arrays)
    if shape is None:
        return None
    if shape[0] >= _state["threads"]:
        views = arrays
        out_shape = shape
    elif all(not isinstance(a, np.ndarray) or a.flags.c_contiguous for a in arrays):
        views = tuple(a.reshape(-1) if isinstance(a, np.ndarray) else a for a in arrays)
        out_shape = (views[0].shape[0] if isinstance(views[0], np.ndarray) else
                     next(v for v in views if isinstance(v, np.ndarray)).shape[0],)
    else:
        return None
    probe = fn(*(v[:1] if isinstance(v, np.ndarray) else v for v in views))
    if isinstance(probe, tuple):
        return None
    out = np.empty(out_shape, dtype=probe.dtype)
    n = out_shape[0]

    def task(lo: int, hi: int) -> None:
        fn(*(v[lo:hi] if isinstance(v, np.ndarray) else v for v in views), out=out[lo:hi])

    _run([lambda lo=lo, hi=hi: task(lo, hi) for lo, hi in _bounds(n, _state["threads"])])
    return out.reshape(shape)


_ONES: dict[tuple, np.ndarray] = {}


def _ones(n: int, dtype: np.dtype) -> np.ndarray:
    key = (n, dtype)
    v = _ONES.get(key)
    if v is None:
        if len(_ONES) > 64:
            _ONES.clear()
        v = _ONES[key] = np.ones(n, dtype=dtype)
    return v


def _blas_sum(x: np.ndarray, dims: tuple, keepdim: bool) -> np.ndarray | None:
    """A sum over leading or trailing dims of a contiguous float array as a matrix-vector
    product with ones: BLAS reads memory at full bandwidth on every core, 2-3x faster than
    ``np.sum``."""
    if x.dtype not in (np.float32, np.float64) or not x.flags.c_contiguous:
        return None
    nd = x.ndim
    k = len(dims)
    if k == 0 or dims != tuple(range(dims[0], dims[0] + k)):
        return None
    out_shape = tuple(1 if i in dims else s for i, s in enumerate(x.shape)) if keepdim else \
        tuple(s for i, s in enumerate(x.shape) if i not in dims)
    if k == nd:  # everything: rows of 1024 @ ones, then the short vector
        if x.size % 1024:
            return None
        m = x.reshape(-1, 1024)
        return np.asarray((m @ _ones(1024, x.dtype)).sum(dtype=x.dtype)).reshape(out_shape)
    if dims[-1] == nd - 1:  # trailing dims: rows @ ones
        cols = 1
        for s in x.shape[dims[0]:]:
            cols *= s
        return (x.reshape(-1, cols) @ _ones(cols, x.dtype)).reshape(out_shape)
    if dims[0] == 0:  # leading dims: ones @ rows
        rows = 1
        for s in x.shape[:k]:
            rows *= s
        return (_ones(rows, x.dtype) @ x.reshape(rows, -1)).reshape(out_shape)
    return None


def reduce_split(fn: Callable[..., np.ndarray], combine: np.ufunc, x: np.ndarray, dims: tuple,
                 keepdim: bool) -> np.ndarray | None:
    """A reduction ``fn(x, axis=dims, keepdims=keepdim)`` (np.max, np.min, ...) split over row
    blocks of axis 0 on every thread; partial results of a reduction over axis 0 are merged
    with ``combine`` (np.maximum, ...).  None for small inputs."""
    if (x.size < MIN_ELEMENTS or x.ndim == 0 or _state["threads"] < 2
            or x.shape[0] < _state["threads"] or not dims):
        return None
    parts = _bounds(x.shape[0], _state["threads"])
    res = _run([lambda lo=lo, hi=hi: fn(x[lo:hi], axis=dims, keepdims=keepdim)
                for lo, hi in parts])
    if 0 in dims:
        out = res[0]
        for r in res[1:]:
            out = combine(out, r)
        return np.asarray(out)
    return np.concatenate(res, axis=0)


def reduce_sum(x: np.ndarray, dims: tuple, keepdim: bool, dtype: np.dtype) -> np.ndarray | None:
    """``np.sum`` over ``dims`` through BLAS or on several threads, or None for the plain
    call."""
    if x.size < MIN_ELEMENTS:
        return None
    if dtype == x.dtype:
        out = _blas_sum(x, dims, keepdim)
        if out is not None:
            return out
    if _splittable((x,)) is None or x.shape[0] < _state["threads"]:
        return None
    parts = _bounds(x.shape[0], _state["threads"])
    if 0 not in dims:
        out_shape = tuple(1 if (keepdim and i in dims) else s for i, s in enumerate(x.shape)
                          if keepdim or i not in dims)
        out = np.empty(out_shape, dtype=dtype)

        def rows(lo: int, hi: int) -> None:
            np.sum(x[lo:hi], axis=dims, keepdims=keepdim, dtype=dtype, out=out[lo:hi])

        _run([lambda lo=lo, hi=hi: rows(lo, hi) for lo, hi in parts])
        return out
    partial = _run([lambda lo=lo, hi=hi: np.sum(x[lo:hi], axis=dims, keepdims=keepdim,
                                                dtype=dtype) for lo, hi in parts])
    total = partial[0]
    for p in partial[1:]:
        total = total + p
    return np.asarray(total, dtype=dtype)


def last_dim_sum(x: np.ndarray) -> np.ndarray:
    """``x.sum(-1, keepdims=True)`` for a C-contiguous float array, through BLAS when large."""
    if x.size >= MIN_ELEMENTS and x.dtype in (np.float32, np.float64) and x.flags.c_contiguous:
        n = x.shape[-1]
        return (x.reshape(-1, n) @ _ones(n, x.dtype)).reshape(x.shape[:-1] + (1,))
    return np.add.reduce(x, axis=-1, keepdims=True)  # np.sum's reduce, without its wrapper



BLOCK = 1 << 16  # elements per block: a kernel's temporaries stay in cache


def map_blocks(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray | None:
    """``fn(x)`` for an elementwise ``fn`` with many temporaries (erf, gelu's parts), computed
    block by block (temporaries stay in cache) on every thread; None for small inputs."""
    if x.size < MIN_ELEMENTS:
        return None
    flat = x.reshape(-1)
    probe = fn(flat[:1])
    out = np.empty(flat.shape, dtype=probe.dtype)
    blocks = _bounds(flat.shape[0], -(-flat.shape[0] // BLOCK))
    threads = _state["threads"]

    def work(k: int) -> None:
        for lo, hi in blocks[k::threads]:
            out[lo:hi] = fn(flat[lo:hi])

    _run([lambda k=k: work(k) for k in range(threads)])
    return out.reshape(x.shape)


def map_blocks_n(fn: Callable[..., np.ndarray], arrays: tuple) -> np.ndarray | None:
    """``fn(*arrays)`` for an elementwise ``fn`` of several operands, block by block on every
    thread as ``map_blocks``; the array operands must share one shape and be C-contiguous
    (others are passed whole: scalars); None when that does not hold or the input is small."""
    shape = None
    for a in arrays:
        if isinstance(a, np.ndarray) and a.ndim:
            if shape is None:
                shape = a.shape
            if a.shape != shape or not a.flags.c_contiguous:
                return None
    if shape is None or math.prod(shape) < MIN_ELEMENTS:
        return None
    flat = [a.reshape(-1) if isinstance(a, np.ndarray) and a.ndim else a for a in arrays]
    n = math.prod(shape)
    probe = fn(*(a[:1] if isinstance(a, np.ndarray) and a.ndim else a for a in flat))
    out = np.empty(n, dtype=probe.dtype)
    blocks = _bounds(n, -(-n // BLOCK))
    threads = _state["threads"]

    def work(k: int) -> None:
        for lo, hi in blocks[k::threads]:
            out[lo:hi] = fn(*(a[lo:hi] if isinstance(a, np.ndarray) and a.ndim else a
                              for a in flat))

    _run([lambda k=k: work(k) for k in range(threads)])
    return out.reshape(shape)


# ------------------------------------------------------------------------------ matmul
# OpenBLAS's own threads wake per call and synchronise per GEMM panel: for the small and
# thin products of a training step (attention's (256, 64) heads, weight gradients
# (384, 2048) @ (2048, 384)) that costs 2-10x, and far more when other processes load the
# machine.  Products above a small size are instead split into one part per ember thread
# (batch entries or row blocks), each a single-threaded GEMM; NumPy releases the GIL inside.
_BLAS_SETTER: dict[str, Any] = {}
MATMUL_MIN_FLOPS = 1 << 22


def _blas_setter() -> Callable[[int], None] | None:
    if "fn" not in _BLAS_SETTER:
        import ctypes
        import glob
        fn = None
        libdir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
        for path in glob.glob(os.path.join(libdir, "libscipy_openblas*.so")):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                         "openblas_set_num_threads"):
                f = getattr(lib, name, None)
                if f is not None:
                    fn = f
                    break
            if fn is not None:
                break
        _BLAS_SETTER["fn"] = fn
    return _BLAS_SETTER["fn"]


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b)`` for arrays of equal rank (>= 2, equal batch dims), split over ember's
    threads with single-threaded BLAS when large enough.  float16/bfloat16 operands are
    multiplied in float32 and the result rounded once to their dtype (``matmul_lowp``)."""
    if a.dtype.num in _LOWP_NUMS and a.dtype == b.dtype:
        return matmul_lowp(a, b)
    threads = _state["threads"]
    m, k = a.shape[-2:]
    n = b.shape[-1]
    flops = 2 * m * n * k * (a.size // max(m * k, 1))
    setter = _blas_setter()
    if (threads < 2 or setter is None or flops < MATMUL_MIN_FLOPS or a.dtype != b.dtype
            or a.dtype not in (np.float32, np.float64) or a.shape[:-2] != b.shape[:-2]):
        return np.matmul(a, b)
    out = np.empty(a.shape[:-1] + (n,), dtype=a.dtype)
    parts = _matmul_parts(a, b, out, threads, lambda x, y, o: np.matmul(x, y, out=o))
    if parts is None:
        return np.matmul(a, b)
    _run_parts(parts, threads, setter)
    return out


def _matmul_parts(a: np.ndarray, b: np.ndarray, out: np.ndarray, threads: int,
                  product: Callable) -> list | None:
    """Closures computing ``product`` over row (or batch) blocks of ``out``: a few parts per
    thread, taken by whichever thread is free, so a thread that the OS deschedules (other
    processes on the cores) does not hold up the whole product.  None: no useful split."""
    m = a.shape[-2]
    batch = a.shape[0] if a.ndim > 2 else 1
    if batch >= threads and a.ndim > 2:
        return [(lambda lo=lo, hi=hi: product(a[lo:hi], b[lo:hi], out[lo:hi]))
                for lo, hi in _bounds(batch, min(batch, 4 * threads))]
    if a.ndim == 2 and m >= 2 * threads:
        pieces = max(threads, min(4 * threads, m // 128))
        return [(lambda lo=lo, hi=hi: product(a[lo:hi], b, out[lo:hi]))
                for lo, hi in _bounds(m, pieces)]
    return None


def _run_parts(parts: list, threads: int, setter: Any) -> None:
    todo = iter(parts)

    def work() -> None:
        for part in todo:
            part()

    setter(1)
    try:
        _run([work] * threads)
    finally:
        setter(threads)


_LOWP_NUMS = frozenset({np.dtype(np.float16).num, np.dtype(ml_dtypes.bfloat16).num})


def _lowp_product(a: np.ndarray, b32: np.ndarray, out: np.ndarray,
                  bias32: np.ndarray | None = None) -> None:
    """``out = round(float32(a) @ b32 (+ bias32))`` for one block of rows (or batches): the
    float32 copy of ``a``'s block and the float32 result exist only per block (the parallel
    split makes blocks of at most ~128 rows for large products, so they stay in cache), and
    the rounding to ``out``'s dtype (round to nearest even) happens once, right after the
    block's product.  Each block is one BLAS call over the same rows as the float32 path, so
    a half result is bit-for-bit the rounded float32 result of the same op."""
    from ember.ops import _half_c  # (it imports this module)

    a32 = np.empty(a.shape, np.float32)
    if not _half_c.convert_into(a32, a, threaded=False):
        a32 = a.astype(np.float32)
    blk = np.matmul(a32, b32)
    if bias32 is not None:
        blk += bias32
    if not _half_c.convert_into(out, blk, threaded=False):
        out[...] = blk


def _to_float32(b: np.ndarray, threads: int) -> np.ndarray:
    """``b.astype(float32)`` (same memory layout), split over threads for large operands (the
    shared operand of a product, often a weight, is converted once per call)."""
    from ember.ops import _half_c  # (it imports this module)

    for view, back in ((b, False), (b.T, True)):   # a weight is often seen transposed
        if view.flags.c_contiguous:
            out = np.empty(view.shape, np.float32)
            if _half_c.convert_into(out, view, threaded=True):
                return out.T if back else out
    if threads < 2 or b.size < MIN_ELEMENTS or b.ndim < 2:
        return b.astype(np.float32)
    out = np.empty_like(b, dtype=np.float32)
    axis = 0 if b.strides[0] >= b.strides[-1] else b.ndim - 1  # split the outermost axis
    n = b.shape[axis]
    tasks = []
    for lo, hi in _bounds(n, threads):
        idx = (slice(None),) * axis + (slice(lo, hi),)
        tasks.append(lambda idx=idx: np.copyto(out[idx], b[idx], casting="unsafe"))
    _run(tasks)
    return out


def matmul_lowp(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """float16/bfloat16 ``a @ b (+ bias)``, float32 accumulation, rounded once: the half GEMM
    kernels of ``_hgemm_c`` (operands packed as they are, AMX for bfloat16 where the CPU has
    it), or for a few rows ``_hsmall_c`` (the weight widened in registers), else (no C
    compiler, a B with neither unit stride) float32 BLAS on blocks converted in cache, whose
    values equal ``(f32(a) @ f32(b) + f32(bias)).astype(a.dtype)``."""
    from ember.ops import _hgemm_c, _hsmall_c  # (they import this module)

    out = _hgemm_c.matmul(a, b, bias)
    if out is None:   # at most SMALL_M rows: the weight widened in registers, read once
        out = _hsmall_c.matmul(a, b, bias)
    if out is not None:
        return out
    threads, setter = _state["threads"], _blas_setter()
    b32 = _to_float32(b, threads)
    product = _lowp_product if bias is None else functools.partial(
        _lowp_product, bias32=bias.astype(np.float32))
    out = np.empty(a.shape[:-1] + (b.shape[-1],), dtype=a.dtype)
    m, k = a.shape[-2:]
    flops = 2 * m * b.shape[-1] * k * (a.size // max(m * k, 1))
    parts = None
    if threads >= 2 and setter is not None and flops >= MATMUL_MIN_FLOPS and \
            a.shape[:-2] == b.shape[:-2]:
        parts = _matmul_parts(a, b32, out, threads, product)
    if parts is None:
        product(a, b32, out)
    else:
        _run_parts(parts, threads, setter)
    return out

"""Resampling primitives of ``F.interpolate``: ``resample`` and its adjoint ``resample_backward``.

Nearest, linear and cubic interpolation are separable: output position ``o`` along a spatial
dim reads ``K`` input positions ``idx[k, o]`` with weights ``w[k, o]`` (K = 1 for nearest, 2
for linear, 4 for cubic; antialiased linear/cubic (``*_aa``) read a window that widens with
the downscaling factor).  ``resample`` applies that per trailing spatial dim, the last dim
first, which is exactly PyTorch's CPU evaluation order (``h0 * (w0 * x00 + w1 * x01) + ...``).
The index/weight tables follow ATen's ``UpSample.h`` (``area_pixel_compute_source_index``,
``nearest_idx``, ``get_cubic_upsample_coefficients``), computed in the op's math type (float32
for float32 input, float64 for float64; nearest indices always in float as ATen does), and are
cached per (mode, sizes, scale).

Where a C compiler is available the eager ops run a small fixed C kernel instead
(``_resample_c``: the same tables and order of products and sums, so the same bits; each plane
in cache-resident scratch, planes over ember's threads); EMBER_EAGER_C=0 or no compiler runs
the NumPy kernels.  The NumPy kernels are vectorized (a ``take`` per tap, weights broadcast
along the dim) over blocks of the leading (batch, channel) rows that stay in cache, spread over
ember's threads.  Upscaling the last dim by an integer factor (``repeat_plan``) instead repeats each
block once and reads every tap as a shifted flat view of the repeat (the same elements, so the
same products and sums), gathering only the few border outputs: a gather per tap is the
costliest step of the forward.  A plane larger than a block is split into chunks of output rows
along its first spatial dim, each computed from the input rows it reads (so large single images
stay in cache and spread over the threads).  The backward is the transpose, written as taps too:
input ``j`` gathers the outputs that read it (``transposed_taps``, padded with zero weights),
so it costs what the forward does (a gradient that holds inf or NaN can turn a padded
``0 * inf`` into NaN).  The two ops are each other's vjp, so double backward works.  In the
C backend each lowers to one ``ResampleKernel`` built from these same tables
(``ember/compiler/c/lower/resample.py``), so compiled results are bit-equal to these kernels.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ember.errors import DTypeError, ShapeError
from ember.ops import _parallel, _resample_c
from ember.ops._util import lowp
from ember.ops.registry import OpDef, bind, register

MODES = ("nearest", "nearest-exact", "linear", "cubic", "linear_aa", "cubic_aa", "area")
_CUBIC_A = -0.75


def _scale(n_in: int, n_out: int, align_corners: bool, scale: float | None, ft: type) -> float:
    """ATen's ``area_pixel_compute_scale`` in the math type ``ft``."""
    if align_corners:
        return ft(n_in - 1) / ft(n_out - 1) if n_out > 1 else ft(0)
    if scale is not None and scale > 0:
        return ft(1.0 / scale)
    return ft(n_in) / ft(n_out)


def _nearest(mode: str, n_in: int, n_out: int, scale: float | None) -> np.ndarray:
    o = np.arange(n_out)
    if mode == "nearest" and n_out == n_in:
        return o
    if mode == "nearest" and n_out == 2 * n_in:
        return o >> 1
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 else (
        np.float32(n_in) / np.float32(n_out))
    if mode == "nearest":
        src = np.floor(o.astype(np.float32) * s)
    else:  # (o + 0.5) in double times the float scale, rounded to float by floorf
        src = np.floor(((o + 0.5) * np.float64(s)).astype(np.float32))
    return np.minimum(src.astype(np.intp), n_in - 1)


def _cubic_coeffs(t: np.ndarray) -> list:
    a = t.dtype.type(_CUBIC_A)

    def conv1(x):  # noqa: ANN001, ANN202
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def conv2(x):  # noqa: ANN001, ANN202
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    one = t.dtype.type(1)
    return [conv2(t + one), conv1(t), conv1(one - t), conv2((one - t) + one)]


@functools.lru_cache(maxsize=256)
def taps(mode: str, n_in: int, n_out: int, align_corners: bool, scale: float | None,
         dtype: str) -> tuple:
    """``(idx (K, n_out), w (K, n_out) or None)`` of one spatial dim."""
    if mode in ("nearest", "nearest-exact"):
        return _nearest(mode, n_in, n_out, scale)[None], None
    ft = np.dtype(dtype).type
    if mode == "area":
        return _taps_area(n_in, n_out, ft)
    if mode.endswith("_aa"):
        return _taps_aa(mode, n_in, n_out, _scale(n_in, n_out, align_corners, scale, ft), ft)
    o = np.arange(n_out)
    if mode == "linear" and n_in == n_out:
        return np.stack([o, o]), np.stack([np.ones(n_out, ft), np.zeros(n_out, ft)])
    s = _scale(n_in, n_out, align_corners, scale, ft)
    of = o.astype(ft)
    real = s * of if align_corners else s * (of + ft(0.5)) - ft(0.5)
    if mode == "linear":
        real = np.maximum(real, ft(0))
    i0 = np.minimum(np.floor(real).astype(np.intp), n_in - 1)
    lam = np.clip(real - i0.astype(ft), ft(0), ft(1)).astype(ft)
    if mode == "linear":
        i1 = i0 + (i0 < n_in - 1)
        return np.stack([i0, i1]), np.stack([ft(1) - lam, lam])
    idx = np.stack([np.clip(i0 - 1 + j, 0, n_in - 1) for j in range(4)])
    return idx, np.stack(_cubic_coeffs(lam))


def _taps_area(n_in: int, n_out: int, ft: type) -> tuple:
    """Adaptive average pooling as taps: output ``o`` averages the inputs
    ``[floor(o * n_in / n_out), ceil((o + 1) * n_in / n_out))``."""
    o = np.arange(n_out)
    start = (o * n_in) // n_out
    end = -((-(o + 1) * n_in) // n_out)
    size = end - start
    j = np.arange(int(size.max()))[:, None]
    idx = np.minimum(start + j, n_in - 1).astype(np.intp)
    w = np.where(j < size, ft(1) / size.astype(ft), ft(0)).astype(ft)
    return idx, w


def _aa_filter(mode: str, x: np.ndarray) -> np.ndarray:
    """ATen's antialiasing filters: the triangle, and Keys' cubic with a = -0.5."""
    x = np.abs(x)
    one = x.dtype.type(1)
    if mode == "linear_aa":
        return np.where(x < one, one - x, x.dtype.type(0))
    a = x.dtype.type(-0.5)
    near = ((a + 2) * x - (a + 3)) * x * x + one
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < one, near, np.where(x < 2 * one, far, x.dtype.type(0)))


def _taps_aa(mode: str, n_in: int, n_out: int, scale: float, ft: type) -> tuple:
    """ATen's ``_compute_weights_aa``: a filter stretched by the scale when downsampling, its
    weights over the window normalized to sum 1; taps past the window get weight 0."""
    interp = 2 if mode == "linear_aa" else 4
    support = ft(interp * 0.5) * scale if scale >= 1 else ft(interp * 0.5)
    k = int(np.ceil(support)) * 2 + 1
    invscale = ft(1.0) / scale if scale >= 1 else ft(1.0)
    center = (np.float64(scale) * (np.arange(n_out) + 0.5)).astype(ft)
    xmin = np.maximum((center - support + ft(0.5)).astype(np.int64), 0)
    xsize = np.minimum((center + support + ft(0.5)).astype(np.int64), n_in) - xmin
    j = np.arange(k)[:, None]
    arg = ((j + xmin - center.astype(np.float64) + 0.5) * np.float64(invscale)).astype(ft)
    w = np.where(j < xsize, _aa_filter(mode, arg), ft(0))
    total = w.sum(0, dtype=ft)
    w = np.where(total != 0, w / np.where(total != 0, total, ft(1)), w).astype(ft)
    idx = np.minimum(xmin + j, n_in - 1).astype(np.intp)
    return idx, w


# ------------------------------------------------------------------------------- kernels
@functools.lru_cache(maxsize=256)
def transposed_taps(mode: str, n_in: int, n_out: int, align_corners: bool, scale: float | None,
                    dtype: str) -> tuple:
    """The adjoint of a dim's taps as taps of its own: input ``j`` gathers the outputs ``o``
    that read it, in increasing ``o`` (PyTorch's accumulation order), padded with weight 0."""
    idx, w = taps(mode, n_in, n_out, align_corners, scale, dtype)
    return transpose_table(idx, w, n_in, dtype)


def transpose_table(idx: np.ndarray, w: np.ndarray | None, n_in: int, dtype: str) -> tuple:
    """The adjoint of a ``(K, n_out)`` tap table (``w`` None: a gather, weight 1) as a
    ``(K', n_in)`` table: input ``j`` gathers the outputs that read it, in increasing output
    order, padded with weight 0 (None when every input is read exactly once)."""
    k, n_out = idx.shape
    src = idx.T.ravel()                       # (o, k) pairs, o-major
    outs = np.repeat(np.arange(n_out), k)
    ws = np.ones(src.size, dtype) if w is None else w.T.ravel()
    order = np.argsort(src, kind="stable")
    src, outs, ws = src[order], outs[order], ws[order]
    counts = np.bincount(src, minlength=n_in)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.arange(src.size) - starts[src]
    kt = max(int(counts.max()), 1)
    t_idx = np.zeros((kt, n_in), np.intp)
    t_w = np.zeros((kt, n_in), dtype)
    t_idx[pos, src] = outs
    t_w[pos, src] = ws
    if w is None and kt == 1 and (counts == 1).all():
        return t_idx, None
    return t_idx, t_w


def _along(x: np.ndarray, axis: int, idx: np.ndarray, w: list | None,
           out: np.ndarray | None = None, flat: np.ndarray | None = None) -> np.ndarray:
    """``sum_k w[k] * x.take(idx[k], axis)`` (one spatial dim), left to right; ``w[k]``
    broadcasts against the result's trailing dims from ``axis`` on.  ``flat``: ``idx`` as
    indices into ``x.ravel()`` (the last axis of a contiguous block; a 1-d gather is about a
    third faster than ``take`` along the last axis)."""
    shape = x.shape[:axis] + (idx.shape[1],) + x.shape[axis + 1:]

    def tap(k: int, dst: np.ndarray | None) -> np.ndarray:
        # mode="clip": the indices are in range, and "raise" would buffer ``dst`` in a copy
        if flat is None:
            return np.take(x, idx[k], axis=axis, out=dst, mode="clip")
        d1 = None if dst is None else dst.reshape(-1)
        return np.take(x.reshape(-1), flat[k], out=d1, mode="clip").reshape(shape)

    out = tap(0, out)
    if w is None:
        return out
    out *= w[0]
    for k in range(1, idx.shape[0]):
        t = tap(k, None)
        t *= w[k]
        out += t
    return out


def _flat_taps(idx: np.ndarray, lines: int, n_in: int) -> np.ndarray:
    """``idx`` of the last axis as indices into a flat ``(lines, n_in)`` block."""
    base = (np.arange(lines, dtype=np.intp) * n_in)[:, None]
    return np.stack([(base + ik).ravel() for ik in idx])


def _weights(w: np.ndarray | None, trailing: tuple) -> list | None:
    """The taps' weights as arrays of shape ``(n_out, *trailing)``: a contiguous operand
    multiplies about twice as fast as one broadcast along the inner dims."""
    if w is None:
        return None
    n = w.shape[1]
    full = (n,) + tuple(trailing)
    return [np.ascontiguousarray(np.broadcast_to(wk.reshape((n,) + (1,) * len(trailing)), full))
            for wk in w]


@functools.lru_cache(maxsize=256)
def repeat_plan(mode: str, n_in: int, n_out: int, align_corners: bool, scale: float | None,
                dtype: str) -> tuple | None:
    """For upsampling by an integer factor ``f = n_out / n_in``: ``(f, cs, lo, hi)`` when tap
    ``k`` reads ``x[(o + cs[k]) // f]`` -- the input repeated ``f`` times, read at offset
    ``cs[k]`` -- for every output ``o`` in ``[lo, hi)`` (the others, a few at each end, are
    gathered on their own); None when the table has no such form."""
    if n_in < 2 or n_out % n_in or n_out // n_in < 2:
        return None
    f = n_out // n_in
    idx = taps(mode, n_in, n_out, align_corners, scale, dtype)[0]
    o = np.arange(n_out)
    cs, good = [], np.ones(n_out, bool)
    span = f * (idx.shape[0] + 1)
    for ik in idx:
        best = None
        for c in range(-span, span + 1):
            j = o + c
            ok = (j >= 0) & (j < n_out) & (np.clip(j, 0, n_out - 1) // f == ik)
            if best is None or ok.sum() > best[1].sum():
                best = (c, ok)
        cs.append(best[0])
        good &= best[1]
    nz = np.flatnonzero(good)
    if nz.size == 0 or not good[nz[0]:nz[-1] + 1].all() or n_out - nz.size > 2 * span:
        return None
    return f, tuple(cs), int(nz[0]), int(nz[-1]) + 1


def _repeat_flat(x: np.ndarray, f: int, dst: np.ndarray | None = None) -> np.ndarray:
    """The C-contiguous ``x`` with each element repeated ``f`` times, flat (``np.repeat``
    along the last axis).  float32 by 2: each element's bits times ``2**32 + 1`` as uint64,
    written to ``dst`` when given (a cast and a multiply: about twice as fast as ``repeat``)."""
    if f == 2 and x.dtype == np.float32:
        u = x.reshape(-1).view(np.uint32).astype(np.uint64)
        d64 = None if dst is None else dst.view(np.uint64)
        return np.multiply(u, np.uint64(0x100000001), out=d64).view(np.float32)
    r = np.repeat(x.reshape(-1), f)
    if dst is None:
        return r
    np.copyto(dst, r)
    return dst


def _repeat_tables(idx: np.ndarray, w: np.ndarray | None, plan: tuple, rows: int,
                   n_in: int) -> tuple:
    """What ``_along_repeat`` reads for blocks of up to ``rows`` rows (a shorter block uses
    prefixes): ``(plan, tiled weights, flat output positions outside [lo, hi), flat input
    positions of each tap there, their weights tiled)``."""
    _, _, lo, hi = plan
    n = idx.shape[1]
    bad = np.r_[0:lo, hi:n]
    r = np.arange(rows, dtype=np.intp)[:, None]
    tiled = None if w is None else [np.tile(wk, rows) for wk in w]
    fsrc = [(r * n_in + ik[bad]).ravel() for ik in idx]
    wbad = None if w is None else [np.tile(wk[bad], rows) for wk in w]
    return plan, tiled, (r * n + bad).ravel(), fsrc, wbad


def _along_repeat(x: np.ndarray, n: int, tables: tuple, out: np.ndarray | None) -> np.ndarray:
    """``_along`` for the last axis of a C-contiguous block through ``repeat_plan``: one
    repeat of the block instead of a gather per tap, each tap then a shifted flat view of it
    times the weights tiled over the block's rows, the same products summed in the same
    order; the outputs outside ``[lo, hi)`` are gathered and summed on their own
    (``tables``: ``_repeat_tables``)."""
    (f, cs, lo, hi), tiled, fpos, fsrc, wbad = tables
    res = np.empty(x.shape[:-1] + (n,), x.dtype) if out is None else out
    rf = res.reshape(-1)
    if tiled is None and cs == (0,) and (lo, hi) == (0, n):
        _repeat_flat(x, f, rf)
        return res
    rep = _repeat_flat(x, f)
    p0, p1 = max(0, -min(cs)), rf.size - max(0, max(cs))
    if tiled is None:
        np.copyto(rf[p0:p1], rep[p0 + cs[0]:p1 + cs[0]])
    else:
        np.multiply(rep[p0 + cs[0]:p1 + cs[0]], tiled[0][p0:p1], out=rf[p0:p1])
        for k in range(1, len(cs)):
            t = np.multiply(rep[p0 + cs[k]:p1 + cs[k]], tiled[k][p0:p1])
            np.add(rf[p0:p1], t, out=rf[p0:p1])
    m = (rf.size // n) * (n - (hi - lo))
    if m:
        xf = x.reshape(-1)
        acc = np.take(xf, fsrc[0][:m])
        if wbad is not None:
            acc *= wbad[0][:m]
            for k in range(1, len(cs)):
                t = np.take(xf, fsrc[k][:m])
                t *= wbad[k][:m]
                acc += t
        rf[fpos[:m]] = acc
    return res


def _chunks(idx: np.ndarray, n_out: int, inner: int) -> list:
    """Output ranges ``[a, b)`` along dim 0 of ~0.25 MiB (float32) each, with the input rows
    ``[i_lo, i_hi)`` that they read: ``[(a, b, i_lo, i_hi)]``."""
    ch = max(1, _parallel.BLOCK // max(inner, 1))
    out = []
    for a in range(0, n_out, ch):
        sub = idx[:, a:a + ch]
        out.append((a, min(a + ch, n_out), int(sub.min()), int(sub.max()) + 1))
    return out


def _steps(tables: list, order: range, plans: list | None, cur: list, per: int,
           span: int | None) -> list:
    """``_separable``'s passes: ``(dim, idx, weights, flat taps, repeat tables)`` each, for
    blocks of ``per`` planes of spatial sizes ``cur`` (``span``: the most input rows along
    dim 0 that one chunk reads, when planes are split into chunks)."""
    steps = []
    nd = len(cur)
    for d in order:
        idx, w = tables[d]
        lines = per * math.prod(([span] + cur[1:d]) if d and span else cur[:d])
        small = d == nd - 1 and per * math.prod(cur) <= 1 << 24
        plan = plans[d] if plans is not None and small else None
        flat = _flat_taps(idx, lines, cur[d]) if small and not span and not plan else None
        rep = None if plan is None else _repeat_tables(idx, w, plan, lines, cur[d])
        cur[d] = idx.shape[1]
        steps.append((d, idx, _weights(w, tuple(cur[d + 1:])), flat, rep))
    return steps


def _separable(x: np.ndarray, nd: int, tables: list, order: range, size: tuple,
               plans: list | None = None) -> np.ndarray:
    """Apply ``tables[d]`` along spatial dim ``d`` for ``d`` in ``order`` to every leading row
    of ``x``, in row blocks small enough that the intermediates stay in cache, spread over
    ember's threads (the blocks' results do not depend on the split).  ``plans[d]``: a
    ``repeat_plan`` for the last dim (used on contiguous blocks), or None.  A plane too large
    for one block is split along dim 0 into chunks of output rows, each computed from the
    input rows it reads (the same values: every output row is computed as in one piece)."""
    lead = x.shape[:x.ndim - nd]
    rows = math.prod(lead)
    x2 = np.ascontiguousarray(x).reshape((rows,) + x.shape[x.ndim - nd:])
    out = np.empty((rows,) + tuple(size), x.dtype)
    if rows == 0 or out.size == 0:
        return out.reshape(lead + tuple(size))
    plane = max(math.prod(x2.shape[1:]), math.prod(size), 1)
    per = max(1, _parallel.BLOCK // plane)  # ~0.25 MiB of float32 output per block
    chunks = None
    if per == 1 and nd >= 2 and plane > 2 * _parallel.BLOCK:
        chunks = _chunks(tables[0][0], size[0], math.prod(size[1:]))
    if chunks is None or len(chunks) < 2:
        chunks, span = [(0, size[0], 0, x2.shape[1])], x2.shape[1]
        blocks = [(lo, min(lo + per, rows), c) for lo in range(0, rows, per) for c in chunks]
    else:
        span = max(c[3] - c[2] for c in chunks)
        blocks = [(r, r + 1, c) for r in range(rows) for c in chunks]
    whole = len(chunks) == 1
    threads = min(_parallel.get_num_threads(), len(blocks))
    if x.size + out.size < _parallel.MIN_ELEMENTS:
        threads = 1
    todo = iter(blocks)  # shared: blocks go to whichever thread is free
    last = order[-1]
    steps = _steps(tables, order, plans, list(x2.shape[1:]), per, None if whole else span)

    def work() -> None:
        for lo, hi, (a, b, i_lo, i_hi) in todo:
            blk = x2[lo:hi] if whole else x2[lo:hi, i_lo:i_hi]
            for d, idx, w, flat, rep in steps:
                dst = (out[lo:hi] if whole else out[lo:hi, a:b]) if d == last else None
                if rep is not None and blk.flags.c_contiguous:
                    blk = _along_repeat(blk, idx.shape[1], rep, dst)
                    continue
                if not whole and d == 0:
                    idx, w = idx[:, a:b] - i_lo, [wk[a:b] for wk in w] if w else w
                blk = _along(blk, 1 + d, idx, w, out=dst,
                             flat=flat if hi - lo == per and blk.flags.c_contiguous else None)

    if threads > 1:
        _parallel._run([work] * threads)
    else:
        work()
    return out.reshape(lead + tuple(size))


def _resample_eager(x: np.ndarray, *, mode: str, size: tuple, align_corners: bool,
                    scales: tuple) -> np.ndarray:
    nd = len(size)
    spatial = x.shape[x.ndim - nd:]
    tables = [taps(mode, n, o, align_corners, s, x.dtype.name)
              for n, o, s in zip(spatial, size, scales)]
    # the last dim first: PyTorch's nesting h0 * (w0 * x00 + w1 * x01) + ...
    order = range(nd - 1, -1, -1)
    res = _resample_c.run(x, nd, tables, order, tuple(size))  # C when built: the same bits
    if res is not None:
        return res
    plans = [None] * (nd - 1) + [repeat_plan(mode, spatial[-1], size[-1], align_corners,
                                             scales[-1], x.dtype.name)]
    return _separable(x, nd, tables, order, tuple(size), plans)


def _resample_bw_eager(g: np.ndarray, *, mode: str, input_size: tuple, align_corners: bool,
                       scales: tuple) -> np.ndarray:
    nd = len(input_size)
    size = g.shape[g.ndim - nd:]
    tables = [transposed_taps(mode, n, o, align_corners, s, g.dtype.name)
              for n, o, s in zip(input_size, size, scales)]
    res = _resample_c.run(g, nd, tables, range(nd), tuple(input_size))
    if res is not None:
        return res
    return _separable(g, nd, tables, range(nd), tuple(input_size))


# ------------------------------------------------------------------------------- meta / vjp
def _spatial(shape: tuple, nd: int) -> tuple:
    return tuple(shape[len(shape) - nd:])


def _check(name: str, x, mode: str, nd: int, sizes: tuple) -> None:  # noqa: ANN001
    if not (x.dtype.is_floating_point or (x.dtype.name == "uint8" and mode.startswith("near"))):
        raise DTypeError(f"[{name}] expected a floating input (or uint8 for nearest modes); got "
                         f"{x.dtype.name}")
    if mode not in MODES:
        raise ShapeError(f"[{name}] unknown mode {mode!r}; expected one of {MODES}")
    if len(x.shape) < nd + 1:
        raise ShapeError(f"[{name}] input of shape {tuple(x.shape)} has fewer than {nd} "
                         f"spatial dims and a batch dim")
    if any(s <= 0 for s in sizes):
        raise ShapeError(f"[{name}] sizes must be positive; got {sizes}")


def _resample_meta(x, *, mode: str, size: tuple, align_corners: bool, scales: tuple) -> tuple:  # noqa: ANN001
    _check("resample", x, mode, len(size), tuple(size) + _spatial(tuple(x.shape), len(size)))
    return tuple(x.shape[:len(x.shape) - len(size)]) + tuple(size), x.dtype


def _resample_bw_meta(g, *, mode: str, input_size: tuple, align_corners: bool,  # noqa: ANN001
                      scales: tuple) -> tuple:
    nd = len(input_size)
    _check("resample_backward", g, mode, nd, tuple(input_size))
    return tuple(g.shape[:len(g.shape) - nd]) + tuple(input_size), g.dtype


def _resample_vjp(ctx, g):  # noqa: ANN001
    p = ctx.params
    nd = len(p["size"])
    return (bind(RESAMPLE_BACKWARD, g, mode=p["mode"],
                 input_size=_spatial(tuple(ctx.input_shapes[0]), nd),
                 align_corners=p["align_corners"], scales=p["scales"]),)


def _resample_bw_vjp(ctx, gg):  # noqa: ANN001
    p = ctx.params
    nd = len(p["input_size"])
    return (bind(RESAMPLE, gg, mode=p["mode"], size=_spatial(tuple(ctx.input_shapes[0]), nd),
                 align_corners=p["align_corners"], scales=p["scales"]),)


RESAMPLE = register(OpDef(
    "resample", "extern", _resample_meta, lowp(_resample_eager), _resample_vjp,
    tags=frozenset({"lowp_upcast"}),
    doc="Separable nearest/linear/cubic resampling of the trailing spatial dims to ``size``.",
    grad_name="UpsampleBackward0",
))
RESAMPLE_BACKWARD = register(OpDef(
    "resample_backward", "extern", _resample_bw_meta, lowp(_resample_bw_eager),
    _resample_bw_vjp, tags=frozenset({"lowp_upcast"}),
    doc="Adjoint of resample: scatter-add of the gradient back to ``input_size``.",
))

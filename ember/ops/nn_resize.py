"""Resampling primitives of ``F.interpolate``: ``resample`` and its adjoint ``resample_backward``.

Nearest, linear and cubic interpolation are separable: output position ``o`` along a spatial
dim reads ``K`` input positions ``idx[k, o]`` with weights ``w[k, o]`` (K = 1 for nearest, 2
for linear, 4 for cubic).  ``resample`` applies that per trailing spatial dim, the last dim
first, which is exactly PyTorch's CPU evaluation order (``h0 * (w0 * x00 + w1 * x01) + ...``).
The index/weight tables follow ATen's ``UpSample.h`` (``area_pixel_compute_source_index``,
``nearest_idx``, ``get_cubic_upsample_coefficients``), computed in the op's math type (float32
for float32 input, float64 for float64; nearest indices always in float as ATen does), and are
cached per (mode, sizes, scale).

The eager kernels are vectorized NumPy (a ``take`` per tap, weights broadcast along the dim)
split over ember's threads along the leading (batch, channel) rows.  The backward is the
transpose: per tap a weighted segment sum (``np.add.reduceat`` over the runs of equal source
indices, which are sorted).  The two ops are each other's vjp, so double backward works.  In
the C backend both are externs (they call these kernels).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ember.errors import DTypeError, ShapeError
from ember.ops import _parallel
from ember.ops._util import lowp
from ember.ops.registry import OpDef, bind, register

MODES = ("nearest", "nearest-exact", "linear", "cubic")
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


def _table(mode: str, n_in: int, n_out: int, align_corners: bool, scale: float | None,
           dtype: np.dtype) -> tuple:
    return taps(mode, n_in, n_out, align_corners, scale, np.dtype(dtype).name)


# ------------------------------------------------------------------------------- kernels
def _along(x: np.ndarray, axis: int, idx: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """``sum_k w[k] * x.take(idx[k], axis)`` (one spatial dim)."""
    if w is None:
        return np.take(x, idx[0], axis=axis)
    wshape = [1] * x.ndim
    wshape[axis] = idx.shape[1]
    out = np.take(x, idx[0], axis=axis)
    out *= w[0].reshape(wshape)
    for k in range(1, idx.shape[0]):
        t = np.take(x, idx[k], axis=axis)
        t *= w[k].reshape(wshape)
        out += t
    return out


def _along_t(g: np.ndarray, axis: int, n_in: int, idx: np.ndarray,
             w: np.ndarray | None) -> np.ndarray:
    """The transpose of ``_along``: scatter-add ``w[k] * g`` to positions ``idx[k]``."""
    shape = list(g.shape)
    shape[axis] = n_in
    gx = np.zeros(shape, g.dtype)
    wshape = [1] * g.ndim
    wshape[axis] = idx.shape[1]
    lead = (slice(None),) * axis
    for k in range(idx.shape[0]):
        t = g if w is None else g * w[k].reshape(wshape)
        ik = idx[k]
        starts = np.flatnonzero(np.r_[True, ik[1:] != ik[:-1]])
        if len(starts) == len(ik):  # a permutation-free 1:1 map
            seg = t
        else:
            seg = np.add.reduceat(t, starts, axis=axis)
        dst = ik[starts]
        if len(dst) and dst[-1] - dst[0] == len(dst) - 1:
            gx[lead + (slice(int(dst[0]), int(dst[-1]) + 1),)] += seg
        else:
            gx[lead + (dst,)] += seg
    return gx


def _rows_split(fn, x: np.ndarray, out_shape: tuple) -> np.ndarray:  # noqa: ANN001
    """Run ``fn`` (a function of a block of rows) over ember's threads along dim 0 of the
    (rows, *spatial) view ``x``."""
    rows = x.shape[0]
    threads = _parallel.get_num_threads()
    if threads == 1 or rows < 2 or x.size < _parallel.MIN_ELEMENTS:
        return fn(x)
    out = np.empty(out_shape, x.dtype)
    parts = _parallel._bounds(rows, min(threads, rows))

    def task(lo: int, hi: int) -> None:
        out[lo:hi] = fn(x[lo:hi])

    _parallel._run([lambda lo=lo, hi=hi: task(lo, hi) for lo, hi in parts])
    return out


def _spatial(shape: tuple, nd: int) -> tuple:
    return tuple(shape[len(shape) - nd:])


def _resample_eager(x: np.ndarray, *, mode: str, size: tuple, align_corners: bool,
                    scales: tuple) -> np.ndarray:
    nd = len(size)
    lead = x.shape[:x.ndim - nd]
    x2 = x.reshape((math.prod(lead),) + _spatial(x.shape, nd)) if lead else x[None]
    tables = [_table(mode, n, o, align_corners, s, x.dtype)
              for n, o, s in zip(_spatial(x.shape, nd), size, scales)]

    def run(block: np.ndarray) -> np.ndarray:
        for d in range(nd - 1, -1, -1):
            block = _along(block, 1 + d, *tables[d])
        return block

    out = _rows_split(run, np.ascontiguousarray(x2), (x2.shape[0],) + tuple(size))
    return out.reshape(lead + tuple(size))


def _resample_bw_eager(g: np.ndarray, *, mode: str, input_size: tuple, align_corners: bool,
                       scales: tuple) -> np.ndarray:
    nd = len(input_size)
    lead = g.shape[:g.ndim - nd]
    size = _spatial(g.shape, nd)
    g2 = g.reshape((math.prod(lead),) + size) if lead else g[None]
    tables = [_table(mode, n, o, align_corners, s, g.dtype)
              for n, o, s in zip(input_size, size, scales)]

    def run(block: np.ndarray) -> np.ndarray:
        for d in range(nd):
            block = _along_t(block, 1 + d, input_size[d], *tables[d])
        return block

    out = _rows_split(run, np.ascontiguousarray(g2), (g2.shape[0],) + tuple(input_size))
    return out.reshape(lead + tuple(input_size))


# ------------------------------------------------------------------------------- meta / vjp
def _check(name: str, x, mode: str, nd: int, sizes: tuple) -> None:  # noqa: ANN001
    if not x.dtype.is_floating_point:
        raise DTypeError(f"[{name}] expected a floating input; got {x.dtype.name}")
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

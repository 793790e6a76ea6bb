"""Sorting and selection primitives (sort, topk, kthvalue/median, unique) and the private
gather/scatter pair their gradients use.

``dim`` is non-negative (the frontend wraps it); a 0-d input is treated as one element.
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.ops.reduction import _extreme_vjp, index_vjp, reduced_shape
from ember.ops.registry import OpDef, bind, register
from ember.sym import unbacked_size

_MULTI = frozenset({"multi_output"})
_LOWP = (np.dtype(np.float16), dt.bfloat16.np)


def _keys(x: np.ndarray) -> np.ndarray:
    """Sort keys: float16/bfloat16 widened to float32 (order preserving, NaN-aware)."""
    return x.astype(np.float32) if x.dtype in _LOWP else x


# ---------------------------------------------------------------------------- gather / scatter
def _grid(index: np.ndarray, dim: int) -> tuple:
    grids = list(np.ix_(*[np.arange(n) for n in index.shape]))
    grids[dim] = index
    return tuple(grids)


def _scatter_eager(src: np.ndarray, index: np.ndarray, *, dim: int, shape: tuple) -> np.ndarray:
    out = np.zeros(shape, src.dtype)
    if src.ndim == 0:
        out[()] = src
        return out
    np.add.at(out, _grid(index, dim), src)
    return out


def _scatter_vjp(ctx, g):  # noqa: ANN001
    (_src, index) = ctx.inputs
    return (bind(GATHER, g, index, dim=ctx.params["dim"]), None)


SCATTER_ADD = register(OpDef(
    "_sort_scatter_add", "index", lambda src, index, *, dim, shape: (tuple(shape), src.dtype),
    _scatter_eager, _scatter_vjp, save=(1,),
    doc="zeros(shape) with src added at index along dim (gradients of index selections).",
))


def _gather_eager(x: np.ndarray, index: np.ndarray, *, dim: int) -> np.ndarray:
    if x.ndim == 0:
        return x.copy()
    return np.asarray(np.take_along_axis(x, index, dim), order="C")


def _gather_vjp(ctx, g):  # noqa: ANN001
    (_x, index) = ctx.inputs
    return (bind(SCATTER_ADD, g, index, dim=ctx.params["dim"], shape=ctx.input_shapes[0]), None)


GATHER = register(OpDef(
    "_sort_gather", "index", lambda x, index, *, dim: (tuple(index.shape), x.dtype),
    _gather_eager, _gather_vjp, save=(1,), doc="x taken at index along dim.",
))


def scatter_to(g, index, dim: int, shape: tuple):  # noqa: ANN001, ANN201
    """The gradient of ``take_along_dim(x, index, dim)`` for x of ``shape``."""
    return bind(SCATTER_ADD, g, index, dim=dim, shape=tuple(shape))


# ---------------------------------------------------------------------------- sort / topk
def _sort_idx(x: np.ndarray, dim: int, descending: bool) -> np.ndarray:
    k = _keys(x)
    if not descending:
        return np.argsort(k, axis=dim, kind="stable")
    # stable descending: sort the reversed array ascending, then reverse back; equal keys keep
    # their original order and NaN (largest) comes first, as in PyTorch
    idx = np.flip(np.argsort(np.flip(k, dim), axis=dim, kind="stable"), dim)
    return x.shape[dim] - 1 - idx


def _sort_eager(x: np.ndarray, *, dim: int, descending: bool, stable: bool) -> tuple:
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    idx = _sort_idx(x, dim, descending).astype(np.int64)
    return np.take_along_axis(x, idx, dim), idx


def _sort_vjp(ctx, g, _gi=None):  # noqa: ANN001
    (_v, idx) = ctx.outputs
    shape = ctx.input_shapes[0]
    if len(shape) == 0:
        return (g,)
    # indices are constants of the gradient (detach: under create_graph saved outputs come
    # back attached to this node)
    return (scatter_to(g, idx.detach(), ctx.params["dim"], shape),)


SORT = register(OpDef(
    "sort", "extern",
    lambda x, *, dim, descending, stable: ((tuple(x.shape), x.dtype), (tuple(x.shape), dt.int64)),
    _sort_eager, _sort_vjp, num_outputs=2, save_output=True, tags=_MULTI,
))


def _topk_meta(x, *, k: int, dim: int, largest: bool, sorted: bool) -> tuple:  # noqa: ANN001
    shape = list(x.shape)
    if shape:
        shape[dim] = k
    return (tuple(shape), x.dtype), (tuple(shape), dt.int64)


def _topk_eager(x: np.ndarray, *, k: int, dim: int, largest: bool, sorted: bool) -> tuple:
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    idx = _sort_idx(x, dim, largest).astype(np.int64)
    idx = np.asarray(np.take(idx, np.arange(k), axis=dim), order="C")
    return np.take_along_axis(x, idx, dim), idx


TOPK = register(OpDef("topk", "extern", _topk_meta, _topk_eager, _sort_vjp, num_outputs=2,
                      save_output=True, tags=_MULTI))


# ---------------------------------------------------------------------------- kthvalue / median
def _kth_meta(x, *, k: int, dim: int, keepdim: bool, nan_first: bool) -> tuple:  # noqa: ANN001
    shape = reduced_shape(tuple(x.shape), (dim,), keepdim) if len(x.shape) else ()
    return (shape, x.dtype), (shape, dt.int64)


def _kth_eager(x: np.ndarray, *, k: int, dim: int, keepdim: bool, nan_first: bool) -> tuple:
    """The k-th smallest (1-based) along dim; with ``nan_first`` a slice holding NaN gives
    its first NaN (median propagates NaN, kthvalue orders NaN last)."""
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    order = np.argsort(_keys(x), axis=dim, kind="stable")
    pos = np.full(reduced_shape(x.shape, (dim,), True), k - 1, np.int64)
    if nan_first and _keys(x).dtype.kind == "f":
        nn = np.sum(~np.isnan(_keys(x)), axis=dim, keepdims=True)
        pos = np.where(nn < x.shape[dim], nn, pos)
    idx = np.take_along_axis(order, pos, dim).astype(np.int64)
    vals = np.take_along_axis(x, idx, dim)
    if not keepdim:
        vals, idx = vals.squeeze(dim), idx.squeeze(dim)
    return np.asarray(vals, order="C"), np.asarray(idx, order="C")


KTHVALUE = register(OpDef("kthvalue", "reduction", _kth_meta, _kth_eager, index_vjp,
                          num_outputs=2, save_output=True, tags=_MULTI))


def _median_eager(x: np.ndarray, *, dims: tuple, keepdim: bool) -> np.ndarray:
    flat = x.reshape(-1)
    if flat.size == 0:
        return np.full((), np.nan, x.dtype)
    k = _keys(flat)
    if k.dtype.kind == "f" and np.isnan(k).any():
        return np.full((), np.nan, x.dtype)
    return np.asarray(flat[np.argsort(k, kind="stable")[(flat.size - 1) // 2]])


MEDIAN = register(OpDef(
    "median", "reduction", lambda x, *, dims, keepdim: ((), x.dtype), _median_eager,
    _extreme_vjp, save=(0,), save_output=True,
    doc="Lower median of all elements (NaN if any is NaN); params dims=all, keepdim=False.",
))


def _mode_eager(x: np.ndarray, *, dim: int, keepdim: bool) -> tuple:
    """The most frequent value along dim (the smallest among equally frequent ones) and the
    index of its last occurrence, as PyTorch's CPU kernel."""
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    xm = np.moveaxis(_keys(x), dim, -1)
    lead, n = xm.shape[:-1], xm.shape[-1]
    rows = xm.reshape(-1, n)
    m = rows.shape[0]
    order = np.argsort(rows, axis=-1, kind="stable")
    srt = np.take_along_axis(rows, order, -1)
    run = np.concatenate([np.zeros((m, 1), np.int64),
                          np.cumsum(srt[:, 1:] != srt[:, :-1], -1)], -1)
    counts = np.zeros((m, n), np.int64)
    np.add.at(counts, (np.arange(m)[:, None], run), 1)
    best = np.argmax(counts, -1)
    last = n - 1 - np.argmax((run == best[:, None])[:, ::-1], -1)
    idx = order[np.arange(m), last].reshape(lead)
    idx = np.expand_dims(idx, dim)
    vals = np.take_along_axis(x, idx, dim)
    if not keepdim:
        vals, idx = vals.squeeze(dim), idx.squeeze(dim)
    return np.asarray(vals, order="C"), np.asarray(idx, np.int64, order="C")


MODE = register(OpDef(
    "mode", "reduction",
    lambda x, *, dim, keepdim: _kth_meta(x, k=1, dim=dim, keepdim=keepdim, nan_first=False),
    _mode_eager, index_vjp, num_outputs=2, save_output=True, tags=_MULTI,
))


# ---------------------------------------------------------------------------- unique
def _unique_meta(x, *, sorted: bool, dim: int | None) -> tuple:  # noqa: ANN001
    # the number of unique values is known only from the data (None in eager, one unbacked
    # SymInt shared by values and counts when the input's shape is symbolic)
    u = unbacked_size(x.shape)
    if dim is None:
        return ((u,), x.dtype), (tuple(x.shape), dt.int64), ((u,), dt.int64)
    shape = tuple(u if i == dim else n for i, n in enumerate(x.shape))
    return (shape, x.dtype), ((x.shape[dim],), dt.int64), ((u,), dt.int64)


def _unique_eager(x: np.ndarray, *, sorted: bool, dim: int | None) -> tuple:
    k = _keys(x)
    if dim is None:
        # NaNs are all distinct, as in PyTorch
        vals, inv, cnt = np.unique(k, return_inverse=True, return_counts=True, equal_nan=False)
        inv = inv.reshape(x.shape)
    else:
        vals, inv, cnt = np.unique(k, return_inverse=True, return_counts=True, axis=dim)
        inv = inv.reshape(-1)
    return (np.asarray(vals.astype(x.dtype), order="C"), inv.astype(np.int64),
            cnt.astype(np.int64))


UNIQUE = register(OpDef(
    "unique", "extern", _unique_meta, _unique_eager, None, num_outputs=3,
    tags=frozenset({"nondifferentiable", "data_dependent", "multi_output"}),
))

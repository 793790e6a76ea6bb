"""Indexing primitives: basic (view) indexing, advanced gather/put, scatter, masked fill and
nonzero.

The frontend (``ember/_frontend/indexing.py``) parses user indices into these strict forms:

* ``basic_index(x, spec=...)``: a view.  ``spec`` has one entry per consumed input dim plus the
  new axes, in order: an ``int`` (select, already non-negative and in range), a
  ``(start, stop, step)`` tuple (a normalized slice, ``step > 0``) or ``None`` (a new axis of
  size 1).  Dims after the spec are kept whole.
* ``index(x, index, dims=...)``: advanced indexing.  ``index`` is int64 of shape ``(k, *B)``:
  row ``j`` indexes dim ``dims[j]`` of ``x``.  The ``B`` dims replace the indexed dims where they
  are adjacent, otherwise they go first (NumPy's and PyTorch's rule).
* ``index_put(x, index, values, dims=..., accumulate=...)``: the out-of-place inverse; ``values``
  has exactly the shape ``index`` would produce and ``x``'s dtype.
* ``gather``/``scatter``/``scatter_reduce`` along ``dim`` with an int64 ``index`` of the same
  rank as ``x`` (no larger than ``x`` off ``dim``, and no larger than ``src``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes as dt
from ember.errors import DTypeError, EmberIndexError, EmberRuntimeError, ShapeError
from ember.ops.registry import OpDef, bind, register
from ember.sym import sym_max, unbacked_size


# ---------------------------------------------------------------------------------- basic
def basic_shape(shape: tuple, spec: tuple) -> tuple:
    """The shape of ``x[spec]`` for a normalized spec."""
    out = []
    d = 0
    for it in spec:
        if it is None:
            out.append(1)
            continue
        if type(it) is tuple:
            start, stop, step = it
            out.append(sym_max(0, (stop - start + step - 1) // step))  # no guard
        d += 1
    return tuple(out) + tuple(shape[d:])


def np_basic_key(spec: tuple) -> tuple:
    """The NumPy key of a spec; the trailing Ellipsis keeps an all-int key a 0-d view."""
    return tuple(slice(*it) if type(it) is tuple else it for it in spec) + (Ellipsis,)


def _basic_meta(x, *, spec: tuple) -> tuple:  # noqa: ANN001
    shape = tuple(x.shape)
    used = len(spec) - spec.count(None)
    if used > len(shape):
        raise EmberIndexError(f"[basic_index] spec consumes {used} dims of a "
                              f"{len(shape)}-d tensor")
    return basic_shape(shape, spec), x.dtype


def _basic_vjp(ctx, g):  # noqa: ANN001
    return (bind(BASIC_INDEX_BACKWARD, g, shape=ctx.input_shapes[0], spec=ctx.params["spec"]),)


def _basic_eager(x: np.ndarray, *, spec: tuple) -> np.ndarray:
    v = x[np_basic_key(spec)]
    if None not in spec or v.size == 0:
        return v
    # NumPy gives an inserted axis stride 0; PyTorch gives it size*stride of the next dim (1 at
    # the end), as unsqueeze does.  Rebuild the view with those strides over the same memory.
    from ember.ops.shape import strided_view
    item = v.itemsize
    strides = [s // item for s in v.strides]
    # PyTorch applies the index left to right, so an inserted axis takes the (not yet sliced)
    # size*stride of the input dim that follows it
    out_dim = 0
    in_dim = 0
    for it in spec:
        if it is None:
            strides[out_dim] = (x.shape[in_dim] * (x.strides[in_dim] // item)
                                if in_dim < x.ndim else 1)
            out_dim += 1
        elif type(it) is tuple:
            out_dim += 1
            in_dim += 1
        else:
            in_dim += 1
    offset = (v.__array_interface__["data"][0] - x.__array_interface__["data"][0]) // item
    return strided_view(x, v.shape, tuple(strides), offset)


BASIC_INDEX = register(OpDef(
    "basic_index", "view", _basic_meta, _basic_eager, _basic_vjp,
    doc="x[ints, slices, None] as a view.", grad_name="SliceBackward0",
))


def _basic_backward_meta(g, *, shape: tuple, spec: tuple) -> tuple:  # noqa: ANN001
    expect = basic_shape(tuple(shape), spec)
    if tuple(g.shape) != expect:
        raise ShapeError(f"[basic_index_backward] grad of shape {tuple(g.shape)}; expected "
                         f"{expect}")
    return tuple(shape), g.dtype


def _basic_backward_eager(g: np.ndarray, *, shape: tuple, spec: tuple) -> np.ndarray:
    out = np.zeros(shape, dtype=g.dtype)
    out[np_basic_key(spec)] = g
    return out


BASIC_INDEX_BACKWARD = register(OpDef(
    "basic_index_backward", "index", _basic_backward_meta, _basic_backward_eager,
    lambda ctx, g: (bind(BASIC_INDEX, g, spec=ctx.params["spec"]),),
    doc="Zeros of ``shape`` with ``g`` written at ``spec`` (the grad of basic_index).",
))


# ---------------------------------------------------------------------------------- advanced
def _check_index_tensor(op: str, index: Any) -> None:
    if index.dtype is not dt.int64:
        raise DTypeError(f"[{op}] index must be int64 (the frontend converts); got "
                         f"{index.dtype.name}")


def index_shape(shape: tuple, ishape: tuple, dims: tuple) -> tuple:
    """Shape of advanced indexing ``shape`` at ``dims`` with a stacked index of ``ishape``."""
    bshape = tuple(ishape[1:])
    rest = [n for i, n in enumerate(shape) if i not in dims]
    if not dims:
        return tuple(shape)
    adjacent = tuple(dims) == tuple(range(dims[0], dims[0] + len(dims)))
    if adjacent:
        first = sum(1 for i in range(dims[0]) if i not in dims)
        return tuple(rest[:first]) + bshape + tuple(rest[first:])
    return bshape + tuple(rest)


def _index_meta(x, index, *, dims: tuple) -> tuple:  # noqa: ANN001
    _check_index_tensor("index", index)
    if len(index.shape) == 0 or index.shape[0] != len(dims):
        raise ShapeError(f"[index] index of shape {tuple(index.shape)} for dims {dims}; expected "
                         f"a leading dim of {len(dims)}")
    if any(not 0 <= d < len(x.shape) for d in dims) or list(dims) != sorted(set(dims)):
        raise EmberIndexError(f"[index] dims {dims} must be increasing dims of a "
                              f"{len(x.shape)}-d tensor")
    return index_shape(tuple(x.shape), tuple(index.shape), dims), x.dtype


def check_bounds(op: str, index: np.ndarray, size: int, dim: int,
                 cls: type = EmberIndexError, negative: bool = True) -> None:
    """PyTorch's out-of-range error for an int index array along a dim of ``size``;
    ``negative``: whether negative indices count from the end (gather/scatter refuse them)."""
    if index.size == 0:
        return
    lo, hi = index.min(), index.max()
    if lo < (-size if negative else 0) or hi >= size:
        bad = hi if hi >= size else lo
        raise cls(f"[{op}] index {int(bad)} is out of bounds for dimension {dim} with size {size}")


def adv_key(shape: tuple, index: np.ndarray, dims: tuple, op: str) -> tuple:
    """The NumPy key for ``index``/``index_put`` after checking bounds."""
    key: list = [slice(None)] * len(shape)
    for j, d in enumerate(dims):
        # PyTorch reports the rank of the dim among the indexed dims
        check_bounds(op, index[j], shape[d], j)
        key[d] = index[j]
    return tuple(key)


def _index_eager(x: np.ndarray, index: np.ndarray, *, dims: tuple) -> np.ndarray:
    return x[adv_key(x.shape, index, dims, "index")]  # advanced indexing always copies


def _index_vjp(ctx, g):  # noqa: ANN001
    x_shape = ctx.input_shapes[0]
    zeros = g.new_zeros(x_shape)
    return (bind(INDEX_PUT, zeros, ctx.inputs[1], g, dims=ctx.params["dims"], accumulate=True),
            None)


INDEX = register(OpDef(
    "index", "index", _index_meta, _index_eager, _index_vjp, save=(1,),
    doc="Advanced (integer array) indexing; a copy.",
))


def _index_put_meta(x, index, values, *, dims: tuple, accumulate: bool) -> tuple:  # noqa: ANN001
    shape, _ = _index_meta(x, index, dims=dims)
    if tuple(values.shape) != shape:
        raise ShapeError(f"[index_put] values of shape {tuple(values.shape)}; expected the "
                         f"indexing result shape {shape}")
    if values.dtype is not x.dtype:
        raise DTypeError(f"[index_put] values dtype {values.dtype.name} differs from "
                         f"{x.dtype.name}")
    return tuple(x.shape), x.dtype


def _index_put_eager(x: np.ndarray, index: np.ndarray, values: np.ndarray, *, dims: tuple,
                     accumulate: bool) -> np.ndarray:
    out = np.array(x, copy=True, order="C")
    key = adv_key(x.shape, index, dims, "index_put")
    if accumulate:
        np.add.at(out, key, values)  # duplicates accumulate
    else:
        out[key] = values
    return out


def _index_put_vjp(ctx, g):  # noqa: ANN001
    p = ctx.params
    index = ctx.inputs[1]
    nx, _, nv = ctx.needs_input_grad
    gx = gv = None
    if nx:
        gx = g if p["accumulate"] else bind(
            INDEX_PUT, g, index, g.new_zeros(ctx.input_shapes[2]), dims=p["dims"],
            accumulate=False)
    if nv:
        gv = bind(INDEX, g, index, dims=p["dims"])
    return (gx, None, gv)


INDEX_PUT = register(OpDef(
    "index_put", "index", _index_put_meta, _index_put_eager, _index_put_vjp, save=(1,),
    doc="x with ``values`` written (or added) at an advanced index; a copy.",
))


# ---------------------------------------------------------------------------------- gather
def _check_dim_index(op: str, x: Any, index: Any, dim: int, src: Any = None) -> None:
    _check_index_tensor(op, index)
    xs, ishape = tuple(x.shape), tuple(index.shape)
    if max(len(ishape), 1) != max(len(xs), 1):
        raise ShapeError(f"[{op}] Index tensor must have the same number of dimensions as "
                         f"input tensor")
    if src is not None and max(len(src.shape), 1) != max(len(ishape), 1):
        raise ShapeError(f"[{op}] Index tensor must have the same number of dimensions as src "
                         f"tensor")
    for d, n in enumerate(ishape):
        too_big = d != dim and d < len(xs) and n > xs[d]
        if src is not None and d < len(src.shape):
            too_big = too_big or n > src.shape[d]
        if too_big:
            extra = (f" and to be no larger size than src {list(src.shape)}"
                     if src is not None else "")
            raise ShapeError(f"[{op}] Size does not match at dimension {d} expected index "
                             f"{list(ishape)} to be no larger than self {list(xs)} apart from "
                             f"dimension {dim}{extra}")


def dim_key(op: str, shape: tuple, index: np.ndarray, dim: int) -> tuple:
    """A NumPy key addressing ``x[..., index[i], ...]`` along ``dim`` (gather/scatter)."""
    if index.ndim == 0:
        index = index.reshape(1)
    size = shape[dim] if shape else 1
    check_bounds(op, index, size, dim, EmberRuntimeError, negative=False)
    key = list(np.indices(index.shape, sparse=True))
    key[dim] = index
    return tuple(key)


def _gather_meta(x, index, *, dim: int) -> tuple:  # noqa: ANN001
    _check_dim_index("gather", x, index, dim)
    return tuple(index.shape), x.dtype


def _gather_eager(x: np.ndarray, index: np.ndarray, *, dim: int) -> np.ndarray:
    xx = x.reshape(1) if x.ndim == 0 else x
    return xx[dim_key("gather", xx.shape, index, dim)].reshape(index.shape)


def _gather_vjp(ctx, g):  # noqa: ANN001
    zeros = g.new_zeros(ctx.input_shapes[0])
    return (bind(SCATTER_ADD, zeros, ctx.inputs[1], g, dim=ctx.params["dim"]), None)


GATHER = register(OpDef(
    "gather", "index", _gather_meta, _gather_eager, _gather_vjp, save=(1,),
    doc="out[i][j] = x[i][index[i][j]] (for dim=1).",
))


def _scatter_meta(x, index, src, *, dim: int) -> tuple:  # noqa: ANN001
    is_tensor = hasattr(src, "shape")
    _check_dim_index("scatter", x, index, dim, src if is_tensor else None)
    if is_tensor and src.dtype is not x.dtype:
        raise DTypeError("[scatter] Expected self.dtype to be equal to src.dtype")
    return tuple(x.shape), x.dtype


def _src_part(src: Any, index: np.ndarray) -> Any:
    if not isinstance(src, np.ndarray):
        return src
    if src.ndim == 0:
        return src.reshape(1)[:1] if index.ndim else src
    return src[tuple(slice(0, n) for n in index.shape)]


def _scatter_eager(x: np.ndarray, index: np.ndarray, src: Any, *, dim: int) -> np.ndarray:
    out = np.array(x, copy=True, order="C")
    view = out.reshape(1) if out.ndim == 0 else out
    key = dim_key("scatter", view.shape, index, dim)
    part = _src_part(src, index)
    view[key] = part.reshape(index.shape) if isinstance(part, np.ndarray) else part
    return out


def _scatter_vjp(ctx, g):  # noqa: ANN001
    index = ctx.inputs[1]
    dim = ctx.params["dim"]
    nx, _, ns = ctx.needs_input_grad
    gx = bind(SCATTER, g, index, 0.0, dim=dim) if nx else None
    gs = None
    if ns:
        gs = bind(GATHER, g, index, dim=dim)
        src_shape = ctx.input_shapes[2]
        if tuple(src_shape) != tuple(gs.shape):
            gs = _pad_to(gs, src_shape)
    return (gx, None, gs)


def _pad_to(g: Any, shape: tuple) -> Any:
    """``g`` placed in the leading corner of zeros of ``shape`` (src larger than index)."""
    spec = tuple((0, n, 1) for n in g.shape)
    return bind(BASIC_INDEX_BACKWARD, g, shape=tuple(shape), spec=spec)


SCATTER = register(OpDef(
    "scatter", "index", _scatter_meta, _scatter_eager, _scatter_vjp, save=(1,),
    doc="x with out[i][index[i][j]] = src[i][j] (for dim=1); src may be a scalar.",
))


def _scatter_add_meta(x, index, src, *, dim: int) -> tuple:  # noqa: ANN001
    _check_dim_index("scatter_add", x, index, dim, src)
    if src.dtype is not x.dtype:
        raise DTypeError("[scatter_add] Expected self.dtype to be equal to src.dtype")
    return tuple(x.shape), x.dtype


def _scatter_add_eager(x: np.ndarray, index: np.ndarray, src: np.ndarray, *,
                       dim: int) -> np.ndarray:
    out = np.array(x, copy=True, order="C")
    view = out.reshape(1) if out.ndim == 0 else out
    key = dim_key("scatter_add", view.shape, index, dim)
    np.add.at(view, key, _src_part(src, index).reshape(index.shape))  # duplicates accumulate
    return out


def _scatter_add_vjp(ctx, g):  # noqa: ANN001
    gs = None
    if ctx.needs_input_grad[2]:
        gs = _maybe_pad(bind(GATHER, g, ctx.inputs[1], dim=ctx.params["dim"]),
                        ctx.input_shapes[2])
    return (g if ctx.needs_input_grad[0] else None, None, gs)


SCATTER_ADD = register(OpDef(
    "scatter_add", "index", _scatter_add_meta, _scatter_add_eager, _scatter_add_vjp,
    save=(1,), doc="x with src added at index along dim (duplicates accumulate).",
))


SCATTER_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _scatter_reduce_meta(x, index, src, *, dim: int, reduce: str,  # noqa: ANN001
                         include_self: bool) -> tuple:
    if reduce not in SCATTER_REDUCES:
        raise EmberRuntimeError(f"[scatter_reduce] reduce argument must be either sum, prod, "
                                f"mean, amax or amin, got {reduce}")
    _check_dim_index("scatter_reduce", x, index, dim, src)
    if src.dtype is not x.dtype:
        raise DTypeError("[scatter_reduce] Expected self.dtype to be equal to src.dtype")
    return tuple(x.shape), x.dtype


_UFUNC = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum,
          "amin": np.minimum}


def _identity(reduce: str, dtype: np.dtype) -> Any:
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "b":
        return reduce == "amin"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if reduce == "amax" else info.max
    return -np.inf if reduce == "amax" else np.inf


def _scatter_reduce_eager(x: np.ndarray, index: np.ndarray, src: np.ndarray, *, dim: int,
                          reduce: str, include_self: bool) -> np.ndarray:
    out = np.array(x, copy=True, order="C")
    view = out.reshape(1) if out.ndim == 0 else out
    key = dim_key("scatter_reduce", view.shape, index, dim)
    part = _src_part(src, index).reshape(index.shape)
    if not include_self:
        view[key] = _identity(reduce, view.dtype)
    _UFUNC[reduce].at(view, key, part)
    if reduce == "mean":
        count = np.full(view.shape, 1 if include_self else 0, dtype=np.int64)
        np.add.at(count, key, 1)
        if not include_self:
            hit = count > 0
            view[~hit] = np.asarray(x).reshape(view.shape)[~hit]
        count = np.maximum(count, 1)
        if view.dtype.kind in "iu":
            view[...] = np.floor_divide(view, count.astype(view.dtype))
        else:
            view[...] = view / count.astype(view.dtype)
    return out


def _scatter_reduce_vjp(ctx, g):  # noqa: ANN001
    x, index, src = ctx.inputs
    p = ctx.params
    dim, reduce, include_self = p["dim"], p["reduce"], p["include_self"]
    nx, _, ns = ctx.needs_input_grad
    if reduce == "sum":
        gx, gsrc_full = g, g
    elif reduce == "mean":
        n = _hit_count(g, index, ctx.input_shapes[2], dim, include_self)
        gx = gsrc_full = g / n
    else:
        gx, _, gsrc = _select_reduce_grads(ctx, g, x, index, src)
        return (gx if nx else None, None, gsrc if ns else None)
    if nx and not include_self:
        gx = bind(SCATTER, gx, index, 0.0, dim=dim)
    gs = None
    if ns:
        gs = bind(GATHER, gsrc_full, index, dim=dim)
        if tuple(ctx.input_shapes[2]) != tuple(gs.shape):
            gs = _pad_to(gs, ctx.input_shapes[2])
    return (gx if nx else None, None, gs)


def _hit_count(g: Any, index: Any, src_shape: tuple, dim: int, include_self: bool) -> Any:
    """How many values were averaged at each position (1 where none was scattered)."""
    ones = g.new_ones(tuple(index.shape))
    hits = bind(SCATTER_ADD, g.new_zeros(tuple(g.shape)), index, ones, dim=dim)
    if include_self:
        return hits + 1
    # positions never scattered to keep count 1
    return hits + bind(SCATTER, g.new_ones(tuple(g.shape)), index, 0.0, dim=dim)


def _select_reduce_grads(ctx, g, x, index, src):  # noqa: ANN001, ANN202
    """prod/amax/amin grads (PyTorch's formulas).  prod divides by the inputs, so zeros in
    them give non-finite grads where PyTorch special-cases them; amax/amin split the grad
    evenly between ties, which needs elementwise ``eq``."""
    p = ctx.params
    dim, reduce, include_self = p["dim"], p["reduce"], p["include_self"]
    result = bind(SCATTER_REDUCE, x.detach(), index, src.detach(), **p)
    srcp = src if tuple(src.shape) == tuple(index.shape) else bind(
        BASIC_INDEX, src, spec=tuple((0, n, 1) for n in index.shape))
    if reduce == "prod":
        gr = g * result
        gx = gr / x
        if not include_self:
            gx = bind(SCATTER, gx, index, 0.0, dim=dim)
        gsrc = bind(GATHER, gr, index, dim=dim) / srcp
        return gx, None, _maybe_pad(gsrc, src.shape)
    if not hasattr(g, "eq"):
        from ember.errors import EmberNotImplementedError
        raise EmberNotImplementedError(
            f"[scatter_reduce] the gradient of reduce={reduce!r} needs the elementwise eq op, "
            "which this build lacks")
    value = bind(GATHER, result, index, dim=dim)
    self_is = x.eq(result).to(g.dtype)
    src_is = srcp.eq(value).to(g.dtype)
    # PyTorch counts ties with self even when include_self=False (then zeroes self's grad)
    n = bind(SCATTER_ADD, self_is, index, src_is, dim=dim)
    dist = g / n
    gx = self_is * dist
    if not include_self:
        gx = bind(SCATTER, gx, index, 0.0, dim=dim)
    gsrc = src_is * bind(GATHER, dist, index, dim=dim)
    return gx, None, _maybe_pad(gsrc, src.shape)


def _maybe_pad(g: Any, shape: Any) -> Any:
    return g if tuple(g.shape) == tuple(shape) else _pad_to(g, tuple(shape))


SCATTER_REDUCE = register(OpDef(
    "scatter_reduce", "index", _scatter_reduce_meta, _scatter_reduce_eager,
    _scatter_reduce_vjp, save=(0, 1, 2),
    doc="x with src values reduced (sum/prod/mean/amax/amin) into positions along dim.",
))


# ---------------------------------------------------------------------------------- masks
def _masked_fill_meta(x, mask, value) -> tuple:  # noqa: ANN001
    if mask.dtype is not dt.bool:
        raise DTypeError(f"[masked_fill] mask must be bool; got {mask.dtype.name}")
    if tuple(mask.shape) != tuple(x.shape):
        raise ShapeError(f"[masked_fill] mask shape {tuple(mask.shape)} differs from input "
                         f"shape {tuple(x.shape)} (the frontend broadcasts)")
    if hasattr(value, "shape"):
        if len(value.shape) != 0 or value.dtype is not x.dtype:
            raise ShapeError("[masked_fill] value must be a 0-d tensor of the input's dtype")
    return tuple(x.shape), x.dtype


def _masked_fill_eager(x: np.ndarray, mask: np.ndarray, value: Any) -> np.ndarray:
    out = np.array(x, copy=True, order="C")
    out[mask] = value
    return out


def _masked_fill_vjp(ctx, g):  # noqa: ANN001
    mask = ctx.inputs[1]
    nx, _, nv = ctx.needs_input_grad
    gx = bind(MASKED_FILL, g, mask, 0.0) if nx else None
    gv = None
    if nv:
        nz = bind(NONZERO, mask)
        gv = bind(INDEX, g, nz.permute(1, 0), dims=tuple(range(len(mask.shape)))).sum()
    return (gx, None, gv)


MASKED_FILL = register(OpDef(
    "masked_fill", "index", _masked_fill_meta, _masked_fill_eager, _masked_fill_vjp, save=(1,),
    doc="x with ``value`` where ``mask`` is True.",
))


def _nonzero_meta(x) -> tuple:  # noqa: ANN001
    # the row count depends on the values: unknown (None) in eager, an unbacked SymInt when the
    # input's shape is symbolic (data_dependent)
    return (unbacked_size(x.shape), len(x.shape)), dt.int64


def _nonzero_eager(x: np.ndarray) -> np.ndarray:
    return np.argwhere(x != 0) if x.dtype.kind != "b" else np.argwhere(x)


NONZERO = register(OpDef(
    "nonzero", "index", _nonzero_meta, _nonzero_eager,
    tags=frozenset({"nondifferentiable", "data_dependent"}),
    doc="Indices of the non-zero elements, shape (n, ndim), int64.",
))

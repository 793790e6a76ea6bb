"""Movement primitives: ops that copy data into a new layout (cat, flip, roll, repeat) and the
scatters that carry gradients of views back to their input's geometry."""

from __future__ import annotations

import numpy as np

from ember.errors import DTypeError, ShapeError
from ember.ops import shape as S
from ember.ops._util import lowp
from ember.ops.registry import OpDef, bind, register


def _c(a: np.ndarray) -> np.ndarray:
    """``a`` in C order (``np.ascontiguousarray`` would turn 0-d into 1-d)."""
    return a if a.flags.c_contiguous else np.array(a, order="C")


# ---------------------------------------------------------------------------------- cat
def _cat_meta(*xs, dim: int) -> tuple:  # noqa: ANN002
    first = xs[0]
    ref = tuple(first.shape)
    for i, x in enumerate(xs):
        if x.dtype is not first.dtype:
            raise DTypeError(f"[cat] primitive inputs must share a dtype; got {first.dtype.name} "
                             f"and {x.dtype.name}")
        s = tuple(x.shape)
        if len(s) != len(ref):
            raise ShapeError(f"[cat] Tensors must have same number of dimensions: got "
                             f"{len(ref)} and {len(s)}")
        for d, (a, b) in enumerate(zip(ref, s)):
            if d != dim and a != b:
                raise ShapeError(
                    f"[cat] Sizes of tensors must match except in dimension {dim}. Expected "
                    f"size {a} but got size {b} for tensor number {i} in the list; shapes "
                    f"{[tuple(t.shape) for t in xs]}")
    out = list(ref)
    out[dim] = sum(x.shape[dim] for x in xs)
    return tuple(out), first.dtype


def _cat_vjp(ctx, g):  # noqa: ANN001
    dim = ctx.params["dim"]
    grads, off = [], 0
    for shape, need in zip(ctx.input_shapes, ctx.needs_input_grad):
        n = shape[dim]
        grads.append(bind(S.NARROW, g, dim=dim, start=off, length=n) if need else None)
        off += n
    return tuple(grads)


CAT = register(OpDef(
    "cat", "movement", _cat_meta,
    lambda *xs, dim: _c(np.concatenate(xs, axis=dim)), _cat_vjp,
))


# ---------------------------------------------------------------------------------- flip/roll
def _same(x, **params) -> tuple:  # noqa: ANN001, ANN003
    return tuple(x.shape), x.dtype


FLIP = register(OpDef(
    "flip", "movement", _same,
    lambda x, *, dims: np.array(np.flip(x, dims), copy=True, order="K"),  # torch keeps layout
    lambda ctx, g: (bind(FLIP, g, dims=ctx.params["dims"]),),
))


def _roll_vjp(ctx, g):  # noqa: ANN001
    p = ctx.params
    return (bind(ROLL, g, shifts=tuple(-s for s in p["shifts"]), dims=p["dims"]),)


ROLL = register(OpDef(
    "roll", "movement", _same,
    lambda x, *, shifts, dims: _c(np.roll(x, shifts, axis=dims)), _roll_vjp,
))


# ---------------------------------------------------------------------------------- repeat
def _repeat_meta(x, *, repeats: tuple) -> tuple:  # noqa: ANN001
    if len(repeats) != len(x.shape):
        raise ShapeError(f"[repeat] primitive needs one repeat per dim; got {list(repeats)} "
                         f"for shape {tuple(x.shape)}")
    if any(r < 0 for r in repeats):
        raise ShapeError(f"[repeat] Trying to create tensor with negative dimension; repeats "
                         f"{list(repeats)}")
    return tuple(n * r for n, r in zip(x.shape, repeats)), x.dtype


def _repeat_vjp(ctx, g):  # noqa: ANN001
    reps = ctx.params["repeats"]
    shape = ctx.input_shapes[0]
    if not reps:
        return (g,)
    split = []
    for r, n in zip(reps, shape):
        split += [r, n]
    gs = g.reshape(split).sum(tuple(range(0, 2 * len(reps), 2)))
    return (gs,)


REPEAT = register(OpDef(
    "repeat", "movement", _repeat_meta, lambda x, *, repeats: _c(np.tile(x, repeats)),
    _repeat_vjp,
))


# ---------------------------------------------------------------------------------- view grads
def _shape_meta(g, *, shape: tuple, **params) -> tuple:  # noqa: ANN001, ANN003
    return tuple(shape), g.dtype


def _narrow_backward(g: np.ndarray, *, shape: tuple, dim: int, start: int) -> np.ndarray:
    out = np.zeros(shape, g.dtype)
    out[(slice(None),) * dim + (slice(start, start + g.shape[dim]),)] = g
    return out


NARROW_BACKWARD = register(OpDef(
    "narrow_backward", "movement", _shape_meta, _narrow_backward,
    lambda ctx, h: (bind(S.NARROW, h, dim=ctx.params["dim"], start=ctx.params["start"],
                         length=ctx.input_shapes[0][ctx.params["dim"]]),),
))


def _select_backward(g: np.ndarray, *, shape: tuple, dim: int, index: int) -> np.ndarray:
    out = np.zeros(shape, g.dtype)
    out[(slice(None),) * dim + (index, Ellipsis)] = g
    return out


SELECT_BACKWARD = register(OpDef(
    "select_backward", "movement", _shape_meta, _select_backward,
    lambda ctx, h: (bind(S.SELECT, h, dim=ctx.params["dim"], index=ctx.params["index"]),),
))


@lowp
def _unfold_backward(g: np.ndarray, *, shape: tuple, dim: int, size: int,
                     step: int) -> np.ndarray:
    if not shape:  # a 0-d input unfolds like a 1-element 1-d one
        return np.asarray(g.sum(), dtype=g.dtype).reshape(())
    out = np.zeros(shape, g.dtype)
    nw = g.shape[dim]
    for k in range(size):  # one strided add per window offset (size is small)
        out[(slice(None),) * dim + (slice(k, k + step * (nw - 1) + 1, step),)] += g[..., k]
    return out


UNFOLD_BACKWARD = register(OpDef(
    "unfold_backward", "movement", _shape_meta, _unfold_backward,
    lambda ctx, h: (bind(S.UNFOLD, h, dim=ctx.params["dim"], size=ctx.params["size"],
                         step=ctx.params["step"]),),
))


def _diagonal_backward(g: np.ndarray, *, shape: tuple, offset: int, dim1: int,
                       dim2: int) -> np.ndarray:
    out = np.zeros(shape, g.dtype)
    S.DIAGONAL.eager(out, offset=offset, dim1=dim1, dim2=dim2)[...] = g
    return out


DIAGONAL_BACKWARD = register(OpDef(
    "diagonal_backward", "movement", _shape_meta, _diagonal_backward,
    lambda ctx, h: (bind(S.DIAGONAL, h, offset=ctx.params["offset"], dim1=ctx.params["dim1"],
                         dim2=ctx.params["dim2"]),),
))


# ---------------------------------------------------------------------------------- as_strided
def _positions(geom: tuple) -> np.ndarray:
    """Storage position of every element of a (shape, strides, offset) geometry."""
    shape, strides, offset = geom
    pos = np.full(shape, offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        idx = np.arange(n, dtype=np.int64) * s
        pos = pos + idx.reshape((n,) + (1,) * (len(shape) - d - 1))
    return pos


def _as_strided_backward_meta(g, *, src: tuple, dst: tuple) -> tuple:  # noqa: ANN001
    if tuple(g.shape) != tuple(src[0]):
        raise ShapeError(f"[as_strided_backward] grad shape {tuple(g.shape)} != {src[0]}")
    return tuple(dst[0]), g.dtype


@lowp
def _as_strided_backward(g: np.ndarray, *, src: tuple, dst: tuple) -> np.ndarray:
    """Sum ``g`` (laid out by geometry ``src``) into storage, then read geometry ``dst``."""
    ps, pd = _positions(src), _positions(dst)
    n = 1 + max(int(ps.max()) if ps.size else 0, int(pd.max()) if pd.size else 0)
    acc = np.zeros(n, g.dtype)
    np.add.at(acc, ps.reshape(-1), g.reshape(-1))
    return acc[pd]


def _dense(geom: tuple) -> bool:
    """A (shape, strides, offset) geometry that walks its storage positions in C order without
    gaps (size-1 dims' strides do not matter)."""
    shape, strides, _ = geom
    step = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != step:
            return False
        step *= n
    return True


def _as_strided_backward_decomp(g, *, src: tuple, dst: tuple):  # noqa: ANN001, ANN202
    """When both geometries are dense over the same positions in the same order (an in-place
    op on a reshaped view of a contiguous result: group norm's output, then ReLU(inplace)),
    the scatter and gather are a reshape; otherwise None (the op stays as it is)."""
    if src[2] == dst[2] and _dense(src) and _dense(dst) and \
            int(np.prod(src[0])) == int(np.prod(dst[0])):
        return g.reshape(tuple(dst[0]))
    return None


AS_STRIDED_BACKWARD = register(OpDef(
    "as_strided_backward", "movement", _as_strided_backward_meta, _as_strided_backward,
    # a linear map whose transpose swaps the two geometries
    lambda ctx, h: (bind(AS_STRIDED_BACKWARD, h, src=ctx.params["dst"],
                         dst=ctx.params["src"]),),
    decomp=_as_strided_backward_decomp,
))

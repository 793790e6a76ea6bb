"""View and movement primitives.  View ops (kind ``view``) return NumPy views, so outputs share
memory and the version counter with their input."""

from __future__ import annotations

import numpy as np

from ember.errors import ShapeError
from ember.ops.registry import OpDef, register


# ---------------------------------------------------------------------------------- view
def _view_meta(x, *, shape: tuple) -> tuple:  # noqa: ANN001
    n = 1
    for s in shape:
        n *= s
    m = 1
    for s in x.shape:
        m *= s
    if n != m:
        raise ShapeError(f"[view] shape '{list(shape)}' is invalid for input of size {m}")
    return tuple(shape), x.dtype


def _view_eager(x: np.ndarray, *, shape: tuple) -> np.ndarray:
    v = x.view()
    try:
        v.shape = shape
    except AttributeError:
        raise ShapeError(
            "[view] view size is not compatible with input tensor's size and stride (at least "
            "one dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        ) from None
    return v


VIEW = register(OpDef(
    "view", "view", _view_meta, _view_eager,
    lambda ctx, g: (g.reshape(ctx.input_shapes[0]),),
))


def _expand_meta(x, *, shape: tuple) -> tuple:  # noqa: ANN001
    xs = tuple(x.shape)
    if len(shape) < len(xs):
        raise ShapeError(
            f"[expand] the number of sizes provided ({len(shape)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({len(xs)})"
        )
    lead = len(shape) - len(xs)
    for i, n in enumerate(xs):
        if n != 1 and n != shape[lead + i]:
            raise ShapeError(
                f"[expand] The expanded size of the tensor ({shape[lead + i]}) must match the "
                f"existing size ({n}) at non-singleton dimension {lead + i}.  Target sizes: "
                f"{list(shape)}.  Tensor sizes: {list(xs)}"
            )
    return tuple(shape), x.dtype


def _expand_vjp(ctx, g):  # noqa: ANN001
    return (g.sum_to_size(ctx.input_shapes[0]),)


EXPAND = register(OpDef(
    "expand", "view", _expand_meta,
    lambda x, *, shape: np.broadcast_to(x, shape), _expand_vjp,
))


def _permute_meta(x, *, dims: tuple) -> tuple:  # noqa: ANN001
    if sorted(dims) != list(range(len(x.shape))):
        raise ShapeError(f"[permute] dims {list(dims)} are not a permutation of "
                         f"{len(x.shape)} dimensions")
    return tuple(x.shape[d] for d in dims), x.dtype


def _permute_vjp(ctx, g):  # noqa: ANN001
    inv = [0] * len(ctx.params["dims"])
    for i, d in enumerate(ctx.params["dims"]):
        inv[d] = i
    return (g.permute(inv),)


PERMUTE = register(OpDef(
    "permute", "view", _permute_meta, lambda x, *, dims: np.transpose(x, dims), _permute_vjp,
))


# ---------------------------------------------------------------------------------- movement
CLONE = register(OpDef(
    "clone", "movement", lambda x: (tuple(x.shape), x.dtype),
    lambda x: np.array(x, copy=True, order="C"), lambda ctx, g: (g,),
))

"""Reduction primitives.  ``dims`` is a tuple of non-negative dims (the frontend normalizes),
``keepdim`` a bool; output dtypes are decided by the frontend (e.g. integer sums cast to int64
before binding)."""

from __future__ import annotations

import numpy as np

from ember.ops._util import lowp
from ember.ops.registry import OpDef, register


def reduced_shape(shape: tuple, dims: tuple, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _reduce_meta(x, *, dims: tuple, keepdim: bool) -> tuple:  # noqa: ANN001
    return reduced_shape(tuple(x.shape), dims, keepdim), x.dtype


def expand_reduced(g, shape: tuple, dims: tuple, keepdim: bool):  # noqa: ANN001, ANN201
    """Broadcast a reduced gradient back to ``shape``."""
    if not keepdim:
        g = g.reshape(reduced_shape(shape, dims, True))
    return g.expand(shape)


def _sum_eager(x: np.ndarray, *, dims: tuple, keepdim: bool) -> np.ndarray:
    return np.sum(x, axis=dims, keepdims=keepdim, dtype=x.dtype)


def _sum_vjp(ctx, g):  # noqa: ANN001
    p = ctx.params
    return (expand_reduced(g, ctx.input_shapes[0], p["dims"], p["keepdim"]),)


SUM = register(OpDef("sum", "reduction", _reduce_meta, lowp(_sum_eager), _sum_vjp))

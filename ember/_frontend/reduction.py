"""Reduction frontend: dim normalization, dtype rules and defaults."""

from __future__ import annotations

from typing import Any, Sequence

from ember import dtypes as dt
from ember._frontend.core import check_tensor, to_dtype
from ember.ops import reduction as R
from ember.ops._util import wrap_dim
from ember.ops.registry import bind
from ember.tensor import Tensor, tensor_method

__all__ = ["sum"]


def norm_dims(dim: Any, ndim: int, op: str) -> tuple:
    """``dim`` (None, int or sequence) as a sorted tuple of non-negative dims; None = all."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    dims = tuple(sorted({wrap_dim(int(d), ndim, op) for d in dim}))
    if ndim == 0:
        return ()
    return dims


def _dims_or_all(dim: Any, ndim: int, op: str) -> tuple:
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(ndim))
    return norm_dims(dim, ndim, op)


@tensor_method("sum")
def sum(input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False, *,
        dtype: dt.dtype | None = None) -> Tensor:
    """Sum over ``dim`` (all dims if None); bool and integer inputs sum in int64."""
    check_tensor(input, "sum")
    if dtype is not None:
        input = to_dtype(input, dtype)
    elif not input._dtype.is_floating_point:
        input = to_dtype(input, dt.int64)
    dims = _dims_or_all(dim, input.ndim, "sum")
    return bind(R.SUM, input, dims=dims, keepdim=bool(keepdim))

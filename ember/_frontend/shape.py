"""View/movement frontend: argument parsing for view, reshape, expand, permute, ..."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember._frontend.core import check_tensor
from ember.errors import ShapeError
from ember.ops import shape as S
from ember.ops._util import wrap_dim
from ember.ops.registry import bind
from ember.tensor import Tensor, tensor_method

__all__ = ["clone", "contiguous", "expand", "expand_as", "permute", "reshape", "sum_to_size", "view"]


def size_args(args: tuple, op: str) -> tuple:
    """Accept ``f(2, 3)``, ``f((2, 3))`` and ``f([2, 3])``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    try:
        return tuple(int(a) for a in args)
    except TypeError:
        raise ShapeError(f"[{op}] expected a sequence of ints for the shape, got {args!r}") from None


def infer_shape(shape: tuple, numel: int, op: str) -> tuple:
    """Resolve one ``-1`` in ``shape``."""
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise ShapeError(f"[{op}] only one dimension can be inferred")
    if any(s < -1 for s in shape):
        raise ShapeError(f"[{op}] invalid shape dimension {min(shape)}")
    if neg:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        if known == 0 or numel % known:
            raise ShapeError(f"[{op}] shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    return shape


@tensor_method("view")
def view(input: Tensor, *shape: Any) -> Tensor:
    """A view with a new shape (no copy); fails if the strides do not allow it."""
    from ember import dtypes as dt
    if len(shape) == 1 and isinstance(shape[0], dt.dtype):
        raise ShapeError("[view] viewing as another dtype is not supported")
    shp = infer_shape(size_args(shape, "view"), input.numel(), "view")
    return bind(S.VIEW, input, shape=shp)


def _viewable(a: np.ndarray, shape: tuple) -> bool:
    v = a.view()
    try:
        v.shape = shape
    except AttributeError:
        return False
    return True


@tensor_method("reshape")
def reshape(input: Tensor, *shape: Any) -> Tensor:
    """A view when the strides allow it, otherwise a copy."""
    check_tensor(input, "reshape")
    shp = infer_shape(size_args(shape, "reshape"), input.numel(), "reshape")
    if shp == input._data.shape:
        return bind(S.VIEW, input, shape=shp)
    if not _viewable(input._data, shp):
        input = bind(S.CLONE, input)
    return bind(S.VIEW, input, shape=shp)


@tensor_method("expand")
def expand(input: Tensor, *sizes: Any) -> Tensor:
    shape = size_args(sizes, "expand")
    lead = len(shape) - input.ndim
    shape = tuple(input.shape[i - lead] if s == -1 and i >= lead else s
                  for i, s in enumerate(shape))
    if any(s < 0 for s in shape):
        raise ShapeError(f"[expand] invalid size {list(shape)}: -1 is only allowed for "
                         f"existing dimensions")
    return bind(S.EXPAND, input, shape=shape)


@tensor_method("expand_as")
def expand_as(input: Tensor, other: Tensor) -> Tensor:
    return expand(input, tuple(other.shape))


@tensor_method("permute")
def permute(input: Tensor, *dims: Any) -> Tensor:
    d = size_args(dims, "permute")
    n = input.ndim
    if len(d) != n:
        raise ShapeError(f"[permute] number of dims don't match in permute: got {len(d)} dims "
                         f"for a {n}-d tensor")
    return bind(S.PERMUTE, input, dims=tuple(wrap_dim(x, n, "permute") for x in d))


@tensor_method("clone")
def clone(input: Tensor, *, memory_format: Any = None) -> Tensor:
    return bind(S.CLONE, input)


@tensor_method("contiguous")
def contiguous(input: Tensor, memory_format: Any = None) -> Tensor:
    if input.is_contiguous():
        return input
    return bind(S.CLONE, input)


@tensor_method("sum_to_size")
def sum_to_size(input: Tensor, *size: Any) -> Tensor:
    """Sum broadcast dims so the result has ``size`` (the inverse of ``expand``)."""
    shape = size_args(size, "sum_to_size")
    if tuple(input.shape) == shape:
        return input
    lead = input.ndim - len(shape)
    if lead < 0:
        raise ShapeError(f"[sum_to_size] size {list(shape)} is not expandable to size "
                         f"{list(input.shape)}")
    dims = list(range(lead))
    for i, n in enumerate(shape):
        if n == 1 and input.shape[lead + i] != 1:
            dims.append(lead + i)
        elif n != input.shape[lead + i]:
            raise ShapeError(f"[sum_to_size] size {list(shape)} is not expandable to size "
                             f"{list(input.shape)}")
    from ember._frontend.reduction import sum as _sum
    out = _sum(input, dims, keepdim=True) if dims else input
    return reshape(out, shape) if lead else out

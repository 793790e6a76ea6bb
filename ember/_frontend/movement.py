"""Movement frontend: cat/stack and friends, flip, roll, repeat/tile.  These copy data."""

from __future__ import annotations

from typing import Any, Sequence

from ember import dtypes as dt
from ember._frontend.autocast import autocast_op
from ember._frontend.core import check_tensor, to_dtype
from ember._frontend.shape import reshape, size_args, unsqueeze
from ember.errors import EmberTypeError, EmberValueError, ShapeError
from ember.ops import movement as M
from ember.ops._util import wrap_dim
from ember.ops.registry import bind
from ember.tensor import Tensor, tensor_method

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "cat", "column_stack", "concat",
           "concatenate", "dstack", "flip", "fliplr", "flipud", "hstack", "roll", "row_stack",
           "stack", "tile", "vstack"]


def _tensor_list(tensors: Any, op: str) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise EmberTypeError(f"[{op}] expected a sequence of Tensors, got "
                             f"{type(tensors).__name__}")
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise EmberTypeError(f"[{op}] expected Tensor as element {i} in argument 0, but got "
                                 f"{type(x).__name__}")
    return list(tensors)


@autocast_op("promote")
def cat(tensors: Sequence[Tensor], dim: int = 0, *, out: Any = None) -> Tensor:
    """Concatenate along ``dim``, promoting dtypes; 1-d empty tensors are skipped (legacy
    PyTorch behaviour)."""
    ts = _tensor_list(tensors, "cat")
    if not ts:
        raise EmberValueError("[cat] torch.cat(): expected a non-empty list of Tensors")
    for i, x in enumerate(ts):
        if x.ndim == 0:
            raise ShapeError(f"[cat] zero-dimensional tensor (at position {i}) cannot be "
                             f"concatenated")
    d0 = ts[0]._dtype
    dtype = d0
    for x in ts[1:]:
        if x._dtype is not dtype:
            dtype = dt.promote_types(dtype, x._dtype)
    ref = next((x for x in ts if x._data.shape != (0,)), ts[0])
    if ref.ndim != 1:
        ts = [x for x in ts if x._data.shape != (0,)] or [ref]
    d = wrap_dim(dim, ref.ndim, "cat")
    return _to_out(bind(M.CAT, *[to_dtype(x, dtype) for x in ts], dim=d), out, "cat")


def _to_out(result: Tensor, out: Tensor | None, op: str) -> Tensor:
    if out is None:
        return result
    if tuple(out.shape) != tuple(result.shape):
        raise ShapeError(f"[{op}] out= of shape {tuple(out.shape)} must have the result's shape "
                         f"{tuple(result.shape)} (resizing out is not supported)")
    return out.copy_(result)


concat = concatenate = cat


@autocast_op("promote")
def stack(tensors: Sequence[Tensor], dim: int = 0, *, out: Any = None) -> Tensor:
    """Join same-shaped tensors along a new dim ``dim``."""
    ts = _tensor_list(tensors, "stack")
    if not ts:
        raise ShapeError("[stack] stack expects a non-empty TensorList")
    s0 = ts[0]._data.shape
    for i, x in enumerate(ts[1:], 1):
        if x._data.shape != s0:
            raise ShapeError(f"[stack] stack expects each tensor to be equal size, but got "
                             f"{list(s0)} at entry 0 and {list(x.shape)} at entry {i}")
    d = wrap_dim(dim, len(s0) + 1, "stack")
    return cat([unsqueeze(x, d) for x in ts], d, out=out)


def atleast_1d(*tensors: Any) -> Any:
    return _atleast(tensors, 1)


def atleast_2d(*tensors: Any) -> Any:
    return _atleast(tensors, 2)


def atleast_3d(*tensors: Any) -> Any:
    return _atleast(tensors, 3)


def _atleast(tensors: tuple, n: int) -> Any:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(_atleast_one(x, n) for x in tensors[0])
    if len(tensors) == 1:
        return _atleast_one(tensors[0], n)
    return tuple(_atleast_one(x, n) for x in tensors)


def _atleast_one(x: Tensor, n: int) -> Tensor:
    check_tensor(x, f"atleast_{n}d")
    k = x.ndim
    if k >= n:
        return x
    if n == 1 or k == 0:
        return reshape(x, (1,) * n)
    if n == 2:  # k == 1
        return unsqueeze(x, 0)
    return unsqueeze(unsqueeze(x, 0), 2) if k == 1 else unsqueeze(x, 2)


def hstack(tensors: Sequence[Tensor], *, out: Any = None) -> Tensor:
    ts = _nonempty(tensors, "hstack")
    ts = [atleast_1d(x) for x in ts]
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor], *, out: Any = None) -> Tensor:
    return cat([atleast_2d(x) for x in _nonempty(tensors, "vstack")], 0)


row_stack = vstack


def dstack(tensors: Sequence[Tensor], *, out: Any = None) -> Tensor:
    return cat([atleast_3d(x) for x in _nonempty(tensors, "dstack")], 2)


def column_stack(tensors: Sequence[Tensor], *, out: Any = None) -> Tensor:
    ts = _nonempty(tensors, "column_stack")
    return hstack([reshape(x, (x.numel(), 1)) if x.ndim <= 1 else x for x in ts])


def _nonempty(tensors: Any, op: str) -> list:
    ts = _tensor_list(tensors, op)
    if not ts:
        raise ShapeError(f"[{op}] {op} expects a non-empty TensorList")
    return ts


# ---------------------------------------------------------------------------------- flip/roll
@tensor_method("flip")
def flip(input: Tensor, *args: Any, dims: Any = None) -> Tensor:
    """Reverse the order of elements along ``dims`` (a copy, as in PyTorch):
    ``ember.flip(x, [0])``, ``x.flip(0, 1)``, ``x.flip(dims=(0,))``."""
    check_tensor(input, "flip")
    if dims is not None and args:
        raise EmberTypeError("[flip] got dims both positionally and as a keyword")
    ds = size_args(args if dims is None else (dims,), "flip")
    w = [wrap_dim(d, input.ndim, "flip") for d in ds]
    for d in w:
        if w.count(d) > 1:
            raise ShapeError(f"[flip] dim {d} appears multiple times in the list of dims")
    if input.ndim == 0:
        w = []
    return bind(M.FLIP, input, dims=tuple(sorted(w)))


@tensor_method("fliplr")
def fliplr(input: Tensor) -> Tensor:
    if input.ndim < 2:
        raise ShapeError("[fliplr] Input must be >= 2-d.")
    return flip(input, 1)


@tensor_method("flipud")
def flipud(input: Tensor) -> Tensor:
    if input.ndim < 1:
        raise ShapeError("[flipud] Input must be >= 1-d.")
    return flip(input, 0)


@tensor_method("roll")
def roll(input: Tensor, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None
         ) -> Tensor:
    """Rotate elements along ``dims`` by ``shifts``; without dims, over the flattened tensor."""
    check_tensor(input, "roll")
    sh = [shifts] if isinstance(shifts, int) else [int(s) for s in shifts]
    if dims is None or (not isinstance(dims, int) and len(dims) == 0):
        if len(sh) != 1:
            raise ShapeError("[roll] `shifts` required" if not sh else
                             f"[roll] shifts and dimensions must align. shifts: {len(sh)}, "
                             f"dims:0")
        flat = reshape(input, (-1,))
        return reshape(bind(M.ROLL, flat, shifts=(sh[0],), dims=(0,)), tuple(input.shape))
    ds = [dims] if isinstance(dims, int) else list(dims)
    if len(sh) != len(ds):
        raise ShapeError(f"[roll] shifts and dimensions must align. shifts: {len(sh)}, "
                         f"dims:{len(ds)}")
    w = tuple(wrap_dim(int(d), input.ndim, "roll") for d in ds)
    if input.ndim == 0:
        return bind(M.ROLL, input, shifts=(), dims=())
    return bind(M.ROLL, input, shifts=tuple(sh), dims=w)


# ---------------------------------------------------------------------------------- repeat
@tensor_method("repeat")
def repeat(input: Tensor, *sizes: Any) -> Tensor:
    """Tile the tensor ``sizes[i]`` times along each dim (extra leading sizes add dims)."""
    reps = size_args(sizes, "repeat")
    if len(reps) < input.ndim:
        raise ShapeError("[repeat] Number of dimensions of repeat dims can not be smaller than "
                         "number of dimensions of tensor")
    if any(r < 0 for r in reps):
        raise ShapeError(f"[repeat] Trying to create tensor with negative dimension; repeats "
                         f"{list(reps)}")
    lead = len(reps) - input.ndim
    x = reshape(input, (1,) * lead + tuple(input.shape)) if lead else input
    return bind(M.REPEAT, x, repeats=reps)


@tensor_method("tile")
def tile(input: Tensor, dims: Sequence[int]) -> Tensor:
    """``repeat`` with ``dims`` left-padded with ones to the tensor's rank."""
    check_tensor(input, "tile")
    reps = size_args((dims,), "tile")
    if len(reps) < input.ndim:
        reps = (1,) * (input.ndim - len(reps)) + reps
    return repeat(input, reps)

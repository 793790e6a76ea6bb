"""Sorting and selection frontend: sort, argsort, msort, topk, kthvalue, median, unique."""

from __future__ import annotations

from typing import Any

from ember import dtypes as dt
from ember._frontend.core import check_tensor
from ember._frontend.reduction import _nonempty, return_types
from ember.errors import DTypeRuntimeError, EmberNotImplementedError, EmberRuntimeError
from ember.ops import sort as S
from ember.ops._util import wrap_dim
from ember.ops.registry import bind
from ember.tensor import Tensor, tensor_method

__all__ = ["argsort", "kthvalue", "median", "mode", "msort", "sort", "topk", "unique"]


@tensor_method("sort")
def sort(input: Tensor, dim: int = -1, descending: bool = False, *,
         stable: bool = False) -> Any:
    """(values, indices) sorted along ``dim``; always stable (equal values keep their order),
    NaN sorts as the largest value."""
    check_tensor(input, "sort")
    d = wrap_dim(dim, input.ndim, "sort")
    v, i = bind(S.SORT, input, dim=d, descending=bool(descending), stable=True)
    return return_types.sort(v, i)


@tensor_method("argsort")
def argsort(input: Tensor, dim: int = -1, descending: bool = False, *,
            stable: bool = False) -> Tensor:
    """The indices that sort ``input`` along ``dim``."""
    return sort(input, dim, descending, stable=stable).indices


@tensor_method("msort")
def msort(input: Tensor) -> Tensor:
    """``sort(input, dim=0).values``."""
    return sort(input, 0).values


@tensor_method("topk")
def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True,
         sorted: bool = True) -> Any:
    """The ``k`` largest (or smallest) values along ``dim`` with their indices, in order."""
    check_tensor(input, "topk")
    if input._dtype is dt.bool:
        raise DTypeRuntimeError("[topk] topk does not support bool dtypes on CPU")
    d = wrap_dim(dim, input.ndim, "topk")
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise EmberRuntimeError(f"[topk] selected index k out of range (k={k}, size {n})")
    v, i = bind(S.TOPK, input, k=int(k), dim=d, largest=bool(largest), sorted=bool(sorted))
    return return_types.topk(v, i)


def _check_sortable(input: Tensor, name: str) -> None:
    if input._dtype is dt.bool:
        raise EmberNotImplementedError(f"[{name}] \"{name}_cpu\" not implemented for 'Bool'")


@tensor_method("kthvalue")
def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> Any:
    """The ``k``-th smallest value (1-based) along ``dim`` and its index."""
    check_tensor(input, "kthvalue")
    _check_sortable(input, "kthvalue")
    d = wrap_dim(dim, input.ndim, "kthvalue")
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise EmberRuntimeError(
            f"[kthvalue] kthvalue(): selected number k out of range for dimension {dim}")
    v, i = bind(S.KTHVALUE, input, k=int(k), dim=d, keepdim=bool(keepdim), nan_first=False)
    return return_types.kthvalue(v, i)


@tensor_method("median")
def median(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """``median(x)``: the lower median of all elements; ``median(x, dim)``: (values, indices)
    of the lower median along ``dim``.  NaN propagates."""
    check_tensor(input, "median")
    _check_sortable(input, "median")
    if dim is None:
        return bind(S.MEDIAN, input, dims=tuple(range(input.ndim)), keepdim=False)
    d = wrap_dim(dim, input.ndim, "median")
    _nonempty(input, dim, (d,) if input.ndim else (), "median")
    n = input.shape[d] if input.ndim else 1
    v, i = bind(S.KTHVALUE, input, k=(n - 1) // 2 + 1, dim=d, keepdim=bool(keepdim),
                nan_first=True)
    return return_types.median(v, i)


@tensor_method("mode")
def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> Any:
    """The most frequent value along ``dim`` (the smallest if several are) and the index of
    its last occurrence."""
    check_tensor(input, "mode")
    _check_sortable(input, "mode")
    d = wrap_dim(dim, input.ndim, "mode")
    _nonempty(input, dim, (d,) if input.ndim else (), "mode")
    v, i = bind(S.MODE, input, dim=d, keepdim=bool(keepdim))
    return return_types.mode(v, i)


@tensor_method("unique")
def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,
           return_counts: bool = False, dim: int | None = None) -> Any:
    """The sorted unique values (or unique slices along ``dim``), optionally with the inverse
    indices and the counts.  The output size depends on the data."""
    check_tensor(input, "unique")
    d = None if dim is None else wrap_dim(dim, input.ndim, "unique")
    vals, inv, cnt = bind(S.UNIQUE, input, sorted=bool(sorted), dim=d)
    if not (return_inverse or return_counts):
        return vals
    out = (vals,) + ((inv,) if return_inverse else ()) + ((cnt,) if return_counts else ())
    return out




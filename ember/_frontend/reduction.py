"""Reduction frontend: dim normalization, dtype rules, defaults and PyTorch's errors, then one
primitive per call."""

from __future__ import annotations

import builtins
import math
import operator
from collections import namedtuple
from typing import Any, Sequence

from ember import dtypes as dt
from ember._bind_fast import full_reduce
from ember._frontend.autocast import autocast_op
from ember._frontend.core import check_tensor, to_dtype
from ember.errors import (
    DTypeRuntimeError,
    EmberIndexError,
    EmberNotImplementedError,
    EmberRuntimeError,
    EmberTypeError,
)
from ember.ops import reduction as R
from ember.ops._util import wrap_dim
from ember.ops.registry import bind
from ember.tensor import Tensor, tensor_method

__all__ = ["all", "amax", "amin", "any", "argmax", "argmin", "count_nonzero", "logsumexp",
           "max", "mean", "min", "nanmean", "nansum", "norm", "prod", "return_types", "std",
           "std_mean", "sum", "var", "var_mean"]

Dim = int | Sequence[int] | None


def _return_type(name: str, fields: str = "values indices") -> type:
    cls = namedtuple(name, fields)  # type: ignore[misc]
    cls.__module__ = "ember.return_types"

    def __repr__(self: Any) -> str:  # noqa: N807 - torch prints one field per line
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"ember.return_types.{name}(\n{body})"

    cls.__repr__ = __repr__
    return cls


class return_types:  # noqa: N801 - mirrors torch.return_types
    """Named tuples returned by (values, indices) ops, as ``torch.return_types``."""

    max = _return_type("max")
    min = _return_type("min")
    sort = _return_type("sort")
    topk = _return_type("topk")
    median = _return_type("median")
    kthvalue = _return_type("kthvalue")
    mode = _return_type("mode")
    cummax = _return_type("cummax")
    cummin = _return_type("cummin")


_ALL_DIMS = tuple(tuple(range(n)) for n in range(17))


def norm_dims(dim: Any, ndim: int, op: str) -> tuple:
    """``dim`` (None, int or sequence) as a sorted tuple of non-negative dims; None and ()
    mean all dims.  Repeated dims raise PyTorch's error."""
    if dim is None:
        # one shared tuple per rank: a compiled call that follows its last trace compares the
        # params of a full reduction by identity (``_bind_fast.bind``)
        return _ALL_DIMS[ndim] if ndim < len(_ALL_DIMS) else tuple(range(ndim))
    if not isinstance(dim, (tuple, list)):
        dim = operator.index(dim)  # ints, NumPy ints, 0-d integer tensors
        return (wrap_dim(dim, ndim, op),) if ndim else _check0(dim, op)
    dims = [wrap_dim(operator.index(d), ndim, op) for d in dim]
    if len(set(dims)) != len(dims):
        rep = next(d for d in dims if dims.count(d) > 1)
        raise EmberRuntimeError(f"[{op}] dim {rep} appears multiple times in the list of dims")
    if not dims or ndim == 0:
        return tuple(range(ndim))
    return tuple(sorted(dims))


def _check0(dim: int, op: str) -> tuple:
    wrap_dim(dim, 0, op)
    return ()


_dims_or_all = norm_dims


def _is_all(dim: Any) -> bool:
    return dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0)


def _int_to_long(input: Tensor, dtype: dt.dtype | None) -> Tensor:
    if dtype is not None:
        return to_dtype(input, dtype)
    if not input._dtype.is_floating_point:
        return to_dtype(input, dt.int64)
    return input


def _nonempty(input: Tensor, dim: Any, dims: tuple, op: str,
              all_exc: type = EmberRuntimeError) -> None:
    """Reductions without identity (max, min, argmax, median) refuse empty ranges."""
    if input._data.size:
        return
    if _is_all(dim) or input.ndim == 0:
        raise all_exc(f"[{op}] {op}(): Expected reduction dim to be specified for "
                      f"input.numel() == 0. Specify the reduction dim with the 'dim' argument.")
    for d in dims:
        if input.shape[d] == 0:
            raise EmberIndexError(
                f"[{op}] {op}(): Expected reduction dim {d} to have non-zero size.")


# ---------------------------------------------------------------------------- sum / mean / prod
@tensor_method("sum")
def sum(input: Tensor, dim: Dim = None, keepdim: bool = False, *,
        dtype: dt.dtype | None = None) -> Tensor:
    """Sum over ``dim`` (all dims if None); bool and integer inputs sum in int64."""
    if dim is None and dtype is None and keepdim is False and input.__class__ is Tensor:
        t = full_reduce(R.SUM, input, _ALL_DIMS, False)  # small float tensors, eagerly
        if t is not None:
            return t
    check_tensor(input, "sum")
    input = _int_to_long(input, dtype)
    return bind(R.SUM, input, dims=norm_dims(dim, input.ndim, "sum"), keepdim=bool(keepdim))


@tensor_method("mean")
def mean(input: Tensor, dim: Dim = None, keepdim: bool = False, *,
         dtype: dt.dtype | None = None) -> Tensor:
    """Arithmetic mean over ``dim``; floating inputs (or a floating ``dtype=``) only."""
    if dim is None and dtype is None and keepdim is False and input.__class__ is Tensor:
        t = full_reduce(R.MEAN, input, _ALL_DIMS, True)  # small float tensors, eagerly
        if t is not None:
            return t
    check_tensor(input, "mean")
    if dtype is not None:
        if not dtype.is_floating_point:
            raise DTypeRuntimeError(
                f"[mean] mean(): could not infer output dtype. Optional dtype must be either a "
                f"floating point or complex dtype. Got: {dtype.name}")
        input = to_dtype(input, dtype)
    elif not input._dtype.is_floating_point:
        raise DTypeRuntimeError(
            f"[mean] mean(): could not infer output dtype. Input dtype must be either a "
            f"floating point or complex dtype. Got: {input._dtype.name}")
    return bind(R.MEAN, input, dims=norm_dims(dim, input.ndim, "mean"), keepdim=bool(keepdim))


@tensor_method("prod")
@autocast_op("fp32")
def prod(input: Tensor, dim: int | None = None, keepdim: bool = False, *,
         dtype: dt.dtype | None = None) -> Tensor:
    """Product over one ``dim`` (all elements if None); integers multiply in int64."""
    check_tensor(input, "prod")
    if dim is not None and not isinstance(dim, int):
        raise EmberTypeError(f"[prod] dim must be an int or None, got {type(dim).__name__}")
    input = _int_to_long(input, dtype)
    return bind(R.PROD, input, dims=norm_dims(dim, input.ndim, "prod"), keepdim=bool(keepdim))


@tensor_method("nansum")
def nansum(input: Tensor, dim: Dim = None, keepdim: bool = False, *,
           dtype: dt.dtype | None = None) -> Tensor:
    """Sum treating NaN as zero; bool and integer inputs sum in int64."""
    check_tensor(input, "nansum")
    input = _int_to_long(input, dtype)
    op = R.NANSUM if input._dtype.is_floating_point else R.SUM
    return bind(op, input, dims=norm_dims(dim, input.ndim, "nansum"), keepdim=bool(keepdim))


@tensor_method("nanmean")
def nanmean(input: Tensor, dim: Dim = None, keepdim: bool = False, *,
            dtype: dt.dtype | None = None) -> Tensor:
    """Mean of the non-NaN elements (``nansum / count``, as PyTorch composes it)."""
    check_tensor(input, "nanmean")
    if not input._dtype.is_floating_point:
        raise DTypeRuntimeError(f"[nanmean] nanmean(): expected input to have floating point "
                                f"or complex dtype but got {input._dtype.name}")
    count = sum(bind(R.NOTNAN, input), dim, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / count


# ---------------------------------------------------------------------------- amax / max / arg
def _extreme(op: Any, name: str, input: Tensor, dim: Dim, keepdim: bool) -> Tensor:
    check_tensor(input, name)
    dims = norm_dims(dim, input.ndim, name)
    _nonempty(input, dim, dims, name)
    return bind(op, input, dims=dims, keepdim=bool(keepdim))


@tensor_method("amax")
def amax(input: Tensor, dim: Dim = (), keepdim: bool = False) -> Tensor:
    """Maximum over ``dim`` (all dims if empty); the gradient is split among ties."""
    return _extreme(R.AMAX, "amax", input, dim, keepdim)


@tensor_method("amin")
def amin(input: Tensor, dim: Dim = (), keepdim: bool = False) -> Tensor:
    """Minimum over ``dim`` (all dims if empty); the gradient is split among ties."""
    return _extreme(R.AMIN, "amin", input, dim, keepdim)


def _values_indices(op: Any, name: str, input: Tensor, dim: int, keepdim: bool) -> Any:
    d = wrap_dim(dim, input.ndim, name)
    _nonempty(input, dim, (d,) if input.ndim else (), name, EmberIndexError)
    v, i = bind(op, input, dim=d, keepdim=bool(keepdim))
    return getattr(return_types, name)(v, i)


def _max_min(name: str, full: Any, by_dim: Any, binary: str, input: Tensor, dim: Any,
             keepdim: bool, other: Any) -> Any:
    check_tensor(input, name)
    if isinstance(dim, Tensor):
        dim, other = None, dim
    if other is not None:
        fn = getattr(Tensor, binary, None)
        if fn is None:
            raise EmberNotImplementedError(f"[{name}] the binary form {name}(input, other) needs "
                                           f"ember.{binary}, which is not available")
        return fn(input, other)
    if dim is None:
        if keepdim:
            raise EmberTypeError(f"[{name}] keepdim needs dim")
        return _extreme(full, name, input, None, False)
    return _values_indices(by_dim, name, input, dim, keepdim)


@tensor_method("max")
def max(input: Tensor, dim: Any = None, keepdim: bool = False, *, other: Any = None) -> Any:
    """``max(x)``: the maximum; ``max(x, dim)``: (values, indices); ``max(x, y)``: maximum."""
    return _max_min("max", R.AMAX, R.MAX_DIM, "maximum", input, dim, keepdim, other)


@tensor_method("min")
def min(input: Tensor, dim: Any = None, keepdim: bool = False, *, other: Any = None) -> Any:
    """``min(x)``: the minimum; ``min(x, dim)``: (values, indices); ``min(x, y)``: minimum."""
    return _max_min("min", R.AMIN, R.MIN_DIM, "minimum", input, dim, keepdim, other)


def _arg(op: Any, name: str, input: Tensor, dim: int | None, keepdim: bool) -> Tensor:
    check_tensor(input, name)
    if input._dtype is dt.bool:
        raise DTypeRuntimeError(f"[{name}] {name}(): does not support bool input")
    d = None if dim is None else wrap_dim(dim, input.ndim, name)
    _nonempty(input, dim, () if d is None or input.ndim == 0 else (d,), name, EmberIndexError)
    return bind(op, input, dim=d, keepdim=bool(keepdim))


@tensor_method("argmax")
def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the (first) maximum, over the flattened input if ``dim`` is None."""
    return _arg(R.ARGMAX, "argmax", input, dim, keepdim)


@tensor_method("argmin")
def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the (first) minimum, over the flattened input if ``dim`` is None."""
    return _arg(R.ARGMIN, "argmin", input, dim, keepdim)


# ---------------------------------------------------------------------------- var / std
def _correction(name: str, unbiased: Any, correction: Any) -> float:
    if unbiased is not None and correction is not None:
        raise EmberRuntimeError(f"[{name}] Cannot specify both unbiased and correction")
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def _var_args(name: str, input: Tensor, dim: Any, unbiased: Any, keepdim: bool,
              correction: Any) -> tuple:
    check_tensor(input, name)
    if isinstance(dim, bool):          # var(x, True): the legacy unbiased positional
        dim, unbiased = None, dim
    if not input._dtype.is_floating_point:
        raise DTypeRuntimeError(f"[{name}] std and var only support floating point and "
                                f"complex dtypes; got {input._dtype.name}")
    c = _correction(name, unbiased, correction)
    return input, {"dims": norm_dims(dim, input.ndim, name), "keepdim": bool(keepdim),
                   "correction": c}


@tensor_method("var")
def var(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
        correction: Any = None) -> Tensor:
    """Variance over ``dim`` with Bessel's ``correction`` (default 1; ``unbiased=False``: 0)."""
    x, p = _var_args("var", input, dim, unbiased, keepdim, correction)
    return bind(R.VAR, x, **p)


@tensor_method("std")
def std(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
        correction: Any = None) -> Tensor:
    """Standard deviation: ``var(...).sqrt()`` with the same arguments."""
    x, p = _var_args("std", input, dim, unbiased, keepdim, correction)
    return bind(R.STD, x, **p)


def var_mean(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple:
    """``(var(input, ...), mean(input, ...))``."""
    x, p = _var_args("var_mean", input, dim, unbiased, keepdim, correction)
    return bind(R.VAR, x, **p), bind(R.MEAN, x, dims=p["dims"], keepdim=p["keepdim"])


def std_mean(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple:
    """``(std(input, ...), mean(input, ...))``."""
    x, p = _var_args("std_mean", input, dim, unbiased, keepdim, correction)
    return bind(R.STD, x, **p), bind(R.MEAN, x, dims=p["dims"], keepdim=p["keepdim"])


# ---------------------------------------------------------------------------- norms
def vector_norm(x: Tensor, ord: Any = 2, dim: Dim = None, keepdim: bool = False, *,
                dtype: dt.dtype | None = None) -> Tensor:
    """``linalg.vector_norm``: (sum |x|^ord)^(1/ord) over ``dim`` (all dims if None); ord may
    be inf, -inf or 0.  The gradient at 0 is 0 (a subgradient), as in PyTorch."""
    op = "linalg.vector_norm"
    check_tensor(x, op)
    if not x._dtype.is_floating_point:
        raise DTypeRuntimeError(f"[{op}] Expected a floating point or complex tensor as input. "
                                f"Got {x._dtype.name}")
    if dtype is not None:
        if not dtype.is_floating_point:
            raise DTypeRuntimeError(f"[{op}] dtype should be floating point or complex, but got "
                                    f"{dtype.name}")
        if dt.promote_types(x._dtype, dtype) is not dtype:
            raise DTypeRuntimeError(
                f"[{op}] the dtype of the input ({x._dtype.name}) should be convertible without "
                f"narrowing to the specified dtype ({dtype.name})")
        x = to_dtype(x, dtype)
    o = builtins.float(ord)
    dims = norm_dims(dim, x.ndim, op)
    if o < 0 or math.isinf(o):
        if x._data.size == 0 and (_is_all(dim) or builtins.any(x.shape[d] == 0 for d in dims)):
            raise EmberRuntimeError(f"[{op}] linalg.vector_norm cannot compute the {ord} norm on "
                                    f"an empty tensor because the operation does not have an "
                                    f"identity")
    return bind(R.NORM, x, ord=o, dims=dims, keepdim=bool(keepdim))


@tensor_method("norm")
def norm(input: Tensor, p: Any = "fro", dim: Dim = None, keepdim: bool = False,
         dtype: dt.dtype | None = None) -> Tensor:
    """``torch.norm``: a vector norm over ``dim`` (``'fro'`` is the 2-norm); ``'nuc'`` and other
    matrix norms belong to ``ember.linalg``."""
    check_tensor(input, "norm")
    if isinstance(p, str):
        if p != "fro":
            raise EmberNotImplementedError(f"[norm] p={p!r} (a matrix norm) is not supported "
                                           f"here; use ember.linalg.matrix_norm")
        p = 2
    if p is None:
        p = 2
    return vector_norm(input, p, dim, keepdim, dtype=dtype)


# ---------------------------------------------------------------------------- logsumexp
@tensor_method("logsumexp")
def logsumexp(input: Tensor, dim: Dim, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(x), dim))`` computed stably; integers give the default float dtype."""
    check_tensor(input, "logsumexp")
    if not input._dtype.is_floating_point:
        input = to_dtype(input, dt.get_default_dtype())
    dims = norm_dims(dim, input.ndim, "logsumexp")
    return bind(R.LOGSUMEXP, input, dims=dims, keepdim=bool(keepdim))


# ---------------------------------------------------------------------------- boolean
def _bool_dims(dim: Dim, ndim: int, op: str) -> tuple:
    # all/any take dim=() as "reduce nothing", unlike sum/amax/mean
    if isinstance(dim, (tuple, list)) and len(dim) == 0:
        return ()
    return norm_dims(dim, ndim, op)


@tensor_method("all")
def all(input: Tensor, dim: Dim = None, keepdim: bool = False) -> Tensor:
    """True where every element over ``dim`` is nonzero (uint8 in, uint8 out)."""
    check_tensor(input, "all")
    return bind(R.ALL, input, dims=_bool_dims(dim, input.ndim, "all"), keepdim=bool(keepdim))


@tensor_method("any")
def any(input: Tensor, dim: Dim = None, keepdim: bool = False) -> Tensor:
    """True where some element over ``dim`` is nonzero (uint8 in, uint8 out)."""
    check_tensor(input, "any")
    return bind(R.ANY, input, dims=_bool_dims(dim, input.ndim, "any"), keepdim=bool(keepdim))


@tensor_method("count_nonzero")
def count_nonzero(input: Tensor, dim: Dim = None) -> Tensor:
    """Number of nonzero elements over ``dim`` (int64)."""
    check_tensor(input, "count_nonzero")
    return bind(R.COUNT_NONZERO, input, dims=norm_dims(dim, input.ndim, "count_nonzero"),
                keepdim=False)

"""Counting and bucketing frontend (bincount, histc, searchsorted, bucketize, isin), exponent
helpers (heaviside, ldexp, frexp, logcumsumexp) and small API functions (Tensor.type,
is_floating_point, is_complex, is_nonzero, dropout)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import dtypes as dt
from ember import random as _random
from ember._frontend.core import broadcast_shapes, check_tensor, expand_to, is_scalar, to_dtype
from ember._frontend.reduction import _return_type
from ember.errors import (
    EmberNotImplementedError,
    EmberRuntimeError,
    EmberTypeError,
    EmberValueError,
)
from ember.ops import counting as C
from ember.ops import random as R
from ember.ops._util import wrap_dim
from ember.ops.registry import bind
from ember.tensor import Tensor, _wrap, tensor_method

__all__ = ["bincount", "bucketize", "dropout", "frexp", "heaviside", "histc", "is_complex",
           "is_floating_point", "is_nonzero", "isin", "ldexp", "logcumsumexp", "searchsorted"]

_frexp_type = _return_type("frexp", "mantissa exponent")

_TORCH_NAMES = {"Float": "float32", "Double": "float64", "Half": "float16",
                "BFloat16": "bfloat16", "Byte": "uint8", "Char": "int8", "Short": "int16",
                "Int": "int32", "Long": "int64", "Bool": "bool"}
_TYPE_NAME = {v: k for k, v in _TORCH_NAMES.items()}


def _dtype_label(d: dt.dtype) -> str:
    """PyTorch's dispatch name of a dtype (``'Long'``, ``'Float'``)."""
    return _TYPE_NAME.get(d.name, d.name)


@tensor_method("bincount")
def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """The number of occurrences of each value in the 1-d non-negative integer ``input``
    (summed ``weights`` when given); length ``max(input) + 1``, at least ``minlength``."""
    check_tensor(input, "bincount")
    if input._dtype is dt.bool or input._dtype.category != 1:
        raise EmberNotImplementedError(
            f"[bincount] \"bincount_cpu\" not implemented for '{_dtype_label(input._dtype)}'")
    if minlength < 0:
        raise EmberRuntimeError("[bincount] minlength should be >= 0")
    if input.ndim != 1:
        raise EmberRuntimeError(
            "[bincount] bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return bind(C.BINCOUNT, input, minlength=int(minlength))
    check_tensor(weights, "bincount", "weights")
    if weights.ndim != 1 or weights.shape[0] != input.shape[0]:
        raise EmberRuntimeError(
            "[bincount] weights should be 1-d and have the same length as input")
    return bind(C.BINCOUNT, input, weights, minlength=int(minlength))


@tensor_method("histc")
def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
    """Histogram of all elements in ``bins`` equal-width bins over [min, max] (the data's
    range when both are 0); elements outside are ignored."""
    check_tensor(input, "histc")
    if input._dtype.category != 2:
        raise EmberNotImplementedError(
            f"[histc] \"histogram_cpu\" not implemented for '{_dtype_label(input._dtype)}'")
    if bins <= 0:
        raise EmberRuntimeError(
            f"[histc] torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    lo, hi = float(min), float(max)
    if lo == hi == 0 and input.numel() > 0:
        a = input._data
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise EmberRuntimeError(
            f"[histc] torch.histc: range of [{_fmt(lo)}, {_fmt(hi)}] is not finite")
    if lo > hi:
        raise EmberRuntimeError("[histc] torch.histc: max must be larger than min")
    return bind(C.HISTC, input, bins=int(bins), min=lo, max=hi)


def _fmt(v: float) -> str:
    return "nan" if math.isnan(v) else (f"{v:g}" if math.isfinite(v) else str(v))


def _search_prepare(seq: Tensor, values: Any, op: str) -> tuple:
    if isinstance(values, Tensor):
        common = dt.result_type(seq, values)
    elif is_scalar(values):
        common = dt.result_type(seq, values)
    else:
        raise EmberTypeError(f"[{op}] argument 'input' must be Tensor or Number, not "
                             f"{type(values).__name__}")
    if common is dt.bool:
        raise EmberNotImplementedError(
            f"[{op}] \"searchsorted_out_cpu\" not implemented for 'Bool'")
    if not isinstance(values, Tensor):
        values = _wrap(np.asarray(values, common.np), common)
    return to_dtype(seq, common), to_dtype(values, common)


def searchsorted(sorted_sequence: Tensor, input: Any, *, out_int32: bool = False,
                 right: bool = False, side: str | None = None,
                 sorter: Tensor | None = None) -> Tensor:
    """Indices where ``input`` would be inserted into the innermost dim of
    ``sorted_sequence`` (whose leading dims match ``input``'s, or which is 1-d) to keep it
    sorted; ``right``/``side='right'`` gives the index after equal values."""
    op = "searchsorted"
    check_tensor(sorted_sequence, op, "sorted_sequence")
    if side is not None:
        if side not in ("left", "right"):
            raise EmberRuntimeError(
                f"[{op}] torch.searchsorted(): side can only be 'left' or 'right' but got "
                f"{side}")
        if right and side == "left":
            raise EmberRuntimeError(
                f"[{op}] torch.searchsorted(): side and right can't be set to opposites, got "
                f"side of {side} while right was True")
        right = side == "right"
    if sorted_sequence.ndim == 0:
        raise EmberRuntimeError(
            f"[{op}] torch.searchsorted(): boundaries tensor should have positive dimension, "
            f"but got 0 dimension")
    vshape = tuple(input.shape) if isinstance(input, Tensor) else ()
    sshape = tuple(sorted_sequence.shape)
    if sorted_sequence.ndim != 1 and (len(vshape) != len(sshape)
                                      or vshape[:-1] != sshape[:-1]):
        raise EmberRuntimeError(
            f"[{op}] torch.searchsorted(): boundaries tensor should be 1 dimension or the "
            f"first N-1 dimensions of boundaries tensor and input value tensor must match, "
            f"but we got boundaries tensor {list(sshape)} and input value tensor "
            f"{list(vshape)}")
    if sorter is not None:
        check_tensor(sorter, op, "sorter")
        if sorter._dtype is not dt.int64:
            raise EmberRuntimeError(
                f"[{op}] torch.searchsorted(): sorter must be a tensor of long dtype but got "
                f"dtype {_dtype_label(sorter._dtype)}")
        if tuple(sorter.shape) != sshape:
            raise EmberRuntimeError(
                f"[{op}] torch.searchsorted(): boundary and sorter must have the same size, "
                f"but got boundary tensor {list(sshape)}and got sorter tensor "
                f"{list(sorter.shape)}")
    seq, vals = _search_prepare(sorted_sequence, input, op)
    extra = () if sorter is None else (sorter,)
    return bind(C.SEARCHSORTED, seq, vals, *extra, right=bool(right),
                out_int32=bool(out_int32))


def bucketize(input: Any, boundaries: Tensor, *, out_int32: bool = False,
              right: bool = False) -> Tensor:
    """The index of the bucket of each element of ``input`` given the sorted 1-d
    ``boundaries`` (``searchsorted(boundaries, input)``)."""
    check_tensor(boundaries, "bucketize", "boundaries")
    if boundaries.ndim != 1:
        raise EmberRuntimeError(
            f"[bucketize] boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False,
         invert: bool = False) -> Tensor:
    """Whether each element of ``elements`` occurs in ``test_elements`` (NaN never does)."""
    te, tt = isinstance(elements, Tensor), isinstance(test_elements, Tensor)
    if not (te or tt):
        raise EmberTypeError("[isin] isin() expects a Tensor for elements or test_elements, "
                             f"got {type(elements).__name__} and "
                             f"{type(test_elements).__name__}")
    common = dt.result_type(elements, test_elements)
    for a in (elements, test_elements):
        if (a._dtype is dt.bool if isinstance(a, Tensor) else isinstance(a, bool)) or (
                common is dt.bool):
            raise EmberRuntimeError("[isin] Unsupported input type encountered for isin(): Bool")
    e = to_dtype(elements, common) if te else _wrap(np.asarray(elements, common.np), common)
    t = (to_dtype(test_elements, common) if tt
         else _wrap(np.asarray(test_elements, common.np), common))
    return bind(C.ISIN, e, t, invert=bool(invert))


@tensor_method("heaviside")
def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """0 where ``input < 0``, ``values`` where ``input == 0``, 1 where ``input > 0``."""
    check_tensor(input, "heaviside")
    check_tensor(values, "heaviside", "values")
    if input._dtype is not values._dtype:
        raise EmberRuntimeError(
            "[heaviside] heaviside is not yet implemented for tensors with different dtypes.")
    shape = tuple(input.shape)
    if tuple(values.shape) != shape:
        shape = broadcast_shapes("heaviside", shape, tuple(values.shape))
    return bind(C.HEAVISIDE, expand_to(input, shape), expand_to(values, shape))


@tensor_method("ldexp")
def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """``input * 2 ** other`` in the promoted floating dtype."""
    check_tensor(input, "ldexp")
    check_tensor(other, "ldexp", "other")
    if other._dtype is dt.bool:
        raise EmberNotImplementedError("[ldexp] \"ldexp_cpu_exp\" not implemented for 'Bool'")
    d = dt.result_type(input, other)
    if d.category != 2:
        d = dt.get_default_dtype()
    return to_dtype(input, d) * to_dtype(other, d).exp2()


@tensor_method("frexp")
def frexp(input: Tensor) -> Any:
    """(mantissa, exponent) with ``input = mantissa * 2 ** exponent`` and
    ``0.5 <= |mantissa| < 1`` (exponent int32)."""
    check_tensor(input, "frexp")
    if input._dtype.category != 2:
        raise EmberRuntimeError("[frexp] torch.frexp() only supports floating-point dtypes")
    m, e = bind(C.FREXP, input)
    return _frexp_type(m, e)


@tensor_method("logcumsumexp")
def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(input), dim))`` computed stably."""
    check_tensor(input, "logcumsumexp")
    if input._dtype.category != 2:
        raise EmberNotImplementedError(
            f"[logcumsumexp] \"logcumsumexp_out_cpu\" not implemented for "
            f"'{_dtype_label(input._dtype)}'")
    d = wrap_dim(dim, input.ndim, "logcumsumexp")
    return bind(C.LOGCUMSUMEXP, input, dim=d)


# ---------------------------------------------------------------------------- small API
# Tensor.type() lives with the legacy tensor types (legacy.py)


def is_floating_point(input: Tensor) -> bool:
    """Whether ``input`` has a floating dtype."""
    check_tensor(input, "is_floating_point")
    return input._dtype.category == 2


def is_complex(input: Tensor) -> bool:
    """Whether ``input`` has a complex dtype (ember has none)."""
    check_tensor(input, "is_complex")
    return False


@tensor_method("is_nonzero")
def is_nonzero(input: Tensor) -> bool:
    """Whether the single element of ``input`` is non-zero."""
    check_tensor(input, "is_nonzero")
    n = input.numel()
    if n == 0:
        raise EmberRuntimeError("[is_nonzero] Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise EmberRuntimeError(
            "[is_nonzero] Boolean value of Tensor with more than one value is ambiguous")
    return bool(input._data.reshape(()) != 0)


def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.dropout(input, p, train)``: ``nn.functional.dropout(input, p, train)`` (the same
    primitive and Philox stream; nn sits above this layer, so it is bound here)."""
    check_tensor(input, "dropout")
    if p < 0.0 or p > 1.0:
        raise EmberValueError(f"[dropout] dropout probability has to be between 0 and 1, but got "
                              f"{p}")
    if not train or p == 0.0 or input.numel() == 0:
        return input
    s, off = _random.resolve(None)._consume(input.numel())
    return bind(R.DROPOUT, input, p=float(p), seed=s, offset=off)

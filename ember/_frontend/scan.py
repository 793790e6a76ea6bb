"""Scan and softmax frontend: cumsum, cumprod, softmax, log_softmax."""

from __future__ import annotations

from typing import Any

from ember import dtypes as dt
from ember._frontend.core import check_tensor, to_dtype
from ember._frontend.reduction import return_types
from ember.errors import EmberNotImplementedError, EmberTypeError
from ember.ops import scan as S
from ember.ops._util import wrap_dim
from ember.ops.registry import bind
from ember.tensor import Tensor, tensor_method

__all__ = ["cummax", "cummin", "cumprod", "cumsum", "log_softmax", "softmax"]


def _scan_input(input: Tensor, dtype: dt.dtype | None, name: str) -> Tensor:
    check_tensor(input, name)
    if dtype is None and not input._dtype.is_floating_point:
        dtype = dt.int64
    if dtype is dt.bool:
        raise EmberNotImplementedError(f"[{name}] \"{name}_out_cpu\" not implemented for 'Bool'")
    return input if dtype is None else to_dtype(input, dtype)


@tensor_method("cumsum")
def cumsum(input: Tensor, dim: int, *, dtype: dt.dtype | None = None) -> Tensor:
    """Cumulative sum along ``dim``; bool and integer inputs accumulate in int64."""
    x = _scan_input(input, dtype, "cumsum")
    return bind(S.CUMSUM, x, dim=wrap_dim(dim, x.ndim, "cumsum"), reverse=False)


@tensor_method("cumprod")
def cumprod(input: Tensor, dim: int, *, dtype: dt.dtype | None = None) -> Tensor:
    """Cumulative product along ``dim``; bool and integer inputs accumulate in int64."""
    x = _scan_input(input, dtype, "cumprod")
    return bind(S.CUMPROD, x, dim=wrap_dim(dim, x.ndim, "cumprod"))


@tensor_method("cummax")
def cummax(input: Tensor, dim: int) -> Any:
    """(values, indices): the running maximum along ``dim`` and where it was (last) seen."""
    check_tensor(input, "cummax")
    v, i = bind(S.CUMMAX, input, dim=wrap_dim(dim, input.ndim, "cummax"))
    return return_types.cummax(v, i)


@tensor_method("cummin")
def cummin(input: Tensor, dim: int) -> Any:
    """(values, indices): the running minimum along ``dim`` and where it was (last) seen."""
    check_tensor(input, "cummin")
    v, i = bind(S.CUMMIN, input, dim=wrap_dim(dim, input.ndim, "cummin"))
    return return_types.cummin(v, i)


def _softmax_input(input: Tensor, dim: Any, dtype: dt.dtype | None, name: str) -> tuple:
    check_tensor(input, name)
    if dim is None:
        raise EmberTypeError(f"[{name}] {name}() missing 1 required positional arguments: "
                             f"\"dim\"")
    if dtype is not None:
        input = to_dtype(input, dtype)
    if not input._dtype.is_floating_point:
        raise EmberNotImplementedError(
            f"[{name}] \"{name}_lastdim_kernel_impl\" not implemented for "
            f"'{input._dtype.name}'; softmax needs a floating dtype (pass dtype=)")
    return input, wrap_dim(dim, input.ndim, name)


@tensor_method("softmax")
def softmax(input: Tensor, dim: Any = None, dtype: dt.dtype | None = None) -> Tensor:
    """``exp(x) / exp(x).sum(dim, keepdim=True)``, one fused, max-subtracted kernel."""
    x, d = _softmax_input(input, dim, dtype, "softmax")
    return bind(S.SOFTMAX, x, dim=d)


@tensor_method("log_softmax")
def log_softmax(input: Tensor, dim: Any = None, dtype: dt.dtype | None = None) -> Tensor:
    """``x - logsumexp(x, dim, keepdim=True)``, one fused, max-subtracted kernel."""
    x, d = _softmax_input(input, dim, dtype, "log_softmax")
    return bind(S.LOG_SOFTMAX, x, dim=d)


from ember._frontend.inplace import inplace_method  # noqa: E402

inplace_method("cumsum_", cumsum)
inplace_method("cumprod_", cumprod)

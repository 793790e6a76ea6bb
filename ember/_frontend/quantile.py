"""``quantile``, ``nanquantile`` and ``nanmedian``: compositions of ``sort``, ``gather`` and
``lerp`` following ATen's ``quantile_compute`` (``aten/src/ATen/native/Sorting.cpp``), so
gradients flow through the sorted values as in PyTorch."""

from __future__ import annotations

from typing import Any

from ember import dtypes as dt
from ember._frontend.core import check_tensor
from ember._frontend.creation import tensor as _tensor
from ember._frontend.pointwise_logic import where
from ember._frontend.reduction import _return_type
from ember._frontend.sort import sort
from ember.errors import EmberRuntimeError
from ember.ops._util import wrap_dim
from ember.tensor import Tensor, tensor_method

__all__ = ["nanmedian", "nanquantile", "quantile"]

_nanmedian_t = _return_type("nanmedian")
_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _check(op: str, input: Tensor, q: Any, interpolation: str) -> Tensor:
    check_tensor(input, op)
    if input.numel() == 0:
        raise EmberRuntimeError(f"[{op}] {op}() input tensor must be non-empty")
    if input.dtype not in (dt.float32, dt.float64):
        raise EmberRuntimeError(f"[{op}] {op}() input tensor must be either float or double "
                                f"dtype")
    if interpolation not in _MODES:
        raise EmberRuntimeError(f"[{op}] {op}() interpolation must be one of linear, lower, "
                                f"higher, midpoint or nearest. Got {interpolation}")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise EmberRuntimeError(f"[{op}] {op}() q must be a scalar or 1D tensor")
        if q.dtype != input.dtype:
            raise EmberRuntimeError(f"[{op}] {op}() q tensor must be same dtype as the input "
                                    f"tensor")
        if q.numel() and (bool((q < 0).any()) or bool((q > 1).any())):
            raise EmberRuntimeError(f"[{op}] {op}() q values must be in the range [0, 1]")
        return q.detach()
    if not 0 <= q <= 1:
        raise EmberRuntimeError(f"[{op}] {op}() q must be in the range [0, 1] but got {q}")
    return _tensor(float(q), dtype=input.dtype)


def _quantile(op: str, input: Tensor, q: Any, dim: int | None, keepdim: bool,
              interpolation: str, ignore_nan: bool) -> Tensor:
    qt = _check(op, input, q, interpolation)
    x = input.reshape(-1) if dim is None else input.movedim(wrap_dim(dim, input.ndim, op), -1)
    if x.ndim == 0:
        x = x.reshape(1)
    s = sort(x, -1).values
    n = s.shape[-1]
    qv = qt.reshape(tuple(qt.shape) + (1,) * s.ndim)
    nan = s.isnan()
    if ignore_nan:
        ranks = qv * ((~nan).sum(-1, keepdim=True).to(s.dtype) - 1)
        ranks = ranks.clamp_min(0)
    else:
        ranks = where(nan.any(-1, keepdim=True), qv * 0 + (n - 1), qv * (n - 1))
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    below = ranks.to(dt.int64)
    full = s.expand(tuple(ranks.shape[:-1]) + (n,))
    out = full.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        w = ranks * 0 + 0.5 if interpolation == "midpoint" else ranks - below.to(s.dtype)
        out = out.lerp(full.gather(-1, ranks.ceil().to(dt.int64)), w)
    out = out.squeeze(-1)
    if keepdim:
        lead = qt.ndim
        if dim is None:
            out = out.reshape(tuple(out.shape[:lead]) + (1,) * input.ndim)
        elif input.ndim:
            out = out.unsqueeze(lead + wrap_dim(dim, input.ndim, op))
    return out


@tensor_method("quantile")
def quantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """The ``q``-quantiles of ``input`` (all elements, or along ``dim``); NaN if a NaN is in
    the range.

    >>> ember.quantile(ember.tensor([1.0, 2.0, 3.0, 4.0]), 0.5)
    tensor(2.5000)
    """
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


@tensor_method("nanquantile")
def nanquantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """:func:`quantile` that ignores NaNs (NaN only where a range is all NaN)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


@tensor_method("nanmedian")
def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """The lower median ignoring NaNs: a value, or ``(values, indices)`` along ``dim``.

    >>> ember.nanmedian(ember.tensor([1.0, float("nan"), 3.0, 2.0]))
    tensor(2.)
    """
    check_tensor(input, "nanmedian")
    if dim is None:
        s = sort(input.reshape(-1)).values
        k = int((~s.isnan()).sum())
        return s[max(k - 1, 0) // 2] if s.numel() else s.sum() * float("nan")
    d = wrap_dim(dim, input.ndim, "nanmedian")
    if input.ndim and input.shape[d] == 0:
        raise EmberRuntimeError(f"[nanmedian] nanmedian(): Expected reduction dim {d} to have "
                                f"non-zero size.")
    x = input if input.ndim else input.reshape(1)
    s, i = sort(x, d if input.ndim else 0)
    k = (~s.isnan()).sum(d if input.ndim else 0, keepdim=True)
    idx = ((k - 1).clamp_min(0)).div(2, rounding_mode="floor")
    v, ix = s.gather(d, idx), i.gather(d, idx)
    if not keepdim or not input.ndim:
        v, ix = v.squeeze(d if input.ndim else 0), ix.squeeze(d if input.ndim else 0)
    return _nanmedian_t(v, ix)

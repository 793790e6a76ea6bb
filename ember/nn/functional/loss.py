"""Loss functions of ``ember.nn.functional`` (PyTorch's signatures, defaults and checks).

Each loss validates its arguments as PyTorch does, then binds one fused composite OpDef
(``ember/ops/nn_loss_ce.py`` for nll_loss/cross_entropy, ``ember/ops/nn_loss.py`` for the
elementwise losses) whose kernel reduces too.
"""

from __future__ import annotations

import warnings
from typing import Any

from ember import dtypes as dt
from ember._frontend.autocast import autocast_op
from ember._frontend.core import broadcast_shapes, check_tensor, expand_to, to_dtype
from ember._frontend.inplace import _type_name
from ember.autograd import grad_mode as _gm
from ember.errors import (
    DTypeRuntimeError,
    EmberNotImplementedError,
    EmberRuntimeError,
    EmberValueError,
    ShapeError,
)
from ember.ops import nn_loss as L
from ember.ops import nn_loss_ce as CE
from ember.ops.registry import bind
from ember.tensor import Tensor

__all__ = [
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "huber_loss",
    "kl_div", "l1_loss", "mse_loss", "nll_loss", "smooth_l1_loss",
]

_REDUCTIONS = ("none", "mean", "sum")


def _reduction(reduction: str, size_average: Any = None, reduce: Any = None) -> str:
    """The reduction string, from the legacy ``size_average``/``reduce`` flags if given."""
    if size_average is not None or reduce is not None:
        warnings.warn("size_average and reduce args will be deprecated, please use "
                      "reduction='{}' instead.".format(
                          "none" if reduce is False else
                          ("sum" if size_average is False else "mean")), stacklevel=3)
        if reduce is False:
            return "none"
        return "sum" if size_average is False else "mean"
    if reduction not in _REDUCTIONS:
        raise EmberValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _size(shape: Any) -> str:
    return f"torch.Size([{', '.join(str(s) for s in shape)}])"


def _not_differentiable(fn: str, name: str, t: Tensor | None) -> None:
    if t is not None and t._requires_grad and _gm.STATE.grad_enabled:
        raise EmberRuntimeError(
            f"[{fn}] The function '{fn}' is not differentiable with respect to argument "
            f"'{name}'. This input cannot have requires_grad True.")


# ------------------------------------------------------------------------ nll / cross_entropy
def _check_class_targets(op: str, input: Tensor, target: Tensor) -> Tensor:
    """PyTorch's nll_loss_nd shape and dtype checks; returns the target (``(1,)`` targets of
    an unbatched input become 0-d)."""
    check_tensor(target, op, "target")
    nd, tn = input.ndim, target.ndim
    if nd < 1:
        raise EmberValueError(f"[{op}] Expected 1 or more dimensions (got {nd})")
    if target._dtype not in (dt.int64, dt.uint8):
        raise DTypeRuntimeError(f"[{op}] expected target dtype to be Long or Byte, but got "
                                f"{_type_name(target._dtype)}")
    if nd != 1 and tn >= 1 and input.shape[0] != target.shape[0]:
        raise EmberValueError(f"[{op}] Expected input batch_size ({input.shape[0]}) to match "
                              f"target batch_size ({target.shape[0]}).")
    if nd <= 2 and tn > 1 or nd == 2 and tn != 1:
        raise ShapeError(f"[{op}] 0D or 1D target tensor expected, multi-target not supported")
    if nd == 1:
        if tn == 1 and target.shape[0] != 1:
            raise EmberValueError(f"[{op}] For 1D input, 1D target must have size 1, but got "
                                  f"target size: {target.shape[0]}")
        return target.reshape(()) if tn == 1 else target  # type: ignore[attr-defined]
    if nd == 4 and tn != 3:
        raise ShapeError(f"[{op}] only batches of spatial targets supported (3D tensors) but got "
                         f"targets of dimension: {tn}")
    if nd == 4 and (tuple(target.shape) != (input.shape[0],) + tuple(input.shape[2:])):
        raise ShapeError(f"[{op}] size mismatch (got input: {list(input.shape)} , target: "
                         f"{list(target.shape)}")
    expected = [input.shape[0]] + list(input.shape[2:])
    if nd > 2 and list(target.shape) != expected:
        raise ShapeError(f"[{op}] Expected target size {expected}, got {list(target.shape)}")
    return target


def _check_weight(op: str, input: Tensor, weight: Tensor | None, prefix: str = "") -> None:
    if weight is None:
        return
    check_tensor(weight, op, "weight")
    n_classes = input.shape[0] if input.ndim == 1 else input.shape[1]
    if weight.ndim != 1 or weight.shape[0] != n_classes:
        raise EmberRuntimeError(
            f"[{op}] {prefix}weight tensor should be defined either for all {n_classes} classes "
            f"or no classes but got weight tensor of shape: {list(weight.shape)}")
    if weight._dtype is not input._dtype:
        raise DTypeRuntimeError(f"[{op}] expected scalar type {_type_name(input._dtype)} but "
                                f"found {_type_name(weight._dtype)}")


@autocast_op("fp32")
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
             reduction: str = "mean") -> Tensor:
    """Negative log likelihood: ``-weight[t] * input[n, t]`` averaged over the summed weights
    of the non-ignored targets (``reduction='mean'``)."""
    check_tensor(input, "nll_loss")
    red = _reduction(reduction, size_average, reduce)
    target = _check_class_targets("nll_loss", input, target)
    if not input._dtype.is_floating_point:
        raise EmberNotImplementedError(
            f"[nll_loss] \"nll_loss_out_frame\" not implemented for '{_type_name(input._dtype)}'")
    _check_weight("nll_loss", input, weight)
    _not_differentiable("nll_loss_forward", "weight", weight)
    return bind(CE.NLL_LOSS, input, target, weight, ignore_index=int(ignore_index),
                reduction=red)


@autocast_op("fp32")
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """``nll_loss(log_softmax(input, 1), target)`` with class weights, ``ignore_index`` and
    label smoothing; ``target`` shaped like ``input`` holds class probabilities."""
    check_tensor(input, "cross_entropy")
    check_tensor(target, "cross_entropy", "target")
    red = _reduction(reduction, size_average, reduce)
    if not input._dtype.is_floating_point:
        raise EmberNotImplementedError(
            f"[cross_entropy] \"log_softmax_lastdim_kernel_impl\" not implemented for "
            f"'{_type_name(input._dtype)}'")
    if label_smoothing > 1.0:
        raise EmberRuntimeError(f"[cross_entropy] label_smoothing must be between 0.0 and 1.0. "
                                f"Got: {label_smoothing}")
    _not_differentiable("nll_loss_forward", "weight", weight)
    eps = float(label_smoothing)
    if input.ndim < 1:
        raise EmberValueError(f"[cross_entropy] Expected 1 or more dimensions (got {input.ndim})")
    if tuple(input.shape) == tuple(target.shape):
        if not target._dtype.is_floating_point:
            raise DTypeRuntimeError(
                f"[cross_entropy] Expected floating point type for target with class "
                f"probabilities, got {_type_name(target._dtype)}")
        if ignore_index >= 0:
            raise EmberRuntimeError(
                "[cross_entropy] ignore_index is not supported for floating point target")
        d = dt.promote_types(input._dtype, target._dtype)
        _check_weight("cross_entropy", input, weight, prefix="cross_entropy: ")
        return bind(CE.CROSS_ENTROPY_SOFT, to_dtype(input, d), to_dtype(target, d),
                    None if weight is None else to_dtype(weight, d), reduction=red,
                    label_smoothing=eps)
    target = _check_class_targets("cross_entropy", input, target)
    _check_weight("cross_entropy", input, weight)
    return bind(CE.CROSS_ENTROPY, input, target, weight, ignore_index=int(ignore_index),
                reduction=red, label_smoothing=eps)


# ------------------------------------------------------------------------ elementwise losses
def _broadcast_pair(op: str, input: Tensor, target: Tensor) -> tuple:
    """PyTorch warns when target and input sizes differ, then broadcasts them."""
    check_tensor(input, op)
    check_tensor(target, op, "target")
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(
            f"Using a target size ({_size(target.shape)}) that is different to the input size "
            f"({_size(input.shape)}). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.", stacklevel=3)
    d = dt.result_type(input, target)
    shape = broadcast_shapes(op, tuple(input.shape), tuple(target.shape))
    return expand_to(to_dtype(input, d), shape), expand_to(to_dtype(target, d), shape)


@autocast_op("fp32")
def mse_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
             reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Mean squared error ``(input - target) ** 2``."""
    red = _reduction(reduction, size_average, reduce)
    x, y = _broadcast_pair("mse_loss", input, target)
    if weight is None:
        return bind(L.MSE_LOSS, x, y, None, None, reduction=red)
    _check_same_size(weight, input)
    return _weighted(bind(L.MSE_LOSS, x, y, None, None, reduction="none"), weight, red, True)


def _check_same_size(weight: Tensor, input: Tensor) -> None:
    if tuple(weight.shape) != tuple(input.shape):
        raise EmberValueError("Weights and input must have the same size.")


def _weighted(loss: Tensor, weight: Tensor, reduction: str, by_weight: bool) -> Tensor:
    """PyTorch's weighted variants: ``mean`` divides by the summed weights (mse, l1) or by the
    element count (huber)."""
    out = loss * weight
    if reduction == "none":
        return out
    total = out.sum()  # type: ignore[attr-defined]
    if reduction == "sum":
        return total
    return total / (weight.sum() if by_weight else out.numel())  # type: ignore[attr-defined]


@autocast_op("fp32")
def l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
            reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Mean absolute error ``|input - target|``."""
    red = _reduction(reduction, size_average, reduce)
    x, y = _broadcast_pair("l1_loss", input, target)
    if weight is None:
        return bind(L.L1_LOSS, x, y, None, None, reduction=red)
    _check_same_size(weight, input)
    return _weighted(bind(L.L1_LOSS, x, y, None, None, reduction="none"), weight, red, True)


@autocast_op("fp32")
def smooth_l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """Quadratic ``0.5 d**2 / beta`` for ``|d| < beta``, linear ``|d| - beta/2`` beyond."""
    red = _reduction(reduction, size_average, reduce)
    if beta < 0:
        raise EmberRuntimeError(
            "[smooth_l1_loss] smooth_l1_loss does not support negative values for beta.")
    x, y = _broadcast_pair("smooth_l1_loss", input, target)
    if beta == 0.0:
        return bind(L.L1_LOSS, x, y, None, None, reduction=red)
    return bind(L.SMOOTH_L1_LOSS, x, y, None, None, reduction=red, beta=float(beta))


@autocast_op("fp32")
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """Quadratic ``0.5 d**2`` for ``|d| < delta``, linear ``delta (|d| - delta/2)`` beyond."""
    red = _reduction(reduction)
    if delta <= 0:
        raise EmberRuntimeError(
            "[huber_loss] huber_loss does not support non-positive values for delta.")
    if target._dtype is not input._dtype:
        # PyTorch's huber kernel casts the target to the input's float dtype, no promotion
        if not target._dtype.is_floating_point:
            raise DTypeRuntimeError(f"[huber_loss] Found dtype {_type_name(target._dtype)} but "
                                    f"expected {_type_name(input._dtype)}")
        target = to_dtype(target, input._dtype)
    x, y = _broadcast_pair("huber_loss", input, target)
    if weight is None:
        return bind(L.HUBER_LOSS, x, y, None, None, reduction=red, delta=float(delta))
    _check_same_size(weight, input)
    out = bind(L.HUBER_LOSS, x, y, None, None, reduction="none", delta=float(delta))
    return _weighted(out, weight, red, False)


def _expand_weight(op: str, weight: Tensor | None, shape: tuple, d: dt.dtype) -> Tensor | None:
    if weight is None:
        return None
    check_tensor(weight, op, "weight")
    full = broadcast_shapes(op, tuple(weight.shape), shape)
    if full != shape:
        raise ShapeError(f"[{op}] weight of shape {list(weight.shape)} cannot be broadcast to "
                         f"the input shape {list(shape)}")
    return expand_to(to_dtype(weight, d), shape)


@autocast_op("fp32")
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average: Any = None, reduce: Any = None,
                         reduction: str = "mean") -> Tensor:
    """``-w (t log(x) + (1 - t) log(1 - x))`` for probabilities ``x`` (logs clamped at -100)."""
    op = "binary_cross_entropy"
    check_tensor(input, op)
    check_tensor(target, op, "target")
    red = _reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise EmberValueError(
            f"[{op}] Using a target size ({_size(target.shape)}) that is different to the input "
            f"size ({_size(input.shape)}) is deprecated. Please ensure they have the same size.")
    if target._dtype is not input._dtype:
        raise DTypeRuntimeError(f"[{op}] Found dtype {_type_name(target._dtype)} but expected "
                                f"{_type_name(input._dtype)}")
    _not_differentiable(op, "weight", weight)
    w = _expand_weight(op, weight, tuple(input.shape), input._dtype)
    return bind(L.BINARY_CROSS_ENTROPY, input, target, w, None, reduction=red)


@autocast_op("fp32")
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, size_average: Any = None,
                                     reduce: Any = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """``binary_cross_entropy(sigmoid(input), target)`` computed stably from logits;
    ``pos_weight`` weighs the positive term per class."""
    op = "binary_cross_entropy_with_logits"
    check_tensor(input, op)
    check_tensor(target, op, "target")
    red = _reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise EmberValueError(f"[{op}] Target size ({_size(target.shape)}) must be the same as "
                              f"input size ({_size(input.shape)})")
    _not_differentiable(op, "weight", weight)
    _not_differentiable(op, "pos_weight", pos_weight)
    d = dt.result_type(input, target)
    shape = tuple(input.shape)
    return bind(L.BINARY_CROSS_ENTROPY_WITH_LOGITS, to_dtype(input, d), to_dtype(target, d),
                _expand_weight(op, weight, shape, d), _expand_weight(op, pos_weight, shape, d),
                reduction=red)


@autocast_op("fp32")
def kl_div(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence ``target * (log(target) - input)`` for log-probabilities
    ``input``; ``reduction='batchmean'`` divides the sum by the batch size."""
    check_tensor(input, "kl_div")
    check_tensor(target, "kl_div", "target")
    batchmean = False
    if size_average is not None or reduce is not None:
        red = _reduction(reduction, size_average, reduce)
    else:
        if reduction == "mean":
            warnings.warn(
                "reduction: 'mean' divides the total loss by both the batch size and the support "
                "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
                "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
                "major release.", stacklevel=2)
        batchmean = reduction == "batchmean"
        red = "sum" if batchmean else _reduction(reduction)
    d = dt.result_type(input, target)
    shape = broadcast_shapes("kl_div", tuple(input.shape), tuple(target.shape))
    x, y = expand_to(to_dtype(input, d), shape), expand_to(to_dtype(target, d), shape)
    out = bind(L.KL_DIV, x, y, None, None, reduction=red, log_target=bool(log_target))
    if batchmean and input.ndim != 0:
        out = out / input.shape[0]
    return out

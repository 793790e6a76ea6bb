"""Normalization functions (``ember.nn.functional``): layer_norm, rms_norm, group_norm,
batch_norm, instance_norm.  All bind the fused primitives of ``ember/ops/nn_norm.py``."""

from __future__ import annotations

import math
from typing import Any, Sequence

from ember import dtypes as dt
from ember._frontend.core import check_tensor
from ember.autograd.grad_mode import no_grad
from ember.autograd.graph import rename
from ember.errors import (
    DTypeRuntimeError,
    EmberNotImplementedError,
    EmberRuntimeError,
    EmberValueError,
)
from ember.nn.functional.conv import not_implemented_for
from ember.ops import nn_norm as N
from ember.ops.registry import bind
from ember.sym import SymInt
from ember.tensor import Tensor

__all__ = ["batch_norm", "group_norm", "instance_norm", "layer_norm", "rms_norm", "normalize"]


def _check_params(op: str, input: Tensor, shape: tuple, *params: Tensor | None) -> None:
    for p in params:
        if p is None:
            continue
        check_tensor(p, op, "weight")
        if p._dtype is not input._dtype:
            raise DTypeRuntimeError(f"[{op}] expected scalar type {input._dtype.name} but found "
                                    f"{p._dtype.name} (weight/bias must match the input dtype)")
        if tuple(p.shape) != shape:
            raise EmberRuntimeError(f"[{op}] Expected weight/bias of shape {list(shape)}, but "
                                    f"got {list(p.shape)}")


def _normalized(op: str, input: Tensor, normalized_shape: Any) -> tuple:
    check_tensor(input, op)
    shape = ((int(normalized_shape),) if isinstance(normalized_shape, int)
             else tuple(int(s) for s in normalized_shape))
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise EmberRuntimeError(
            f"[{op}] Given normalized_shape={list(shape)}, expected input with shape "
            f"[*, {', '.join(map(str, shape))}], but got input of size{list(input.shape)}")
    if not input._dtype.is_floating_point:
        raise not_implemented_for(op, "LayerNormKernelImpl", input._dtype)
    return shape, tuple(range(input.ndim - k, input.ndim))


def layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize over the trailing ``normalized_shape`` dims, then scale and shift.

    >>> layer_norm(ember.randn(2, 3), (3,)).shape
    ember.Size([2, 3])
    """
    shape, dims = _normalized("layer_norm", input, normalized_shape)
    _check_params("layer_norm", input, shape, weight, bias)
    return bind(N.LAYER_NORM, input, weight, bias, dims=dims, eps=float(eps))[0]


def rms_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing dims; ``eps`` defaults to
    ``finfo(input.dtype).eps``."""
    shape, dims = _normalized("rms_norm", input, normalized_shape)
    _check_params("rms_norm", input, shape, weight)
    if eps is None:
        eps = dt.finfo(input._dtype).eps
    return bind(N.RMS_NORM, input, weight, dims=dims, eps=float(eps))[0]


def _channel_view(p: Tensor | None, ndim: int) -> Tensor | None:
    """A per-channel (C,) parameter as (C, 1, ...) so it broadcasts against (N, C, *S)."""
    if p is None:
        return None
    return p.reshape((p.shape[0],) + (1,) * (ndim - 2))


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize each of ``num_groups`` channel groups of ``(N, C, *)`` per sample."""
    check_tensor(input, "group_norm")
    if input.ndim < 2:
        raise EmberRuntimeError(f"[group_norm] Expected at least 2 dimensions for input tensor "
                                f"but received {input.ndim}")
    n, c = input.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise EmberRuntimeError(
            f"[group_norm] Expected number of channels in input to be divisible by num_groups, "
            f"but got input of shape {list(input.shape)} and num_groups={num_groups}")
    spatial = tuple(input.shape[2:])
    size = [n * c // num_groups, num_groups] + list(spatial)
    if size[0] * math.prod(spatial) == 1:
        raise EmberValueError(f"[group_norm] Expected more than 1 value per channel when "
                              f"training, got input size {size}")
    _check_params("group_norm", input, (c,), weight, bias)
    if not input._dtype.is_floating_point:
        raise not_implemented_for("group_norm", "GroupNormKernelImpl", input._dtype)
    # (N, G, C/G, S): weight/bias as (G, C/G, 1) broadcast inside the fused kernel
    x = input.reshape(n, num_groups, c // num_groups, -1)
    pshape = (num_groups, c // num_groups, 1)
    w = weight.reshape(pshape) if weight is not None else None
    b = bias.reshape(pshape) if bias is not None else None
    y = bind(N.LAYER_NORM, x, w, b, dims=(2, 3), eps=float(eps))[0]
    return y.reshape(tuple(input.shape))


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalization over (N, *spatial) per channel of ``(N, C, *)``.

    Training uses the batch statistics and updates ``running_mean``/``running_var`` in place
    (the latter with the unbiased variance); evaluation uses the running statistics.
    """
    check_tensor(input, "batch_norm")
    if input.ndim < 2:
        raise EmberValueError(f"[batch_norm] expected 2D or higher input (got {input.ndim}D)")
    c = input.shape[1]
    _check_params("batch_norm", input, (c,), weight, bias)
    w, b = _channel_view(weight, input.ndim), _channel_view(bias, input.ndim)
    if training:
        count = input.numel() // max(c, 1)
        if count <= 1:
            raise EmberValueError(
                f"[batch_norm] Expected more than 1 value per channel when training, got input "
                f"size {input.shape}")
        dims = (0,) + tuple(range(2, input.ndim))
        y, mean, rstd = bind(N.LAYER_NORM, input, w, b, dims=dims, eps=float(eps))
        rename(y, "NativeBatchNormBackward0")   # the layer-norm op, named as PyTorch's kernel
        if running_mean is not None or running_var is not None:
            _update_running(running_mean, running_var, mean, rstd, c, count, momentum, eps)
        return y
    if running_mean is None or running_var is None:
        raise EmberRuntimeError("[batch_norm] running_mean and running_var must be defined in "
                                "evaluation mode")
    shape = (c,) + (1,) * (input.ndim - 2)
    scale = bind(N.RSQRT_EPS, running_var, eps=float(eps))
    if weight is not None:
        scale = scale * weight
    y = (input - running_mean.reshape(shape)) * scale.reshape(shape)
    return y + b if b is not None else y


def _update_running(running_mean: Tensor | None, running_var: Tensor | None, mean: Tensor,
                    rstd: Tensor, c: int, count: int, momentum: float, eps: float) -> None:
    with no_grad():
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(mean.reshape(c) * momentum)
        if running_var is not None:
            var = (1 / (rstd * rstd) - eps).reshape(c)
            if isinstance(count, SymInt):  # export: the unbiased factor stays symbolic
                from ember.ops.pointwise import DIV, MUL
                var = bind(DIV, bind(MUL, var, count), count - 1)
            else:
                var = var * (count / (count - 1))
            running_var.mul_(1 - momentum).add_(var * momentum)


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each channel of each sample over its spatial dims."""
    check_tensor(input, "instance_norm")
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if input.ndim < 3:
        raise EmberValueError(f"[instance_norm] expected 3D or higher input (got "
                              f"{input.ndim}D)")
    c = input.shape[1]
    _check_params("instance_norm", input, (c,), weight, bias)
    w, b = _channel_view(weight, input.ndim), _channel_view(bias, input.ndim)
    dims = tuple(range(2, input.ndim))
    y, mean, rstd = bind(N.LAYER_NORM, input, w, b, dims=dims, eps=float(eps))
    if running_mean is not None or running_var is not None:
        # PyTorch averages the per-sample statistics over the batch
        n = input.shape[0]
        count = input.numel() // max(n * c, 1)
        with no_grad():
            m = mean.reshape(n, c).sum(0) / n
            v = ((1 / (rstd * rstd) - eps).reshape(n, c) * (count / max(count - 1, 1))).sum(0) / n
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(m * momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(v * momentum)
    return y


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """``input / max(||input||_p along dim, eps)``, as ``F.normalize``.

    >>> F.normalize(ember.tensor([[3.0, 4.0]]))
    tensor([[0.6000, 0.8000]])
    """
    if out is not None:
        raise EmberNotImplementedError("[normalize] out= is not supported")
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    return input / denom

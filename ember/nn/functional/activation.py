"""Activation functions of ``ember.nn.functional`` (PyTorch's signatures and defaults).

Each function checks the dtype as PyTorch does, fills defaults and binds its fused pointwise
OpDef from ``ember/ops/nn_activation.py``; ``inplace=True`` computes out of place and commits
the result into the input with ``commit_inplace`` (version counter, autograd rebase, views).
"""

from __future__ import annotations

from typing import Any

from ember import dtypes as dt
from ember._frontend.autocast import autocast_op
from ember._frontend.core import check_tensor, to_dtype
from ember._frontend.inplace import _type_name, commit_inplace
from ember.autograd import grad_mode as _gm
from ember.errors import EmberNotImplementedError, EmberRuntimeError, EmberValueError
from ember.ops import registry as _reg
from ember.ops._util import wrap_dim
from ember.ops.nn_activation import ACTIVATIONS as _A
from ember.ops.nn_activation import GLU as _GLU
from ember.ops.nn_activation import PRELU as _PRELU
from ember.ops.registry import bind
from ember.tensor import Tensor, tensor_method

__all__ = [
    "celu", "celu_", "elu", "elu_", "gelu", "glu", "hardshrink", "hardsigmoid", "hardswish",
    "hardtanh", "hardtanh_", "leaky_relu", "leaky_relu_", "logsigmoid", "mish", "prelu", "relu",
    "relu6", "relu_", "selu", "selu_", "sigmoid", "silu", "softplus", "softshrink", "softsign",
    "tanh", "tanhshrink", "threshold", "threshold_",
]

_RELU = _A["relu"]
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _float_only(input: Tensor, op: str, kernel: str) -> None:
    """PyTorch's dispatch error for float-only kernels given integer/bool tensors."""
    check_tensor(input, op)
    if not input._dtype.is_floating_point:
        raise EmberNotImplementedError(
            f"[{op}] \"{kernel}\" not implemented for '{_type_name(input._dtype)}'")


def _apply(name: str, input: Tensor, inplace: bool, op: str, **params: Any) -> Tensor:
    """Bind activation ``name``; in place, commit into ``input``.  The gradient reads the
    input's old values, so when autograd records, the op runs on a clone (PyTorch saves the
    original ``self`` of in-place ops the same way)."""
    if not inplace:
        return bind(_A[name], input, **params)
    src = input
    if input._requires_grad and _gm.STATE.grad_enabled:
        src = input.clone()  # type: ignore[attr-defined]
    return commit_inplace(input, bind(_A[name], src, **params), op + "_")


def _float_act(name: str, kernel: str, input: Tensor, inplace: bool, op: str | None = None,
               **params: Any) -> Tensor:
    _float_only(input, op or name, kernel)
    return _apply(name, input, inplace, op or name, **params)


# ------------------------------------------------------------------------ piecewise linear
@tensor_method("relu")
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(input, 0)`` elementwise (integer tensors too)."""
    if not inplace and isinstance(input, Tensor) and input._dtype is not dt.bool:
        return _reg._binder(_RELU, (input,), {})  # what _apply binds (the frequent case, direct)
    check_tensor(input, "relu")
    if input._dtype is dt.bool:
        raise EmberRuntimeError("[relu] Boolean inputs not supported for relu")
    return _apply("relu", input, inplace, "relu")


def relu_(input: Tensor) -> Tensor:
    """In-place ``relu``."""
    return relu(input, inplace=True)


Tensor.relu_ = relu_  # type: ignore[attr-defined]


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """Clamp to ``[min_val, max_val]`` (gradient 1 strictly inside, 0 outside)."""
    check_tensor(input, "hardtanh")
    if min_val > max_val:
        raise EmberValueError("[hardtanh] min_val cannot be greater than max_val")
    if input._dtype is dt.bool:
        raise EmberRuntimeError("[hardtanh] Bool inputs not supported for hardtanh")
    return _apply("hardtanh", input, inplace, "hardtanh", min_val=min_val, max_val=max_val)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(input, 0), 6)``: ``hardtanh(input, 0, 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``input`` where positive, ``negative_slope * input`` elsewhere."""
    return _float_act("leaky_relu", "leaky_relu_cpu", input, inplace,
                      negative_slope=float(negative_slope))


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    return leaky_relu(input, negative_slope, inplace=True)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``value`` where ``input <= threshold``, ``input`` elsewhere."""
    check_tensor(input, "threshold")
    if input._dtype is dt.bool:
        raise EmberNotImplementedError("[threshold] \"threshold_cpu\" not implemented for 'Bool'")
    return _apply("threshold", input, inplace, "threshold", threshold=threshold, value=value)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    return globals()["threshold"](input, threshold, value, inplace=True)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(input + 3) / 6``."""
    return _float_act("hardsigmoid", "hardsigmoid_cpu", input, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``input * relu6(input + 3) / 6``."""
    return _float_act("hardswish", "hardswish_cpu", input, inplace)


# ------------------------------------------------------------------------ smooth
_GELU_MODES = ("none", "tanh")


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``input * Phi(input)`` (exact, with erf) or its tanh approximation."""
    if approximate not in _GELU_MODES:
        raise EmberRuntimeError("[gelu] approximate argument must be either none or tanh.")
    return _float_act("gelu", "GeluKernelImpl", input, False, approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``input * sigmoid(input)``."""
    return _float_act("silu", "silu_cpu", input, inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``input * tanh(softplus(input))``."""
    return _float_act("mish", "mish_cpu", input, inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * input)) / beta``, linear where ``beta * input > threshold``."""
    return _float_act("softplus", "softplus_cpu", input, False, beta=float(beta),
                      threshold=float(threshold))


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``input`` where positive, ``alpha * (exp(input) - 1)`` elsewhere."""
    return _float_act("elu", "elu_cpu", input, inplace, alpha=float(alpha), scale=1.0,
                      input_scale=1.0)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return elu(input, alpha, inplace=True)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(input, alpha)`` with the self-normalising constants."""
    return _float_act("elu", "elu_cpu", input, inplace, op="selu", alpha=_SELU_ALPHA,
                      scale=_SELU_SCALE, input_scale=1.0)


def selu_(input: Tensor) -> Tensor:
    return selu(input, inplace=True)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise EmberRuntimeError("[celu] ZeroDivisionError: alpha cannot be 0 for CELU")
    return _float_act("elu", "elu_cpu", input, inplace, op="celu", alpha=float(alpha), scale=1.0,
                      input_scale=1.0 / float(alpha))


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return celu(input, alpha, inplace=True)


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(input))``, computed without overflow."""
    return _float_act("log_sigmoid", "log_sigmoid_cpu", input, False)


def _promote_float(input: Tensor, op: str) -> Tensor:
    check_tensor(input, op)
    if not input._dtype.is_floating_point:
        return to_dtype(input, dt.get_default_dtype())
    return input


def sigmoid(input: Tensor) -> Tensor:
    """``1 / (1 + exp(-input))`` (``ember.sigmoid``)."""
    from ember._frontend import pointwise_math
    return pointwise_math.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent (``ember.tanh``)."""
    from ember._frontend import pointwise_math
    return pointwise_math.tanh(input)


def softsign(input: Tensor) -> Tensor:
    """``input / (1 + |input|)``."""
    check_tensor(input, "softsign")
    if input._dtype is dt.bool:
        raise EmberNotImplementedError("[softsign] \"abs_cpu\" not implemented for 'Bool'")
    return bind(_A["softsign"], _promote_float(input, "softsign"))


def tanhshrink(input: Tensor) -> Tensor:
    """``input - tanh(input)``."""
    check_tensor(input, "tanhshrink")
    if input._dtype is dt.bool:
        raise EmberRuntimeError(
            "[tanhshrink] Subtraction, the `-` operator, with a bool tensor is not supported. "
            "If you are trying to invert a mask, use the `~` or `logical_not()` operator "
            "instead.")
    return bind(_A["tanhshrink"], _promote_float(input, "tanhshrink"))


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit ``a * sigmoid(b)`` where ``a, b`` are the halves of ``input`` along
    ``dim``."""
    check_tensor(input, "glu")
    if input.ndim == 0:
        raise EmberRuntimeError("[glu] glu does not support scalars because halving size must "
                                "be even")
    d = wrap_dim(dim, input.ndim, "glu")
    if input.shape[d] % 2:
        raise EmberRuntimeError(f"[glu] Halving dimension must be even, but dimension {d} is "
                                f"size {input.shape[d]}")
    _float_only(input, "glu", "glu_cpu")
    return bind(_GLU, input, dim=d)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``input`` where ``|input| > lambd``, 0 elsewhere."""
    return _float_act("hardshrink", "hardshrink_cpu", input, False, lambd=float(lambd))


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``input`` shrunk toward 0 by ``lambd`` (0 inside ``[-lambd, lambd]``)."""
    _float_only(input, "softshrink", "softshrink_cpu")
    if lambd < 0:
        raise EmberRuntimeError(
            f"[softshrink] lambda must be in range [0, 3.40282e+38] for input dtype "
            f"{_type_name(input._dtype)}, but found {lambd:g}")
    return _apply("softshrink", input, False, "softshrink", lambd=float(lambd))


@autocast_op("lower")
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``input`` where positive, ``weight * input`` elsewhere; ``weight`` has one element or
    one per channel (dim 1)."""
    check_tensor(input, "prelu")
    check_tensor(weight, "prelu", "weight")
    if weight.ndim > 1:
        raise EmberRuntimeError(f"[prelu] prelu: Expected `weight` to be a scalar or 1D tensor, "
                                f"but got: ndim = {weight.ndim}")
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() != 1 and weight.numel() != channels:
        raise EmberRuntimeError(
            f"[prelu] Mismatch of parameter numbers and input channel size. Found parameter "
            f"numbers = {weight.numel()} and channel size = {channels}.")
    if weight._dtype is not input._dtype:
        raise EmberRuntimeError(f"[prelu] prelu: Type promoting not supported. Got "
                                f"{_type_name(input._dtype)} and {_type_name(weight._dtype)}")
    _float_only(input, "prelu", "prelu_cpu")
    return bind(_PRELU, input, weight)

"""Helpers of ``Module``: argument parsing for ``to``, one state-dict entry's load, the
always-called forward hooks, and the ``load_state_dict`` result type."""

from __future__ import annotations

import warnings
from collections import namedtuple
from typing import Any

from ember import dtypes as _dt
from ember.autograd.grad_mode import no_grad
from ember.errors import EmberTypeError
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def run_always_called(module: Any, args: Any, kwargs: Any, result: Any,
                       called: set) -> None:
    for hook_id, hook in tuple(module._forward_hooks.items()):
        if hook_id in module._forward_hooks_always_called and hook_id not in called:
            try:
                if hook_id in module._forward_hooks_with_kwargs:
                    hook(module, args, kwargs, result)
                else:
                    hook(module, args, result)
            except Exception as e:
                warnings.warn("module forward hook with ``always_call=True`` raised an exception "
                              f"that was silenced as another error was raised in forward: {e}",
                              stacklevel=2)


def load_one(module: Any, name: str, key: str, param: Tensor, input_param: Any,
              assign: bool, error_msgs: list) -> None:
    if not isinstance(input_param, Tensor):
        error_msgs.append(
            f'While copying the parameter named "{key}", expected ember.Tensor or Tensor-like '
            f"object from checkpoint but received {type(input_param)}"
        )
        return
    # backward compatibility with checkpoints that stored 0-d values as shape (1,)
    if len(param.shape) == 0 and len(input_param.shape) == 1 and input_param.shape[0] == 1:
        input_param = input_param[0]
    if input_param.shape != param.shape:
        error_msgs.append(
            f"size mismatch for {key}: copying a param with shape {input_param.shape} from "
            f"checkpoint, the shape in current model is {param.shape}."
        )
        return
    try:
        with no_grad():
            if assign:
                if isinstance(param, Parameter):
                    if not isinstance(input_param, Parameter):
                        input_param = Parameter(input_param, requires_grad=param.requires_grad)
                    else:
                        input_param.requires_grad_(param.requires_grad)
                setattr(module, name, input_param)
            else:
                param.copy_(input_param)
    except Exception as ex:
        error_msgs.append(
            f'While copying the parameter named "{key}", whose dimensions in the model are '
            f"{param.size()} and whose dimensions in the checkpoint are {input_param.size()}, "
            f"an exception occurred : {ex.args}."
        )


def parse_to(args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """(device, dtype) from Module.to's overloads."""
    from ember.device import device as _device
    kwargs = dict(kwargs)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    tensor = kwargs.pop("tensor", None)
    if kwargs:
        raise TypeError(f"to() received an invalid combination of arguments: {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            tensor = a
        elif isinstance(a, _dt.dtype):
            dtype = a
        elif isinstance(a, (str, _device)):
            device = a
        elif isinstance(a, bool):
            continue  # non_blocking
        else:
            raise EmberTypeError(
                f"[Module.to] expected a device, dtype or Tensor, got {type(a).__name__}"
            )
    if tensor is not None:
        device, dtype = tensor.device, tensor.dtype
    return device, dtype



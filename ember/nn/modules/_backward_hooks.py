"""Module full backward hooks: identity autograd Functions around a module's inputs and outputs
report ``grad_output`` (and run backward pre-hooks) and then ``grad_input`` (and run hooks)."""

from __future__ import annotations

import warnings
from typing import Any, Callable

from ember.autograd.function import Function
from ember.tensor import Tensor


class _Identity(Function):
    """Passes tensors through; its backward hands their grads to ``on_grads``."""

    @staticmethod
    def forward(ctx: Any, on_grads: Callable, *args: Tensor) -> tuple:
        ctx.on_grads = on_grads
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        return args

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        return (None, *ctx.on_grads(grads))


def _pack(indices: list, values: tuple, n: int) -> tuple:
    out: list = [None] * n
    for i, v in zip(indices, values):
        out[i] = v
    return tuple(out)


class BackwardHook:
    """The state of one forward call of a module with full backward (pre-)hooks."""

    def __init__(self, module: Any, hooks: list, pre_hooks: list) -> None:
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.grad_outputs: tuple | None = None
        self.n_inputs = 0
        self.input_index: list = []

    def setup_input_hook(self, args: tuple) -> tuple:
        self.n_inputs = len(args)
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not any(args[i].requires_grad for i in idx):
            return args
        self.input_index = idx
        new = _Identity.apply(self._on_grad_input, *[args[i] for i in idx])
        out = list(args)
        for i, t in zip(idx, new):
            out[i] = t
        return tuple(out)

    def setup_output_hook(self, result: Any) -> Any:
        is_tuple = isinstance(result, tuple)
        outs = list(result) if is_tuple else [result]
        idx = [i for i, o in enumerate(outs) if isinstance(o, Tensor)]
        if not any(outs[i].requires_grad for i in idx):
            return result
        self.output_index, self.n_outputs = idx, len(outs)
        new = _Identity.apply(self._on_grad_output, *[outs[i] for i in idx])
        for i, t in zip(idx, new):
            outs[i] = t
        return tuple(outs) if is_tuple else outs[0]

    def _on_grad_output(self, grads: tuple) -> tuple:
        grad_outputs = _pack(self.output_index, grads, self.n_outputs)
        for hook in self.pre_hooks:
            res = hook(self.module, grad_outputs)
            if res is not None:
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                if len(res) != len(grad_outputs):
                    raise RuntimeError(
                        "Backward pre hook returned an invalid number of grad_output, got "
                        f"{len(res)}, but expected {len(grad_outputs)}"
                    )
                grad_outputs = res
        self.grad_outputs = grad_outputs
        if not self.input_index:  # no input requires grad: the hooks run now, with Nones
            warnings.warn(
                "Full backward hook is firing when gradients are computed with respect to module "
                "outputs since no inputs require gradients. See "
                "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                "#torch.nn.Module.register_full_backward_hook for more details.", stacklevel=5)
            grad_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                res = hook(self.module, grad_inputs, self.grad_outputs)
                if res is not None and not all(r is None for r in res):
                    raise RuntimeError(
                        "Backward hook for Modules where no input requires gradient should "
                        "always return None or None for all gradients."
                    )
        return tuple(grad_outputs[i] for i in self.output_index)

    def _on_grad_input(self, grads: tuple) -> tuple:
        grad_inputs = _pack(self.input_index, grads, self.n_inputs)
        for hook in self.hooks:
            res = hook(self.module, grad_inputs, self.grad_outputs)
            if res is None:
                continue
            res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
            if len(res) != len(grad_inputs):
                raise RuntimeError(
                    "Backward hook returned an invalid number of grad_input, got "
                    f"{len(res)}, but expected {len(grad_inputs)}"
                )
            grad_inputs = res
        return tuple(grad_inputs[i] for i in self.input_index)

"""Adagrad: per-coordinate learning rates from the running sum of squared gradients."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember._frontend.creation import full_like
from ember.optim.optimizer import (
    Optimizer,
    _advance_step,
    _check_hparams,
    _next_count,
    _recompute,
    _scalar_step,
)
from ember.tensor import Tensor

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """``torch.optim.Adagrad``; like torch, the state is created for every param up front.

    Example::

        opt = Adagrad([w], lr=1e-2, lr_decay=1e-3, initial_accumulator_value=0.1)
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        _check_hparams(lr, lr_decay=lr_decay, weight_decay=weight_decay,
                       initial_accumulator_value=initial_accumulator_value, eps=eps)
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value,
                    "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
                    "fused": fused}
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = _scalar_step()
                state["sum"] = full_like(p, group["initial_accumulator_value"])

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        lr, wd = float(group["lr"]), group["weight_decay"]
        state = self.state[p]
        step_t = state["step"]
        step = _advance_step(step_t, recomputed=True)
        grad = -p.grad if group["maximize"] else p.grad
        if wd != 0:
            grad = grad.add(p, alpha=wd)
        decay = group["lr_decay"]
        neg_clr = _neg_clr(step, lr, decay)
        _recompute((neg_clr,), lambda: (_neg_clr(_next_count(step_t), lr, decay),))
        state_sum = state["sum"]
        state_sum.addcmul_(grad, grad, value=1)
        std = state_sum.sqrt().add_(group["eps"])
        p.addcdiv_(grad, std, value=neg_clr)


def _neg_clr(step: float, lr: float, lr_decay: float) -> float:
    return -(lr / (1 + (step - 1) * lr_decay))

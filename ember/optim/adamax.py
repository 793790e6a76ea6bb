"""Adamax: Adam with the infinity norm of past gradients in place of the second moment."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember._frontend.creation import zeros_like
from ember._frontend.pointwise_logic import maximum
from ember.optim.optimizer import (
    Optimizer,
    _advance_step,
    _check_hparams,
    _next_count,
    _recompute,
    _scalar_step,
)
from ember.tensor import Tensor

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """``torch.optim.Adamax``, torch's single-tensor update step for step.

    Example::

        opt = Adamax(model.parameters(), lr=2e-3, betas=(0.9, 0.999))
    """

    def __init__(self, params: Iterable[Any], lr: float | Tensor = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        _check_hparams(lr, eps=eps, betas=betas, weight_decay=weight_decay)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}
        super().__init__(params, defaults)

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        lr, eps, wd = float(group["lr"]), group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        state = self.state[p]
        if len(state) == 0:
            state["step"] = _scalar_step()
            state["exp_avg"] = zeros_like(p)
            state["exp_inf"] = zeros_like(p)
        exp_avg, exp_inf, step_t = state["exp_avg"], state["exp_inf"], state["step"]
        grad = -p.grad if group["maximize"] else p.grad
        step = _advance_step(step_t, recomputed=True)
        if wd != 0:
            grad = grad.add(p, alpha=wd)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_inf.copy_(maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
        neg_clr = _neg_clr(step, lr, beta1)
        _recompute((neg_clr,), lambda: (_neg_clr(_next_count(step_t), lr, beta1),))
        p.addcdiv_(exp_avg, exp_inf, value=neg_clr)


def _neg_clr(step: float, lr: float, beta1: float) -> float:
    return -(lr / (1 - beta1**step))

"""RAdam: Adam with a rectified (variance-aware) adaptive learning rate."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember._frontend.creation import zeros_like
from ember._lazy import STATE as _LZ
from ember.optim.optimizer import (
    Optimizer,
    _advance_step,
    _check_hparams,
    _next_count,
    _recompute,
    _scalar_step,
)
from ember.tensor import Tensor

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """``torch.optim.RAdam``; ``decoupled_weight_decay=True`` gives RAdamW.  Until the
    variance of the adaptive rate is tractable (``rho_t <= 5``) the step is plain momentum.

    Example::

        opt = RAdam(model.parameters(), lr=1e-3, weight_decay=1e-2, decoupled_weight_decay=True)
    """

    def __init__(self, params: Iterable[Any], lr: float | Tensor = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        _check_hparams(lr, eps=eps, betas=betas, weight_decay=weight_decay)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "foreach": foreach, "capturable": capturable,
                    "decoupled_weight_decay": decoupled_weight_decay,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        lr, eps, wd = float(group["lr"]), group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        state = self.state[p]
        if len(state) == 0:
            state["step"] = _scalar_step()
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
        exp_avg, exp_avg_sq, step_t = state["exp_avg"], state["exp_avg_sq"], state["step"]
        grad = -p.grad if group["maximize"] else p.grad
        step = _advance_step(step_t, recomputed=True)
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                grad = grad.add(p, alpha=wd)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        nums = _radam_scalars(step, beta1, beta2)
        bias_correction1, bias_correction2_sqrt, rect = nums
        bias_corrected_exp_avg = exp_avg / bias_correction1
        if rect is None:
            if _LZ.recorder is not None:
                # rho_t grows with the step: a replay could not switch to the other branch
                _LZ.recorder.refuse("RAdam takes its warm-up branch (rho_t <= 5) on this step")
            p.add_(bias_corrected_exp_avg * lr, alpha=-1.0)
            return
        # rho_t only grows with the step, so later steps stay on this branch
        _recompute(nums, lambda: _radam_scalars(_next_count(step_t), beta1, beta2))
        # torch's ``number / tensor`` is ``tensor.reciprocal() * number``
        adaptive_lr = exp_avg_sq.sqrt().add_(eps).reciprocal().mul(bias_correction2_sqrt)
        p.add_(bias_corrected_exp_avg * lr * adaptive_lr * rect, alpha=-1.0)


def _radam_scalars(step: float, beta1: float, beta2: float) -> tuple:
    """(bias correction 1, sqrt of bias correction 2, rectification term or None while
    ``rho_t <= 5``) of step number ``step``."""
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
    if rho_t <= 5.0:
        return bias_correction1, bias_correction2**0.5, None
    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
    return bias_correction1, bias_correction2**0.5, rect

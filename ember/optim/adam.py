"""Adam and AdamW (decoupled weight decay), torch's single-tensor update step for step."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember._frontend.creation import zeros_like
from ember._frontend.pointwise_logic import maximum
from ember.optim.optimizer import Optimizer, _advance_step, _scalar_step
from ember.tensor import Tensor

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """``torch.optim.Adam``; ``decoupled_weight_decay=True`` gives AdamW.

    Example::

        opt = Adam([w], lr=1e-3, betas=(0.9, 0.999), amsgrad=True)
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not (isinstance(betas[0], float) and isinstance(betas[1], float)
                or isinstance(betas[0], Tensor) and isinstance(betas[1], Tensor)):
            raise ValueError("betas must be either both floats or both Tensors")
        betas = tuple(float(b) for b in betas)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable, "fused": fused,
                    "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)

    def _state_for(self, p: Tensor, amsgrad: bool) -> dict[str, Any]:
        state = self.state[p]
        if len(state) == 0:
            state["step"] = _scalar_step()
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = zeros_like(p)
        return state

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        lr, wd, eps = float(group["lr"]), group["weight_decay"], group["eps"]
        beta1, beta2 = group["betas"]
        amsgrad = group["amsgrad"]
        state = self._state_for(p, amsgrad)
        grad = -p.grad if group["maximize"] else p.grad
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        step = _advance_step(state["step"])
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                grad = grad.add(p, alpha=wd)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = bias_correction2**0.5
        if amsgrad:
            max_sq = state["max_exp_avg_sq"]
            max_sq.copy_(maximum(max_sq, exp_avg_sq))
            denom = (max_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        else:
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        p.addcdiv_(exp_avg, denom, value=-step_size)


class AdamW(Adam):
    """``torch.optim.AdamW``: Adam with decoupled weight decay (``p *= 1 - lr * wd``).

    Example::

        opt = AdamW([w], lr=1e-3, weight_decay=1e-2)
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)

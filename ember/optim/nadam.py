"""NAdam: Adam with Nesterov momentum (and a momentum schedule), torch's single-tensor step."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember._frontend.creation import zeros_like
from ember.optim.optimizer import (
    Optimizer,
    _advance_step,
    _check_hparams,
    _next_count,
    _recompute,
    _scalar_state,
    _scalar_step,
)
from ember.tensor import Tensor

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """``torch.optim.NAdam``; ``decoupled_weight_decay=True`` gives NAdamW.

    Example::

        opt = NAdam(model.parameters(), lr=2e-3, momentum_decay=4e-3)
    """

    def __init__(self, params: Iterable[Any], lr: float | Tensor = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        _check_hparams(lr, eps=eps, betas=betas, weight_decay=weight_decay,
                       momentum_decay=momentum_decay)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "momentum_decay": momentum_decay,
                    "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize,
                    "foreach": foreach, "capturable": capturable,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        lr, eps, wd = float(group["lr"]), group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        state = self.state[p]
        if len(state) == 0:
            state["step"] = _scalar_step()
            state["mu_product"] = _scalar_state(1.0)
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        step_t, mu_product = state["step"], state["mu_product"]
        grad = -p.grad if group["maximize"] else p.grad
        step = _advance_step(step_t, recomputed=True)
        # the numbers of this step; mu_product is read before it is written (see _advance_step)
        decay = group["momentum_decay"]
        nums = _nadam_scalars(step, mu_product, lr, beta1, beta2, decay)
        _recompute(nums, lambda: _nadam_scalars(_next_count(step_t), mu_product, lr, beta1,
                                                beta2, decay))
        bias_correction2, mu, grad_coef, avg_coef = nums
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                grad = grad.add(p, alpha=wd)
        mu_product.mul_(mu)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = exp_avg_sq.div(bias_correction2).sqrt()
        denom.add_(eps)
        p.addcdiv_(grad, denom, value=grad_coef)
        p.addcdiv_(exp_avg, denom, value=avg_coef)


def _nadam_scalars(step: float, mu_product: Tensor, lr: float, beta1: float, beta2: float,
                   momentum_decay: float) -> tuple[float, float, float, float]:
    """(bias correction 2, mu, grad and exp_avg coefficients) of step number ``step`` given the
    ``mu_product`` state before it, whose new value is computed here as ``mu_product.mul_(mu)``
    rounds it (in its own dtype), so that the state is read only before it is written."""
    bias_correction2 = 1 - beta2**step
    mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
    mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
    dt = mu_product.dtype
    compute = dt.compute_np.type
    new_product = float(dt.np.type(compute(mu_product.item()) * compute(mu)))
    mu_product_next = new_product * mu_next
    grad_coef = -lr * (1.0 - mu) / (1.0 - new_product)
    avg_coef = (-lr * mu_next) / (1.0 - mu_product_next)
    return bias_correction2, mu, grad_coef, avg_coef

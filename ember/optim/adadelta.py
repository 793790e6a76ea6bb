"""Adadelta: step sizes from running averages of squared gradients and squared updates."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember._frontend.creation import zeros_like
from ember.optim.optimizer import Optimizer, _check_hparams, _scalar_step
from ember.tensor import Tensor

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """``torch.optim.Adadelta``, torch's single-tensor update step for step.

    Example::

        opt = Adadelta(model.parameters(), lr=1.0, rho=0.9, eps=1e-6)
    """

    def __init__(self, params: Iterable[Any], lr: float | Tensor = 1.0, rho: float = 0.9,
                 eps: float = 1e-6, weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        _check_hparams(lr, rho=rho, eps=eps, weight_decay=weight_decay)
        defaults = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "capturable": capturable, "foreach": foreach,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        lr, rho, eps, wd = float(group["lr"]), group["rho"], group["eps"], group["weight_decay"]
        state = self.state[p]
        if len(state) == 0:
            state["step"] = _scalar_step()
            state["square_avg"] = zeros_like(p)
            state["acc_delta"] = zeros_like(p)
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        state["step"].add_(1)   # counted, never read: nothing here depends on the step number
        grad = -p.grad if group["maximize"] else p.grad
        if wd != 0:
            grad = grad.add(p, alpha=wd)
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_()
        delta.div_(std).mul_(grad)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-lr)

"""RMSprop (optionally centered, with momentum), torch's single-tensor update."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember._frontend.creation import zeros_like
from ember.optim.optimizer import Optimizer, _check_hparams, _scalar_step
from ember.tensor import Tensor

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """``torch.optim.RMSprop``: divide the gradient by a running RMS of its recent values.

    Example::

        opt = RMSprop([w], lr=1e-2, alpha=0.99, momentum=0.9, centered=True)
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        _check_hparams(lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        defaults = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
                    "centered": centered, "weight_decay": weight_decay,
                    "capturable": capturable, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        lr, alpha, eps = float(group["lr"]), group["alpha"], group["eps"]
        momentum, wd = group["momentum"], group["weight_decay"]
        state = self.state[p]
        if len(state) == 0:
            state["step"] = _scalar_step()
            state["square_avg"] = zeros_like(p)
            if momentum > 0:
                state["momentum_buffer"] = zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = zeros_like(p)
        grad = -p.grad if group["maximize"] else p.grad
        square_avg = state["square_avg"]
        state["step"].add_(1)
        if wd != 0:
            grad = grad.add(p, alpha=wd)
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.lerp_(grad, 1 - alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg = avg.add_(eps)
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf.mul_(momentum).addcdiv_(grad, avg)
            p.add_(buf, alpha=-lr)
        else:
            p.addcdiv_(grad, avg, value=-lr)

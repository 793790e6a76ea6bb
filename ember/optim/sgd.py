"""Stochastic gradient descent with optional momentum, Nesterov momentum and weight decay."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember.optim.optimizer import Optimizer
from ember.tensor import Tensor

__all__ = ["SGD"]


class SGD(Optimizer):
    """``torch.optim.SGD``: ``p -= lr * (momentum buffer or grad)``, torch's update order.

    Example::

        opt = SGD([w], lr=0.1, momentum=0.9, nesterov=True)
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        # not _check_hparams: torch's SGD tests ``x < 0`` (a NaN passes), the others ``0 <= x``
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
                    "foreach": foreach, "differentiable": differentiable, "fused": fused}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        lr, momentum, wd = float(group["lr"]), group["momentum"], group["weight_decay"]
        grad = -p.grad if group["maximize"] else p.grad
        if wd != 0:
            grad = grad.add(p, alpha=wd)
        if momentum != 0:
            state = self.state[p]
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = grad.clone().detach()
                state["momentum_buffer"] = buf
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - group["dampening"])
            grad = grad.add(buf, alpha=momentum) if group["nesterov"] else buf
        p.add_(grad, alpha=-lr)

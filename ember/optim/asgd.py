"""ASGD: averaged stochastic gradient descent (decaying step size, running average ``ax``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember._frontend.creation import zeros_like
from ember._lazy import STATE as _LZ
from ember.dtypes import get_default_dtype
from ember.optim.optimizer import (
    Optimizer,
    _advance_step,
    _check_hparams,
    _scalar_state,
    _scalar_step,
)
from ember.tensor import Tensor

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """``torch.optim.ASGD``, torch's single-tensor update step for step.  The state keeps the
    current step size ``eta``, the averaging coefficient ``mu`` and the average ``ax``.

    Example::

        opt = ASGD(model.parameters(), lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6)
    """

    def __init__(self, params: Iterable[Any], lr: float | Tensor = 1e-2, lambd: float = 1e-4,
                 alpha: float = 0.75, t0: float = 1e6, weight_decay: float = 0,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        _check_hparams(lr, weight_decay=weight_decay)
        defaults = {"lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0,
                    "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
        super().__init__(params, defaults)

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        lr, lambd, wd = float(group["lr"]), group["lambd"], group["weight_decay"]
        state = self.state[p]
        if len(state) == 0:
            state["step"] = _scalar_step()
            state["eta"] = _scalar_state(lr)
            state["mu"] = _scalar_state(1.0)
            state["ax"] = zeros_like(p)
        ax, eta, mu = state["ax"], state["eta"], state["mu"]
        if _LZ.recorder is not None:
            _LZ.recorder.refuse("ASGD reads its eta and mu state as Python numbers (and "
                                "branches on mu)")
        grad = -p.grad if group["maximize"] else p.grad
        # eta and mu are read before they are written (see _advance_step)
        eta_value, mu_is_one = eta.item(), mu.item() == 1
        step = _advance_step(state["step"], recomputed=True)
        if wd != 0:
            grad = grad.add(p, alpha=wd)
        p.mul_(1 - lambd * eta_value)
        p.add_(grad, alpha=-eta_value)
        if mu_is_one:
            ax.copy_(p)
        else:
            ax.add_(p.sub(ax).mul_(mu))
        # torch copies ``as_tensor(number)``: the number rounded to the default dtype
        rounded = get_default_dtype().np.type
        eta.fill_(float(rounded(lr / ((1 + lambd * lr * step) ** group["alpha"]))))
        mu.fill_(float(rounded(1 / max(1, step - group["t0"]))))

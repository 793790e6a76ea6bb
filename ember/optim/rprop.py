"""Rprop: per-coordinate step sizes that grow while the gradient keeps its sign."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember._frontend.creation import full_like, zeros_like
from ember._frontend.pointwise_logic import where
from ember.optim.optimizer import Optimizer, _check_hparams, _scalar_step
from ember.tensor import Tensor

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """``torch.optim.Rprop``: the sign of the gradient times a step size that is multiplied by
    ``etas[1]`` while the sign holds and by ``etas[0]`` when it flips (then the step is
    skipped), clamped to ``step_sizes``.

    Example::

        opt = Rprop(model.parameters(), lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50))
    """

    def __init__(self, params: Iterable[Any], lr: float | Tensor = 1e-2,
                 etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        _check_hparams(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = {"lr": lr, "etas": etas, "step_sizes": step_sizes, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}
        super().__init__(params, defaults)

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        state = self.state[p]
        if len(state) == 0:
            state["step"] = _scalar_step()
            state["prev"] = zeros_like(p)
            state["step_size"] = full_like(p.grad, float(group["lr"]))
        prev, step_size = state["prev"], state["step_size"]
        state["step"].add_(1)
        grad = -p.grad if group["maximize"] else p.grad
        # torch assigns through boolean masks; where() gives the same values without making
        # the compiled graph depend on data
        sign = grad.mul(prev).sign()
        sign = where(sign.gt(0), etaplus, sign)
        sign = where(sign.lt(0), etaminus, sign)
        sign = where(sign.eq(0), 1, sign)
        step_size.mul_(sign).clamp_(step_size_min, step_size_max)
        grad = where(sign.eq(etaminus), 0, grad)
        p.addcmul_(grad.sign(), step_size, value=-1)
        prev.copy_(grad)

"""L-BFGS with an optional strong-Wolfe line search: torch.optim.LBFGS, line for line.

Like torch, the scalars of the method (``ys``, ``ro``, ``H_diag``, ``al``, ``gtd``, often ``t``)
are 0-d tensors, and the loss is read as a Python number (``float(closure())``): inside
``ember.compile`` each such read is a graph break, which gives the same numbers as eager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember._frontend.creation import zeros
from ember._frontend.movement import cat
from ember.autograd.grad_mode import enable_grad, no_grad
from ember.optim._line_search import strong_wolfe
from ember.optim.optimizer import Optimizer, _check_hparams
from ember.tensor import Tensor

__all__ = ["LBFGS"]


def _number(x: Any) -> Any:
    """An ``alpha`` for ``add_``: torch turns a 0-d tensor into its Python number."""
    return x.item() if isinstance(x, Tensor) else x


class LBFGS(Optimizer):
    """``torch.optim.LBFGS``: one param group; ``step(closure)`` runs up to ``max_iter``
    iterations, calling ``closure`` (which zeroes grads, computes the loss, calls
    ``backward()`` and returns the loss) up to ``max_eval`` times.  The state lives under the
    first parameter (``func_evals``, ``n_iter``, ``d``, ``t``, ``old_dirs``, ``old_stps``,
    ``ro``, ``H_diag``, ``prev_flat_grad``, ``prev_loss``, ``al``).

    Example::

        opt = LBFGS(model.parameters(), lr=1, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            return loss

        opt.step(closure)
    """

    def __init__(self, params: Any, lr: float | Tensor = 1, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        _check_hparams(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                    "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                    "history_size": history_size, "line_search_fn": line_search_fn}
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._numel_cache: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_numel_cache"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._params = self.param_groups[0]["params"]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._params = self.param_groups[0]["params"]

    # -- flat views of the parameters ---------------------------------------------------------
    def _numel(self) -> int:
        if self._numel_cache is None:
            self._numel_cache = sum(p.numel() for p in self._params)
        return self._numel_cache

    def _gather_flat_grad(self) -> Tensor:
        views = [zeros(p.numel(), dtype=p.dtype) if p.grad is None else p.grad.reshape(-1)
                 for p in self._params]
        return cat(views, 0)

    def _add_grad(self, step_size: Any, update: Tensor) -> None:
        offset = 0
        alpha = _number(step_size)
        for p in self._params:
            numel = p.numel()
            p.add_(update[offset:offset + numel].view_as(p), alpha=alpha)
            offset += numel
        assert offset == self._numel(), (offset, self._numel())

    def _clone_param(self) -> list[Tensor]:
        return [p.clone() for p in self._params]

    def _set_param(self, params_data: list[Tensor]) -> None:
        for p, pdata in zip(self._params, params_data, strict=True):
            p.copy_(pdata)

    def _directional_evaluate(self, closure: Callable[[], Any], x: list[Tensor], t: Any,
                              d: Tensor) -> tuple[float, Tensor]:
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    # -- the step -----------------------------------------------------------------------------
    def step(self, closure: Callable[[], Any]) -> Any:  # type: ignore[override]
        """Run up to ``max_iter`` L-BFGS iterations; returns the loss of the first closure
        call."""
        assert len(self.param_groups) == 1, len(self.param_groups)

        def grad_closure() -> Any:
            with enable_grad():
                return closure()

        with no_grad():
            return self._step(grad_closure)

    def _step(self, closure: Callable[[], Any]) -> Any:
        group = self.param_groups[0]
        lr = _number(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        # LBFGS's state is global; torch keeps it under the first param (so loading casts it)
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if flat_grad.abs().max() <= tolerance_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        history = (state.get("old_dirs"), state.get("old_stps"), state.get("ro"),
                   state.get("H_diag"))
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, history = flat_grad.neg(), ([], [], [], 1)
            else:
                history = _update_history(history, flat_grad.sub(prev_flat_grad), d.mul(t),
                                          group["history_size"])
                d = _two_loop(state, history, flat_grad, group["history_size"])
            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss
            # reset the initial guess for the step size
            t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)  # directional derivative
            if gtd > -tolerance_change:
                break
            loss, flat_grad, t, ls_func_evals, opt_cond = self._move(
                closure, group, loss, flat_grad, d, t, gtd, n_iter, max_eval - current_evals)
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if (n_iter == max_iter or current_evals >= max_eval or opt_cond
                    or d.mul(t).abs().max() <= tolerance_change
                    or abs(loss - prev_loss) < tolerance_change):
                break
        old_dirs, old_stps, ro, h_diag = history
        state.update({"d": d, "t": t, "old_dirs": old_dirs, "old_stps": old_stps, "ro": ro,
                      "H_diag": h_diag, "prev_flat_grad": prev_flat_grad,
                      "prev_loss": prev_loss})
        return orig_loss

    def _move(self, closure: Callable[[], Any], group: dict, loss: float, flat_grad: Tensor,
              d: Tensor, t: Any, gtd: Tensor, n_iter: int, max_ls: int) -> tuple:
        """Step along ``d``: by a strong-Wolfe line search or by ``t``; returns (loss, flat
        grad, t, function evaluations, optimality reached)."""
        tolerance_grad = group["tolerance_grad"]
        line_search_fn = group["line_search_fn"]
        if line_search_fn is not None:
            if line_search_fn != "strong_wolfe":
                raise RuntimeError("only 'strong_wolfe' is supported")
            x_init = self._clone_param()

            def obj_func(x: list[Tensor], t: Any, d: Tensor) -> tuple[float, Tensor]:
                return self._directional_evaluate(closure, x, t, d)

            loss, flat_grad, t, ls_func_evals = strong_wolfe(
                obj_func, x_init, t, d, loss, flat_grad, gtd, max_ls=max_ls)
            self._add_grad(t, d)
            return loss, flat_grad, t, ls_func_evals, bool(flat_grad.abs().max() <= tolerance_grad)
        self._add_grad(t, d)  # no line search: a fixed step
        if n_iter == group["max_iter"]:
            # not re-evaluated after the last iteration (no use in a stochastic setting)
            return loss, flat_grad, t, 0, False
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        return loss, flat_grad, t, 1, bool(flat_grad.abs().max() <= tolerance_grad)


def _update_history(history: tuple, y: Tensor, s: Tensor, history_size: int) -> tuple:
    """Append the curvature pair (``y`` = change of gradient, ``s`` = step) when ``y.s`` is
    positive enough, dropping the oldest beyond ``history_size``; rescale ``H_diag``."""
    old_dirs, old_stps, ro, h_diag = history
    ys = y.dot(s)  # y*s
    if ys > 1e-10:
        if len(old_dirs) == history_size:  # shift the history by one (limited memory)
            old_dirs.pop(0)
            old_stps.pop(0)
            ro.pop(0)
        old_dirs.append(y)
        old_stps.append(s)
        ro.append(1.0 / ys)
        h_diag = ys / y.dot(y)  # scale of the initial inverse Hessian
    return old_dirs, old_stps, ro, h_diag


def _two_loop(state: dict, history: tuple, flat_grad: Tensor, history_size: int) -> Tensor:
    """The L-BFGS direction: the approximate inverse Hessian times the negative gradient,
    by the two-loop recursion (``al`` is kept in the state, as torch does)."""
    old_dirs, old_stps, ro, h_diag = history
    if "al" not in state:
        state["al"] = [None] * history_size
    al = state["al"]
    q = flat_grad.neg()
    for i in range(len(old_dirs) - 1, -1, -1):
        al[i] = old_stps[i].dot(q) * ro[i]
        q.add_(old_dirs[i], alpha=-al[i].item())
    r = q.mul(h_diag)
    for i in range(len(old_dirs)):
        be_i = old_dirs[i].dot(r) * ro[i]
        r.add_(old_stps[i], alpha=(al[i] - be_i).item())
    return r

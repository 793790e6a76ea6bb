"""The strong-Wolfe line search of L-BFGS (torch.optim.lbfgs's ``_strong_wolfe``, after
minFunc), kept step for step so that the same trial points are evaluated.  Step sizes, slopes
and gradients may be 0-d tensors or Python numbers, as in torch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember.tensor import Tensor

__all__ = ["cubic_interpolate", "strong_wolfe"]


def cubic_interpolate(x1: Any, f1: Any, g1: Any, x2: Any, f2: Any, g2: Any,
                      bounds: tuple | None = None) -> Any:
    """The minimizer of the cubic through two points with values and slopes, clamped to
    ``bounds`` (default: the interval); the midpoint when the cubic has no minimum."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - _div(3 * (f1 - f2), x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square.sqrt()
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _div(a: Any, b: Any) -> Any:
    """``a / b`` as torch computes it: a number over a tensor is ``b.reciprocal() * a``."""
    if isinstance(b, Tensor) and not isinstance(a, Tensor):
        return b.reciprocal() * a
    return a / b


class _Bracket:
    """The interval the zoom phase narrows: step sizes, values, gradients and slopes."""

    def __init__(self, t: list, f: list, g: list, gtd: list | None) -> None:
        self.t, self.f, self.g, self.gtd = t, f, g, gtd

    def ends(self) -> tuple[int, int]:
        """(index of the lower value, index of the higher)."""
        return (0, 1) if self.f[0] <= self.f[-1] else (1, 0)

    def set(self, i: int, t: Any, f: Any, g: Tensor, gtd: Any) -> None:
        self.t[i], self.f[i], self.g[i], self.gtd[i] = t, f, g, gtd


def strong_wolfe(obj_func: Callable, x: list[Tensor], t: Any, d: Tensor, f: float, g: Tensor,
                 gtd: Any, c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9,
                 max_ls: int = 25) -> tuple[Any, Tensor, Any, int]:
    """Search along ``d`` from ``x`` (loss ``f``, gradient ``g``, slope ``gtd``) for a step
    meeting the strong Wolfe conditions; ``obj_func(x, t, d)`` gives (loss, gradient) at
    ``x + t * d``.  Returns (loss, gradient, step, function evaluations)."""
    d_norm = d.abs().max()
    g = g.clone()
    bracket, done, ls_iter, evals = _bracket_phase(obj_func, x, t, d, f, g, gtd, c1, c2, max_ls)
    # zoom: refine the bracket until a point satisfies the conditions
    insuf_progress = False
    low_pos, high_pos = bracket.ends()
    while not done and ls_iter < max_ls:
        if abs(bracket.t[1] - bracket.t[0]) * d_norm < tolerance_change:
            break  # the bracket is too small
        t = cubic_interpolate(bracket.t[0], bracket.f[0], bracket.gtd[0],
                              bracket.t[1], bracket.f[1], bracket.gtd[1])
        t, insuf_progress = _keep_away_from_ends(t, bracket.t, insuf_progress)
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket.f[low_pos]:
            # Armijo condition not satisfied or not lower than the lowest point
            bracket.set(high_pos, t, f_new, g_new.clone(), gtd_new)
            low_pos, high_pos = bracket.ends()
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True  # the Wolfe conditions hold
            elif gtd_new * (bracket.t[high_pos] - bracket.t[low_pos]) >= 0:
                bracket.set(high_pos, bracket.t[low_pos], bracket.f[low_pos],
                            bracket.g[low_pos], bracket.gtd[low_pos])  # old high -> new low
            bracket.set(low_pos, t, f_new, g_new.clone(), gtd_new)
    return bracket.f[low_pos], bracket.g[low_pos], bracket.t[low_pos], evals


def _keep_away_from_ends(t: Any, ts: list, insuf_progress: bool) -> tuple[Any, bool]:
    """Move a trial step that is too close to an end of the bracket 10% of its length inside
    when the last step made insufficient progress too or ``t`` is at an end."""
    eps = 0.1 * (max(ts) - min(ts))
    if min(max(ts) - t, t - min(ts)) < eps:
        if insuf_progress or t >= max(ts) or t <= min(ts):
            if abs(t - max(ts)) < abs(t - min(ts)):
                t = max(ts) - eps
            else:
                t = min(ts) + eps
            return t, False
        return t, True
    return t, False


def _bracket_phase(obj_func: Callable, x: list, t: Any, d: Tensor, f: float, g: Tensor,
                   gtd: Any, c1: float, c2: float, max_ls: int) -> tuple:
    """Grow the step until an interval holds a point satisfying the conditions; returns
    (bracket, done, line-search iterations, function evaluations)."""
    f_new, g_new = obj_func(x, t, d)
    evals = 1
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    ls_iter = 0
    while ls_iter < max_ls:
        interval = _Bracket([t_prev, t], [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new])
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            interval.g[1] = g_new.clone()
            return interval, False, ls_iter, evals
        if abs(gtd_new) <= -c2 * gtd:
            return _Bracket([t], [f_new], [g_new], None), True, ls_iter, evals
        if gtd_new >= 0:
            interval.g[1] = g_new.clone()
            return interval, False, ls_iter, evals
        # interpolate
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                              bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.clone(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    # reached the maximum number of iterations (the zoom loop does not run)
    return _Bracket([0, t], [f, f_new], [g, g_new], None), False, ls_iter, evals

"""``ember.cond``: PyTorch's ``torch.cond`` (a structured if/else on a data-dependent predicate).

Eagerly (and under ``ember.compile``, where reading ``pred`` is a graph break) it calls the
chosen branch; while exporting, the export tracer records BOTH branches as subgraphs of one
``cond`` node that ``ep.module()`` evaluates on each call (docs/export.md).

Example::

    >>> def f(x):
    ...     return ember.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))
"""

from __future__ import annotations

from typing import Any, Callable

from ember import _lazy
from ember.tensor import Tensor


def cond(pred: Any, true_fn: Callable, false_fn: Callable, operands: tuple | list = ()) -> Any:
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``; ``pred`` is a bool or
    a one-element tensor; the branches take the operands (tensors) and return tensors of the
    same shapes and dtypes (checked while exporting, as PyTorch checks while tracing)."""
    if not (isinstance(pred, (bool, Tensor)) or type(pred).__name__ == "SymBool"):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
    if isinstance(pred, Tensor) and pred.numel() != 1:
        raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                           f"{pred}.")
    if not callable(true_fn) or not callable(false_fn):
        raise RuntimeError("Expect both branches to be callable.")
    if not isinstance(operands, (tuple, list)) or not all(
            isinstance(t, (Tensor, int, float, bool)) for t in operands):
        raise RuntimeError("Expect operands to be a tuple of possibly nested dict/list/tuple "
                           f"that only consists of tensor leaves, but got {operands}.")
    hook = getattr(_lazy.STATE.trace, "cond", None)
    if hook is not None and (isinstance(pred, Tensor) or type(pred).__name__ == "SymBool"):
        return hook(pred, true_fn, false_fn, tuple(operands))
    return (true_fn if bool(pred) else false_fn)(*operands)


__all__ = ["cond"]

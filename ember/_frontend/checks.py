"""``ember._check`` / ``ember._check_is_size`` (PyTorch's ``torch._check`` family): assert a
condition eagerly; on a relation of unbacked sizes while exporting (an ``ember.SymBool``),
record a runtime assert and a fact the shape rules use (docs/export.md)."""

from __future__ import annotations

from typing import Any

from ember.sym import SymBool


def _check(cond: Any, message: Any = None) -> None:
    """PyTorch's ``torch._check``: raise ``RuntimeError`` when ``cond`` is False; on a
    ``SymBool`` (a relation of unbacked sizes while exporting) record it as a runtime assert
    (a graph node) and as a fact the shape rules can use.

    >>> ember._check(n <= x.shape[0])      # n = t.item() while exporting
    """
    if isinstance(cond, SymBool) and not cond.is_backed():
        cond.env.defer_runtime_assert(cond.rel, message() if callable(message) else message)
        return
    if not cond:
        text = message() if callable(message) else message
        raise RuntimeError(text if text is not None else
                           "Expected cond to be True, but got False. (Could this error message "
                           "be improved? If so, please report an enhancement request to "
                           "PyTorch.)")


def _check_is_size(i: Any, message: Any = None, *, max: Any = None) -> None:  # noqa: A002
    """PyTorch's ``torch._check_is_size``: ``i >= 0`` (and ``i <= max``), as runtime asserts
    when ``i`` is an unbacked size."""
    _check(i >= 0, message)
    if max is not None:
        _check(i <= max, message)


__all__ = ["_check", "_check_is_size"]

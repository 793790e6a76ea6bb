"""``mark_dynamic``, ``maybe_mark_dynamic`` and ``mark_static``: per-dim marks on a tensor
that the compiler's guards read (re-exported by ``ember.compiler.frontend.api`` and
``ember._dynamo``)."""

from __future__ import annotations

from ember import _lazy
from ember.errors import EmberRuntimeError, EmberTypeError
from ember.tensor import Tensor

_LZ = _lazy.STATE


def _check_not_tracing(what: str) -> None:
    if _LZ.trace is not None:
        raise EmberRuntimeError(f"[{what}] must be called before the compiled call, not inside "
                                "compiled code")


def mark_dynamic(t: Tensor, index: int | list, *, min: int | None = None,  # noqa: A002
                 max: int | None = None) -> None:  # noqa: A002
    """Make dims ``index`` of ``t`` size-generic from the first compile."""
    _check_not_tracing("mark_dynamic")
    _mark(t, index, "dynamic")


def maybe_mark_dynamic(t: Tensor, index: int | list) -> None:
    """A hint that dims ``index`` of ``t`` vary (never an error)."""
    _check_not_tracing("maybe_mark_dynamic")
    _mark(t, index, "dynamic")


def mark_static(t: Tensor, index: int | list | None = None) -> None:
    """Keep dims ``index`` (all when None) of ``t`` specialized even when they change."""
    _check_not_tracing("mark_static")
    _mark(t, list(range(t.ndim)) if index is None else index, "static")


def _mark(t: Tensor, index: int | list, how: str) -> None:
    if not isinstance(t, Tensor):
        raise EmberTypeError(f"[mark_{how}] expected a Tensor, got {type(t).__name__}")
    idx = [index] if isinstance(index, int) else list(index)
    marks = dict(t.__dict__.get("_dyn_marks") or {})
    for i in idx:
        if not -t.ndim <= i < max(t.ndim, 1):
            raise EmberRuntimeError(f"[mark_{how}] dim {i} out of range for a {t.ndim}-d tensor")
        marks[i % max(t.ndim, 1)] = how
    t._dyn_marks = marks

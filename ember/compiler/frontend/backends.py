"""Backend registry (``ember.compile(..., backend=...)``).

A backend is a callable ``backend(graph, example_inputs) -> callable``: ``graph`` is an
``ember.compiler.Graph``, ``example_inputs`` are ember tensors for its tensor inputs, and the
returned callable is called with the graph's tensor inputs followed by its lifted scalars and
returns its outputs (``graph.forward`` is the trivial backend).  ``"eager"`` runs the graph with
the eager NumPy kernels; it is the reference for every other backend.  ``"inductor"`` (the
default of ``ember.compile``, as in PyTorch) and ``"c"`` are the C backend (docs/compiler.md),
which registers itself here (``ember/compiler/c/__init__.py``): the frontend never imports it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ember.errors import EmberRuntimeError

_BACKENDS: dict[str, Callable] = {}
_TAGS: dict[str, tuple] = {}
_FALLBACK_REPORT: list[Callable] = []  # the C backend's ``graph -> [(op, reason)]`` (explain)


def register_backend(compiler_fn: Callable | None = None, name: str | None = None,
                     tags: Sequence[str] = ()) -> Any:
    """Register ``compiler_fn`` under ``name`` (default: its ``__name__``); usable as a
    decorator.  ``tags`` (e.g. ``("debug",)``) let ``list_backends`` leave it out.

    >>> @register_backend
    ... def my_backend(graph, example_inputs):
    ...     return graph.forward
    """
    def deco(fn: Callable) -> Callable:
        key = name or fn.__name__
        if key in _BACKENDS:
            raise EmberRuntimeError(f"[register_backend] duplicate name: {key}")
        _BACKENDS[key] = fn
        _TAGS[key] = tuple(tags)
        return fn
    if compiler_fn is None:
        return deco
    return deco(compiler_fn)


def list_backends(exclude_tags: Sequence[str] | None = ("debug", "experimental")) -> list[str]:
    """Names of the registered backends without any of ``exclude_tags`` (``None``: all)."""
    skip = set(exclude_tags or ())
    return sorted(k for k in _BACKENDS if not skip.intersection(_TAGS.get(k, ())))


def lookup_backend(backend: Any) -> Callable:
    """The compiler function for ``backend`` (a registered name or a callable)."""
    if callable(backend):
        return backend
    if isinstance(backend, str) and backend in _BACKENDS:
        return _BACKENDS[backend]
    raise EmberRuntimeError(f"Invalid backend: {backend!r} (unknown backend; registered: "
                            f"{', '.join(list_backends(None))}), see "
                            f"`ember._dynamo.list_backends(None)`, or pass a callable "
                            f"(graph, example_inputs) -> callable")


def register_fallback_report(fn: Callable[[Any], list]) -> None:
    """Register ``fn(graph) -> [(op name, reason)]``: the nodes a backend would run as eager
    externs (the C backend registers its lowering; ``explain`` reports them)."""
    _FALLBACK_REPORT[:] = [fn]


def fallback_report(graph: Any) -> list | None:
    """``(op, reason)`` per extern of ``graph`` from the registered report (None: none)."""
    return _FALLBACK_REPORT[0](graph) if _FALLBACK_REPORT else None


def _eager(graph: Any, example_inputs: list) -> Callable:
    def run(arrays: list, scalars: list) -> list:
        return graph.run(arrays, scalars)
    run._ember_arrays = True  # type: ignore[attr-defined]
    return run


register_backend(_eager, "eager", tags=("debug",))


# ember has no separate autograd-tracing stage to debug: "aot_eager" runs the reference
register_backend(_eager, "aot_eager", tags=("debug",))

__all__ = ["fallback_report", "list_backends", "lookup_backend", "register_backend",
           "register_fallback_report"]

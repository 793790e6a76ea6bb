"""Backend registry (``ember.compile(..., backend=...)``).

A backend is a callable ``backend(graph, example_inputs) -> callable``: ``graph`` is an
``ember.compiler.Graph``, ``example_inputs`` are ember tensors for its tensor inputs, and the
returned callable is called with the graph's tensor inputs followed by its lifted scalars and
returns its outputs (``graph.forward`` is the trivial backend).  ``"eager"`` runs the graph with
the eager NumPy kernels; it is the reference for every other backend.
"""

from __future__ import annotations

from typing import Any, Callable

from ember.errors import EmberRuntimeError

_BACKENDS: dict[str, Callable] = {}


def register_backend(compiler_fn: Callable | None = None, name: str | None = None) -> Any:
    """Register ``compiler_fn`` under ``name`` (default: its ``__name__``); usable as a
    decorator."""
    def deco(fn: Callable) -> Callable:
        key = name or fn.__name__
        if key in _BACKENDS:
            raise EmberRuntimeError(f"[register_backend] duplicate name: {key}")
        _BACKENDS[key] = fn
        return fn
    if compiler_fn is None:
        return deco
    return deco(compiler_fn)


def list_backends(exclude_tags: Any = ("debug",)) -> list[str]:
    """Names of the registered backends."""
    return sorted(_BACKENDS)


def lookup_backend(backend: Any) -> Callable:
    if callable(backend):
        return backend
    if isinstance(backend, str) and backend in _BACKENDS:
        return _BACKENDS[backend]
    raise EmberRuntimeError(f"[ember.compile] unknown backend {backend!r}; registered: "
                            f"{', '.join(list_backends())} (or pass a callable)")


def _eager(graph: Any, example_inputs: list) -> Callable:
    def run(arrays: list, scalars: list) -> list:
        return graph.run(arrays, scalars)
    run._ember_arrays = True  # type: ignore[attr-defined]
    return run


register_backend(_eager, "eager")


def _c(graph: Any, example_inputs: list) -> Callable:
    from ember.compiler.cbackend import c_backend  # the C toolchain loads on first use
    return c_backend(graph, example_inputs)


register_backend(_c, "c")
# the C backend (issue 5) registers "inductor"-like names; until then these run the reference
register_backend(_eager, "aot_eager")
register_backend(_eager, "inductor")

__all__ = ["list_backends", "lookup_backend", "register_backend"]

"""The compiler: ``ember.compile`` and its controls (ARCHITECTURE.md §4-5).

``ember.compile(fn)`` records ``fn``'s tensor ops lazily on every call and runs them as cached
graphs.  ``set_stance``, ``error_on_graph_break``, ``disable``, ``mark_dynamic`` and
``explain`` steer and inspect it; ``Graph`` is the IR a custom backend receives.
"""

from typing import Any

# the C backend registers itself as "inductor" and "c" (its toolchain loads on first use);
# replay registers mode="reduce-overhead"
from ember.compiler import c as _c_backend  # noqa: F401
from ember.compiler.frontend import replay as _replay  # noqa: F401
from ember.compiler.frontend.api import (
    CompiledFunction,
    FallbackWarning,
    OptimizedModule,
    RecompileError,
    RecompileLimitWarning,
    compile,
    compiler_config,
    disable,
    error_on_graph_break,
    graph_break,
    is_compiling,
    mark_dynamic,
    mark_static,
    maybe_mark_dynamic,
    reset,
    set_stance,
)
from ember.compiler.frontend.backends import list_backends, register_backend
from ember.compiler.frontend.explain import ExplainOutput, explain
from ember.compiler.frontend.graph import Graph, Node, Sym
from ember.errors import GraphBreakError

config = compiler_config


def codegen(fn: Any, *args: Any, **kwargs: Any) -> str:
    """The C source ``fn(*args, **kwargs)``'s graphs compile to with the C backend."""
    from ember.compiler.c.backend import codegen as _codegen  # the C toolchain loads on use
    return _codegen(fn, *args, **kwargs)


__all__ = ["CompiledFunction", "ExplainOutput", "FallbackWarning", "Graph", "GraphBreakError",
           "Node", "OptimizedModule", "RecompileError", "RecompileLimitWarning", "Sym", "codegen",
           "compile", "config", "disable", "error_on_graph_break", "explain", "graph_break",
           "is_compiling", "list_backends", "mark_dynamic", "mark_static", "maybe_mark_dynamic",
           "register_backend", "reset", "set_stance"]

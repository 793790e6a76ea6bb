"""``ember._dynamo``: PyTorch's ``torch._dynamo`` names for drop-in scripts, mapped onto
``ember.compiler``."""

from ember._dynamo import exc  # noqa: E402  (PyTorch's exception classes)
from ember.compiler.frontend.api import (
    OptimizedModule,
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
from ember.compiler.frontend.api import (
    compiler_config as config,
)
from ember.compiler.frontend.backends import list_backends, lookup_backend, register_backend
from ember.compiler.frontend.explain import explain

__all__ = ["OptimizedModule", "config", "exc", "disable", "error_on_graph_break", "explain",
           "graph_break", "is_compiling", "list_backends", "lookup_backend", "mark_dynamic",
           "mark_static", "maybe_mark_dynamic", "register_backend", "reset", "set_stance"]

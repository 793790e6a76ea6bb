"""``ember._dynamo``: PyTorch's ``torch._dynamo`` names for drop-in scripts, mapped onto
``ember.compiler``."""

from ember.compiler.api import (
    compiler_config as config,
)
from ember.compiler.api import (
    disable,
    error_on_graph_break,
    graph_break,
    is_compiling,
    mark_dynamic,
    mark_static,
    maybe_mark_dynamic,
    reset,
)
from ember.compiler.backends import list_backends, register_backend
from ember.compiler.explain import explain

__all__ = ["config", "disable", "error_on_graph_break", "explain", "graph_break",
           "is_compiling", "list_backends", "mark_dynamic", "mark_static", "maybe_mark_dynamic",
           "register_backend", "reset"]

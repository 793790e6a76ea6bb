"""Graph -> loop IR: a ``LoweringContext`` (``context.py``) and one module per op family, each
registering its rules by OpDef (``registry.py``).

Importing this package imports every family module, so every rule is registered before
``lower`` runs.
"""

from ember.compiler.c.ir.loop_ir import Program
from ember.compiler.c.lower import (  # noqa: F401 - each registers its rules
    attention,
    copy,
    flex,
    gemm,
    index,
    pointwise,
    pool,
    random,
    reduce,
    rows,
    scan,
    sort,
    view,
)
from ember.compiler.c.lower.context import LoweringContext, LowerStats
from ember.compiler.c.lower.pointwise import helpers_in
from ember.compiler.frontend.graph import Graph


def lower(graph: Graph, helpers: frozenset) -> Program:
    """The loop-IR ``Program`` of ``graph`` (with ``.stats`` and ``.sources``), before
    scheduling (``ember.compiler.c.schedule``); ``helpers``: the C helpers the prelude has."""
    return LoweringContext(graph, helpers).run()


__all__ = ["LowerStats", "LoweringContext", "helpers_in", "lower"]

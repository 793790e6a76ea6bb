"""Graph -> loop IR: a ``LoweringContext`` (``context.py``) and one module per op family, each
registering its rules by OpDef (``registry.py``).

Importing this package imports every family module, so every rule is registered before
``lower`` runs.
"""

from typing import Any

from ember.compiler.c.ir.loop_ir import Program
from ember.compiler.c.lower import (  # noqa: F401 - each registers its rules
    attention,
    copy,
    flex,
    gemm,
    index,
    kernel_op,
    pointwise,
    pool,
    qlinear,
    random,
    reduce,
    resample,
    rnn,
    rows,
    scan,
    sort,
    taps,
    view,
)
from ember.compiler.c.lower.context import LoweringContext, LowerStats
from ember.compiler.c.lower.pointwise import helpers_in
from ember.compiler.frontend.graph import Graph


def lower(graph: Graph, helpers: frozenset, plan: Any = None) -> Program:
    """The loop-IR ``Program`` of ``graph`` (with ``.stats`` and ``.sources``), before
    scheduling (``ember.compiler.c.schedule``); ``helpers``: the C helpers the prelude has;
    ``plan``: the ``FusionPlan`` lowering follows (``c/fusion_plan.py``; None: graph order)."""
    return LoweringContext(graph, helpers, plan).run()


__all__ = ["LowerStats", "LoweringContext", "helpers_in", "lower"]

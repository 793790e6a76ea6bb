"""``ember.fx.experimental.symbolic_shapes``: PyTorch's names for symbolic-shape machinery at
PyTorch's path, so ``except`` clauses and imports written for PyTorch work.  The machinery
itself is ``ember.sym`` (docs/export.md).

>>> from ember.fx.experimental.symbolic_shapes import ShapeEnv, ConstraintViolationError
"""

from __future__ import annotations

from ember.errors import GuardOnDataDependentSymNode
from ember.sym import ShapeEnv, SymInt, ValueRange, guard_int, has_symbolic, is_symbolic


class ConstraintViolationError(RuntimeError):
    """A dynamic dim's spec contradicts what tracing needed (PyTorch raises it inside export,
    which reports it as ``ember._dynamo.exc.UserError``)."""


def is_concrete_int(a: object) -> bool:
    """Whether ``a`` is a plain int (not a symbolic size)."""
    return isinstance(a, int) and not isinstance(a, bool)


def free_symbols(x: object) -> set:
    """The sympy symbols a ``SymInt`` (or a tuple of sizes) depends on."""
    if isinstance(x, SymInt):
        return set(x.expr.free_symbols)
    if isinstance(x, (tuple, list)):
        return set().union(*(free_symbols(y) for y in x)) if x else set()
    return set()


__all__ = ["ConstraintViolationError", "GuardOnDataDependentSymNode", "ShapeEnv", "SymInt",
           "ValueRange", "free_symbols", "guard_int", "has_symbolic", "is_concrete_int",
           "is_symbolic"]

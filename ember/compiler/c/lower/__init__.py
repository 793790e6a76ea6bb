"""Graph -> loop IR: a ``LoweringContext`` and one module per op family."""

from ember.compiler.c.lower.context import Lowering, LowerStats, helpers_in, lower

__all__ = ["LowerStats", "Lowering", "helpers_in", "lower"]

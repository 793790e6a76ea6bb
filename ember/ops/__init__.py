"""The op registry and every OpDef (importing this package registers them all)."""

from ember.ops import pointwise, reduction, shape  # noqa: F401
from ember.ops.registry import REGISTRY, OpDef, bind, register

__all__ = ["REGISTRY", "OpDef", "bind", "register"]

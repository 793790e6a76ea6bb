"""``ember.fx.experimental`` (PyTorch's path)."""

from ember.fx.experimental import symbolic_shapes

__all__ = ["symbolic_shapes"]

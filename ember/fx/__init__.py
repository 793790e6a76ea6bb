"""``ember.fx``: the parts of ``torch.fx`` that export users reach for: the graph classes of an
exported program and ``ember.fx.experimental.symbolic_shapes`` (PyTorch's paths)."""

from ember.export.graph import Graph, Node
from ember.fx import experimental

__all__ = ["Graph", "Node", "experimental"]

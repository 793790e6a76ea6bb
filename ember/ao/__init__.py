"""``ember.ao``: PyTorch's architecture-optimization namespace (dynamic quantization)."""

from ember.ao import (
    nn,  # noqa: F401, E402
    quantization,  # noqa: F401  (first: ao.nn imports it)
)

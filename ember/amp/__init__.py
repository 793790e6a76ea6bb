"""``ember.amp``: PyTorch's automatic mixed precision API (``autocast``, ``GradScaler``).

See docs/devices.md: CPU ``autocast`` regions are recorded but do not cast yet; ``GradScaler``
works on the CPU and disables itself (with PyTorch's warning) for CUDA.
"""

from ember.amp.autocast_mode import (
    autocast,
    custom_bwd,
    custom_fwd,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_enabled,
)
from ember.amp.grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd", "get_autocast_dtype",
           "is_autocast_available", "is_autocast_enabled"]

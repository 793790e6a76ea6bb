"""``ember.amp``: PyTorch's automatic mixed precision API (``autocast``, ``GradScaler``).

CPU ``autocast`` casts with PyTorch's CPU op policy (docs/low_precision.md); ``GradScaler``
works on the CPU and disables itself (with PyTorch's warning) for CUDA.
"""

from ember.amp.autocast_mode import (
    autocast,
    clear_autocast_cache,
    custom_bwd,
    custom_fwd,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from ember.amp.grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "clear_autocast_cache", "custom_bwd", "custom_fwd",
           "get_autocast_dtype", "is_autocast_available", "is_autocast_cache_enabled",
           "is_autocast_enabled", "set_autocast_cache_enabled", "set_autocast_dtype",
           "set_autocast_enabled"]

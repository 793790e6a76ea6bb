"""``ember.cpu.amp``: PyTorch's deprecated CPU spellings of ``ember.amp`` (they warn, then
behave as ``ember.amp.autocast("cpu", ...)`` and ``ember.amp.GradScaler("cpu", ...)``)."""

from __future__ import annotations

import warnings

from ember import amp as _amp
from ember import dtypes as dt

__all__ = ["GradScaler", "autocast"]


class autocast(_amp.autocast):  # noqa: N801 (PyTorch's name)
    """``ember.amp.autocast("cpu", ...)`` (deprecated spelling).

    >>> with ember.cpu.amp.autocast():   # FutureWarning; bfloat16 region
    ...     y = model(x)
    """

    def __init__(self, enabled: bool = True, dtype: dt.dtype = dt.bfloat16,
                 cache_enabled: bool = True) -> None:
        warnings.warn("`torch.cpu.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """``ember.amp.GradScaler("cpu", ...)`` (deprecated spelling)."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        warnings.warn("`torch.cpu.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)

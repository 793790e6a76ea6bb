"""``ember.cuda.amp``: PyTorch's deprecated CUDA spellings of ``ember.amp``.

``autocast(...)`` is ``ember.amp.autocast("cuda", ...)`` and ``GradScaler(...)`` is
``ember.amp.GradScaler("cuda", ...)``: with ``enabled=False`` they do nothing, enabled they warn
(as PyTorch without CUDA) and disable themselves.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

from ember import amp as _amp
from ember import dtypes as dt


class autocast(_amp.autocast):  # noqa: N801 (PyTorch's name)
    """``ember.amp.autocast("cuda", ...)``: disabled on ember (no CUDA)."""

    def __init__(self, enabled: bool = True, dtype: dt.dtype = dt.float16,
                 cache_enabled: bool = True) -> None:
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """``ember.amp.GradScaler("cuda", ...)``: disabled on ember (no CUDA)."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


def custom_fwd(fwd: Callable | None = None, *, cast_inputs: Any = None) -> Callable:
    return _amp.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd: Callable | None = None) -> Callable:
    return _amp.custom_bwd(bwd, device_type="cuda")



"""``ember.autocast`` / ``ember.amp.autocast``: PyTorch's automatic mixed precision context.

For ``device_type="cpu"`` the region's state (enabled, dtype) is recorded and reported by
``is_autocast_enabled`` / ``get_autocast_dtype``, but ops do not cast yet: eager and compiled
code compute in the tensors' own dtypes (a documented no-op until ember has CPU autocast).
``device_type="cuda"`` (or another accelerator) warns and disables itself, as PyTorch does on a
machine without that device.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

from ember import dtypes as dt
from ember.errors import EmberRuntimeError, EmberValueError

_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "meta", "hpu", "mtia", "xla", "ipu", "maia")
_DEFAULT_DTYPE = {"cpu": dt.bfloat16}
_STATE: dict[str, list] = {}  # device type -> stack of (enabled, dtype)


def _current(device_type: str) -> tuple[bool, dt.dtype]:
    stack = _STATE.get(device_type)
    if stack:
        return stack[-1]
    return False, _DEFAULT_DTYPE.get(device_type, dt.float16)


def is_autocast_available(device_type: str) -> bool:
    """Whether ``autocast`` accepts ``device_type`` (as PyTorch: 'cpu' and 'cuda')."""
    return device_type in ("cpu", "cuda")


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether an enabled ``autocast`` region for ``device_type`` (default 'cuda') is active."""
    return _current(device_type or "cuda")[0]


def get_autocast_dtype(device_type: str) -> dt.dtype:
    """The dtype of the innermost ``autocast`` region for ``device_type`` (or its default)."""
    return _current(device_type)[1]


class autocast:  # noqa: N801 (PyTorch's name)
    """Mixed-precision region, a context manager and a decorator.

    >>> with ember.autocast("cpu", dtype=ember.bfloat16):
    ...     y = model(x)   # recorded, but ops compute in their own dtype for now

    Signature and checks follow PyTorch 2.13: an unknown ``device_type`` raises, an unsupported
    dtype or an absent device warns and disables the region.
    """

    def __init__(self, device_type: str, dtype: dt.dtype | None = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        if not isinstance(device_type, str):
            raise EmberValueError(f"[autocast] Expected `device_type` of type `str`, got: "
                                  f"`{type(device_type)}`")
        if device_type not in _DEVICE_TYPES:
            raise EmberRuntimeError(f"[autocast] Expected one of {', '.join(_DEVICE_TYPES)} "
                                    f"device type at start of device string: {device_type}")
        self.device = device_type
        self.fast_dtype = dtype if dtype is not None else _DEFAULT_DTYPE.get(device_type,
                                                                             dt.float16)
        self._enabled = bool(enabled)
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        if not self._enabled:
            return
        if device_type == "cpu":
            if self.fast_dtype not in (dt.bfloat16, dt.float16):
                warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling "
                              "autocast.\nCPU Autocast only supports dtypes of torch.bfloat16, "
                              "torch.float16 currently.", stacklevel=2)
                self._enabled = False
        else:
            name = device_type.upper()
            warnings.warn(f"{name} is not available (ember computes on the CPU). Disabling "
                          "autocast.", stacklevel=2)
            self._enabled = False

    def __enter__(self) -> autocast:
        _STATE.setdefault(self.device, []).append((self._enabled, self.fast_dtype))
        return self

    def __exit__(self, *exc: object) -> None:
        _STATE[self.device].pop()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)
        return decorated


def custom_fwd(fwd: Callable | None = None, *, device_type: str,
               cast_inputs: dt.dtype | None = None) -> Callable:
    """Decorator for a custom ``autograd.Function.forward``; with autocast a no-op, it returns
    the function unchanged."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    return fwd


def custom_bwd(bwd: Callable | None = None, *, device_type: str) -> Callable:
    """Decorator for a custom ``autograd.Function.backward``: returns it unchanged."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd

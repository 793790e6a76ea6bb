"""``ember.autocast`` / ``ember.amp.autocast``: PyTorch's automatic mixed precision context.

For ``device_type="cpu"`` ops cast as PyTorch's CPU autocast does (policy and op lists in
``ember._frontend.autocast`` and docs/low_precision.md): matrix products and convolutions run in
the autocast dtype (bfloat16 by default, or float16), losses and a few numerically sensitive ops
in float32, ``cat``/``stack``/``index_copy`` in the widest input type.
``device_type="cuda"`` (or another accelerator) warns and disables itself, as PyTorch does on a
machine without that device.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

from ember import dtypes as dt
from ember._frontend import autocast as _ac
from ember.errors import EmberRuntimeError, EmberValueError

_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "meta", "hpu", "mtia", "xla", "ipu", "maia")
_OTHER: dict[str, list] = {}  # non-CPU device type -> [enabled, dtype] (always disabled here)
_CPU = _ac.STATE


def _check_device(device_type: str, op: str) -> None:
    if device_type not in _DEVICE_TYPES:
        raise EmberRuntimeError(f"[{op}] Expected one of {', '.join(_DEVICE_TYPES)} "
                                f"device type at start of device string: {device_type}")


def is_autocast_available(device_type: str) -> bool:
    """Whether ``autocast`` accepts ``device_type`` (as PyTorch: 'cpu' and 'cuda')."""
    return device_type in ("cpu", "cuda")


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether an enabled ``autocast`` region for ``device_type`` (default 'cuda') is active.

    >>> with ember.autocast("cpu"):
    ...     assert ember.is_autocast_enabled("cpu")
    """
    device_type = device_type or "cuda"
    if device_type == "cpu":
        return _CPU.on
    return _OTHER.get(device_type, [False])[0]


def set_autocast_enabled(device_type: str, enabled: bool) -> None:
    """Turn autocast for ``device_type`` on or off outside a ``with`` block (PyTorch's API)."""
    _check_device(device_type, "set_autocast_enabled")
    if device_type == "cpu":
        _CPU.on = bool(enabled)
    else:
        _OTHER.setdefault(device_type, [False, dt.float16])[0] = bool(enabled)


def get_autocast_dtype(device_type: str) -> dt.dtype:
    """The dtype autocast uses for ``device_type`` (CPU default bfloat16).

    >>> ember.get_autocast_dtype("cpu")
    ember.bfloat16
    """
    if device_type == "cpu":
        return _CPU.dtype
    return _OTHER.get(device_type, [False, dt.float16])[1]


def set_autocast_dtype(device_type: str, dtype: dt.dtype) -> None:
    """Set the dtype that ``autocast(device_type)`` uses when given no ``dtype``."""
    _check_device(device_type, "set_autocast_dtype")
    if device_type == "cpu":
        _CPU.dtype = dtype
    else:
        _OTHER.setdefault(device_type, [False, dt.float16])[1] = dtype


def is_autocast_cache_enabled() -> bool:
    """Whether autocast caches the casts of float32 leaf tensors that require grad."""
    return _CPU.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    _CPU.cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    """Drop the weight casts cached by the current autocast region."""
    _ac.clear_cache()


class autocast:  # noqa: N801 (PyTorch's name)
    """Mixed-precision region, a context manager and a decorator.

    >>> with ember.autocast("cpu", dtype=ember.bfloat16):
    ...     y = model(x)   # linear/conv/matmul in bfloat16, losses in float32

    Signature and checks follow PyTorch 2.13: an unknown ``device_type`` raises, an unsupported
    dtype or an absent device warns and disables the region.
    """

    def __init__(self, device_type: str, dtype: dt.dtype | None = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        if not isinstance(device_type, str):
            raise EmberValueError(f"[autocast] Expected `device_type` of type `str`, got: "
                                  f"`{type(device_type)}`")
        _check_device(device_type, "autocast")
        self.device = device_type
        self.fast_dtype = dtype if dtype is not None else get_autocast_dtype(device_type)
        self._enabled = bool(enabled)
        self._cache_enabled = (is_autocast_cache_enabled() if cache_enabled is None
                               else bool(cache_enabled))
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
        self._prev_cache = is_autocast_cache_enabled()
        self._prev = (is_autocast_enabled(self.device), get_autocast_dtype(self.device))
        set_autocast_dtype(self.device, self.fast_dtype)
        set_autocast_enabled(self.device, self._enabled)
        _CPU.nesting += 1
        set_autocast_cache_enabled(self._cache_enabled)
        return self

    def __exit__(self, *exc: object) -> None:
        _CPU.nesting -= 1
        if _CPU.nesting == 0:
            _ac.clear_cache()
        set_autocast_enabled(self.device, self._prev[0])
        set_autocast_dtype(self.device, self._prev[1])
        set_autocast_cache_enabled(self._prev_cache)

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            # a fresh copy per call (re-entrant, recursion-safe; checks and warning done once)
            region = object.__new__(autocast)
            region.__dict__.update(self.__dict__)
            with region:
                return fn(*args, **kwargs)
        return decorated


def custom_fwd(fwd: Callable | None = None, *, device_type: str,
               cast_inputs: dt.dtype | None = None) -> Callable:
    """Decorator for a custom ``autograd.Function.forward``.

    Without ``cast_inputs`` the forward runs under the caller's autocast state (remembered for
    ``custom_bwd``); with it, inside an enabled region, floating inputs are cast to
    ``cast_inputs`` and the forward (and later the backward) runs with autocast off
    (PyTorch's semantics).
    """
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    _check_device(device_type, "custom_fwd")

    @functools.wraps(fwd)
    def decorate_fwd(*args: Any, **kwargs: Any) -> Any:
        ctx = args[0]
        ctx._autocast_dtype = get_autocast_dtype(device_type)
        enabled = is_autocast_enabled(device_type)
        ctx._fwd_used_autocast = enabled if cast_inputs is None else False
        if cast_inputs is None or not enabled:
            return fwd(*args, **kwargs)
        with autocast(device_type, enabled=False):
            return fwd(*_ac._cast(args, cast_inputs),
                       **{k: _ac._cast(v, cast_inputs) for k, v in kwargs.items()})
    return decorate_fwd


def custom_bwd(bwd: Callable | None = None, *, device_type: str) -> Callable:
    """Decorator for a custom ``autograd.Function.backward``: runs it under the autocast state
    that the matching ``custom_fwd`` forward saw."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    _check_device(device_type, "custom_bwd")

    @functools.wraps(bwd)
    def decorate_bwd(*args: Any, **kwargs: Any) -> Any:
        ctx = args[0]
        with autocast(device_type, enabled=getattr(ctx, "_fwd_used_autocast", False),
                      dtype=getattr(ctx, "_autocast_dtype", None)):
            return bwd(*args, **kwargs)
    return decorate_bwd

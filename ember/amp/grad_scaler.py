"""``ember.amp.GradScaler``: PyTorch's loss scaling for mixed-precision training.

``GradScaler("cpu")`` scales and unscales for real (the CPU algorithm of PyTorch 2.13: skip the
step when a gradient is inf/NaN, back off the scale, grow it every ``growth_interval`` clean
steps).  ``GradScaler("cuda")`` (and ``ember.cuda.amp.GradScaler()``) warns that CUDA is not
available and disables itself, as PyTorch does; disabled, ``scale`` returns its input, ``step``
calls ``optimizer.step()`` and ``update`` does nothing.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from enum import Enum
from typing import Any

from ember import dtypes as dt
from ember.autograd.grad_mode import no_grad
from ember.errors import EmberRuntimeError, EmberTypeError
from ember.tensor import Tensor


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state() -> dict[str, Any]:
    return {"stage": OptState.READY, "found_inf": 0.0}


class GradScaler:
    """Scale the loss, unscale the gradients, skip steps with inf/NaN gradients.

    >>> scaler = ember.amp.GradScaler("cpu")
    >>> scaler.scale(loss).backward()
    >>> scaler.step(optimizer)
    >>> scaler.update()
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        self._enabled = enabled
        if device != "cpu" and enabled:
            warnings.warn(f"torch.{device}.amp.GradScaler is enabled, but {device.upper()} is "
                          "not available (ember computes on the CPU).  Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise EmberRuntimeError("[GradScaler] The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise EmberRuntimeError("[GradScaler] The backoff factor must be < 1.0.")
            self._init_scale = float(init_scale)
            self._scale: float | None = None
            self._growth_factor = float(growth_factor)
            self._backoff_factor = float(backoff_factor)
            self._growth_interval = int(growth_interval)
            self._init_growth_tracker = 0
            self._growth_tracker: int | None = None
            self._per_optimizer_states: defaultdict = defaultdict(_refresh_per_optimizer_state)

    # ------------------------------------------------------------------ scaling
    def _lazy_init(self) -> None:
        if self._scale is None:
            self._scale = self._init_scale
            self._growth_tracker = self._init_growth_tracker

    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor or nested list/tuple of them) times the current scale."""
        if not self._enabled:
            return outputs
        self._lazy_init()
        if isinstance(outputs, Tensor):
            return outputs * self._scale_tensor(outputs)
        if isinstance(outputs, (list, tuple)):
            scaled = [self.scale(o) for o in outputs]
            return type(outputs)(scaled)
        if hasattr(outputs, "__iter__"):
            return map(self.scale, outputs)
        raise EmberTypeError("[GradScaler.scale] outputs must be a Tensor or an iterable of "
                             "Tensors")

    def _scale_tensor(self, like: Tensor) -> Tensor:
        # a 0-d float32 tensor, as PyTorch's: it does not promote a bfloat16 loss
        return like.new_full((), self._scale, dtype=dt.float32)

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place, and note inf/NaN."""
        if not self._enabled:
            return
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise EmberRuntimeError("unscale_() has already been called on this optimizer since "
                                    "the last update().")
        if state["stage"] is OptState.STEPPED:
            raise EmberRuntimeError("unscale_() is being called after step().")
        self._lazy_init()
        state["found_inf"] = self._unscale_grads(optimizer, 1.0 / self._scale)  # type: ignore
        state["stage"] = OptState.UNSCALED

    def _unscale_grads(self, optimizer: Any, inv_scale: float) -> float:
        from ember._frontend.movement import stack
        inv = float(dt.float32.np.type(inv_scale))
        finite = []
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype is dt.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    finite.append(g.isfinite().all())
                    g.mul_(inv)
            # one read of a value for all gradients (one graph break when compiled)
            return 0.0 if not finite or bool(stack(finite).all()) else 1.0

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step()`` unless the (unscaled) gradients hold inf/NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise EmberRuntimeError("Closure use is not currently supported if GradScaler is "
                                    "enabled.")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise EmberRuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        retval = None
        if not state["found_inf"]:
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Back the scale off after a skipped step, grow it after ``growth_interval`` clean
        ones; or set it to ``new_scale``."""
        if not self._enabled:
            return
        self._lazy_init()
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
        else:
            states = self._per_optimizer_states.values()
            if not states:
                raise EmberRuntimeError("No inf checks were recorded prior to update.")
            found_inf = sum(s["found_inf"] for s in states)
            f32 = dt.float32.np.type
            if found_inf:
                self._scale = float(f32(self._scale) * f32(self._backoff_factor))
                self._growth_tracker = 0
            else:
                tracker = self._growth_tracker + 1  # type: ignore[operator]
                if tracker == self._growth_interval:
                    grown = f32(self._scale) * f32(self._growth_factor)
                    if abs(float(grown)) != float("inf"):
                        self._scale = float(grown)
                    tracker = 0
                self._growth_tracker = tracker
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    # ------------------------------------------------------------------ settings
    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else \
            self._growth_tracker

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """``scale``, the growth/backoff settings and the growth tracker ({} when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise EmberRuntimeError("The source state dict is empty, possibly because it was "
                                    "saved from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale = self._init_scale
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = self._init_growth_tracker

"""``ember.accelerator``: PyTorch's device-generic accelerator API.  ember computes on the CPU,
so there is no accelerator (PyTorch's answers on a CPU-only machine).

>>> ember.accelerator.is_available()
False
"""

from __future__ import annotations

from typing import Any

from ember.errors import EmberRuntimeError


def is_available() -> bool:
    return False


def current_accelerator(check_available: bool = False) -> None:
    """None: there is no accelerator."""
    return None


def device_count() -> int:
    return 0


def _none(op: str) -> Any:
    raise EmberRuntimeError(f"[accelerator.{op}] Cannot access accelerator device when none is "
                            "available.")


def current_device_index() -> int:
    return _none("current_device_index")


def set_device_index(device: Any) -> None:
    _none("set_device_index")


def synchronize(device: Any = None) -> None:
    _none("synchronize")


__all__ = ["current_accelerator", "current_device_index", "device_count", "is_available",
           "set_device_index", "synchronize"]

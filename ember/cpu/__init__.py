"""``ember.cpu``: PyTorch's ``torch.cpu`` device module (the CPU is ember's one device).

>>> ember.cpu.is_available(), ember.cpu.device_count()
(True, 1)
"""

from __future__ import annotations

from ember.cpu import amp

__all__ = ["amp", "current_device", "device_count", "is_available", "synchronize"]


def is_available() -> bool:
    """Always True (as ``torch.cpu.is_available()``)."""
    return True


def device_count() -> int:
    """Always 1."""
    return 1


def current_device() -> str:
    """``"cpu"``."""
    return "cpu"


def synchronize(device: object = None) -> None:
    """Nothing to wait for: CPU ops complete when they return."""

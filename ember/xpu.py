"""``ember.xpu``: Intel's GPU device, absent in ember (PyTorch's answers without XPU)."""

from __future__ import annotations

from ember.device import check_device


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def manual_seed(seed: int) -> None:
    """Accepted and ignored."""


def manual_seed_all(seed: int) -> None:
    """Accepted and ignored."""


def synchronize(device: object = None) -> None:
    """Raises ``DeviceUnavailableError`` (an ``AssertionError``, as PyTorch without XPU)."""
    check_device("xpu", "xpu.synchronize")


def empty_cache() -> None:
    """A no-op."""


__all__ = ["device_count", "empty_cache", "is_available", "manual_seed", "manual_seed_all",
           "synchronize"]

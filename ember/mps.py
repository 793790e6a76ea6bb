"""``ember.mps``: Apple's Metal device, absent in ember (PyTorch's answers without MPS)."""

from __future__ import annotations

from ember.errors import DeviceUnavailableError


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def manual_seed(seed: int) -> None:
    """Accepted and ignored, as PyTorch without MPS."""


def seed() -> None:
    """Accepted and ignored."""


def synchronize() -> None:
    raise DeviceUnavailableError("[mps.synchronize] Cannot execute deviceSynchronize() without "
                                 "MPS backend: ember computes on the CPU")


def empty_cache() -> None:
    raise DeviceUnavailableError("[mps.empty_cache] Cannot execute emptyCache() without MPS "
                                 "backend: ember computes on the CPU")


__all__ = ["device_count", "empty_cache", "is_available", "manual_seed", "seed", "synchronize"]

"""``ember.cuda``: PyTorch's ``torch.cuda`` as on a build without CUDA.

ember computes on the CPU, so ``is_available()`` is False and ``device_count()`` 0, exactly what
PyTorch answers on a machine without a GPU; that is enough for the usual
``device = "cuda" if torch.cuda.is_available() else "cpu"``.  Seeding functions are accepted and
seed nothing; ``empty_cache`` does nothing; functions that need a device (``synchronize``,
``current_device``, ``get_device_name`` ...) raise
``DeviceUnavailableError`` (an ``AssertionError``, as PyTorch's "Torch not compiled with CUDA
enabled", and a ``RuntimeError``).

>>> ember.cuda.is_available()
False
"""

from __future__ import annotations

from typing import Any

from ember.cuda import amp  # noqa: F401
from ember.device import check_device
from ember.errors import EmberTypeError


def _no_cuda(op: str) -> Any:
    check_device("cuda", op)  # raises DeviceUnavailableError


def is_available() -> bool:
    """False: ember has no CUDA backend."""
    return False


def device_count() -> int:
    """0: ember has no CUDA devices."""
    return 0


def is_initialized() -> bool:
    return False


def init() -> None:
    _no_cuda("cuda.init")


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def manual_seed(seed: int) -> None:
    """Accepted and ignored (no CUDA generator to seed), as PyTorch without CUDA."""


def manual_seed_all(seed: int) -> None:
    """Accepted and ignored (no CUDA generators to seed)."""


def seed() -> None:
    """Accepted and ignored."""


def seed_all() -> None:
    """Accepted and ignored."""


def synchronize(device: Any = None) -> None:
    """Raises ``DeviceUnavailableError``, as PyTorch without CUDA (guard it with
    ``is_available()``)."""
    _no_cuda("cuda.synchronize")


def empty_cache() -> None:
    """No CUDA caching allocator: a no-op."""


def ipc_collect() -> None:
    """A no-op."""


def memory_allocated(device: Any = None) -> int:
    """0, as PyTorch without CUDA."""
    return 0


def max_memory_allocated(device: Any = None) -> int:
    return 0


def memory_reserved(device: Any = None) -> int:
    return 0


def max_memory_reserved(device: Any = None) -> int:
    return 0


def reset_peak_memory_stats(device: Any = None) -> None:
    """A no-op (there is no CUDA memory to track)."""


def current_device() -> int:
    """Raises ``DeviceUnavailableError``: there is no current CUDA device."""
    return _no_cuda("cuda.current_device")


def get_device_name(device: Any = None) -> str:
    return _no_cuda("cuda.get_device_name")


def get_device_capability(device: Any = None) -> tuple[int, int]:
    return _no_cuda("cuda.get_device_capability")


def get_device_properties(device: Any = None) -> Any:
    return _no_cuda("cuda.get_device_properties")


def set_device(device: Any) -> None:
    _no_cuda("cuda.set_device")


def get_rng_state(device: Any = "cuda") -> Any:
    return _no_cuda("cuda.get_rng_state")


def set_rng_state(new_state: Any, device: Any = "cuda") -> None:
    _no_cuda("cuda.set_rng_state")


def current_stream(device: Any = None) -> Any:
    return _no_cuda("cuda.current_stream")


class device:  # noqa: N801 (PyTorch's name)
    """``with ember.cuda.device(0):`` raises on entry: there is no CUDA device."""

    def __init__(self, device: Any) -> None:
        self.idx = device

    def __enter__(self) -> None:
        _no_cuda("cuda.device")

    def __exit__(self, *exc: object) -> None:
        return None


class _CudaTensorType(type):
    """Metaclass of ``ember.cuda.FloatTensor`` and friends: no tensor is one, and building one
    raises PyTorch's ``TypeError``."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return False

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise EmberTypeError(f"[cuda.{cls.__name__}] type torch.cuda.{cls.__name__} not "
                             "available: ember has no CUDA (as PyTorch not compiled with CUDA "
                             "enabled)")


_LEGACY = ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
           "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor")
for _name in _LEGACY:
    globals()[_name] = _CudaTensorType(_name, (), {"__module__": "ember.cuda"})
del _name

__all__ = [*_LEGACY,
    "amp", "current_device", "current_stream", "device", "device_count", "empty_cache",
    "get_device_capability", "get_device_name", "get_device_properties", "get_rng_state", "init",
    "ipc_collect", "is_available", "is_bf16_supported", "is_initialized", "manual_seed",
    "manual_seed_all", "max_memory_allocated", "max_memory_reserved", "memory_allocated",
    "memory_reserved", "reset_peak_memory_stats", "seed", "seed_all", "set_device",
    "set_rng_state", "synchronize",
]

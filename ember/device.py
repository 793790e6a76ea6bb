"""Devices, device guards and streams.

ember computes on the CPU.  ``ember.device("cuda")`` can be named (so code that builds device
objects runs), but placing a tensor there raises a clear ``DeviceError``.  ``DeviceGuard`` and
``Stream`` are real objects for the CPU: work is synchronous, so a stream is always idle, but the
objects exist so the stable C ABI can hand them out later.
"""

from __future__ import annotations

import itertools
from typing import Union

from ember.errors import DeviceError, DeviceUnavailableError, EmberRuntimeError, EmberValueError

_KNOWN_TYPES = ("cpu", "cuda", "mps", "meta", "xpu")


class device:  # noqa: N801
    """A device name and optional index: ``ember.device("cpu")``, ``ember.device("cpu:0")``."""

    __slots__ = ("type", "index")

    def __init__(self, type: DeviceLike, index: int | None = None) -> None:  # noqa: A002
        if isinstance(type, device):
            self.type, self.index = type.type, type.index
            return
        if not isinstance(type, str):
            raise EmberValueError(f"[device] expected a device string, got {type!r}")
        name = type
        if ":" in name:
            if index is not None:
                raise EmberValueError(f"[device] type {name!r} already holds an index")
            name, _, idx = name.partition(":")
            if not idx.isdigit():
                raise EmberValueError(f"[device] invalid device string {type!r}")
            index = int(idx)
        if name not in _KNOWN_TYPES:
            raise EmberValueError(
                f"[device] expected one of {', '.join(_KNOWN_TYPES)} device type at start of "
                f"device string: {type}"
            )
        if index is not None and index < 0:
            raise EmberValueError(f"[device] device index must be non-negative, got {index}")
        self.type, self.index = name, index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


DeviceLike = Union[str, device, int, None]
_ACCELERATORS = {"cuda": "CUDA", "mps": "MPS", "xpu": "XPU"}
CPU = device("cpu")


def check_pin(pin_memory: bool, op: str) -> None:
    """``pin_memory=True`` needs an accelerator's pinned allocator; ember has none (PyTorch's
    CPU build raises the same RuntimeError)."""
    if pin_memory:
        raise EmberRuntimeError(f"[{op}] pin_memory=True requires a CUDA or other accelerator "
                                "backend; no pinned memory allocator is available on this system.")


def check_device(dev: DeviceLike, op: str) -> device:
    """Resolve ``dev`` to the CPU device, or raise ``DeviceError`` naming the op."""
    if dev is None:
        return CPU
    if isinstance(dev, int):
        raise DeviceUnavailableError(
            f"[{op}] device ordinal {dev} (an accelerator) is not available: ember has no CUDA "
            "backend and computes on the CPU (expected 'cpu')"
        )
    d = device(dev)
    if d.type in _ACCELERATORS:
        raise DeviceUnavailableError(
            f"[{op}] device '{d}' is not available: ember has no {_ACCELERATORS[d.type]} backend "
            f"(as PyTorch when 'Torch not compiled with {_ACCELERATORS[d.type]} enabled'); "
            "ember computes on the CPU (expected 'cpu')"
        )
    if d.type != "cpu" or (d.index not in (None, 0)):
        raise DeviceError(
            f"[{op}] device '{d}' is not available; ember computes on the CPU (expected 'cpu')"
        )
    return CPU


class Stream:
    """A CPU stream.  Work on the CPU runs synchronously, so every stream is always complete."""

    _ids = itertools.count(1)

    def __init__(self, device: DeviceLike = None, priority: int = 0) -> None:
        self.device = check_device(device, "Stream")
        self.priority = priority
        self.stream_id = next(Stream._ids)

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def wait_stream(self, stream: Stream) -> None:
        return None

    def __enter__(self) -> Stream:
        _stream_stack.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _stream_stack.pop()

    def __repr__(self) -> str:
        return f"<ember.Stream device={self.device} id={self.stream_id}>"


_default_stream = Stream()
_stream_stack: list[Stream] = []


def current_stream(device: DeviceLike = None) -> Stream:
    """The stream work is issued on (the default CPU stream unless one is entered)."""
    check_device(device, "current_stream")
    return _stream_stack[-1] if _stream_stack else _default_stream


def default_stream(device: DeviceLike = None) -> Stream:
    check_device(device, "default_stream")
    return _default_stream


def synchronize(device: DeviceLike = None) -> None:
    """Wait for all work on ``device``: a no-op on the synchronous CPU."""
    check_device(device, "synchronize")


_current_index = [0]


class DeviceGuard:
    """Context manager that makes ``device`` current and restores the previous one on exit."""

    def __init__(self, device: DeviceLike) -> None:
        self.device = check_device(device, "DeviceGuard")
        self._prev: int | None = None

    def __enter__(self) -> DeviceGuard:
        self._prev = _current_index[0]
        _current_index[0] = self.device.index or 0
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._prev is not None
        _current_index[0] = self._prev


def current_device() -> int:
    return _current_index[0]


def set_default_device(device: DeviceLike) -> None:
    """PyTorch's default device for new tensors: only 'cpu' (or None) is accepted; an
    accelerator raises ``DeviceUnavailableError`` at once (PyTorch raises at the first tensor
    created there)."""
    check_device(device, "set_default_device")


def get_default_device() -> device:
    """The device new tensors are created on: always ``device(type='cpu')``."""
    return CPU

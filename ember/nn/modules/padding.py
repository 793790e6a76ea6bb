"""Padding modules: ``ReflectionPad``, ``ReplicationPad``, ``ZeroPad``, ``ConstantPad`` and
``CircularPad`` in 1-d, 2-d and 3-d, each a call of :func:`ember.nn.functional.pad`.

``padding`` is an int (the same on every side) or a tuple ``(left, right[, top, bottom[,
front, back]])`` as in ``F.pad``.

>>> nn.ReflectionPad2d(1)(ember.ones(1, 1, 2, 2)).shape
ember.Size([1, 1, 4, 4])
"""

from __future__ import annotations

from typing import Any

from ember.errors import EmberValueError
from ember.nn.functional.conv import pad
from ember.nn.modules.module import Module
from ember.tensor import Tensor

__all__ = [
    "CircularPad1d", "CircularPad2d", "CircularPad3d",
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
    "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
    "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
]


def _ntuple(padding: Any, n: int) -> tuple:
    if isinstance(padding, (list, tuple)):
        return tuple(padding)
    return (padding,) * n


class _PadNd(Module):
    __constants__ = ["padding"]
    _mode = "constant"
    _n = 2  # length of the padding tuple (two per padded dim)

    def __init__(self, padding: Any) -> None:
        super().__init__()
        self.padding = _ntuple(padding, self._n)

    def forward(self, input: Tensor) -> Tensor:
        return pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _CircularPadNd(_PadNd):
    _mode = "circular"

    def forward(self, input: Tensor) -> Tensor:
        d = self._n // 2
        if input.ndim not in (d + 1, d + 2):
            raise EmberValueError(f"[{type(self).__name__}] expected {d + 1}D or {d + 2}D input "
                                  f"(got {input.ndim}D input)")
        return pad(input, self.padding, "circular")


class _ConstantPadNd(_PadNd):
    __constants__ = ["padding", "value"]

    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


def _family(base: type, mode: str | None, doc: str) -> tuple:
    """The 1-d, 2-d and 3-d classes of a padding kind (PyTorch's names, this module's path, so
    they pickle and print as PyTorch's do)."""
    classes = []
    for d in (1, 2, 3):
        attrs: dict = {"_n": 2 * d, "__doc__": f"{doc} of the last {d} dim(s)."}
        if mode is not None:
            attrs["_mode"] = mode
        name = base.__name__.strip("_").replace("Nd", f"{d}d")
        classes.append(type(name, (base,), attrs | {"__module__": __name__}))
    return tuple(classes)


class _ReflectionPadNd(_PadNd):
    _mode = "reflect"


class _ReplicationPadNd(_PadNd):
    _mode = "replicate"


ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = _family(
    _ReflectionPadNd, None, "Pads with the reflection of the input (the border not repeated)")
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = _family(
    _ReplicationPadNd, None, "Pads by repeating the border values")
CircularPad1d, CircularPad2d, CircularPad3d = _family(
    _CircularPadNd, None, "Pads by wrapping around (periodic)")
ConstantPad1d, ConstantPad2d, ConstantPad3d = _family(
    _ConstantPadNd, None, "Pads with a constant ``value``")
ZeroPad1d, ZeroPad2d, ZeroPad3d = _family(_ZeroPadNd, None, "Pads with zeros")

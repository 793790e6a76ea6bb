"""Quantized tensors (PyTorch's ``torch.quantize_per_tensor`` / ``quantize_per_channel``
results), as far as int8 dynamic quantization needs them: integer codes with a scale and a
zero point per tensor or per channel, ``int_repr``/``dequantize``/``q_scale``/``q_zero_point``/
``q_per_channel_*``.  No op computes on them; ``ember.ao.nn.quantized.dynamic.Linear`` stores
its weight as one.

Arithmetic as PyTorch's x86 (fbgemm) kernels: ``code = clamp(nearbyint(fma(x, 1.0f / scale,
zero_point)), qmin, qmax)`` in float32 (fbgemm's vectorized ``Quantize`` fuses the multiply and
the add; two roundings differ for about one value in a million), ties to even.

>>> import ember
>>> q = ember.quantize_per_tensor(ember.tensor([0.5, -1.0]), 0.5, 0, ember.qint8)
>>> q.int_repr().tolist(), q.dequantize().tolist()
([1, -2], [0.5, -1.0])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes as dt
from ember._frontend.creation import tensor
from ember.errors import DTypeError, EmberValueError
from ember.ops.qlinear import quantize_array
from ember.tensor import Tensor

_RANGE = {"qint8": (-128, 127), "quint8": (0, 255), "qint32": (-2**31, 2**31 - 1)}

per_tensor_affine, per_channel_affine = "per_tensor_affine", "per_channel_affine"
per_tensor_symmetric, per_channel_symmetric = "per_tensor_symmetric", "per_channel_symmetric"


class QuantizedTensor:
    """Integer codes with quantization parameters (PyTorch's quantized tensor, minimal)."""

    def __init__(self, codes: np.ndarray, dtype: dt.dtype, scale: Any, zero_point: Any,
                 axis: int | None = None) -> None:
        self._codes, self.dtype, self._axis = codes, dtype, axis
        self._scale, self._zero_point = scale, zero_point

    @property
    def shape(self) -> tuple:
        return tuple(self._codes.shape)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return self._codes.ndim

    @property
    def is_quantized(self) -> bool:
        return True

    def qscheme(self) -> str:
        return per_tensor_affine if self._axis is None else per_channel_affine

    def int_repr(self) -> Tensor:
        """The integer codes as an int8/uint8/int32 tensor."""
        return tensor(self._codes.copy())

    def q_scale(self) -> float:
        self._need(False, "q_scale")
        return float(self._scale)

    def q_zero_point(self) -> int:
        self._need(False, "q_zero_point")
        return int(self._zero_point)

    def q_per_channel_scales(self) -> Tensor:
        self._need(True, "q_per_channel_scales")
        return tensor(np.asarray(self._scale, np.float64))

    def q_per_channel_zero_points(self) -> Tensor:
        self._need(True, "q_per_channel_zero_points")
        return tensor(np.asarray(self._zero_point, np.int64))

    def q_per_channel_axis(self) -> int:
        self._need(True, "q_per_channel_axis")
        return int(self._axis)

    def _need(self, per_channel: bool, op: str) -> None:
        if (self._axis is not None) != per_channel:
            want = "per-channel" if per_channel else "per-tensor"
            raise EmberValueError(f"[{op}] expected a {want} quantized tensor, got "
                                  f"{self.qscheme()}")

    def _params(self) -> tuple:
        """(scale, zero_point) broadcasting against the codes (float32, float32)."""
        s = np.asarray(self._scale, np.float32)
        z = np.asarray(self._zero_point, np.float32)
        if self._axis is not None:
            shape = [1] * self._codes.ndim
            shape[self._axis] = -1
            s, z = s.reshape(shape), z.reshape(shape)
        return s, z

    def dequantize(self) -> Tensor:
        """float32 ``(code - zero_point) * scale`` (per channel: in float64 with the float64
        scales, rounded once, as PyTorch does)."""
        s, z = self._params()
        if self._axis is not None:
            s = np.asarray(self._scale, np.float64).reshape(s.shape)
            return tensor(((self._codes.astype(np.float64) - z) * s).astype(np.float32))
        return tensor(((self._codes.astype(np.float32) - z) * s).astype(np.float32))

    def __repr__(self) -> str:
        return (f"QuantizedTensor({self.dequantize().tolist()}, size={self.shape}, "
                f"dtype={self.dtype}, quantization_scheme={self.qscheme()})")


def _check(x: Tensor, dtype: dt.dtype, op: str) -> tuple:
    if dtype not in dt.QUANTIZED_DTYPES:
        raise DTypeError(f"[{op}] dtype must be ember.qint8, ember.quint8 or ember.qint32, "
                         f"got {dtype}")
    if not isinstance(x, Tensor) or not x.dtype.is_floating_point:
        raise DTypeError(f"[{op}] expects a floating point tensor, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}")
    return _RANGE[dtype.name]


def quantize_per_tensor(input: Tensor, scale: float, zero_point: int,  # noqa: A002
                        dtype: dt.dtype) -> QuantizedTensor:
    """Quantize ``input`` with one scale and zero point (PyTorch's ``quantize_per_tensor``).

    >>> import ember
    >>> ember.quantize_per_tensor(ember.tensor([1.0]), 0.1, 10, ember.quint8).int_repr()
    tensor([20], dtype=ember.uint8)
    """
    qmin, qmax = _check(input, dtype, "quantize_per_tensor")
    x = input.detach().numpy().astype(np.float32)
    codes = quantize_array(x, np.float32(scale), int(zero_point), qmin, qmax, dtype.np)
    return QuantizedTensor(codes, dtype, float(scale), int(zero_point))


def quantize_per_channel(input: Tensor, scales: Tensor, zero_points: Tensor,  # noqa: A002
                         axis: int, dtype: dt.dtype) -> QuantizedTensor:
    """Quantize ``input`` with one scale and zero point per index of ``axis``.

    >>> import ember
    >>> q = ember.quantize_per_channel(ember.tensor([[1.0], [1.0]]), ember.tensor([0.5, 0.25]),
    ...                                ember.tensor([0, 0]), 0, ember.qint8)
    >>> q.int_repr().flatten().tolist()
    [2, 4]
    """
    qmin, qmax = _check(input, dtype, "quantize_per_channel")
    x = input.detach().numpy().astype(np.float32)
    s = np.asarray(scales.detach().numpy(), np.float64)
    z = np.asarray(zero_points.detach().numpy(), np.int64)
    if s.shape != (x.shape[axis],) or z.shape != s.shape:
        raise EmberValueError(f"[quantize_per_channel] expected {x.shape[axis]} scales and zero "
                              f"points for axis {axis}, got {s.shape} and {z.shape}")
    shape = [1] * x.ndim
    shape[axis] = -1
    codes = quantize_array(x, s.astype(np.float32).reshape(shape), z.reshape(shape), qmin, qmax,
                           dtype.np)
    return QuantizedTensor(codes, dtype, s, z, axis % x.ndim)


def dequantize(input: Any) -> Any:  # noqa: A002 (PyTorch's parameter name)
    """``input.dequantize()`` (PyTorch's ``torch.dequantize``); a list or tuple of quantized
    tensors gives a list of float32 tensors, as PyTorch's overload does."""
    if isinstance(input, (list, tuple)):
        return [q.dequantize() for q in input]
    return input.dequantize()


__all__ = ["QuantizedTensor", "quantize_per_tensor", "quantize_per_channel", "dequantize",
           "per_tensor_affine", "per_channel_affine", "per_tensor_symmetric",
           "per_channel_symmetric"]

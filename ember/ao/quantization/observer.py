"""Observers and QConfigs for dynamic quantization (PyTorch's ``torch.ao.quantization``
names; the arithmetic of ``MinMaxObserver``/``PerChannelMinMaxObserver._calculate_qparams``
in float32, the weight observers of ``default_dynamic_qconfig`` and
``per_channel_dynamic_qconfig``).

>>> import ember
>>> obs = MinMaxObserver(dtype=ember.qint8, qscheme=per_tensor_symmetric)
>>> _ = obs(ember.tensor([-2.55, 1.0]))
>>> [round(float(v), 4) for v in obs.calculate_qparams()]
[0.02, 0.0]
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np

from ember import dtypes as dt
from ember._frontend.creation import tensor
from ember.ao.quantization.qtensor import (
    per_channel_affine,
    per_channel_symmetric,
    per_tensor_affine,
    per_tensor_symmetric,
)
from ember.errors import EmberValueError
from ember.tensor import Tensor

_EPS = np.float32(np.finfo(np.float32).eps)


def _qrange(dtype: dt.dtype, reduce_range: bool, quant_min: Any, quant_max: Any) -> tuple:
    if quant_min is not None and quant_max is not None:
        return int(quant_min), int(quant_max)
    lo, hi = {"qint8": (-128, 127), "quint8": (0, 255), "qint32": (-2**31, 2**31 - 1),
              "int8": (-128, 127), "uint8": (0, 255)}[dtype.name]
    if reduce_range:
        lo, hi = lo // 2, hi // 2
    return lo, hi


class _MinMaxBase:
    def __init__(self, dtype: dt.dtype = dt.quint8, qscheme: str = per_tensor_affine,
                 reduce_range: bool = False, quant_min: int | None = None,
                 quant_max: int | None = None, eps: float = float(_EPS),
                 is_dynamic: bool = False) -> None:
        if qscheme not in (per_tensor_affine, per_tensor_symmetric, per_channel_affine,
                           per_channel_symmetric):
            raise EmberValueError(f"[{type(self).__name__}] unknown qscheme {qscheme!r}")
        self.dtype, self.qscheme, self.reduce_range = dtype, qscheme, reduce_range
        self.quant_min, self.quant_max = _qrange(dtype, reduce_range, quant_min, quant_max)
        self.eps = np.float32(eps)
        self.min_val = self.max_val = None

    def __call__(self, x: Tensor) -> Tensor:
        return self.forward(x)

    def _qparams(self, mn: np.ndarray, mx: np.ndarray) -> tuple:
        """float32 scale and int64 zero point (PyTorch's ``_calculate_qparams``)."""
        neg = np.minimum(mn, np.float32(0))
        pos = np.maximum(mx, np.float32(0))
        qmin, qmax = self.quant_min, self.quant_max
        if self.qscheme in (per_tensor_symmetric, per_channel_symmetric):
            pos = np.maximum(-neg, pos)
            scale = np.maximum((pos / np.float32((qmax - qmin) / 2)).astype(np.float32), self.eps)
            zp = np.full(scale.shape, (qmin + qmax) // 2 if self.dtype.name in ("quint8", "uint8")
                         else 0, np.int64)
        else:
            scale = ((pos - neg) / np.float32(qmax - qmin)).astype(np.float32)
            scale = np.maximum(scale, self.eps)
            zp = qmin - np.rint(neg / scale).astype(np.int64)
            zp = np.clip(zp, qmin, qmax)
        return scale, zp


class MinMaxObserver(_MinMaxBase):
    """Running min/max of everything observed; one scale and zero point."""

    def forward(self, x: Tensor) -> Tensor:
        a = x.detach().numpy().astype(np.float32)
        mn, mx = np.float32(a.min()), np.float32(a.max())
        if self.min_val is not None:
            mn, mx = min(mn, self.min_val), max(mx, self.max_val)
        self.min_val, self.max_val = mn, mx
        return x

    def calculate_qparams(self) -> tuple:
        s, z = self._qparams(np.float32(self.min_val), np.float32(self.max_val))
        return tensor(np.asarray(s, np.float32)), tensor(np.asarray(z, np.int64))


class PerChannelMinMaxObserver(_MinMaxBase):
    """Running min/max per index of ``ch_axis``; one scale and zero point per channel."""

    def __init__(self, ch_axis: int = 0, dtype: dt.dtype = dt.quint8,
                 qscheme: str = per_channel_affine, **kwargs: Any) -> None:
        super().__init__(dtype=dtype, qscheme=qscheme, **kwargs)
        self.ch_axis = ch_axis

    def forward(self, x: Tensor) -> Tensor:
        a = np.moveaxis(x.detach().numpy().astype(np.float32), self.ch_axis, 0)
        a = a.reshape(a.shape[0], -1)
        mn, mx = a.min(axis=1), a.max(axis=1)
        if self.min_val is not None:
            mn, mx = np.minimum(mn, self.min_val), np.maximum(mx, self.max_val)
        self.min_val, self.max_val = mn, mx
        return x

    def calculate_qparams(self) -> tuple:
        s, z = self._qparams(self.min_val, self.max_val)
        return tensor(s), tensor(z)


class PlaceholderObserver:
    """Records only the dtype (the activation side of a dynamic qconfig)."""

    def __init__(self, dtype: dt.dtype = dt.float32, quant_min: int | None = None,
                 quant_max: int | None = None, is_dynamic: bool = False,
                 qscheme: str = per_tensor_affine, **kwargs: Any) -> None:
        self.dtype, self.quant_min, self.quant_max = dtype, quant_min, quant_max
        self.is_dynamic, self.qscheme = is_dynamic, qscheme

    def __call__(self, x: Tensor) -> Tensor:
        return x


class QConfig(NamedTuple):
    """``(activation, weight)``: observer constructors (PyTorch's ``QConfig``)."""

    activation: Any
    weight: Any


default_dynamic_quant_observer = functools.partial(
    PlaceholderObserver, dtype=dt.quint8, quant_min=0, quant_max=255, is_dynamic=True)
default_weight_observer = functools.partial(
    MinMaxObserver, dtype=dt.qint8, qscheme=per_tensor_symmetric)
default_per_channel_weight_observer = functools.partial(
    PerChannelMinMaxObserver, dtype=dt.qint8, qscheme=per_channel_symmetric)
default_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                  weight=default_weight_observer)
per_channel_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                      weight=default_per_channel_weight_observer)
# PyTorch's float16 dynamic quantization: weights stored as float16, activations float32
float16_dynamic_qconfig = QConfig(
    activation=functools.partial(PlaceholderObserver, dtype=dt.float16, is_dynamic=True),
    weight=functools.partial(PlaceholderObserver, dtype=dt.float16))
# ember's addition (torchao's int8 dynamic activation / int8 weight scheme): every row of the
# input (every token) gets its own scale and zero point, weights per output channel
per_token_affine = "per_token_affine"
per_token_dynamic_quant_observer = functools.partial(
    PlaceholderObserver, dtype=dt.quint8, quant_min=0, quant_max=255, is_dynamic=True,
    qscheme=per_token_affine)
per_token_dynamic_qconfig = QConfig(activation=per_token_dynamic_quant_observer,
                                    weight=default_per_channel_weight_observer)

__all__ = ["MinMaxObserver", "PerChannelMinMaxObserver", "PlaceholderObserver", "QConfig",
           "default_dynamic_qconfig", "float16_dynamic_qconfig", "per_channel_dynamic_qconfig",
           "per_token_dynamic_qconfig",
           "per_token_dynamic_quant_observer", "per_token_affine",
           "default_dynamic_quant_observer", "default_weight_observer",
           "default_per_channel_weight_observer"]

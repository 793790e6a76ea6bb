"""``ember.ao.nn.quantized.dynamic.Linear``: PyTorch's dynamically quantized Linear (int8
weights quantized once, activations quantized per call, int32 sums, float32 output).

>>> import ember
>>> m = Linear.from_float(ember.nn.Linear(4, 2))
>>> m(ember.randn(3, 4)).shape
ember.Size([3, 2])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes as dt
from ember._frontend.creation import tensor
from ember.ao.quantization import _dynamic_kernel as kern
from ember.ao.quantization.observer import default_dynamic_qconfig, per_token_affine
from ember.ao.quantization.qtensor import QuantizedTensor, quantize_per_channel, quantize_per_tensor
from ember.errors import DTypeError, EmberTypeError, ShapeError
from ember.nn.modules.module import Module
from ember.ops.qlinear import QLINEAR_DYNAMIC
from ember.ops.registry import bind
from ember.tensor import Tensor


def quantize_weight(weight: Tensor, qconfig: Any, op: str) -> QuantizedTensor:
    """A float weight quantized by ``qconfig``'s weight observer (qint8, per tensor or per
    output channel), as PyTorch's ``from_float`` does."""
    observer = qconfig.weight()
    if observer.dtype is not dt.qint8:
        raise DTypeError(f"[{op}] weight observer must have dtype ember.qint8, got "
                         f"{observer.dtype}")
    w = weight.detach().float()
    observer(w)
    scale, zp = observer.calculate_qparams()
    if observer.qscheme.startswith("per_channel"):
        return quantize_per_channel(w, scale.double(), zp, 0, dt.qint8)
    return quantize_per_tensor(w, float(scale), int(zp), dt.qint8)


def _op_tensors(w: kern.PackedWeight, bias: np.ndarray | None) -> tuple:
    """The ``qlinear_dynamic`` operands of a packed weight, made once: (packed codes, column
    sums, scales, bias), the last three padded to the packed width.  Plain tensor attributes
    of ``LinearPackedParams`` (not buffers: the state dict keeps PyTorch's keys); a compiled
    graph reads them as runtime arguments, ``ember.export`` lifts them as constants named
    ``<fqn>._packed_params._packed_weight`` (``_packed_colsum``, ``_packed_scale``,
    ``_packed_bias``), which an AOT package stores as its weights."""
    p = w.packed
    mp = p.colsum.shape[0]
    scale = np.zeros(mp, np.float32)
    scale[:p.m] = np.broadcast_to(np.asarray(w.scale, np.float32), (p.m,))
    b = np.zeros(mp, np.float32)
    if bias is not None:
        b[:p.m] = bias
    return (tensor(p.data), tensor(p.colsum), tensor(scale), tensor(b))


_F16_MAX = 65504.0


def _check_dtype(dtype: dt.dtype, op: str) -> None:
    if dtype not in (dt.qint8, dt.float16):
        raise DTypeError(f"[{op}] only ember.qint8 and ember.float16 are supported, got {dtype}")


class LinearPackedParams(Module):
    """Holds the quantized weight and the float bias (saved as ``_packed_params``).  With
    ``dtype=ember.float16`` the weight is stored as float16 (PyTorch's
    ``linear_prepack_fp16``: clamped to +-65504, rounded to nearest even)."""

    _version = 3

    def __init__(self, dtype: dt.dtype = dt.qint8) -> None:
        super().__init__()
        _check_dtype(dtype, "quantized.dynamic.Linear")
        self.dtype = dtype
        w = tensor(np.zeros((1, 1), np.float32))
        self.set_weight_bias(w if dtype is dt.float16 else quantize_per_tensor(w, 1.0, 0,
                                                                             dt.qint8), None)

    def _set_float16(self, weight: Tensor, bias: Tensor | None) -> None:
        if not isinstance(weight, Tensor) or not weight.dtype.is_floating_point:
            raise EmberTypeError("[quantized.dynamic.Linear] a float16 packed weight is made "
                                 "from a float tensor")
        w = np.clip(weight.detach().float().numpy(), -_F16_MAX, _F16_MAX)
        self._weight16 = tensor(w.astype(np.float16))       # the stored weight
        self._weight, self._bias = None, bias
        self._bias_np = None if bias is None else \
            np.ascontiguousarray(bias.detach().numpy(), dtype=np.float32)
        self._bias32 = None if bias is None else tensor(self._bias_np)   # no autograd

    def set_weight_bias(self, weight: QuantizedTensor | Tensor, bias: Tensor | None) -> None:
        if self.dtype is dt.float16:
            self._set_float16(weight, bias)
            return
        if not isinstance(weight, QuantizedTensor) or weight.dtype is not dt.qint8:
            raise EmberTypeError("[quantized.dynamic.Linear] the weight must be a qint8 "
                                 "quantized tensor (ember.quantize_per_tensor/per_channel)")
        self._weight, self._bias = weight, bias
        s = np.asarray(weight._scale, np.float64).astype(np.float32)
        self._packed = kern.PackedWeight(weight._codes, s if weight._axis is not None
                                         else np.float32(s))
        self._bias_np = None if bias is None else \
            np.ascontiguousarray(bias.detach().numpy(), dtype=np.float32)
        (self._packed_weight, self._packed_colsum, self._packed_scale,
         self._packed_bias) = _op_tensors(self._packed, self._bias_np)

    def _float16_linear(self, x: Tensor) -> Tensor:
        """PyTorch's ``linear_dynamic_fp16``: the float16 weight widened exactly, a float32
        product (float32 accumulation), then the bias added (``output.add_(bias)``)."""
        from ember.nn import functional as F  # noqa: PLC0415, N812

        out = F.linear(x, self._weight16.float())
        return out if self._bias32 is None else out + self._bias32

    @property
    def _qargs(self) -> tuple:
        return self._packed_weight, self._packed_colsum, self._packed_scale, self._packed_bias

    def _weight_bias(self) -> tuple:
        if self.dtype is dt.float16:     # PyTorch unpacks it as float32
            return self._weight16.float(), self._bias
        return self._weight, self._bias

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "dtype"] = self.dtype
        destination[prefix + "_packed_params"] = self._weight_bias()

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: dict,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        for name in ("dtype", "_packed_params"):
            if prefix + name not in state_dict and strict:
                missing_keys.append(prefix + name)
        if prefix + "_packed_params" in state_dict:
            weight, bias = state_dict.pop(prefix + "_packed_params")
            self.set_weight_bias(weight, bias)
        state_dict.pop(prefix + "dtype", None)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys,
                                      unexpected_keys, error_msgs)


class Linear(Module):
    """A Linear whose weight is int8 (per tensor or per output channel) and whose input is
    quantized to uint8 at every call (PyTorch's ``DynamicQuantizedLinear``); with
    ``dtype=ember.float16`` the weight is stored as float16 and the product is float32
    (PyTorch's ``linear_dynamic_fp16``)."""

    _version = 4

    def __init__(self, in_features: int, out_features: int, bias_: bool = True,
                 dtype: dt.dtype = dt.qint8) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.scale, self.zero_point = 1.0, 0
        self.version = 4
        # per_token_dynamic_qconfig: every input row its own scale and zero point over the
        # full [0, 255] (PyTorch's per-tensor scheme: one pair over [0, 127], reduce_range)
        self.per_row_input = False
        self._packed_params = LinearPackedParams(dtype)
        w = tensor(np.zeros((out_features, in_features), np.float32))
        if dtype is dt.qint8:
            w = quantize_per_tensor(w, 1.0, 0, dt.qint8)
        self._packed_params.set_weight_bias(
            w, tensor(np.zeros(out_features, np.float32)) if bias_ else None)

    def _get_name(self) -> str:
        return "DynamicQuantizedLinear"

    def extra_repr(self) -> str:
        s = (f"in_features={self.in_features}, out_features={self.out_features}, "
             f"dtype={self._packed_params.dtype}")
        if self._packed_params.dtype is dt.qint8:
            s += f", qscheme=ember.{self._packed_params._weight.qscheme()}"
        return s

    def __repr__(self) -> str:      # PyTorch hides _packed_params
        return f"{self._get_name()}({self.extra_repr()})"

    def weight(self) -> QuantizedTensor | Tensor:
        return self._packed_params._weight_bias()[0]

    def bias(self) -> Tensor | None:
        return self._packed_params._bias

    def set_weight_bias(self, w: QuantizedTensor | Tensor, b: Tensor | None) -> None:
        self._packed_params.set_weight_bias(w, b)

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor) or x.dtype is not dt.float32:
            raise DTypeError(f"[quantized.dynamic.Linear] expects a float32 input, got "
                             f"{getattr(x, 'dtype', type(x).__name__)}")
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ShapeError(f"[quantized.dynamic.Linear] input of shape {tuple(x.shape)} does "
                             f"not end in in_features={self.in_features}")
        p = self._packed_params
        if p.dtype is dt.float16:
            return p._float16_linear(x.detach())
        # one op (ember/ops/qlinear.py): eager runs the packed C kernel; ember.compile
        # records it and the C backend lowers it into the graph (no graph break)
        return bind(QLINEAR_DYNAMIC, x.detach(), *p._qargs, m=self.out_features,
                    k=self.in_features, per_row=self.per_row_input,
                    reduce_range=not self.per_row_input, has_bias=p._bias_np is not None)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "scale"] = tensor(np.float32(self.scale))
        destination[prefix + "zero_point"] = tensor(np.int64(self.zero_point))

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: dict,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        self.scale = float(state_dict.pop(prefix + "scale", self.scale))
        self.zero_point = int(state_dict.pop(prefix + "zero_point", self.zero_point))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    @classmethod
    def from_float(cls, mod: Module, use_precomputed_fake_quant: bool = False) -> Linear:
        """Quantize a float ``nn.Linear`` that carries a ``qconfig`` (as ``quantize_dynamic``
        sets); without one, ``default_dynamic_qconfig``."""
        qconfig = getattr(mod, "qconfig", None) or default_dynamic_qconfig
        bias = None if mod.bias is None else mod.bias.detach().float().clone()
        if qconfig.weight().dtype is dt.float16:
            q = cls(mod.in_features, mod.out_features, dtype=dt.float16)
            q.set_weight_bias(mod.weight.detach().float(), bias)
            return q
        qw = quantize_weight(mod.weight, qconfig, "quantized.dynamic.Linear")
        q = cls(mod.in_features, mod.out_features, dtype=dt.qint8)
        act = qconfig.activation()
        q.per_row_input = getattr(act, "qscheme", None) == per_token_affine
        q.set_weight_bias(qw, bias)
        return q


__all__ = ["Linear", "LinearPackedParams", "quantize_weight"]

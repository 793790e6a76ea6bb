"""``quantize_dynamic`` (PyTorch's eager-mode dynamic quantization).

>>> import ember
>>> model = ember.nn.Sequential(ember.nn.Linear(8, 4), ember.nn.ReLU())
>>> q = quantize_dynamic(model, {ember.nn.Linear}, dtype=ember.qint8)
>>> type(q[0]).__name__, q(ember.randn(2, 8)).shape
('Linear', ember.Size([2, 4]))
"""

from __future__ import annotations

import copy
from typing import Any

from ember import dtypes as dt
from ember import nn
from ember.ao.quantization.observer import QConfig, default_dynamic_qconfig
from ember.errors import DTypeError


def get_default_dynamic_quant_module_mappings() -> dict:
    """float module type -> dynamic quantized module type (the cells: not yet)."""
    from ember.ao.nn.quantized.dynamic.linear import Linear as DynamicLinear  # noqa: PLC0415
    from ember.ao.nn.quantized.dynamic.rnn import GRU as DynamicGRU  # noqa: PLC0415, N811
    from ember.ao.nn.quantized.dynamic.rnn import LSTM as DynamicLSTM  # noqa: PLC0415, N811

    return {nn.Linear: DynamicLinear, nn.LSTM: DynamicLSTM, nn.GRU: DynamicGRU}


def _spec(qconfig_spec: Any, dtype: dt.dtype) -> dict:
    if dtype is not dt.qint8:
        raise DTypeError(f"[quantize_dynamic] only dtype=ember.qint8 is supported, got {dtype} "
                         "(float16 dynamic quantization is not implemented)")
    if qconfig_spec is None:
        rnn = [getattr(nn, n) for n in ("LSTM", "GRU", "LSTMCell", "RNNCell", "GRUCell")
               if hasattr(nn, n)]
        return dict.fromkeys([nn.Linear, *rnn], default_dynamic_qconfig)
    if isinstance(qconfig_spec, (set, frozenset, list, tuple)):
        return dict.fromkeys(qconfig_spec, default_dynamic_qconfig)
    return dict(qconfig_spec)


def _propagate(module: nn.Module, spec: dict, parent: QConfig | None, prefix: str) -> None:
    qconfig = spec.get(prefix, spec.get(type(module), parent))
    module.qconfig = qconfig
    for name, child in module.named_children():
        _propagate(child, spec, qconfig, prefix + ("." if prefix else "") + name)


def _convert(module: nn.Module, mapping: dict) -> None:
    for name, child in list(module.named_children()):
        if type(child) in mapping and getattr(child, "qconfig", None) is not None:
            setattr(module, name, mapping[type(child)].from_float(child))
        else:
            _convert(child, mapping)


def _remove_qconfig(module: nn.Module) -> None:
    for m in module.modules():
        if "qconfig" in m.__dict__:
            del m.__dict__["qconfig"]


def quantize_dynamic(model: nn.Module, qconfig_spec: Any = None, dtype: dt.dtype = dt.qint8,
                     mapping: dict | None = None, inplace: bool = False) -> nn.Module:
    """Replace the submodules chosen by ``qconfig_spec`` (a set of module types, or a dict of
    types / qualified names to QConfigs) with dynamically quantized ones; the root module itself
    is never replaced (as in PyTorch).  ``nn.Linear``, ``nn.LSTM`` and ``nn.GRU`` have quantized
    versions; other listed types (the cells) stay float."""
    spec = _spec(qconfig_spec, dtype)
    mapping = get_default_dynamic_quant_module_mappings() if mapping is None else mapping
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    _propagate(model, spec, None, "")
    _convert(model, mapping)
    _remove_qconfig(model)
    return model


__all__ = ["quantize_dynamic", "get_default_dynamic_quant_module_mappings"]

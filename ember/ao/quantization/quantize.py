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
from ember.ao.quantization.observer import (
    QConfig,
    default_dynamic_qconfig,
    float16_dynamic_qconfig,
)
from ember.errors import DTypeError


def get_default_dynamic_quant_module_mappings() -> dict:
    """float module type -> dynamic quantized module type (PyTorch's
    ``DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS`` for the modules ember has)."""
    from ember.ao.nn.quantized import dynamic as nnqd  # noqa: PLC0415

    return {nn.GRUCell: nnqd.GRUCell, nn.Linear: nnqd.Linear, nn.LSTM: nnqd.LSTM,
            nn.GRU: nnqd.GRU, nn.LSTMCell: nnqd.LSTMCell, nn.RNNCell: nnqd.RNNCell}


def _spec(qconfig_spec: Any, dtype: dt.dtype) -> dict:
    if dtype not in (dt.qint8, dt.float16):
        raise DTypeError(f"[quantize_dynamic] only dtype=ember.qint8 or ember.float16 is "
                         f"supported, got {dtype}")
    qconfig = default_dynamic_qconfig if dtype is dt.qint8 else float16_dynamic_qconfig
    if qconfig_spec is None:     # PyTorch's default set for qint8 and float16
        return dict.fromkeys([nn.Linear, nn.LSTM, nn.GRU, nn.LSTMCell, nn.RNNCell, nn.GRUCell],
                             qconfig)
    if isinstance(qconfig_spec, (set, frozenset, list, tuple)):
        return dict.fromkeys(qconfig_spec, qconfig)
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
    is never replaced (as in PyTorch).  ``nn.Linear``, ``nn.LSTM``, ``nn.GRU`` and the cells
    ``nn.LSTMCell``, ``nn.GRUCell``, ``nn.RNNCell`` have quantized versions (the default set,
    ``qconfig_spec=None``, is all six)."""
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

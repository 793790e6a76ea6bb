"""``ember.ao.nn.quantized.dynamic.LSTM`` and ``GRU``: PyTorch's dynamically quantized RNNs
(eager).

What torch 2.13's CPU ``quantized_lstm`` (``use_dynamic=True``) computes, per layer and
direction: the input projection of the whole sequence at once, ``linear_dynamic(x, W_ih,
b_ih)`` (one input scale for all time steps), then per step ``gates = linear_dynamic(h, W_hh,
b_hh) + xw[t]``, the float32 gate nonlinearities and ``c = f * c + i * g``, ``h = o *
tanh(c)`` (GRU: torch's ``GRUCell`` order, ``n = tanh(xn + hn * r)``, ``h' = (h - n) * z +
n``).  The int8 products are bit for bit torch's (``ember/ao/quantization``); the float
gate math differs from torch's vectorized sigmoid/tanh in the last bits, which can flip an
activation code of the next step's hidden state, so outputs agree with torch's to about one
quantization step, not bitwise.  Not supported: ``proj_size``, packed sequences, and torch's
state dict keys (``_all_weight_values``; build the model with ``quantize_dynamic`` instead).

>>> import ember
>>> q = LSTM.from_float(ember.nn.LSTM(4, 3))
>>> out, (h, c) = q(ember.randn(5, 2, 4))
>>> tuple(out.shape), tuple(h.shape)
((5, 2, 3), (1, 2, 3))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import nn
from ember._frontend.creation import tensor
from ember.ao.nn.quantized.dynamic.linear import quantize_weight
from ember.ao.quantization import _dynamic_kernel as kern
from ember.ao.quantization.observer import default_dynamic_qconfig
from ember.errors import EmberNotImplementedError
from ember.tensor import Tensor


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.float32(1) / (np.float32(1) + np.exp(-x))


class _QuantizedRNNMixin:
    """The quantized forward shared by LSTM and GRU (``_cells``: per layer-direction the
    packed input and hidden weights with their float biases)."""

    @property
    def _flat_weights(self) -> list:
        # the float checks read the weights' dtype: the quantized LSTM runs in float32
        return [getattr(self, "_float_marker", None)] if hasattr(self, "_cells") else \
            super()._flat_weights

    @classmethod
    def from_float(cls, mod: Any, use_precomputed_fake_quant: bool = False) -> Any:
        """Quantize a float module's weights (its ``qconfig``, as ``quantize_dynamic`` sets,
        or ``default_dynamic_qconfig``)."""
        if getattr(mod, "proj_size", 0):
            raise EmberNotImplementedError("[quantized.dynamic.LSTM] proj_size is not supported")
        qconfig = getattr(mod, "qconfig", None) or default_dynamic_qconfig
        q = cls(mod.input_size, mod.hidden_size, mod.num_layers, mod.bias, mod.batch_first,
                mod.dropout, mod.bidirectional)
        q._cells = []
        for names in mod._all_weights:
            ws = {n.split("_l")[0]: getattr(mod, n) for n in names}
            cell = []
            for kind in ("ih", "hh"):
                qw = quantize_weight(ws[f"weight_{kind}"], qconfig, "quantized.dynamic.LSTM")
                s = np.asarray(qw._scale, np.float64).astype(np.float32)
                packed = kern.PackedWeight(qw._codes, s if qw._axis is not None
                                           else np.float32(s))
                b = ws.get(f"bias_{kind}")
                cell.append((packed, None if b is None else
                             np.ascontiguousarray(b.detach().numpy(), np.float32)))
            q._cells.append(cell)
        for name in q._flat_weights_names:        # the float weights live on as int8 only
            delattr(q, name)
        q._flat_weights_names = []
        q._float_marker = tensor(np.zeros(0, np.float32))
        return q.eval()

    def _direction(self, xs: np.ndarray, cell: list, h: np.ndarray, c: Any,
                   reverse: bool) -> tuple:
        (w_ih, b_ih), (w_hh, b_hh) = cell
        t_len, batch, _ = xs.shape
        xw = kern.linear_dynamic(xs.reshape(t_len * batch, -1), w_ih, b_ih).reshape(
            t_len, batch, -1)
        out = np.empty((t_len, batch, self.hidden_size), np.float32)
        for t in (range(t_len - 1, -1, -1) if reverse else range(t_len)):
            h, c = self._step(xw[t], kern.linear_dynamic(h, w_hh, b_hh), h, c)
            out[t] = h
        return out, h, c

    def _run(self, input: Tensor, hx: Any, batch_sizes: Tensor | None) -> tuple:
        lstm = self.mode == "LSTM"
        if batch_sizes is not None:
            raise EmberNotImplementedError(f"[quantized.dynamic.{self.mode}] packed sequences "
                                           "are not supported")
        x = input.transpose(0, 1) if self.batch_first else input
        xs = np.ascontiguousarray(x.detach().numpy(), np.float32)
        h0 = (hx[0] if lstm else hx).detach().numpy().astype(np.float32)
        c0 = hx[1].detach().numpy().astype(np.float32) if lstm else None
        dirs = 2 if self.bidirectional else 1
        hn = np.empty_like(h0)
        cn = np.empty_like(c0) if lstm else None
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                o, hn[k], c = self._direction(xs, self._cells[k], h0[k],
                                              c0[k] if lstm else None, d == 1)
                if lstm:
                    cn[k] = c
                outs.append(o)
            xs = np.ascontiguousarray(np.concatenate(outs, axis=-1))
        out = tensor(xs)
        if self.batch_first:
            out = out.transpose(0, 1)
        return out, ((tensor(hn), tensor(cn)) if lstm else tensor(hn))


class LSTM(_QuantizedRNNMixin, nn.LSTM):
    """An LSTM whose input and hidden products are int8 dynamic quantized Linears."""

    _FLOAT_MODULE = nn.LSTM

    def _get_name(self) -> str:
        return "DynamicQuantizedLSTM"

    def _step(self, xw: np.ndarray, hw: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple:
        hs = self.hidden_size
        g = hw + xw                        # torch: linear_hh(h).add_(precomputed input)
        i, f = _sigmoid(g[:, :hs]), _sigmoid(g[:, hs:2 * hs])
        gg, o = np.tanh(g[:, 2 * hs:3 * hs]), _sigmoid(g[:, 3 * hs:])
        c = f * c + i * gg
        return o * np.tanh(c), c


class GRU(_QuantizedRNNMixin, nn.GRU):
    """A GRU whose input and hidden products are int8 dynamic quantized Linears."""

    _FLOAT_MODULE = nn.GRU

    def _get_name(self) -> str:
        return "DynamicQuantizedGRU"

    def _step(self, xw: np.ndarray, hw: np.ndarray, h: np.ndarray, c: Any) -> tuple:
        hs = self.hidden_size
        r = _sigmoid(hw[:, :hs] + xw[:, :hs])
        z = _sigmoid(hw[:, hs:2 * hs] + xw[:, hs:2 * hs])
        n = np.tanh(xw[:, 2 * hs:] + hw[:, 2 * hs:] * r)
        return (h - n) * z + n, None


__all__ = ["GRU", "LSTM"]

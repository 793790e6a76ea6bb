"""``ember.ao.nn.quantized.dynamic.LSTM``: PyTorch's dynamically quantized LSTM (eager).

What torch 2.13's CPU ``quantized_lstm`` (``use_dynamic=True``) computes, per layer and
direction: the input projection of the whole sequence at once, ``linear_dynamic(x, W_ih,
b_ih)`` (one input scale for all time steps), then per step ``gates = linear_dynamic(h, W_hh,
b_hh) + xw[t]``, the float32 gate nonlinearities and ``c = f * c + i * g``, ``h = o *
tanh(c)``.  The int8 products are bit for bit torch's (``ember/ao/quantization``); the float
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


class LSTM(nn.LSTM):
    """An LSTM whose input and hidden products are int8 dynamic quantized Linears."""

    _FLOAT_MODULE = nn.LSTM

    def _get_name(self) -> str:
        return "DynamicQuantizedLSTM"

    @property
    def _flat_weights(self) -> list:
        # the float checks read the weights' dtype: the quantized LSTM runs in float32
        return [getattr(self, "_float_marker", None)] if hasattr(self, "_cells") else \
            super()._flat_weights

    @classmethod
    def from_float(cls, mod: nn.LSTM, use_precomputed_fake_quant: bool = False) -> LSTM:
        """Quantize a float ``nn.LSTM``'s weights (its ``qconfig``, as ``quantize_dynamic``
        sets, or ``default_dynamic_qconfig``)."""
        if mod.proj_size:
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

    def _direction(self, xs: np.ndarray, cell: list, h: np.ndarray, c: np.ndarray,
                   reverse: bool) -> tuple:
        (w_ih, b_ih), (w_hh, b_hh) = cell
        t_len, batch, _ = xs.shape
        hs = self.hidden_size
        xw = kern.linear_dynamic(xs.reshape(t_len * batch, -1), w_ih, b_ih).reshape(
            t_len, batch, 4 * hs)
        out = np.empty((t_len, batch, hs), np.float32)
        for t in (range(t_len - 1, -1, -1) if reverse else range(t_len)):
            g = kern.linear_dynamic(h, w_hh, b_hh) + xw[t]
            i, f = _sigmoid(g[:, :hs]), _sigmoid(g[:, hs:2 * hs])
            gg, o = np.tanh(g[:, 2 * hs:3 * hs]), _sigmoid(g[:, 3 * hs:])
            c = f * c + i * gg
            h = o * np.tanh(c)
            out[t] = h
        return out, h, c

    def _run(self, input: Tensor, hx: Any, batch_sizes: Tensor | None) -> tuple:
        if batch_sizes is not None:
            raise EmberNotImplementedError("[quantized.dynamic.LSTM] packed sequences are not "
                                           "supported")
        x = input.transpose(0, 1) if self.batch_first else input
        xs = np.ascontiguousarray(x.detach().numpy(), np.float32)
        h0 = hx[0].detach().numpy().astype(np.float32)
        c0 = hx[1].detach().numpy().astype(np.float32)
        dirs = 2 if self.bidirectional else 1
        hn, cn = np.empty_like(h0), np.empty_like(c0)
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                o, hn[k], cn[k] = self._direction(xs, self._cells[k], h0[k], c0[k], d == 1)
                outs.append(o)
            xs = np.ascontiguousarray(np.concatenate(outs, axis=-1))
        out = tensor(xs)
        if self.batch_first:
            out = out.transpose(0, 1)
        return out, (tensor(hn), tensor(cn))


__all__ = ["LSTM"]

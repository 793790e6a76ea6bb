"""``ember.ao.nn.quantized.dynamic``: PyTorch's dynamically quantized recurrent modules
(``LSTM``, ``GRU``, ``LSTMCell``, ``GRUCell``, ``RNNCell``).

What torch 2.13's CPU ``quantized_lstm`` (``use_dynamic=True``) and the
``quantized_*_cell_dynamic`` ops compute: every product is an int8 dynamic quantized Linear
whose float32 bias is added in its epilogue (``qlinear_dynamic``: the input's scale is chosen
per call, over [0, 127]), the gates are float32.  ``LSTM``/``GRU``, per layer and direction:
the input projection of the whole sequence in one product (one input scale for all time
steps), then per step ``gates = linear_dynamic(h, W_hh, b_hh) + xw[t]``; LSTM ``c = f * c + i *
g``, ``h = o * tanh(c)``; GRU (torch's ``GRUCell`` order) ``n = tanh(xn + hn * r)``, ``h' =
(h - n) * z + n``; Elman ``h' = act(linear_hh(h) + linear_ih(x))``.  The int8 products are bit
for bit torch's; the float gate math differs from torch's vectorized sigmoid/tanh in the last
bits, which can flip an activation code of the next step, so outputs agree with torch's to
about one quantization step, not bitwise.

The forward is written in ember ops (one ``qlinear_dynamic`` per product, tensor ops for the
gates; nothing reads a value in Python), so ``ember.compile`` records it whole and
``ember.export.export`` exports it (the time loop is unrolled: the sequence length is static).
Not supported: ``proj_size``, packed sequences.

>>> import ember
>>> q = LSTM.from_float(ember.nn.LSTM(4, 3))
>>> out, (h, c) = q(ember.randn(5, 2, 4))
>>> tuple(out.shape), tuple(h.shape)
((5, 2, 3), (1, 2, 3))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes as dt
from ember import nn
from ember._frontend.creation import tensor, zeros
from ember._frontend.movement import cat, stack
from ember.ao.nn.quantized.dynamic.linear import LinearPackedParams, quantize_weight
from ember.ao.quantization.observer import default_dynamic_qconfig, float16_dynamic_qconfig
from ember.ao.quantization.qtensor import QuantizedTensor, quantize_per_tensor
from ember.errors import (
    DTypeError,
    EmberIndexError,
    EmberNotImplementedError,
    EmberRuntimeError,
    EmberTypeError,
    EmberValueError,
    ShapeError,
)
from ember.nn.modules.module import Module
from ember.ops.qlinear import QLINEAR_DYNAMIC
from ember.ops.registry import bind
from ember.tensor import Tensor


class PackedWeightBias(LinearPackedParams):
    """One product of a recurrent module: the int8 weight packed once and its float bias (the
    ``qlinear_dynamic`` operands are plain tensor attributes, so export names them by FQN).
    Its owner writes the state dict entry (PyTorch's keys)."""

    def linear(self, x: Tensor) -> Tensor:
        """``linear_dynamic(x, W, b)``: (..., K) float32 -> (..., M) float32 (float16
        weights: ``linear_dynamic_fp16``)."""
        if self.dtype is dt.float16:
            return self._float16_linear(x)
        m, k = self._weight._codes.shape
        return bind(QLINEAR_DYNAMIC, x, *self._qargs, m=m, k=k, per_row=False,
                    reduce_range=True, has_bias=self._bias_np is not None)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        pass

    def _load_from_state_dict(self, state_dict: Any, prefix: str, *args: Any) -> None:
        pass


def _packed(weight: Tensor, bias: Tensor | None, qconfig: Any, op: str) -> PackedWeightBias:
    """int8 (``qconfig``'s weight observer) or float16 (``float16_dynamic_qconfig``)."""
    b = None if bias is None else bias.detach().float().clone()
    if qconfig.weight().dtype is dt.float16:
        p = PackedWeightBias(dt.float16)
        p.set_weight_bias(weight.detach().float(), b)
        return p
    p = PackedWeightBias()
    p.set_weight_bias(quantize_weight(weight, qconfig, op), b)
    return p


def _placeholder(rows: int, cols: int, bias: bool, dtype: dt.dtype) -> PackedWeightBias:
    """A zero weight (torch's ``__init__`` packs random ones; ``from_float`` replaces it)."""
    p = PackedWeightBias(dtype)
    w = tensor(np.zeros((rows, cols), np.float32))
    if dtype is dt.qint8:
        w = quantize_per_tensor(w, 1.0, 0, dt.qint8)
    p.set_weight_bias(w, tensor(np.zeros(rows, np.float32)) if bias else None)
    return p


def _lstm_gates(g: Tensor, c: Tensor) -> tuple:
    """torch's ``LSTMCell``: ``g = linear_hh(h) + linear_ih(x)`` chunked i, f, g, o."""
    i, f, gg, o = g.chunk(4, 1)
    c = f.sigmoid() * c + i.sigmoid() * gg.tanh()
    return o.sigmoid() * c.tanh(), c


def _gru_gates(xw: Tensor, hw: Tensor, h: Tensor) -> Tensor:
    """torch's ``GRUCell``: ``r, z`` from the summed gates, ``n = tanh(xn + hn * r)``,
    ``h' = (h - n) * z + n``."""
    xr, xz, xn = xw.chunk(3, 1)
    hr, hz, hn = hw.chunk(3, 1)
    r, z = (hr + xr).sigmoid(), (hz + xz).sigmoid()
    n = (xn + hn * r).tanh()
    return (h - n) * z + n


class PackedParameter(Module):
    """One layer-direction of a quantized ``LSTM``/``GRU`` (PyTorch's ``_all_weight_values``
    entry): ``param._packed_weight_ih`` / ``_packed_weight_hh``."""

    def __init__(self, param: Module) -> None:
        super().__init__()
        self.param = param

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        p = self.param
        destination[prefix + "param"] = (*p._packed_weight_ih._weight_bias(),
                                          *p._packed_weight_hh._weight_bias())

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: dict,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        if prefix + "param" not in state_dict:
            if strict:
                missing_keys.append(prefix + "param")
            return
        w_ih, b_ih, w_hh, b_hh = state_dict.pop(prefix + "param")
        self.param._packed_weight_ih.set_weight_bias(w_ih, b_ih)
        self.param._packed_weight_hh.set_weight_bias(w_hh, b_hh)


class _QuantizedRNNMixin:
    """The quantized forward shared by LSTM and GRU."""

    @property
    def _flat_weights(self) -> list:
        # the float checks read the weights' dtype: the quantized LSTM runs in float32
        return [getattr(self, "_float_marker", None)] if "_float_marker" in self.__dict__ \
            else super()._flat_weights

    def __repr__(self) -> str:      # PyTorch hides _all_weight_values
        return f"{self._get_name()}({self.extra_repr()})"

    def __init__(self, *args: Any, dtype: dt.dtype = dt.qint8, **kwargs: Any) -> None:
        """PyTorch's signature: the float module's arguments and ``dtype`` (``ember.qint8``
        or ``ember.float16``); the weights start as the float module's random ones,
        quantized (``from_float`` replaces them)."""
        op = f"quantized.dynamic.{type(self).__name__}"
        if dtype not in (dt.qint8, dt.float16):
            raise DTypeError(f"[{op}] only ember.qint8 and ember.float16 are supported, got "
                             f"{dtype}")
        if kwargs.get("proj_size", 0):
            raise EmberNotImplementedError(f"[{op}] proj_size is not supported")
        super().__init__(*args, **kwargs)
        self.dtype = dtype
        self._set_weights(self, default_dynamic_qconfig if dtype is dt.qint8
                          else float16_dynamic_qconfig)

    def _set_weights(self, mod: Any, qconfig: Any) -> None:
        """Quantize ``mod``'s float weights into ``_all_weight_values`` (one
        ``PackedParameter`` per layer and direction) and drop the float ones of ``self``."""
        op = f"quantized.dynamic.{type(self).__name__}"
        cells = []
        for names in mod._all_weights:
            ws = {n.split("_l")[0]: getattr(mod, n) for n in names}
            cell = Module()
            for kind in ("ih", "hh"):
                setattr(cell, f"_packed_weight_{kind}",
                        _packed(ws[f"weight_{kind}"], ws.get(f"bias_{kind}"), qconfig, op))
            cells.append(PackedParameter(cell))
        for name in self._flat_weights_names:     # the float weights live on quantized only
            delattr(self, name)
        self._flat_weights_names = []
        self._float_marker = tensor(np.zeros(0, np.float32))
        self._all_weight_values = nn.ModuleList(cells)

    @classmethod
    def from_float(cls, mod: Any, use_precomputed_fake_quant: bool = False) -> Any:
        """Quantize a float module's weights (its ``qconfig``, as ``quantize_dynamic`` sets,
        or ``default_dynamic_qconfig``; ``float16_dynamic_qconfig``: float16 weights)."""
        if getattr(mod, "proj_size", 0):
            raise EmberNotImplementedError(f"[quantized.dynamic.{cls.__name__}] proj_size is "
                                           "not supported")
        qconfig = getattr(mod, "qconfig", None) or default_dynamic_qconfig
        q = cls(mod.input_size, mod.hidden_size, mod.num_layers, mod.bias, mod.batch_first,
                mod.dropout, mod.bidirectional, dtype=qconfig.weight().dtype)
        q._set_weights(mod, qconfig)
        return q.eval()

    def _weight_bias(self) -> dict:
        """``{"weight": {"weight_ih_l0", ...}, "bias": {"bias_ih_l0", ...}}`` (PyTorch's
        names; ``_reverse`` for the second direction)."""
        out: dict = {"weight": {}, "bias": {}}
        dirs = 2 if self.bidirectional else 1
        for k, entry in enumerate(self._all_weight_values):
            suffix = f"_l{k // dirs}" + ("_reverse" if k % dirs else "")
            for kind in ("ih", "hh"):
                w, b = getattr(entry.param, f"_packed_weight_{kind}")._weight_bias()
                out["weight"][f"weight_{kind}{suffix}"] = w
                out["bias"][f"bias_{kind}{suffix}"] = b
        return out

    def get_weight(self) -> dict:
        return self._weight_bias()["weight"]

    def get_bias(self) -> dict:
        return self._weight_bias()["bias"]

    def _direction(self, xs: Tensor, cell: Module, h: Tensor, c: Any, reverse: bool) -> tuple:
        xw = cell._packed_weight_ih.linear(xs)           # one input scale for the sequence
        steps = range(xs.shape[0] - 1, -1, -1) if reverse else range(xs.shape[0])
        outs: list = [None] * xs.shape[0]
        lstm = self.mode == "LSTM"
        for t in steps:
            hw = cell._packed_weight_hh.linear(h)
            if lstm:
                h, c = _lstm_gates(hw + xw[t], c)      # torch: linear_hh(h).add_(xw[t])
            else:
                h = _gru_gates(xw[t], hw, h)
            outs[t] = h
        return stack(outs), h, c

    def _run(self, input: Tensor, hx: Any, batch_sizes: Tensor | None) -> tuple:
        lstm = self.mode == "LSTM"
        if batch_sizes is not None:
            raise EmberNotImplementedError(f"[quantized.dynamic.{self.mode}] packed sequences "
                                           "are not supported")
        xs = (input.transpose(0, 1) if self.batch_first else input).detach().contiguous()
        h0, c0 = (hx[0].detach(), hx[1].detach()) if lstm else (hx.detach(), None)
        dirs = 2 if self.bidirectional else 1
        hn, cn = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                o, h, c = self._direction(xs, self._all_weight_values[k].param, h0[k],
                                          c0[k] if lstm else None, d == 1)
                hn.append(h)
                cn.append(c)
                outs.append(o)
            xs = cat(outs, -1) if dirs == 2 else outs[0]
        out = xs.transpose(0, 1) if self.batch_first else xs
        return out, ((stack(hn), stack(cn)) if lstm else stack(hn))


class LSTM(_QuantizedRNNMixin, nn.LSTM):
    """An LSTM whose input and hidden products are int8 dynamic quantized Linears."""

    _FLOAT_MODULE = nn.LSTM

    def _get_name(self) -> str:
        return "DynamicQuantizedLSTM"


class GRU(_QuantizedRNNMixin, nn.GRU):
    """A GRU whose input and hidden products are int8 dynamic quantized Linears."""

    _FLOAT_MODULE = nn.GRU

    def _get_name(self) -> str:
        return "DynamicQuantizedGRU"


class RNNCellBase(Module):
    """Shared by the dynamic quantized cells: ``_packed_weight_ih`` / ``_packed_weight_hh``
    (int8 weights with their float biases, PyTorch's state dict keys) and PyTorch's checks."""

    __constants__ = ["input_size", "hidden_size", "bias"]
    _OP = "quantized.dynamic.RNNCellBase"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 num_chunks: int = 4, dtype: dt.dtype = dt.qint8) -> None:
        super().__init__()
        if dtype not in (dt.qint8, dt.float16):
            raise DTypeError(f"[{self._OP}] only ember.qint8 and ember.float16 are supported, "
                             f"got {dtype}")
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_dtype = dtype
        rows = num_chunks * hidden_size
        if bias:     # plain float attributes, as in PyTorch (the packed weights hold the bias)
            self.bias_ih = tensor(np.zeros(rows, np.float32))
            self.bias_hh = tensor(np.zeros(rows, np.float32))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self._packed_weight_ih = _placeholder(rows, input_size, bias, dtype)
        self._packed_weight_hh = _placeholder(rows, hidden_size, bias, dtype)

    def _get_name(self) -> str:
        return "DynamicQuantizedRNNBase"

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def __repr__(self) -> str:      # PyTorch's packed weights are not modules
        return f"{self._get_name()}({self.extra_repr()})"

    def check_forward_input(self, input: Tensor) -> None:
        if not isinstance(input, Tensor) or input.dtype is not dt.float32:
            raise DTypeError(f"[{self._OP}] expected scalar type Float but found "
                             f"{getattr(input, 'dtype', type(input).__name__)}")
        if input.dim() != 2:
            raise EmberIndexError(f"[{self._OP}] Dimension out of range: expected a 2-D "
                                  f"(batch, input_size) input, got {input.dim()}-D")
        if input.size(1) != self.input_size:
            raise ShapeError(f"[{self._OP}] input has inconsistent input_size: got "
                             f"{input.size(1)}, expected {self.input_size}")

    def check_forward_hidden(self, input: Tensor, hx: Tensor, hidden_label: str = "") -> None:
        if hx.dim() != 2 or input.size(0) != hx.size(0):
            raise ShapeError(f"[{self._OP}] Input batch size {input.size(0)} doesn't match "
                             f"hidden{hidden_label} batch size {hx.size(0)}")
        if hx.size(1) != self.hidden_size:
            raise ShapeError(f"[{self._OP}] hidden{hidden_label} has inconsistent hidden_size: "
                             f"got {hx.size(1)}, expected {self.hidden_size}")

    def _zeros(self, input: Tensor) -> Tensor:
        return zeros((input.size(0), self.hidden_size), dtype=input.dtype)

    @classmethod
    def from_float(cls, mod: Module, use_precomputed_fake_quant: bool = False) -> RNNCellBase:
        """Quantize a float ``nn.LSTMCell`` / ``nn.GRUCell`` / ``nn.RNNCell`` (its
        ``qconfig``, as ``quantize_dynamic`` sets, or ``default_dynamic_qconfig``); as in
        PyTorch the cell must have biases."""
        kinds = {nn.LSTMCell: LSTMCell, nn.GRUCell: GRUCell, nn.RNNCell: RNNCell}
        if type(mod) not in kinds:
            raise EmberTypeError(f"[{cls._OP}] from_float only works for nn.LSTMCell, "
                                 f"nn.GRUCell and nn.RNNCell, got {type(mod).__name__}")
        qconfig = getattr(mod, "qconfig", None) or default_dynamic_qconfig
        target = kinds[type(mod)]
        extra = {"nonlinearity": mod.nonlinearity} if target is RNNCell else {}
        q = target(mod.input_size, mod.hidden_size, bias=mod.bias,
                   dtype=qconfig.weight().dtype, **extra)
        if not mod.bias:
            raise EmberValueError(f"[{target._OP}] mod.bias must be True")
        q._packed_weight_ih = _packed(mod.weight_ih, mod.bias_ih, qconfig, target._OP)
        q._packed_weight_hh = _packed(mod.weight_hh, mod.bias_hh, qconfig, target._OP)
        q.bias_ih = mod.bias_ih.detach().float().clone()
        q.bias_hh = mod.bias_hh.detach().float().clone()
        return q

    def _weight_bias(self) -> dict:
        """``{"weight": {"weight_ih", "weight_hh"}, "bias": {"bias_ih", "bias_hh"}}``."""
        w1, b1 = self._packed_weight_ih._weight_bias()
        w2, b2 = self._packed_weight_hh._weight_bias()
        return {"weight": {"weight_ih": w1, "weight_hh": w2},
                "bias": {"bias_ih": b1, "bias_hh": b2}}

    def get_weight(self) -> dict:
        return self._weight_bias()["weight"]

    def get_bias(self) -> dict:
        return self._weight_bias()["bias"]

    def set_weight_bias(self, weight_bias_dict: dict) -> None:
        w, b = weight_bias_dict["weight"], weight_bias_dict["bias"]
        self._packed_weight_ih.set_weight_bias(w["weight_ih"], b["bias_ih"])
        self._packed_weight_hh.set_weight_bias(w["weight_hh"], b["bias_hh"])

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "_packed_weight_ih"] = self._packed_weight_ih._weight_bias()
        destination[prefix + "_packed_weight_hh"] = self._packed_weight_hh._weight_bias()

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: dict,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        for kind in ("ih", "hh"):
            key = f"{prefix}_packed_weight_{kind}"
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            w, b = state_dict.pop(key)
            if not isinstance(w, (QuantizedTensor, Tensor)):
                raise EmberTypeError(f"[{self._OP}] {key} must hold (weight, bias); "
                                     f"got {type(w).__name__} (torch's packed objects are "
                                     "not readable)")
            getattr(self, f"_packed_weight_{kind}").set_weight_bias(w, b)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys,
                                      unexpected_keys, error_msgs)


class RNNCell(RNNCellBase):
    """An Elman cell (tanh or ReLU) with int8 dynamic quantized products.

    >>> import ember
    >>> q = RNNCell.from_float(ember.nn.RNNCell(4, 3))
    >>> tuple(q(ember.randn(2, 4)).shape)
    (2, 3)
    """

    __constants__ = ["input_size", "hidden_size", "bias", "nonlinearity"]
    _OP = "quantized.dynamic.RNNCell"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", dtype: dt.dtype = dt.qint8) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, dtype=dtype)
        self.nonlinearity = nonlinearity

    def _get_name(self) -> str:
        return "DynamicQuantizedRNNCell"

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        self.check_forward_input(input)
        hx = self._zeros(input) if hx is None else hx
        self.check_forward_hidden(input, hx, "")
        if self.nonlinearity not in ("tanh", "relu"):
            raise EmberRuntimeError(f"[{self._OP}] Unknown nonlinearity: {self.nonlinearity}")
        g = self._packed_weight_hh.linear(hx.detach()) + self._packed_weight_ih.linear(
            input.detach())
        return g.tanh() if self.nonlinearity == "tanh" else g.relu()


class LSTMCell(RNNCellBase):
    """An LSTM cell with int8 dynamic quantized products; returns ``(h', c')``.

    >>> import ember
    >>> q = LSTMCell.from_float(ember.nn.LSTMCell(4, 3))
    >>> h, c = q(ember.randn(2, 4))
    >>> tuple(h.shape), tuple(c.shape)
    ((2, 3), (2, 3))
    """

    _OP = "quantized.dynamic.LSTMCell"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 dtype: dt.dtype = dt.qint8) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, dtype=dtype)

    def _get_name(self) -> str:
        return "DynamicQuantizedLSTMCell"

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None
                ) -> tuple[Tensor, Tensor]:
        self.check_forward_input(input)
        if hx is None:
            z = self._zeros(input)
            hx = (z, z)
        self.check_forward_hidden(input, hx[0], "[0]")
        self.check_forward_hidden(input, hx[1], "[1]")
        g = self._packed_weight_hh.linear(hx[0].detach()) + self._packed_weight_ih.linear(
            input.detach())
        return _lstm_gates(g, hx[1].detach())


class GRUCell(RNNCellBase):
    """A GRU cell with int8 dynamic quantized products.

    >>> import ember
    >>> q = GRUCell.from_float(ember.nn.GRUCell(4, 3))
    >>> tuple(q(ember.randn(2, 4)).shape)
    (2, 3)
    """

    _OP = "quantized.dynamic.GRUCell"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 dtype: dt.dtype = dt.qint8) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, dtype=dtype)

    def _get_name(self) -> str:
        return "DynamicQuantizedGRUCell"

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        self.check_forward_input(input)
        hx = self._zeros(input) if hx is None else hx
        self.check_forward_hidden(input, hx, "")
        h = hx.detach()
        return _gru_gates(self._packed_weight_ih.linear(input.detach()),
                          self._packed_weight_hh.linear(h), h)


__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "PackedParameter", "PackedWeightBias",
           "RNNCell", "RNNCellBase"]

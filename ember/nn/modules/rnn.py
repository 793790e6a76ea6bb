"""Recurrent layers with PyTorch's constructors, parameter names and layout, init and errors:
``RNN`` (tanh/relu), ``LSTM`` (with ``proj_size``), ``GRU`` and the cells ``RNNCell``,
``LSTMCell``, ``GRUCell``.

Parameters per layer ``k`` and direction (``_reverse`` suffix for the second): ``weight_ih_lk``
``(G * hidden, in)``, ``weight_hh_lk`` ``(G * hidden, H_out)``, ``bias_ih_lk``, ``bias_hh_lk``
``(G * hidden,)`` and, for an LSTM with ``proj_size``, ``weight_hr_lk`` ``(proj, hidden)``;
gates are stacked i, f, g, o (LSTM) and r, z, n (GRU), so PyTorch's state dicts load as they are.
The math is in ``_rnn_loop`` (ember ops only: autograd and ``ember.compile`` work unchanged).
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

from ember._frontend.creation import empty, zeros
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError, ShapeError
from ember.nn import init
from ember.nn.modules._rnn_loop import GATES, CellWeights, cell_step, project_input, run_layers
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.nn.utils.rnn import PackedSequence
from ember.tensor import Tensor

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_OP = {"LSTM": "lstm", "GRU": "gru", "RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu"}


def _apply_permutation(tensor: Tensor, permutation: Tensor, dim: int = 1) -> Tensor:
    return tensor.index_select(dim, permutation)


def _check_config(input_size: Any, hidden_size: Any, num_layers: int, bias: Any,
                  batch_first: Any, dropout: Any, proj_size: int) -> None:
    """PyTorch's constructor checks, with its error types and messages."""
    op = "RNNBase"
    if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
            or not 0 <= dropout <= 1):
        raise EmberValueError(f"[{op}] dropout should be a number in range [0, 1] representing "
                              "the probability of an element being zeroed")
    for name, value in (("bias", bias), ("batch_first", batch_first)):
        if not isinstance(value, bool):
            raise EmberTypeError(f"[{op}] {name} should be of type bool, got: "
                                 f"{type(value).__name__}")
    for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
        if not isinstance(value, int):
            raise EmberTypeError(f"[{op}] {name} should be of type int, got: "
                                 f"{type(value).__name__}")
        if value <= 0:
            raise EmberValueError(f"[{op}] {name} must be greater than zero")
    if num_layers <= 0:
        raise EmberValueError(f"[{op}] num_layers must be greater than zero")
    if proj_size < 0:
        raise EmberValueError(f"[{op}] proj_size should be a positive integer or zero to "
                              "disable projections")
    if proj_size >= hidden_size:
        raise EmberValueError(f"[{op}] proj_size has to be smaller than hidden_size")


class RNNBase(Module):
    """Parameters, checks and the shared forward of ``RNN``, ``LSTM`` and ``GRU``."""

    __constants__ = ["mode", "input_size", "hidden_size", "num_layers", "bias", "batch_first",
                     "dropout", "bidirectional", "proj_size"]

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if mode not in GATES:
            raise EmberValueError(f"[RNNBase] Unrecognized RNN mode: {mode}")
        _check_config(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                      proj_size)
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        self._make_parameters(GATES[mode] * hidden_size, {"device": device, "dtype": dtype})
        self.reset_parameters()

    def _make_parameters(self, gate_size: int, fk: dict) -> None:
        num_directions = 2 if self.bidirectional else 1
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        for layer in range(self.num_layers):
            for direction in range(num_directions):
                in_size = self.input_size if layer == 0 else real_hidden * num_directions
                shapes = {"weight_ih": (gate_size, in_size), "weight_hh": (gate_size, real_hidden)}
                if self.bias:
                    shapes.update(bias_ih=(gate_size,), bias_hh=(gate_size,))
                if self.proj_size > 0:
                    shapes["weight_hr"] = (self.proj_size, self.hidden_size)
                suffix = "_reverse" if direction == 1 else ""
                names = []
                for kind, shape in shapes.items():
                    name = f"{kind}_l{layer}{suffix}"
                    setattr(self, name, Parameter(empty(shape, **fk)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)

    @property
    def _flat_weights(self) -> list[Tensor | None]:
        """The parameters in PyTorch's flat order (read from the module, so always current)."""
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """Per layer-direction, its parameters in PyTorch's order."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """A no-op, as PyTorch's is on the CPU (it packs weights for cuDNN only)."""

    def reset_parameters(self) -> None:
        """Every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _cell_weights(self) -> list[CellWeights]:
        """Per layer-direction, its parameters (``None`` where absent)."""
        out = []
        for names in self._all_weights:
            tag = names[0][len("weight_ih_"):]  # "l0", "l0_reverse", ...
            out.append(CellWeights(*(getattr(self, f"{kind}_{tag}", None) for kind in
                                     ("weight_ih", "weight_hh", "bias_ih", "bias_hh",
                                      "weight_hr"))))
        return out

    # ----------------------------------------------------------------- PyTorch's checks
    def check_input(self, input: Tensor, batch_sizes: Tensor | None) -> None:
        op = _OP[self.mode]
        w_dtype = self._flat_weights[0].dtype
        if input.dtype != w_dtype:
            raise EmberValueError(
                f"[{op}] RNN input dtype ({input.dtype}) does not match weight dtype "
                f"({w_dtype}). Convert input: input.to({w_dtype}), or convert model: "
                f"model.to({input.dtype})")
        expected_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_dim:
            raise ShapeError(f"[{op}] input must have {expected_dim} dimensions, got "
                             f"{input.dim()}")
        if self.input_size != input.size(-1):
            raise ShapeError(f"[{op}] input.size(-1) must be equal to input_size. Expected "
                             f"{self.input_size}, got {input.size(-1)}")

    def get_expected_hidden_size(self, input: Tensor, batch_sizes: Tensor | None
                                 ) -> tuple[int, int, int]:
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * num_directions, mini_batch, size)

    def check_hidden_size(self, hx: Tensor, expected_hidden_size: tuple[int, int, int],
                          msg: str = "Expected hidden size {}, got {}") -> None:
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise ShapeError(f"[{_OP[self.mode]}] "
                             + msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input: Tensor, hidden: Tensor,
                           batch_sizes: Tensor | None) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx: Tensor, permutation: Tensor | None) -> Tensor:
        if permutation is None:
            return hx
        return _apply_permutation(hx, permutation)

    # ----------------------------------------------------------------- forward
    def _zeros_state(self, input: Tensor, batch: int) -> tuple:
        num_directions = 2 if self.bidirectional else 1
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        h = zeros((self.num_layers * num_directions, batch, real_hidden), dtype=input.dtype)
        if self.mode != "LSTM":
            return h
        return h, zeros((self.num_layers * num_directions, batch, self.hidden_size),
                        dtype=input.dtype)

    def _run(self, input: Tensor, hx: Any, batch_sizes: Tensor | None) -> tuple:
        """The recurrence on time-major ``input`` (or packed data) and checked state."""
        h0, c0 = (hx if self.mode == "LSTM" else (hx, None))
        sizes = None if batch_sizes is None else [int(v) for v in batch_sizes.tolist()]
        x = input.transpose(0, 1) if (self.batch_first and sizes is None) else input
        out, h, c = run_layers(self.mode, x, sizes, h0, c0, self._cell_weights(),
                               self.num_layers, self.bidirectional, self.dropout,
                               self.training)
        if self.batch_first and sizes is None:
            out = out.transpose(0, 1)
        return out, ((h, c) if self.mode == "LSTM" else h)

    def _forward_packed(self, input: PackedSequence, hx: Any) -> tuple:
        data, batch_sizes, sorted_indices, unsorted_indices = input
        if hx is None:
            hx = self._zeros_state(data, int(batch_sizes[0]))
        else:
            hx = self.permute_hidden(hx, sorted_indices)
        self.check_forward_args(data, hx, batch_sizes)
        out, hidden = self._run(data, hx, batch_sizes)
        return (PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices),
                self.permute_hidden(hidden, unsorted_indices))

    def _forward_tensor(self, input: Tensor, hx: Any, name: str) -> tuple:
        op = _OP[self.mode]
        if input.dim() not in (2, 3):
            tail = " tensor" if self.mode.startswith("RNN") else ""
            raise EmberValueError(f"[{op}] {name}: Expected input to be 2D or 3D, got "
                                  f"{input.dim()}D{tail} instead")
        is_batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if not is_batched:
            input = input.unsqueeze(batch_dim)
        if hx is not None:
            hx = self._check_state_dims(hx, is_batched)
        else:
            hx = self._zeros_state(input, input.size(batch_dim))
        self.check_forward_args(input, hx, None)
        out, hidden = self._run(input, hx, None)
        if not is_batched:
            out = out.squeeze(batch_dim)
            hidden = (tuple(t.squeeze(1) for t in hidden) if self.mode == "LSTM"
                      else hidden.squeeze(1))
        return out, hidden

    def _check_state_dims(self, hx: Tensor, is_batched: bool) -> Tensor:
        want = 3 if is_batched else 2
        if hx.dim() != want:
            kind = "batched 3-D" if is_batched else "unbatched 2-D"
            raise EmberRuntimeError(f"[{_OP[self.mode]}] For {kind} input, hx should also be "
                                    f"{want}-D but got {hx.dim()}-D tensor")
        return hx if is_batched else hx.unsqueeze(1)

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    def __setstate__(self, state: dict) -> None:
        state = {k: v for k, v in state.items() if k not in ("_flat_weights",
                                                              "_flat_weight_refs")}
        super().__setstate__(state)
        if "proj_size" not in state:
            self.proj_size = 0


def _no_proj(kwargs: dict) -> None:
    if "proj_size" in kwargs:
        raise EmberValueError("[RNNBase] proj_size argument is only supported for LSTM, not RNN "
                              "or GRU")


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or ReLU).

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None)``.

    Example::

        >>> rnn = nn.RNN(10, 20, 2)
        >>> output, hn = rnn(ember.randn(5, 3, 10), ember.randn(2, 3, 20))
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _no_proj(kwargs)
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity not in ("tanh", "relu"):
            raise EmberValueError(f"[RNN] Unknown nonlinearity '{self.nonlinearity}'. Select "
                                  "from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU",
                         *args, **kwargs)

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None) -> tuple:
        """``(output, h_n)``; ``output`` is a ``PackedSequence`` when ``input`` is one."""
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        return self._forward_tensor(input, hx, "RNN")


class LSTM(RNNBase):
    """Long short-term memory; gates i, f, g, o; ``proj_size > 0`` projects ``h`` with
    ``weight_hr_l{k}``.

    ``LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, proj_size=0, device=None, dtype=None)``.

    Example::

        >>> lstm = nn.LSTM(10, 20, 2)
        >>> output, (hn, cn) = lstm(ember.randn(5, 3, 10))
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input: Tensor, batch_sizes: Tensor | None
                               ) -> tuple[int, int, int]:
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        return (self.num_layers * num_directions, mini_batch, self.hidden_size)

    def check_forward_args(self, input: Tensor, hidden: tuple[Tensor, Tensor],  # type: ignore[override]
                           batch_sizes: Tensor | None) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx: tuple[Tensor, Tensor],  # type: ignore[override]
                       permutation: Tensor | None) -> tuple[Tensor, Tensor]:
        if permutation is None:
            return hx
        return _apply_permutation(hx[0], permutation), _apply_permutation(hx[1], permutation)

    def _check_state_dims(self, hx: Any, is_batched: bool) -> tuple[Tensor, Tensor]:
        h, c = hx
        want = 3 if is_batched else 2
        if h.dim() != want or c.dim() != want:
            kind = "batched 3-D" if is_batched else "unbatched 2-D"
            raise EmberRuntimeError(f"[lstm] For {kind} input, hx and cx should also be "
                                    f"{want}-D but got ({h.dim()}-D, {c.dim()}-D) tensors")
        return (h, c) if is_batched else (h.unsqueeze(1), c.unsqueeze(1))

    def forward(self, input: Tensor | PackedSequence,
                hx: tuple[Tensor, Tensor] | None = None) -> tuple:
        """``(output, (h_n, c_n))``; ``output`` is a ``PackedSequence`` when ``input`` is."""
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        return self._forward_tensor(input, hx, "LSTM")


class GRU(RNNBase):
    """Gated recurrent unit; gates r, z, n with ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``
    and ``h' = (1 - z) * n + z * h``.

    ``GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, device=None, dtype=None)``.

    Example::

        >>> gru = nn.GRU(10, 20, 2, batch_first=True)
        >>> output, hn = gru(ember.randn(3, 5, 10))
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _no_proj(kwargs)
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None) -> tuple:
        """``(output, h_n)``; ``output`` is a ``PackedSequence`` when ``input`` is one."""
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        return self._forward_tensor(input, hx, "GRU")


# --------------------------------------------------------------------------------- cells
class RNNCellBase(Module):
    """Parameters ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh`` of one recurrent cell."""

    __constants__ = ["input_size", "hidden_size", "bias"]

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device: Any = None, dtype: Any = None) -> None:
        fk = {"device": device, "dtype": dtype}
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), **fk))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), **fk))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, **fk))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, **fk))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self) -> None:
        """Every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _step(self, mode: str, name: str, input: Tensor, hx: Any) -> Any:
        """Shared cell forward: dimension checks, zero state, one ``cell_step``."""
        op = _OP[mode] + "_cell"
        if input.dim() not in (1, 2):
            raise EmberValueError(f"[{op}] {name}: Expected input to be 1D or 2D, got "
                                  f"{input.dim()}D instead")
        states = () if hx is None else ((hx,) if mode != "LSTM" else tuple(hx))
        for idx, value in enumerate(states):
            if value.dim() not in (1, 2):
                what = f"hx[{idx}]" if mode == "LSTM" else "hidden"
                raise EmberValueError(f"[{op}] {name}: Expected {what} to be 1D or 2D, got "
                                      f"{value.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
            states = tuple(s.unsqueeze(0) for s in states)
        if not states:
            z = zeros((input.size(0), self.hidden_size), dtype=input.dtype)
            states = (z, z) if mode == "LSTM" else (z,)
        self._check_sizes(op, input, states)
        w = CellWeights(self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        h, c = cell_step(mode, project_input(mode, input, w), states[0],
                         states[1] if mode == "LSTM" else None, w, self.weight_hh.t())
        out = (h, c) if mode == "LSTM" else h
        if not is_batched:
            out = (h.squeeze(0), c.squeeze(0)) if mode == "LSTM" else h.squeeze(0)
        return out

    def _check_sizes(self, op: str, input: Tensor, states: tuple) -> None:
        if input.size(1) != self.input_size:
            raise ShapeError(f"[{op}] input has inconsistent input_size: got {input.size(1)} "
                             f"expected {self.input_size}")
        for i, s in enumerate(states):
            if s.size(0) != input.size(0):
                raise ShapeError(f"[{op}] Input batch size {input.size(0)} doesn't match "
                                 f"hidden{i} batch size {s.size(0)}")
            if s.size(1) != self.hidden_size:
                raise ShapeError(f"[{op}] hidden{i} has inconsistent hidden_size: got "
                                 f"{s.size(1)}, expected {self.hidden_size}")


class RNNCell(RNNCellBase):
    """One Elman step ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or ReLU).

    Example::

        >>> cell = nn.RNNCell(10, 20)
        >>> h = cell(ember.randn(3, 10))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device,
                         dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if self.nonlinearity not in ("tanh", "relu"):
            raise EmberRuntimeError(f"[rnn_cell] Unknown nonlinearity: {self.nonlinearity}")
        mode = "RNN_RELU" if self.nonlinearity == "relu" else "RNN_TANH"
        return self._step(mode, "RNNCell", input, hx)


class LSTMCell(RNNCellBase):
    """One LSTM step (gates i, f, g, o); returns ``(h', c')``.

    Example::

        >>> cell = nn.LSTMCell(10, 20)
        >>> h, c = cell(ember.randn(3, 10))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device,
                         dtype=dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None
                ) -> tuple[Tensor, Tensor]:
        return self._step("LSTM", "LSTMCell", input, hx)


class GRUCell(RNNCellBase):
    """One GRU step (gates r, z, n).

    Example::

        >>> cell = nn.GRUCell(10, 20)
        >>> h = cell(ember.randn(3, 10))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device,
                         dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step("GRU", "GRUCell", input, hx)

"""The recurrence behind ``nn.RNN``, ``nn.LSTM``, ``nn.GRU`` and their cells, written with
ember ops (``linear``, ``addmm``, ``sigmoid``, ``tanh``, slicing, ``cat``/``stack``) so autograd
and ``ember.compile`` need nothing special.

Per layer and direction the input projection of every time step is one matrix product over the
whole sequence (``x @ W_ih.T + b``); only the hidden projection runs step by step.  For LSTM and
plain RNNs ``b_hh`` is folded into that bias (it is added to the same pre-activation); GRU keeps
it with the hidden projection because its candidate gate scales ``W_hn h + b_hn`` by ``r``.

Packed batches (sorted by decreasing length) run the same loop on shrinking row ranges: the
forward direction drops finished rows, the reverse direction starts rows when their last step
comes, from their initial state; this is the order of PyTorch's packed kernels.

An LSTM layer-direction on a padded batch without a projection (``proj_size=0``) runs as ONE
op, ``lstm_scan`` (``ember/ops/rnn.py``: every step forward, backpropagation through time as
``lstm_scan_backward``; NumPy kernels eager, one recurrence kernel each in the C backend); a
GRU layer-direction on a padded batch likewise as ``gru_scan`` (``ember/ops/rnn_gru.py``), a
plain RNN's as ``rnn_scan`` (``ember/ops/rnn_plain.py``).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from ember._frontend.linalg import addmm
from ember._frontend.movement import cat, stack
from ember.nn import functional as F
from ember.ops import OPS, bind
from ember.tensor import Tensor

GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


class CellWeights(NamedTuple):
    """One layer-direction's parameters (``None`` where absent)."""

    w_ih: Tensor
    w_hh: Tensor
    b_ih: Tensor | None
    b_hh: Tensor | None
    w_hr: Tensor | None = None


def project_input(mode: str, x: Tensor, w: CellWeights) -> Tensor:
    """``x @ W_ih.T`` plus the biases that add straight into the gate pre-activations."""
    bias = w.b_ih
    if mode != "GRU" and w.b_hh is not None:
        bias = w.b_hh if bias is None else bias + w.b_hh
    return F.linear(x, w.w_ih, bias)


def cell_step(mode: str, xw: Tensor, h: Tensor, c: Tensor | None, w: CellWeights,
              w_hh_t: Tensor) -> tuple[Tensor, Tensor | None]:
    """One time step: (h', c') from the projected input ``xw`` and the state (h, c);
    ``w_hh_t`` is ``w.w_hh.t()`` (taken once per sequence)."""
    if mode == "LSTM":
        i, f, g, o = addmm(xw, h, w_hh_t).chunk(4, 1)
        c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        h = o.sigmoid() * c.tanh()
        if w.w_hr is not None:
            h = F.linear(h, w.w_hr)
        return h, c
    if mode == "GRU":
        gh = h.mm(w_hh_t) if w.b_hh is None else addmm(w.b_hh, h, w_hh_t)
        hid = h.shape[1]
        rz = (xw[:, : 2 * hid] + gh[:, : 2 * hid]).sigmoid()
        r, z = rz[:, :hid], rz[:, hid:]
        n = (xw[:, 2 * hid:] + r * gh[:, 2 * hid:]).tanh()
        return (h - n) * z + n, None
    pre = addmm(xw, h, w_hh_t)
    return (pre.tanh() if mode == "RNN_TANH" else pre.relu()), None


def run_direction(mode: str, steps: Sequence[Tensor], sizes: Sequence[int], h0: Tensor,
                  c0: Tensor | None, w: CellWeights, reverse: bool
                  ) -> tuple[list[Tensor], Tensor, Tensor | None]:
    """Run one direction over ``steps`` (projected inputs in time order; step ``t`` has
    ``sizes[t]`` rows). Returns the per-step outputs in time order and the final (h, c)."""
    w_hh_t = w.w_hh.t()
    n_steps = len(steps)
    order = range(n_steps - 1, -1, -1) if reverse else range(n_steps)
    if reverse and n_steps and sizes[-1] < h0.shape[0]:
        h, c = h0[: sizes[-1]], (None if c0 is None else c0[: sizes[-1]])
    else:
        h, c = h0, c0
    outs: list[Tensor] = [h0] * n_steps
    done: list[tuple[Tensor, Tensor | None]] = []
    for t in order:
        bs, cur = sizes[t], h.shape[0]
        if bs < cur:  # forward direction, packed: rows bs.. have finished
            done.append((h[bs:], None if c is None else c[bs:]))
            h, c = h[:bs], (None if c is None else c[:bs])
        elif bs > cur:  # reverse direction, packed: rows cur..bs start here
            h = cat([h, h0[cur:bs]], 0)
            c = None if c is None else cat([c, c0[cur:bs]], 0)
        h, c = cell_step(mode, steps[t], h, c, w, w_hh_t)
        outs[t] = h
    if done:
        h = cat([h] + [d[0] for d in reversed(done)], 0)
        c = None if c is None else cat([c] + [d[1] for d in reversed(done)], 0)
    return outs, h, c


def run_layers(mode: str, x: Tensor, sizes: list[int] | None, h0: Tensor, c0: Tensor | None,
               weights: Sequence[CellWeights], num_layers: int, bidirectional: bool,
               dropout: float, training: bool) -> tuple[Tensor, Tensor, Tensor | None]:
    """The multi-layer recurrence. ``x`` is ``(T, B, I)`` (``sizes`` None) or packed data
    ``(N, I)`` with per-step batch ``sizes``; ``h0``/``c0`` are ``(L * D, B, H)``.
    Returns (output, h_n, c_n) with output ``(T, B, D * H_out)`` or packed ``(N, D * H_out)``."""
    n_dir = 2 if bidirectional else 1
    h_init = h0.unbind(0)
    c_init = c0.unbind(0) if c0 is not None else [None] * len(h_init)
    hs, cs = [], []
    layer_in = x
    for layer in range(num_layers):
        outs = []
        for d in range(n_dir):
            k = layer * n_dir + d
            xw = project_input(mode, layer_in, weights[k])
            if mode == "LSTM" and sizes is None and weights[k].w_hr is None:
                out, h, c, _, _ = bind(OPS.lstm_scan, xw, h_init[k], c_init[k], weights[k].w_hh,
                                       reverse=d == 1)
                outs.append(out)
                hs.append(h)
                cs.append(c)
                continue
            if mode in ("RNN_TANH", "RNN_RELU") and sizes is None:
                out, h = bind(OPS.rnn_scan, xw, h_init[k], weights[k].w_hh, reverse=d == 1,
                              relu=mode == "RNN_RELU")
                outs.append(out)
                hs.append(h)
                continue
            if mode == "GRU" and sizes is None:
                w = weights[k]
                b_hh = w.b_hh if w.b_hh is not None else w.w_hh.new_zeros(w.w_hh.shape[0])
                out, h, _, _ = bind(OPS.gru_scan, xw, h_init[k], w.w_hh, b_hh, reverse=d == 1)
                outs.append(out)
                hs.append(h)
                continue
            if sizes is None:
                steps, step_sizes = xw.unbind(0), [xw.shape[1]] * xw.shape[0]
            else:
                steps, step_sizes = xw.split(sizes, 0), sizes
            seq, h, c = run_direction(mode, steps, step_sizes, h_init[k], c_init[k],
                                      weights[k], reverse=d == 1)
            outs.append(stack(seq, 0) if sizes is None else cat(seq, 0))
            hs.append(h)
            cs.append(c)
        layer_in = outs[0] if n_dir == 1 else cat(outs, -1)
        if dropout > 0 and training and layer < num_layers - 1:
            layer_in = F.dropout(layer_in, dropout, True)
    return layer_in, stack(hs, 0), (stack(cs, 0) if c0 is not None else None)


def vf_gru(input: Tensor, hx: Tensor, params: Sequence[Tensor], has_biases: bool,
           num_layers: int, dropout: float, train: bool, bidirectional: bool,
           batch_first: bool) -> tuple[Tensor, Tensor]:
    """PyTorch's ``torch._VF.gru`` (padded input): ``params`` in PyTorch's flat order (per layer
    and direction ``w_ih, w_hh[, b_ih, b_hh]``); returns (output, h_n).

    >>> import ember
    >>> x, h = ember.randn(5, 2, 3), ember.zeros(1, 2, 4)
    >>> p = [ember.randn(12, 3), ember.randn(12, 4)]
    >>> vf_gru(x, h, p, False, 1, 0.0, False, False, False)[1].shape
    ember.Size([1, 2, 4])
    """
    weights = _flat_weights(params, has_biases)
    x = input.transpose(0, 1) if batch_first else input
    out, h, _ = run_layers("GRU", x, None, hx, None, weights, num_layers, bidirectional, dropout,
                           train)
    return (out.transpose(0, 1) if batch_first else out), h


def vf_rnn(input: Tensor, hx: Tensor, params: Sequence[Tensor], has_biases: bool,
           num_layers: int, dropout: float, train: bool, bidirectional: bool,
           batch_first: bool, nonlinearity: str = "tanh") -> tuple[Tensor, Tensor]:
    """PyTorch's ``torch._VF.rnn_tanh`` / ``rnn_relu`` (``nonlinearity``; padded input):
    returns (output, h_n).

    >>> import ember
    >>> x, h = ember.randn(5, 2, 3), ember.zeros(1, 2, 4)
    >>> p = [ember.randn(4, 3), ember.randn(4, 4)]
    >>> vf_rnn(x, h, p, False, 1, 0.0, False, False, False)[0].shape
    ember.Size([5, 2, 4])
    """
    mode = "RNN_RELU" if nonlinearity == "relu" else "RNN_TANH"
    x = input.transpose(0, 1) if batch_first else input
    out, h, _ = run_layers(mode, x, None, hx, None, _flat_weights(params, has_biases),
                           num_layers, bidirectional, dropout, train)
    return (out.transpose(0, 1) if batch_first else out), h


def _flat_weights(params: Sequence[Tensor], has_biases: bool) -> list[CellWeights]:
    per = 4 if has_biases else 2
    return [CellWeights(*params[k: k + 2],
                        *((params[k + 2], params[k + 3]) if has_biases else (None, None)))
            for k in range(0, len(params), per)]


def vf_lstm(input: Tensor, hx: Sequence[Tensor], params: Sequence[Tensor], has_biases: bool,
            num_layers: int, dropout: float, train: bool, bidirectional: bool,
            batch_first: bool) -> tuple[Tensor, Tensor, Tensor]:
    """PyTorch's ``torch._VF.lstm`` (padded input; no projection): ``params`` in PyTorch's flat
    order (per layer and direction ``w_ih, w_hh[, b_ih, b_hh]``); returns (output, h_n, c_n).

    >>> import ember
    >>> x, h = ember.randn(5, 2, 3), ember.zeros(1, 2, 4)
    >>> p = [ember.randn(16, 3), ember.randn(16, 4)]
    >>> vf_lstm(x, (h, h), p, False, 1, 0.0, False, False, False)[0].shape
    ember.Size([5, 2, 4])
    """
    weights = _flat_weights(params, has_biases)
    x = input.transpose(0, 1) if batch_first else input
    out, h, c = run_layers("LSTM", x, None, hx[0], hx[1], weights, num_layers, bidirectional,
                           dropout, train)
    return (out.transpose(0, 1) if batch_first else out), h, c

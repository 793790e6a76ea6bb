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
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from ember._frontend.linalg import addmm
from ember._frontend.movement import cat, stack
from ember.autograd import grad_mode
from ember.autograd.function import Function
from ember.nn import functional as F
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


class LSTMScan(Function):
    """One LSTM direction over a padded ``(T, B, 4H)`` input projection (no projection layer),
    with a hand-written backward through time: per step one product ``dgates @ W_hh`` and the
    gate pointwise math; the weight gradient is then ONE product ``dG^T @ H_prev`` over all
    steps (k = T * B) instead of T products with k = B summed, which is what autograd through
    the step-by-step graph does. Same math as ``cell_step``; still ember ops only, so it
    traces and compiles. A backward asked to build a graph (double backward) recomputes the
    forward with autograd and differentiates that, so higher derivatives stay exact."""

    @staticmethod
    def forward(ctx, xw, h0, c0, w_hh, reverse):  # noqa: ANN001, ANN205
        steps, hid = xw.unbind(0), h0.shape[1]
        order = range(len(steps) - 1, -1, -1) if reverse else range(len(steps))
        w_t = w_hh.t()
        h, c = h0, c0
        outs, acts, gs, cs, prev = ([None] * len(steps) for _ in range(5))
        for t in order:
            prev[t] = h
            gates = addmm(steps[t], h, w_t)
            a = gates.sigmoid()  # i, f, o used; g's slot is overwritten by tanh below
            g = gates[:, 2 * hid: 3 * hid].tanh()
            c = a[:, hid: 2 * hid] * c + a[:, :hid] * g
            h = a[:, 3 * hid:] * c.tanh()
            outs[t], acts[t], gs[t], cs[t] = h, a, g, c
        ctx.reverse = reverse
        ctx.save_for_backward(xw, h0, c0, w_hh, stack(acts, 0), stack(gs, 0), stack(cs, 0),
                              stack(prev, 0))
        return stack(outs, 0), h, c

    @staticmethod
    def backward(ctx, d_out, d_h, d_c):  # noqa: ANN001, ANN205
        xw, h0, c0, w_hh, acts, gs, cs, prev = ctx.saved_tensors
        if grad_mode.is_grad_enabled():
            return _lstm_scan_grads_by_autograd(ctx, (xw, h0, c0, w_hh), (d_out, d_h, d_c))
        n_steps, hid = xw.shape[0], h0.shape[1]
        order = list(range(n_steps - 1, -1, -1) if ctx.reverse else range(n_steps))
        a_s, g_s, c_s, d_outs = acts.unbind(0), gs.unbind(0), cs.unbind(0), d_out.unbind(0)
        c_prev = {t: (c_s[order[k - 1]] if k else c0) for k, t in enumerate(order)}
        dgates = [None] * n_steps
        dh, dc = d_h, d_c
        for t in reversed(order):
            a, g, c = a_s[t], g_s[t], c_s[t]
            i, f, o = a[:, :hid], a[:, hid: 2 * hid], a[:, 3 * hid:]
            tc = c.tanh()
            dh_t = d_outs[t] + dh
            dc = dc + dh_t * o * (1 - tc * tc)
            dgate = cat([dc * g * i * (1 - i), dc * c_prev[t] * f * (1 - f),
                         dc * i * (1 - g * g), dh_t * tc * o * (1 - o)], 1)
            dc = dc * f
            dh = dgate.mm(w_hh)
            dgates[t] = dgate
        d_g = stack(dgates, 0)
        d_w = None
        if ctx.needs_input_grad[3]:
            rows = n_steps * xw.shape[1]
            d_w = d_g.reshape(rows, 4 * hid).t().mm(prev.reshape(rows, hid))
        return d_g, dh, dc, d_w, None


def _lstm_scan_grads_by_autograd(ctx, inputs: tuple, grads: tuple) -> tuple:  # noqa: ANN001
    """LSTMScan's backward when it must itself be differentiable: rerun the step-by-step
    forward with autograd on the saved inputs and take its vector-Jacobian product."""
    from ember.autograd.engine import grad as autograd_grad
    xw, h0, c0, w_hh = inputs
    w = CellWeights(None, w_hh, None, None)
    outs, h, c = run_direction("LSTM", xw.unbind(0), [xw.shape[1]] * xw.shape[0], h0, c0, w,
                               ctx.reverse)
    wanted = [k for k in range(4) if ctx.needs_input_grad[k]]
    got = autograd_grad([stack(outs, 0), h, c], [inputs[k] for k in wanted], list(grads),
                        create_graph=True, allow_unused=True)
    result = [None] * 5
    for k, g in zip(wanted, got):
        result[k] = g
    return tuple(result)


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
                out, h, c = LSTMScan.apply(xw, h_init[k], c_init[k], weights[k].w_hh, d == 1)
                outs.append(out)
                hs.append(h)
                cs.append(c)
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

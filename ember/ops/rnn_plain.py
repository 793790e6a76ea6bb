"""The plain (Elman) RNN recurrence of one layer and direction as ONE op, forward and backward
(the counterpart of ``ember/ops/rnn.py``'s ``lstm_scan`` for ``nn.RNN``).

``rnn_scan(xw, h0, w_hh, reverse=, relu=)``: ``xw`` is ``x @ W_ih^T + b_ih + b_hh``
(``(T, B, H)``); per step ``h = act(xw[t] + h @ W_hh^T)`` with ``act`` tanh, or relu when
``relu``.  Outputs ``out`` (``(T, B, H)``) and ``h_n``.  ``rnn_scan_backward`` returns the
gradients of ``xw`` (the pre-activations) and of ``h0``; the vjp adds ``W_hh``'s as one product
over all ``T * B`` rows.  A ``create_graph=True`` backward recomputes the steps with
differentiable ops.
"""

from __future__ import annotations

import numpy as np

from ember.errors import ShapeError
from ember.ops._util import lowp
from ember.ops.linalg import MATMUL
from ember.ops.movement import CAT
from ember.ops.registry import OpDef, bind, register
from ember.ops.rnn import _check, _order, _prev_hidden, _SerialBlas


def _rnn_meta(xw, h0, w_hh, *, reverse: bool, relu: bool) -> tuple:  # noqa: ANN001
    """Shapes: out (T, B, H), h_n (B, H)."""
    _check("rnn_scan", {"xw": (xw.shape, 3), "h0": (h0.shape, 2), "w_hh": (w_hh.shape, 2)},
           [xw.dtype, h0.dtype, w_hh.dtype])
    t, b, hid = xw.shape
    if tuple(w_hh.shape) != (hid, hid) or tuple(h0.shape) != (b, hid):
        raise ShapeError(f"[rnn_scan] expected xw (T, B, H), h0 (B, H), w_hh (H, H); got "
                         f"{tuple(xw.shape)}, {tuple(h0.shape)}, {tuple(w_hh.shape)}")
    return ((t, b, hid), xw.dtype), ((b, hid), xw.dtype)


def _rnn_eager(xw: np.ndarray, h0: np.ndarray, w_hh: np.ndarray, *, reverse: bool,
               relu: bool) -> tuple:
    t_n = xw.shape[0]
    out = np.empty(xw.shape, xw.dtype)
    w_t = np.ascontiguousarray(w_hh.T)
    h = h0
    with _SerialBlas():
        for t in _order(t_n, reverse):
            pre = np.matmul(h, w_t)
            pre += xw[t]
            h = np.maximum(pre, 0, out=out[t]) if relu else np.tanh(pre, out=out[t])
    return out, (h0 if t_n == 0 else h).copy()


def _rnn_bwd_meta(d_out, d_h, out, w_hh, *, reverse: bool, relu: bool) -> tuple:  # noqa: ANN001
    """Shapes: dxw (T, B, H), dh0 (B, H)."""
    _check("rnn_scan_backward", {"d_out": (d_out.shape, 3), "out": (out.shape, 3)},
           [d_out.dtype, d_h.dtype, out.dtype, w_hh.dtype])
    t, b, hid = d_out.shape
    if (tuple(out.shape) != (t, b, hid) or tuple(d_h.shape) != (b, hid)
            or tuple(w_hh.shape) != (hid, hid)):
        raise ShapeError(f"[rnn_scan_backward] shapes do not match one RNN direction: d_out "
                         f"{tuple(d_out.shape)}, out {tuple(out.shape)}, w_hh "
                         f"{tuple(w_hh.shape)}")
    return ((t, b, hid), d_out.dtype), ((b, hid), d_out.dtype)


def _rnn_bwd_eager(d_out: np.ndarray, d_h: np.ndarray, out: np.ndarray, w_hh: np.ndarray, *,
                   reverse: bool, relu: bool) -> tuple:
    dxw = np.empty(d_out.shape, d_out.dtype)
    dh = d_h.copy()
    with _SerialBlas():
        for t in reversed(list(_order(d_out.shape[0], reverse))):
            h = out[t]
            dh += d_out[t]
            if relu:
                np.multiply(dh, h > 0, out=dxw[t])
            else:
                np.multiply(dh, 1 - h * h, out=dxw[t])
            dh = np.matmul(dxw[t], w_hh)
    return dxw, dh


RNN_SCAN_BACKWARD = register(OpDef(
    "rnn_scan_backward", "composite", _rnn_bwd_meta, lowp(_rnn_bwd_eager), None,
    num_outputs=2, tags=frozenset({"multi_output", "nondifferentiable", "lowp_upcast"}),
    doc="Backpropagation through time of rnn_scan: (dxw, dh0) from the output grads and the "
        "saved outputs (first order).",
))


def _rnn_vjp(ctx, d_out, d_h):  # noqa: ANN001
    xw, h0, w_hh = ctx.inputs
    rev, relu = ctx.params["reverse"], ctx.params["relu"]
    if ctx.create_graph:
        out, dxw, dh = _rnn_bptt_composed(xw, h0, w_hh, d_out, d_h, rev, relu)
    else:
        out = ctx.outputs[0]
        dxw, dh = bind(RNN_SCAN_BACKWARD, d_out, d_h, out, w_hh, reverse=rev, relu=relu)
    needs = ctx.needs_input_grad
    d_w = None
    if needs[2]:
        t, b, hid = d_out.shape
        prev = _prev_hidden(out, h0, rev)
        d_w = bind(MATMUL, dxw.reshape(t * b, hid).t(), prev.reshape(t * b, hid))
    return (dxw if needs[0] else None, dh if needs[1] else None, d_w)


def _rnn_bptt_composed(xw, h0, w_hh, d_out, d_h, reverse: bool, relu: bool) -> tuple:  # noqa: ANN001
    """Forward and backward with differentiable ops (``create_graph=True``): (out, dxw,
    dh0)."""
    steps, order = xw.unbind(0), list(_order(xw.shape[0], reverse))
    h, outs = h0, [None] * len(order)
    for t in order:
        pre = steps[t] + bind(MATMUL, h, w_hh.t())
        h = pre.relu() if relu else pre.tanh()
        outs[t] = h
    d_outs, dh, dxws = d_out.unbind(0), d_h, [None] * len(order)
    for t in reversed(order):
        dh = dh + d_outs[t]
        h = outs[t]
        dpre = dh * (h > 0).to(h.dtype) if relu else dh * (1 - h * h)
        dxws[t] = dpre.unsqueeze(0)
        dh = bind(MATMUL, dpre, w_hh)
    if not order:
        return xw, xw * 0, dh
    return (bind(CAT, *[o.unsqueeze(0) for o in outs], dim=0), bind(CAT, *dxws, dim=0), dh)


RNN_SCAN = register(OpDef(
    "rnn_scan", "composite", _rnn_meta, lowp(_rnn_eager), _rnn_vjp,
    num_outputs=2, save=(0, 1, 2), save_output=(0,),
    tags=frozenset({"multi_output", "lowp_upcast"}),
    doc="One plain RNN direction (tanh, or relu) over all time steps from the projected input "
        "xw = x W_ih^T + b_ih + b_hh: (out, h_n).",
))

__all__ = ["RNN_SCAN", "RNN_SCAN_BACKWARD"]

"""The GRU recurrence of one layer and direction as ONE op, forward and backward (the GRU
counterpart of ``ember/ops/rnn.py``'s ``lstm_scan``).

``gru_scan(xw, h0, w_hh, b_hh, reverse=)``: ``xw`` is ``x @ W_ih^T + b_ih`` (``(T, B, 3H)``),
gates in PyTorch's order (r, z, n), ``W_hh`` ``(3H, H)``, ``b_hh`` ``(3H,)``:

    gh = h @ W_hh^T + b_hh
    r = sigmoid(xw_r + gh_r);  z = sigmoid(xw_z + gh_z);  n = tanh(xw_n + r * gh_n)
    h = (h - n) * z + n

Outputs: ``out`` (``(T, B, H)``), ``h_n``, and for the backward ``acts`` (``(T, B, 3H)``: r, z,
n) and ``ghn`` (``(T, B, H)``: ``gh_n`` of every step).  ``gru_scan_backward`` returns the
gradients of ``xw`` and of ``gh`` (both ``(T, B, 3H)``) and of ``h0``; the vjp turns ``dgh`` into
the gradients of ``W_hh`` (one product over all ``T * B`` rows) and ``b_hh`` (a sum).  A
``create_graph=True`` backward recomputes the steps with differentiable ops.
"""

from __future__ import annotations

import numpy as np

from ember.errors import ShapeError
from ember.ops._util import lowp
from ember.ops.linalg import MATMUL
from ember.ops.movement import CAT
from ember.ops.nn_activation import _sigmoid
from ember.ops.registry import OpDef, bind, register
from ember.ops.rnn import _check, _order, _prev_hidden, _SerialBlas


def _gru_meta(xw, h0, w_hh, b_hh, *, reverse: bool) -> tuple:  # noqa: ANN001
    """Shapes: out (T, B, H), h_n (B, H), acts (T, B, 3H), ghn (T, B, H)."""
    _check("gru_scan", {"xw": (xw.shape, 3), "h0": (h0.shape, 2), "w_hh": (w_hh.shape, 2),
                        "b_hh": (b_hh.shape, 1)}, [xw.dtype, h0.dtype, w_hh.dtype, b_hh.dtype])
    t, b, g3 = xw.shape
    hid = h0.shape[1]
    if (tuple(w_hh.shape) != (3 * hid, hid) or g3 != 3 * hid or tuple(h0.shape) != (b, hid)
            or tuple(b_hh.shape) != (3 * hid,)):
        raise ShapeError(f"[gru_scan] expected xw (T, B, 3H), h0 (B, H), w_hh (3H, H), b_hh "
                         f"(3H,); got {tuple(xw.shape)}, {tuple(h0.shape)}, "
                         f"{tuple(w_hh.shape)}, {tuple(b_hh.shape)}")
    d = xw.dtype
    return ((t, b, hid), d), ((b, hid), d), ((t, b, 3 * hid), d), ((t, b, hid), d)


def _gru_eager(xw: np.ndarray, h0: np.ndarray, w_hh: np.ndarray, b_hh: np.ndarray, *,
               reverse: bool) -> tuple:
    t_n, b, g3 = xw.shape
    hid = g3 // 3
    out = np.empty((t_n, b, hid), xw.dtype)
    acts = np.empty((t_n, b, g3), xw.dtype)
    ghn = np.empty((t_n, b, hid), xw.dtype)
    w_t = np.ascontiguousarray(w_hh.T)
    h = h0
    with np.errstate(over="ignore"), _SerialBlas():
        for t in _order(t_n, reverse):
            gh = np.matmul(h, w_t)
            gh += b_hh
            a, x = acts[t], xw[t]
            np.add(x[:, : 2 * hid], gh[:, : 2 * hid], out=a[:, : 2 * hid])
            a[:, : 2 * hid] = _sigmoid(a[:, : 2 * hid])
            ghn[t] = gh[:, 2 * hid:]
            n = np.tanh(x[:, 2 * hid:] + a[:, :hid] * gh[:, 2 * hid:])
            a[:, 2 * hid:] = n
            h = np.add((h - n) * a[:, hid: 2 * hid], n, out=out[t])
    return out, (h0 if t_n == 0 else h).copy(), acts, ghn


def _gru_bwd_meta(d_out, d_h, acts, ghn, out, h0, w_hh, *, reverse: bool) -> tuple:  # noqa: ANN001
    """Shapes: dxw (T, B, 3H), dgh (T, B, 3H), dh0 (B, H)."""
    _check("gru_scan_backward", {"d_out": (d_out.shape, 3), "acts": (acts.shape, 3)},
           [d_out.dtype, d_h.dtype, acts.dtype, ghn.dtype, out.dtype, h0.dtype, w_hh.dtype])
    t, b, hid = d_out.shape
    if (tuple(acts.shape) != (t, b, 3 * hid) or tuple(w_hh.shape) != (3 * hid, hid)
            or any(tuple(x.shape) != (t, b, hid) for x in (ghn, out))
            or any(tuple(x.shape) != (b, hid) for x in (d_h, h0))):
        raise ShapeError("[gru_scan_backward] shapes do not match one GRU direction: d_out "
                         f"{tuple(d_out.shape)}, acts {tuple(acts.shape)}, w_hh "
                         f"{tuple(w_hh.shape)}")
    d = d_out.dtype
    return ((t, b, 3 * hid), d), ((t, b, 3 * hid), d), ((b, hid), d)


def _gru_bwd_eager(d_out: np.ndarray, d_h: np.ndarray, acts: np.ndarray, ghn: np.ndarray,
                   out: np.ndarray, h0: np.ndarray, w_hh: np.ndarray, *, reverse: bool) -> tuple:
    t_n, b, hid = d_out.shape
    dxw = np.empty((t_n, b, 3 * hid), d_out.dtype)
    dgh = np.empty((t_n, b, 3 * hid), d_out.dtype)
    dh = d_h.copy()
    order = list(_order(t_n, reverse))
    with _SerialBlas():
        for k in range(t_n - 1, -1, -1):
            t = order[k]
            r, z, n = (acts[t][:, j * hid: (j + 1) * hid] for j in range(3))
            hp = out[order[k - 1]] if k else h0
            dh += d_out[t]
            dn = np.multiply(dh * (1 - z), 1 - n * n, out=dxw[t][:, 2 * hid:])
            np.multiply(dh * (hp - n), z * (1 - z), out=dxw[t][:, hid: 2 * hid])
            np.multiply(dn * ghn[t], r * (1 - r), out=dxw[t][:, :hid])
            dgh[t][:, : 2 * hid] = dxw[t][:, : 2 * hid]
            np.multiply(dn, r, out=dgh[t][:, 2 * hid:])
            dh = dh * z + np.matmul(dgh[t], w_hh)
    return dxw, dgh, dh


GRU_SCAN_BACKWARD = register(OpDef(
    "gru_scan_backward", "composite", _gru_bwd_meta, lowp(_gru_bwd_eager), None,
    num_outputs=3, tags=frozenset({"multi_output", "nondifferentiable", "lowp_upcast"}),
    doc="Backpropagation through time of gru_scan: (dxw, dgh, dh0) from the output grads and "
        "the saved gates, gh_n and outputs (first order).",
))


def _gru_vjp(ctx, d_out, d_h, *_internal):  # noqa: ANN001
    xw, h0, w_hh, b_hh = ctx.inputs
    rev = ctx.params["reverse"]
    needs = ctx.needs_input_grad
    if ctx.create_graph:
        out, dxw, dgh, dh = _gru_bptt_composed(xw, h0, w_hh, b_hh, d_out, d_h, rev)
    else:
        out, _, acts, ghn = ctx.outputs
        dxw, dgh, dh = bind(GRU_SCAN_BACKWARD, d_out, d_h, acts, ghn, out, h0, w_hh,
                            reverse=rev)
    t, b, hid = d_out.shape
    d_w = d_b = None
    if needs[2]:
        prev = _prev_hidden(out, h0, rev)
        d_w = bind(MATMUL, dgh.reshape(t * b, 3 * hid).t(), prev.reshape(t * b, hid))
    if needs[3]:
        d_b = dgh.reshape(t * b, 3 * hid).sum(0)
    return (dxw if needs[0] else None, dh if needs[1] else None, d_w, d_b)


def _gru_bptt_composed(xw, h0, w_hh, b_hh, d_out, d_h, reverse: bool) -> tuple:  # noqa: ANN001
    """Forward and backward with differentiable ops (``create_graph=True``): (out, dxw, dgh,
    dh0)."""
    hid = h0.shape[1]
    steps, order = xw.unbind(0), list(_order(xw.shape[0], reverse))
    h, saved, outs = h0, {}, [None] * len(order)
    for t in order:
        gh = bind(MATMUL, h, w_hh.t()) + b_hh
        r = (steps[t][:, :hid] + gh[:, :hid]).sigmoid()
        z = (steps[t][:, hid: 2 * hid] + gh[:, hid: 2 * hid]).sigmoid()
        n = (steps[t][:, 2 * hid:] + r * gh[:, 2 * hid:]).tanh()
        saved[t] = (h, r, z, n, gh[:, 2 * hid:])
        h = (h - n) * z + n
        outs[t] = h.unsqueeze(0)
    d_outs, dh = d_out.unbind(0), d_h
    dxws, dghs = [None] * len(order), [None] * len(order)
    for t in reversed(order):
        hp, r, z, n, ghn = saved[t]
        dh = dh + d_outs[t]
        dn = dh * (1 - z) * (1 - n * n)
        dz = dh * (hp - n) * (z * (1 - z))
        dr = dn * ghn * (r * (1 - r))
        dxws[t] = bind(CAT, dr, dz, dn, dim=1).unsqueeze(0)
        dghs[t] = bind(CAT, dr, dz, dn * r, dim=1).unsqueeze(0)
        dh = dh * z + bind(MATMUL, dghs[t][0], w_hh)
    if not order:
        return xw[:, :, :hid], xw * 0, xw * 0, dh
    return (bind(CAT, *outs, dim=0), bind(CAT, *dxws, dim=0), bind(CAT, *dghs, dim=0), dh)


GRU_SCAN = register(OpDef(
    "gru_scan", "composite", _gru_meta, lowp(_gru_eager), _gru_vjp,
    num_outputs=4, save=(0, 1, 2, 3), save_output=(0, 2, 3),
    tags=frozenset({"multi_output", "lowp_upcast"}),
    doc="One GRU direction over all time steps from the projected input xw = x W_ih^T + b_ih: "
        "(out, h_n, gates r/z/n, gh_n); gate order r, z, n.",
))

__all__ = ["GRU_SCAN", "GRU_SCAN_BACKWARD"]

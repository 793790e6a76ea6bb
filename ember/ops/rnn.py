"""The LSTM recurrence of one layer and direction as ONE op, forward and backward.

``lstm_scan(xw, h0, c0, w_hh, reverse=)`` runs every time step of one LSTM direction over the
projected input ``xw`` (``(T, B, 4H)``: ``x @ W_ih^T + b_ih + b_hh``, computed by the caller as one
big product) from the state ``(h0, c0)`` (``(B, H)`` each) with PyTorch's gate order
(i, f, g, o) and ``W_hh`` of shape ``(4H, H)``:

    gates = xw[t] + h @ W_hh^T;  i, f, o = sigmoid(.), g = tanh(.)
    c = f * c + i * g;           h = o * tanh(c)

Outputs: ``out`` (``(T, B, H)``, h of every step in time order), ``h_n``, ``c_n``, and two
tensors the backward reads: ``acts`` (``(T, B, 4H)``, the activated gates i, f, g, o) and ``cs``
(``(T, B, H)``, c of every step).  ``lstm_scan_backward`` is backpropagation through time over
those: per step the gate derivatives and ONE product ``dgates @ W_hh``; the weight gradient is
then one product ``dgates^T @ h_prev`` over all ``T * B`` rows (in the vjp, with ember ops).

Eager kernels: NumPy, one BLAS product and a few array ops per step.  The C backend lowers both
ops to one recurrence kernel each (``ember/compiler/c/lower/rnn.py``).  A backward that must
itself be differentiable (``create_graph=True``) recomputes the steps with differentiable ops.
The gradients of ``acts`` and ``cs`` (internal outputs, never handed to users) are not
propagated.
"""

from __future__ import annotations

import numpy as np

from ember.errors import DTypeError, ShapeError
from ember.ops import _parallel
from ember.ops._util import lowp
from ember.ops.linalg import MATMUL
from ember.ops.movement import CAT
from ember.ops.nn_activation import _sigmoid
from ember.ops.registry import OpDef, bind, register

_FLOAT_KINDS = ("float16", "bfloat16", "float32", "float64")


def _check(op: str, shapes: dict, dtypes: list) -> None:
    d0 = dtypes[0]
    if d0.name not in _FLOAT_KINDS or any(d is not d0 for d in dtypes):
        raise DTypeError(f"[{op}] expected floating tensors of one dtype, got "
                         f"{[d.name for d in dtypes]}")
    for name, (shape, ndim) in shapes.items():
        if len(shape) != ndim:
            raise ShapeError(f"[{op}] {name} must be {ndim}-D, got shape {tuple(shape)}")


def _lstm_meta(xw, h0, c0, w_hh, *, reverse: bool) -> tuple:  # noqa: ANN001
    """Shapes: out (T, B, H), h_n, c_n (B, H), acts (T, B, 4H), cs (T, B, H)."""
    _check("lstm_scan", {"xw": (xw.shape, 3), "h0": (h0.shape, 2), "c0": (c0.shape, 2),
                         "w_hh": (w_hh.shape, 2)},
           [xw.dtype, h0.dtype, c0.dtype, w_hh.dtype])
    t, b, g4 = xw.shape
    hid = h0.shape[1]
    if (tuple(w_hh.shape) != (4 * hid, hid) or g4 != 4 * hid or tuple(h0.shape) != (b, hid)
            or tuple(c0.shape) != (b, hid)):
        raise ShapeError(f"[lstm_scan] expected xw (T, B, 4H), h0/c0 (B, H), w_hh (4H, H); got "
                         f"{tuple(xw.shape)}, {tuple(h0.shape)}, {tuple(c0.shape)}, "
                         f"{tuple(w_hh.shape)}")
    d = xw.dtype
    return (((t, b, hid), d), ((b, hid), d), ((b, hid), d), ((t, b, 4 * hid), d),
            ((t, b, hid), d))


def _order(n: int, reverse: bool) -> range:
    return range(n - 1, -1, -1) if reverse else range(n)


class _SerialBlas:
    """Single-threaded BLAS for the per-step products (batch-row sized: OpenBLAS's threads
    would wake and synchronise on every one of them, which costs more than they save and
    thrashes on a loaded machine); the thread count is restored afterwards."""

    def __enter__(self) -> None:
        self.threads = _parallel.get_num_threads()
        self.setter = _parallel._blas_setter() if self.threads > 1 else None
        if self.setter is not None:
            self.setter(1)

    def __exit__(self, *exc: object) -> None:
        if self.setter is not None:
            self.setter(self.threads)


def _lstm_eager(xw: np.ndarray, h0: np.ndarray, c0: np.ndarray, w_hh: np.ndarray, *,
                reverse: bool) -> tuple:
    t_n, b, g4 = xw.shape
    hid = g4 // 4
    out = np.empty((t_n, b, hid), xw.dtype)
    acts = np.empty((t_n, b, g4), xw.dtype)
    cs = np.empty((t_n, b, hid), xw.dtype)
    w_t = np.ascontiguousarray(w_hh.T)  # a plain (not transposed) operand: BLAS is faster
    h, c = h0, c0
    with np.errstate(over="ignore"), _SerialBlas():
        for t in _order(t_n, reverse):
            a = acts[t]
            np.matmul(h, w_t, out=a)
            a += xw[t]
            a[:, 2 * hid: 3 * hid] = np.tanh(a[:, 2 * hid: 3 * hid])
            for lo in (0, hid, 3 * hid):
                a[:, lo: lo + hid] = _sigmoid(a[:, lo: lo + hid])
            c = np.multiply(a[:, hid: 2 * hid], c, out=cs[t])
            c += a[:, :hid] * a[:, 2 * hid: 3 * hid]
            h = np.multiply(a[:, 3 * hid:], np.tanh(c), out=out[t])
    if t_n == 0:
        return out, h0.copy(), c0.copy(), acts, cs
    return out, h.copy(), c.copy(), acts, cs


def _lstm_bwd_meta(d_out, d_h, d_c, acts, cs, c0, w_hh, *, reverse: bool) -> tuple:  # noqa: ANN001
    """Shapes: dgates (T, B, 4H), dh0 (B, H), dc0 (B, H)."""
    _check("lstm_scan_backward", {"d_out": (d_out.shape, 3), "acts": (acts.shape, 3)},
           [d_out.dtype, d_h.dtype, d_c.dtype, acts.dtype, cs.dtype, c0.dtype, w_hh.dtype])
    t, b, hid = d_out.shape
    if (tuple(acts.shape) != (t, b, 4 * hid) or tuple(cs.shape) != (t, b, hid)
            or tuple(w_hh.shape) != (4 * hid, hid)
            or any(tuple(x.shape) != (b, hid) for x in (d_h, d_c, c0))):
        raise ShapeError("[lstm_scan_backward] shapes do not match one LSTM direction: "
                         f"d_out {tuple(d_out.shape)}, acts {tuple(acts.shape)}, w_hh "
                         f"{tuple(w_hh.shape)}")
    d = d_out.dtype
    return ((t, b, 4 * hid), d), ((b, hid), d), ((b, hid), d)


def _lstm_bwd_eager(d_out: np.ndarray, d_h: np.ndarray, d_c: np.ndarray, acts: np.ndarray,
                    cs: np.ndarray, c0: np.ndarray, w_hh: np.ndarray, *, reverse: bool) -> tuple:
    t_n, b, hid = d_out.shape
    dg = np.empty((t_n, b, 4 * hid), d_out.dtype)
    dh, dc = d_h.copy(), d_c.copy()
    order = list(_order(t_n, reverse))
    with _SerialBlas():
        for k in range(t_n - 1, -1, -1):
            t = order[k]
            i, f, g, o = (acts[t][:, j * hid: (j + 1) * hid] for j in range(4))
            c_prev = cs[order[k - 1]] if k else c0
            tc = np.tanh(cs[t])
            dh += d_out[t]
            dc += dh * o * (1 - tc * tc)
            d = dg[t]
            np.multiply(dc * g, i * (1 - i), out=d[:, :hid])
            np.multiply(dc * c_prev, f * (1 - f), out=d[:, hid: 2 * hid])
            np.multiply(dc * i, 1 - g * g, out=d[:, 2 * hid: 3 * hid])
            np.multiply(dh * tc, o * (1 - o), out=d[:, 3 * hid:])
            dc *= f
            dh = np.matmul(d, w_hh)
    return dg, dh, dc


LSTM_SCAN_BACKWARD = register(OpDef(
    "lstm_scan_backward", "composite", _lstm_bwd_meta, lowp(_lstm_bwd_eager), None,
    num_outputs=3, tags=frozenset({"multi_output", "nondifferentiable", "lowp_upcast"}),
    doc="Backpropagation through time of lstm_scan: (dgates, dh0, dc0) from the output grads, "
        "the saved activated gates and cell states (first order).",
))


def _prev_hidden(out, h0, reverse: bool):  # noqa: ANN001, ANN202
    """h fed into each step, in time order: (T, B, H)."""
    first = h0.unsqueeze(0)
    if out.shape[0] <= 1:
        return first
    if reverse:
        return bind(CAT, out[1:], first, dim=0)
    return bind(CAT, first, out[:-1], dim=0)


def _lstm_vjp(ctx, d_out, d_h, d_c, *_internal):  # noqa: ANN001
    xw, h0, c0, w_hh = ctx.inputs
    rev = ctx.params["reverse"]
    needs = ctx.needs_input_grad
    if ctx.create_graph:
        dg, dh, dc = _bptt_composed(xw, h0, c0, w_hh, d_out, d_h, d_c, rev)
    else:
        out, _, _, acts, cs = ctx.outputs
        dg, dh, dc = bind(LSTM_SCAN_BACKWARD, d_out, d_h, d_c, acts, cs, c0, w_hh, reverse=rev)
    d_w = None
    if needs[3]:
        if ctx.create_graph:
            out = _forward_composed(xw, h0, c0, w_hh, rev)[0]
        t, b, hid = d_out.shape
        prev = _prev_hidden(out, h0, rev)
        d_w = bind(MATMUL, dg.reshape(t * b, 4 * hid).t(), prev.reshape(t * b, hid))
    return (dg if needs[0] else None, dh if needs[1] else None, dc if needs[2] else None, d_w)


def _forward_composed(xw, h0, c0, w_hh, reverse: bool) -> tuple:  # noqa: ANN001
    """The forward with differentiable ops: (out, acts as (i, f, g, o) per step, cs)."""
    hid = h0.shape[1]
    steps = xw.unbind(0)
    h, c = h0, c0
    outs, acts, cs = ([None] * len(steps) for _ in range(3))
    w_t = w_hh.t()
    for t in _order(len(steps), reverse):
        gates = steps[t] + bind(MATMUL, h, w_t)
        i = gates[:, :hid].sigmoid()
        f = gates[:, hid: 2 * hid].sigmoid()
        g = gates[:, 2 * hid: 3 * hid].tanh()
        o = gates[:, 3 * hid:].sigmoid()
        c = f * c + i * g
        h = o * c.tanh()
        outs[t], acts[t], cs[t] = h, (i, f, g, o), c
    out = bind(CAT, *[x.unsqueeze(0) for x in outs], dim=0) if outs else None
    return out, acts, cs


def _bptt_composed(xw, h0, c0, w_hh, d_out, d_h, d_c, reverse: bool) -> tuple:  # noqa: ANN001
    """lstm_scan_backward written with differentiable ops on a recomputed forward (for
    ``create_graph=True``: higher derivatives stay exact)."""
    _, acts, cs = _forward_composed(xw, h0, c0, w_hh, reverse)
    order = list(_order(xw.shape[0], reverse))
    d_outs = d_out.unbind(0)
    dgates = [None] * len(order)
    dh, dc = d_h, d_c
    for k in range(len(order) - 1, -1, -1):
        t = order[k]
        i, f, g, o = acts[t]
        c_prev = cs[order[k - 1]] if k else c0
        tc = cs[t].tanh()
        dh = dh + d_outs[t]
        dc = dc + dh * o * (1 - tc * tc)
        dgate = bind(CAT, dc * g * i * (1 - i), dc * c_prev * f * (1 - f), dc * i * (1 - g * g),
                     dh * tc * o * (1 - o), dim=1)
        dc = dc * f
        dh = bind(MATMUL, dgate, w_hh)
        dgates[t] = dgate.unsqueeze(0)
    if not dgates:
        return xw * 0, dh, dc
    return bind(CAT, *dgates, dim=0), dh, dc


LSTM_SCAN = register(OpDef(
    "lstm_scan", "composite", _lstm_meta, lowp(_lstm_eager), _lstm_vjp,
    num_outputs=5, save=(0, 1, 2, 3), save_output=(0, 3, 4),
    tags=frozenset({"multi_output", "lowp_upcast"}),
    doc="One LSTM direction over all time steps from the projected input xw = x W_ih^T + b: "
        "(out, h_n, c_n, activated gates, cell states); gate order i, f, g, o.",
))

__all__ = ["LSTM_SCAN", "LSTM_SCAN_BACKWARD"]

"""``lstm_scan``/``gru_scan``/``rnn_scan`` and their backwards -> ONE ``LstmKernel`` each
(``ir/rnn.py``).

Per step the forward kernel runs one BLAS product ``h_{t-1} @ W_hh^T`` accumulated onto the
projected input (copied into the gate buffer, the product's ``beta = 1``), then the gate
nonlinearities, the cell and the hidden state in one pass over the step's ``B x H`` units,
straight into the outputs (the previous step's h and c are read from them).  The backward
kernel does the gate derivatives per step, then ONE product ``dgates_t @ W_hh`` for the next
step's dh; the weight gradient stays a single large product outside (the op's vjp).  With
``ember_num_threads > 1`` (OpenMP units) each thread owns a range of hidden units in every step
(its columns of all four gates: one product per gate block), with one barrier per step.

Lowered: float32/float64 with static sizes; element reads go through each operand's strides
(a slice of a bidirectional output's gradient is not copied); ``W_hh`` needs a unit column
stride.  Same formulas and rounding order as the eager kernels (``ember/ops/rnn.py``); the
products and ``exp``/``tanh`` are BLAS's and the C prelude's, so results agree to float
rounding, not bit for bit.
"""

from __future__ import annotations

from typing import Any

from ember.compiler.c.ir.loop_ir import Geometry
from ember.compiler.c.ir.rnn import LstmKernel, StridedOperand
from ember.compiler.c.lower.context import LoweringContext, is_ref, log
from ember.compiler.c.lower.registry import lowering
from ember.ops import OPS

_FLOATS = ("float32", "float64")


def _operand(m: Any) -> StridedOperand | None:
    g = m.geom
    vals = tuple(g.shape) + tuple(g.strides) + (g.offset,)
    if any(type(x) is not int for x in vals):
        return None
    st = tuple(g.strides)
    return StridedOperand(m.buf, g.offset, ((0,) * (3 - len(st))) + st)


@lowering(OPS.lstm_scan, backward=False, mode="LSTM", w_at=3)
@lowering(OPS.lstm_scan_backward, backward=True, mode="LSTM", w_at=6)
@lowering(OPS.gru_scan, backward=False, mode="GRU", w_at=2)
@lowering(OPS.gru_scan_backward, backward=True, mode="GRU", w_at=6)
@lowering(OPS.rnn_scan, backward=False, mode="RNN", w_at=2)
@lowering(OPS.rnn_scan_backward, backward=True, mode="RNN", w_at=3)
def lower_lstm(lw: LoweringContext, i: int, n: Any, backward: bool, mode: str,
               w_at: int) -> str | None:
    """Lower node ``i`` (an LSTM/GRU recurrence op, ``n.args[w_at]`` its W_hh) into ``lw``;
    None, or why not."""
    refs = list(n.args)
    if any(not is_ref(a) for a in refs):
        return "a non-tensor operand"
    if "ember_sigmoid" not in lw.helpers or "ember_tanh" not in lw.helpers:
        return "C helpers ember_sigmoid/ember_tanh not in the prelude"
    dt = lw.dtype_of(refs[0])
    if dt.np.name not in _FLOATS or any(lw.dtype_of(r) != dt for r in refs):
        return "not float32/float64 operands of one dtype"
    if type(n.params.get("reverse")) is not bool or type(n.params.get("relu", False)) is not bool:
        return "symbolic reverse or relu"
    lw.materialize(refs)
    mats = [lw.in_memory(r) for r in refs]
    if any(m is None for m in mats):
        return "an operand is not in memory"
    ops = [_operand(m) for m in mats]
    if any(o is None for o in ops):
        return "dynamic sizes"
    w = ops[w_at]
    ins = ops[:w_at] + ops[w_at + 1:]
    shapes = [tuple(m.geom.shape) for k, m in enumerate(mats) if k != w_at]
    dims = [(1,) * (3 - len(sh)) + sh for sh in shapes]
    hid = tuple(mats[w_at].geom.shape)[1]
    if w.strides[2] != 1 and hid > 1:
        return "W_hh without a unit column stride"
    t_n, b = tuple(mats[0].geom.shape)[:2]
    lw.close_group()
    lw.open_segment()
    outs = []
    for j, (shape, _) in enumerate(n.specs):
        buf = lw.buffer(dt, tuple(shape), "temp")
        outs.append(buf)
        lw.bind(i, j, buf, Geometry.contiguous(tuple(shape)), dt)
    k = LstmKernel(lw.kernel_name(), backward, n.params["reverse"], t_n, b, hid, ins, w, outs,
                   dims, mode, n.params.get("relu", False), [n.op.name])
    lw.add_kernel(k)
    log("fusion", f"{k.name}: {n.op.name} as one recurrence kernel, T={t_n} B={b} H={hid}", 3)
    return None


__all__ = ["lower_lstm"]

"""``LstmKernel``: the whole recurrence of one LSTM or GRU layer-direction (``lstm_scan``,
``gru_scan``) or its backpropagation through time (``lstm_scan_backward``,
``gru_scan_backward``) as one kernel.  Lowered by
``lower/rnn.py``; its C is ``codegen/rnn.py`` with the template ``codegen/csrc/lstm.h.in``."""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.compiler.c.ir.loop_ir import Buffer


@dataclass(eq=False)
class StridedOperand:
    """An operand read element by element: ``buf[offset + i*strides[0] + ...]`` (3 strides for
    (T, B, X) operands; 2-D operands use strides[1:] and strides[0] == 0)."""

    buf: Buffer
    offset: int
    strides: tuple


@dataclass(eq=False)
class LstmKernel:
    """One LSTM (``mode`` "LSTM"), GRU ("GRU") or plain RNN ("RNN") direction over ``T`` steps
    of batch ``B``, hidden size ``H``; ``w`` is W_hh (4H, 3H or H x H, row stride
    ``strides[1]``).

    LSTM forward (``backward`` False): ``ins = [xw, h0, c0]``, ``outs = [out, h_n, c_n, acts,
    cs]``; backward: ``ins = [d_out, d_h, d_c, acts, cs, c0]``, ``outs = [dgates, dh0, dc0]``.
    GRU forward: ``ins = [xw, h0, b_hh]``, ``outs = [out, h_n, acts, ghn]``; backward: ``ins =
    [d_out, d_h, acts, ghn, out, h0]``, ``outs = [dxw, dgh, dh0]``.  Plain RNN ("RNN", tanh
    or ``relu``) forward: ``ins = [xw, h0]``, ``outs = [out, h_n]``; backward: ``ins = [d_out,
    d_h, out]``, ``outs = [dxw, dh0]``.  ``dims``: each input's
    (T or 1, B or 1, width).  Outputs are C-contiguous."""

    name: str
    backward: bool
    reverse: bool
    T: int
    B: int
    H: int
    ins: list
    w: StridedOperand
    outs: list
    dims: list
    mode: str = "LSTM"
    relu: bool = False
    ops: list = field(default_factory=list)

    @property
    def out(self) -> Buffer:
        return self.outs[0]

    def buffers(self) -> tuple[list, list]:
        loads: list = []
        for x in self.ins + [self.w]:
            if x.buf not in loads:
                loads.append(x.buf)
        return loads, list(self.outs)

    def has_checks(self) -> bool:
        return True  # returns 1 when its scratch cannot be allocated

    def __str__(self) -> str:
        what = self.mode.lower() + (" backward" if self.backward else "")
        return (f"kernel {self.name}  // {' '.join(self.ops)} ({what} T={self.T} B={self.B} "
                f"H={self.H}{' reverse' if self.reverse else ''})\n  "
                f"{', '.join(b.name for b in self.outs)} = {what}("
                f"{', '.join(x.buf.name for x in self.ins + [self.w])})")


__all__ = ["LstmKernel", "StridedOperand"]

"""``QLinearKernel``: one int8 dynamic-quantized linear (``qlinear_dynamic``,
``ember/ops/qlinear.py``) inside a compiled graph.  Lowered by ``lower/qlinear.py``; its C is
``codegen/qlinear.py`` (the eager packed kernel, ``ember/ops/csrc/qlinear_eager.c``, plus the
driver ``codegen/csrc/qlinear_graph.h``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ember.compiler.c.ir.loop_ir import Buffer


@dataclass(eq=False)
class QLinearKernel:
    """``out`` (n, m) float32 = qlinear_dynamic of ``x`` (n rows of k floats, ``ldx`` apart from
    element ``x_offset``) and the packed weight ``wdata`` (k padded to ``kp``, ``mp`` packed
    columns) with ``colsum``, ``wscale`` and ``bias`` (``has_bias``).  ``n``: a size
    expression (a runtime size under dynamic shapes); the rest are static."""

    name: str
    x: Buffer
    x_offset: Any
    ldx: Any
    n: Any
    k: int
    m: int
    mp: int
    kp: int
    wdata: Buffer
    colsum: Buffer
    wscale: Buffer
    bias: Buffer
    has_bias: bool
    per_row: bool
    reduce_range: bool
    out: Buffer
    ops: list = field(default_factory=list)

    def buffers(self) -> tuple[list, list]:
        loads: list = []
        for b in (self.x, self.wdata, self.colsum, self.wscale, self.bias):
            if b not in loads:
                loads.append(b)
        return loads, [self.out]

    def has_checks(self) -> bool:
        return True  # returns 1 on a NaN input (eager raises) or when out of memory

    def __str__(self) -> str:
        scheme = "per row" if self.per_row else "per tensor"
        return (f"kernel {self.name}  // {' '.join(self.ops)} (int8 dynamic linear, {scheme}, "
                f"n={self.n} k={self.k} m={self.m})\n  {self.out.name} = qlinear_dynamic("
                f"{self.x.name}, {self.wdata.name}, {self.colsum.name}, {self.wscale.name}, "
                f"{self.bias.name})")


__all__ = ["QLinearKernel"]

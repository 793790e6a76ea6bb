"""``QLinearKernel``: one int8 dynamic-quantized linear (``qlinear_dynamic``,
``ember/ops/qlinear.py``) inside a compiled graph.  Lowered by ``lower/qlinear.py``; its C is
``codegen/qlinear.py`` (the eager packed kernel, ``ember/ops/csrc/qlinear_eager.c``, plus the
driver ``codegen/csrc/qlinear_graph.h``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ember.compiler.c.ir.loop_ir import Buffer, Store, loaded_buffers


@dataclass(eq=False)
class QLinearKernel:
    """``out`` (..., m) float32 = qlinear_dynamic of ``x`` (n rows of k floats, ``ldx`` apart
    from element ``x_offset``) and the packed weight ``wdata`` (k padded to ``kp``, ``mp``
    packed columns) with ``colsum``, ``wscale`` and ``bias`` (``has_bias``).  ``n``: a size
    expression (a runtime size under dynamic shapes); the rest are static.  ``epilogue``:
    Let/Store statements over ``out``'s index space (loop variables ``i0..``, or one flat
    ``i`` when ``epi_flat``), as a GemmKernel's: fused pointwise consumers
    (``schedule.fuse_epilogues``), run on each finished block of rows while it is in cache."""

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
    epilogue: list = field(default_factory=list)
    epi_flat: bool = False

    def epi_ranges(self) -> tuple:
        return tuple(self.out.shape)

    def epi_vars(self) -> list:
        return ["i"] if self.epi_flat else [f"i{d}" for d in range(len(self.epi_ranges()))]

    def operand_buffers(self) -> list:
        return [self.x, self.wdata, self.colsum, self.wscale, self.bias]

    def buffers(self) -> tuple[list, list]:
        """(loaded buffers, stored buffers); ``out`` counts as stored only."""
        loads: list = []
        stores: list = [self.out]
        for b in self.operand_buffers():
            if b not in loads:
                loads.append(b)
        for st in self.epilogue:
            for b in loaded_buffers(st.expr):
                if b not in loads and b is not self.out:
                    loads.append(b)
            if isinstance(st, Store) and st.buf not in stores:
                stores.append(st.buf)
        return loads, stores

    def has_checks(self) -> bool:
        return True  # returns 1 on a NaN input or out of memory: the graph reruns eagerly

    def __str__(self) -> str:
        scheme = "per row" if self.per_row else "per tensor"
        return (f"kernel {self.name}  // {' '.join(self.ops)} (int8 dynamic linear, {scheme}, "
                f"n={self.n} k={self.k} m={self.m})\n  {self.out.name} = qlinear_dynamic("
                f"{self.x.name}, {self.wdata.name}, {self.colsum.name}, {self.wscale.name}, "
                f"{self.bias.name})" + "".join(f"\n    {st}" for st in self.epilogue))


__all__ = ["QLinearKernel"]

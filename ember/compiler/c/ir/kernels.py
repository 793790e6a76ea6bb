"""Kernel kinds beyond loop_ir's loop nests, as data: an attention kernel and a row
gather/scatter-add.  Their C comes from ``codegen/attention.py`` and ``codegen/index.py``."""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.compiler.c.ir.loop_ir import Buffer, Geometry, MatOperand

# the most batch dims an AttentionKernel iterates (the size of its job's C arrays)
ATTENTION_MAX_BATCH_DIMS = 8


@dataclass(eq=False)
class AttentionKernel:
    """Attention over ``batch`` heads of ``L`` query rows, ``S`` keys, head dims ``E``/``Ev``.
    ``outs``: ``[out]`` (forward) or ``[gq, gk, gv, gm]`` (backward; ``gm`` None when unused),
    all C-contiguous; operands are ``MatOperand``s (``g``: the output's gradient)."""

    name: str
    backward: bool
    q: MatOperand
    k: MatOperand
    v: MatOperand
    mask: MatOperand | None
    g: MatOperand | None
    outs: list
    batch: tuple
    L: int
    S: int
    E: int
    Ev: int
    scale: float
    ops: list = field(default_factory=list)
    impl: str = "blas"

    @property
    def out(self) -> Buffer:
        return self.outs[0]

    def operands(self) -> list:
        return [x for x in (self.q, self.k, self.v, self.mask, self.g) if x is not None]

    def buffers(self) -> tuple[list, list]:
        loads: list = []
        for x in self.operands():
            if x.buf not in loads:
                loads.append(x.buf)
        return loads, [b for b in self.outs if b is not None]

    def has_checks(self) -> bool:
        return True  # returns 1 when its scratch cannot be allocated

    def __str__(self) -> str:
        what = "backward" if self.backward else "forward"
        outs = ", ".join("-" if b is None else b.name for b in self.outs)
        ops = ", ".join(f"{n}={x}" for n, x in (("q", self.q), ("k", self.k), ("v", self.v),
                                                 ("mask", self.mask), ("g", self.g))
                        if x is not None)
        return (f"kernel {self.name}  // {' '.join(self.ops)} (attention {what}, batch "
                f"{list(self.batch)}, L={self.L} S={self.S} E={self.E} Ev={self.Ev}, "
                f"scale={self.scale!r})\n  {outs} = attention({ops})")


@dataclass(eq=False)
class IndexKernel:
    """``scatter=False``: ``out[r, c] = src[idx[r] * src_rs + c * src_cs]`` (a gather of rows
    of the 2-D ``src``); ``scatter=True``: ``out`` (``num x cols``, C-contiguous) zeroed, then
    ``out[idx[r], c] += src[r, c]`` for ``r`` in order (``src`` rows through ``src_geom``).
    ``idx_geom``: the index tensor's geometry (its elements are the rows ``r``, C order)."""

    name: str
    scatter: bool
    src: Buffer
    src_geom: Geometry
    idx: Buffer
    idx_geom: Geometry
    out: Buffer
    num: int
    cols: int
    ops: list = field(default_factory=list)

    @property
    def rows(self) -> int:
        n = 1
        for s in self.idx_geom.shape:
            n *= s
        return n

    def buffers(self) -> tuple[list, list]:
        return [self.src, self.idx], [self.out]

    def has_checks(self) -> bool:
        return True  # returns 1 for an index out of range

    def __str__(self) -> str:
        what = "scatter_add" if self.scatter else "gather"
        return (f"kernel {self.name}  // {' '.join(self.ops)} ({what} of {self.rows} rows x "
                f"{self.cols}, {self.num} weights)\n  {self.out.name} = {what}("
                f"{self.src.name}{list(self.src_geom.strides)}+{self.src_geom.offset}, "
                f"{self.idx.name}{list(self.idx_geom.strides)}+{self.idx_geom.offset})")


__all__ = ["ATTENTION_MAX_BATCH_DIMS", "AttentionKernel", "IndexKernel"]

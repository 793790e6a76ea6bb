"""The rounding of a float16/bfloat16 product's float32 result (``lower/gemm.py``,
``lower/attention.py``).

``round_to_group``: a half product's float32 result rounded to its dtype as a value of a new
open group, so the pointwise ops after it (GELU) join that group and ``fuse_epilogues`` merges
the whole chain into the product's epilogue (PyTorch's Inductor fuses them the same way).
"""

from __future__ import annotations

from typing import Any

from ember.compiler.c.ir.loop_ir import Let, Op, contiguous_strides, round_expr
from ember.compiler.c.lower.context import LoweringContext


def round_to_group(lw: LoweringContext, i: int, dt: Any, name: str, j: int = 0) -> None:
    """Output ``j`` of node ``i``, a float32 result in memory, rounded once to half dtype
    ``dt``, as a value of a new open group (``name``: the op name the kernel lists)."""
    ref = ("n", i, j)
    shape = tuple(lw.vals[ref].geom.shape)
    g = lw.join_group(shape, [ref])
    src = lw.operand(g, ref)
    loc = g.local()
    g.body.append(Let(loc, "float", Op(name, round_expr(dt, "{0}"), (src,))))
    lw.add_value(g, i, loc, shape, dt, contiguous_strides(shape), name, j)
    lw.stats.fused_ops -= 1     # a rounding, not a graph op


__all__ = ["round_to_group"]

"""``qlinear_dynamic`` -> ONE ``QLinearKernel`` (``ir/qlinear.py``): the int8 dynamic linear
runs as C inside the graph (no extern, no graph break).  The input must sit in memory with a
unit column stride (a view's row stride and offset are read in place); the packed weight,
column sums, scales and bias are graph inputs read where they are.  The kernel computes what
the eager kernel computes, bit for bit: the same C product (``ember/ops/csrc/qlinear_eager.c``)
and the same ``ChooseQuantizationParams`` steps (``codegen/csrc/qlinear_graph.h``).
"""

from __future__ import annotations

from typing import Any

from ember.compiler.c.ir.loop_ir import Geometry, numel, s_mul
from ember.compiler.c.ir.qlinear import QLinearKernel
from ember.compiler.c.lower.context import LoweringContext, is_ref, log
from ember.compiler.c.lower.registry import lowering
from ember.ops import OPS


@lowering(OPS.qlinear_dynamic)
def lower_qlinear(lw: LoweringContext, i: int, n: Any) -> str | None:
    """Lower node ``i`` (``qlinear_dynamic``) into ``lw``; None, or why not."""
    refs = list(n.args)
    if len(refs) != 5 or any(not is_ref(a) for a in refs):
        return "a non-tensor operand"
    p = n.params
    if any(type(p[key]) is not bool for key in ("per_row", "reduce_range", "has_bias")):
        return "symbolic flags"
    if type(p["m"]) is not int or type(p["k"]) is not int:
        return "symbolic m or k"
    lw.materialize(refs)
    mats = [lw.in_memory(r) for r in refs]
    if any(v is None for v in mats):
        return "an operand is not in memory"
    x = mats[0]
    shape, strides = tuple(x.geom.shape), tuple(x.geom.strides)
    k = shape[-1]
    if k != p["k"] or (k > 1 and strides[-1] != 1):
        return "an input without a unit column stride"
    lead = shape[:-1]
    rows = numel(lead)
    # the leading dims must collapse into rows one stride apart (a view is read in place)
    for d in range(len(lead) - 1):
        if lead[d] != 1 and strides[d] != s_mul(strides[d + 1], lead[d + 1]):
            return "an input whose leading dims are not rows of one stride"
    ldx = next((strides[d] for d in range(len(lead) - 1, -1, -1) if lead[d] != 1), k)
    for v in mats[1:]:
        if not v.geom.is_contiguous() or any(type(s) is not int for s in v.geom.shape):
            return "a packed-weight operand that is not a contiguous static buffer"
    wshape = tuple(mats[1].geom.shape)
    lw.close_group()
    lw.open_segment()
    out_shape = lead + (p["m"],)
    out = lw.buffer(x.dtype, out_shape, "temp")
    lw.bind(i, 0, out, Geometry.contiguous(out_shape), x.dtype)
    kern = QLinearKernel(lw.kernel_name(), x.buf, x.geom.offset, ldx, rows, k, p["m"],
                         wshape[0] * 16, wshape[1] * 4, mats[1].buf, mats[2].buf, mats[3].buf,
                         mats[4].buf, p["has_bias"], p["per_row"], p["reduce_range"], out,
                         [n.op.name])
    lw.add_kernel(kern)
    log("fusion", f"{kern.name}: qlinear_dynamic as one int8 kernel, n={rows} k={k} "
        f"m={p['m']}", 3)
    return None


__all__ = ["lower_qlinear"]

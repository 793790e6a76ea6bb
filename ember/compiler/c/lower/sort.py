"""``sort`` and ``topk`` -> ``SortKernel``s: a stable merge sort of every slice along ``dim``
(NaN largest, equal keys in their order, as eager's stable argsort), values copied exactly.
Static sizes only; a 0-d or empty input stays an extern.  (Their gradients' gather and
scatter-add are ``DimIndexKernel``s: ``lower/index.py``.)
"""

from __future__ import annotations

from typing import Any

from ember.compiler.c.ir.kernels import SortKernel
from ember.compiler.c.ir.loop_ir import STORAGE_CTYPES, Geometry
from ember.compiler.c.lower.context import LoweringContext, is_ref, log
from ember.compiler.c.lower.index import _static
from ember.compiler.c.lower.registry import lowering
from ember.ops import OPS


@lowering(OPS.sort, order="descending")
@lowering(OPS.topk, order="largest")
def lower_sort(lw: LoweringContext, i: int, n: Any, order: str) -> str | None:
    """``sort`` (all of each slice) or ``topk`` (its first ``k``) as one ``SortKernel``."""
    x_r = n.args[0]
    if not is_ref(x_r):
        return "a non-tensor operand"
    (vshape, dt), (ishape, idt) = n.specs
    if dt.np.name not in STORAGE_CTYPES or lw.dtype_of(x_r) != dt:
        return f"dtype {dt.name}"
    x = lw.in_memory(x_r)
    if x is None:
        return "an operand is not in memory"
    p = n.params
    if not _static(x.geom) or any(type(m) is not int for m in tuple(vshape)) or any(
            type(v) not in (int, bool) for v in p.values()):
        return "dynamic sizes"
    xs, dim = tuple(x.geom.shape), int(p["dim"])
    if not xs or 0 in xs or 0 in tuple(vshape):
        return "a 0-d or empty input"
    lw.close_group()
    lw.open_segment()
    vals = lw.buffer(dt, tuple(vshape), "temp")
    idx = lw.buffer(idt, tuple(ishape), "temp")
    kname = lw.kernel_name()
    lw.add_kernel(SortKernel(kname, dt, x.buf, x.geom, dim, bool(p[order]),
                             int(tuple(vshape)[dim]), [vals, idx], [n.op.name]))
    lw.bind(i, 0, vals, Geometry.contiguous(tuple(vshape)), dt)
    lw.bind(i, 1, idx, Geometry.contiguous(tuple(ishape)), idt)
    log("fusion", f"{kname}: {n.op.name} as one stable-sort kernel along dim {dim}", 3)
    return None


__all__ = ["lower_sort"]

"""Max pooling -> ``PoolKernel``s: ``max_pool`` (values and flat indices) and its backward
``pool_scatter`` (a per-row scatter-add in double, rounded once, as eager's bincount).

Every value is copied or summed as eager does it (the window scan keeps the first maximum and
lets every NaN replace it; padding reads -inf, or the integer dtype's minimum), so both kernels
are bit-identical to eager.  Both lower over runtime batch and spatial sizes (``max_pool``'s
``out`` parameter holds the lifted result sizes, ``pool_scatter``'s ``input_shape`` the input's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.compiler.c.ir.kernels import PoolKernel
from ember.compiler.c.ir.loop_ir import STORAGE_CTYPES, Geometry
from ember.compiler.c.lower.context import LoweringContext, is_ref, log, size_of
from ember.compiler.c.lower.index import _static
from ember.compiler.c.lower.registry import lowering
from ember.ops import OPS


def _fill(dt: Any) -> str | None:
    """C text of the padding value of eager's max_pool for ``dt`` (None: not lowered)."""
    if dt.is_floating_point:
        return "-INFINITY"
    name = dt.np.name
    if name == "bool" or name not in STORAGE_CTYPES:
        return None
    lo = int(np.iinfo(np.dtype(name)).min)
    return "INT64_MIN" if lo == -2 ** 63 else f"{lo}LL"


@lowering(OPS.max_pool)
def lower_max_pool(lw: LoweringContext, i: int, n: Any) -> str | None:
    """``max_pool`` as one ``PoolKernel`` storing values and indices."""
    x_r = n.args[0]
    if not is_ref(x_r):
        return "a non-tensor operand"
    (vshape, dt), (ishape, _) = n.specs
    fill = _fill(dt)
    if fill is None or lw.dtype_of(x_r) != dt:
        return f"dtype {dt.name}"
    x = lw.in_memory(x_r)
    if x is None:
        return "an operand is not in memory"
    p = n.params
    if any(type(v) is not int for k in ("kernel", "stride", "padding", "dilation")
           for v in p[k]):
        return "runtime window parameters"
    xs = tuple(x.geom.shape)
    if _static(x.geom) and all(type(m) is int for m in p["out"]):
        vshape, ishape = tuple(vshape), tuple(ishape)
    else:  # runtime sizes (exported programs, dynamic=True): shaped from the input and out
        vshape = ishape = tuple(xs[:2]) + tuple(size_of(m) for m in p["out"])
    if len(xs) != 2 + len(p["kernel"]) or 0 in tuple(vshape) or 0 in xs:
        return "an empty input or result"
    lw.close_group()
    lw.open_segment()
    vals = lw.buffer(dt, tuple(vshape), "temp")
    idx = lw.buffer(n.specs[1][1], tuple(ishape), "temp")
    kname = lw.kernel_name()
    lw.add_kernel(PoolKernel(kname, False, dt, x.buf, x.geom, None, None, [vals, idx],
                             xs[2:], tuple(vshape[2:]), tuple(p["kernel"]), tuple(p["stride"]),
                             tuple(p["padding"]), tuple(p["dilation"]), fill, [n.op.name]))
    lw.bind(i, 0, vals, Geometry.contiguous(tuple(vshape)), dt)
    lw.bind(i, 1, idx, Geometry.contiguous(tuple(ishape)), n.specs[1][1])
    log("fusion", f"{kname}: {n.op.name} as one pooling kernel", 3)
    return None


@lowering(OPS.pool_scatter)
def lower_pool_scatter(lw: LoweringContext, i: int, n: Any) -> str | None:
    """``pool_scatter`` (max pooling's backward) as one ``PoolKernel``."""
    if any(not is_ref(a) for a in n.args):
        return "a non-tensor operand"
    out_shape, dt = n.specs[0]
    out_shape = tuple(out_shape)
    if not dt.is_floating_point or dt.np.name not in STORAGE_CTYPES:
        return f"dtype {dt.name}"
    if lw.dtype_of(n.args[1]).name != "int64":
        return "index dtype is not int64"
    g, idx = lw.in_memory(n.args[0]), lw.in_memory(n.args[1])
    if g is None or idx is None:
        return "an operand is not in memory"
    gs = tuple(g.geom.shape)
    if not _static(g.geom, idx.geom) or any(type(m) is not int for m in out_shape):
        # runtime sizes (dynamic=True): (batch, channels) from the gradient, the input's
        # spatial sizes from the (lifted) parameter; specs hold one call's sizes
        out_shape = gs[:2] + tuple(size_of(m) for m in n.params["input_shape"][2:])
    # (runtime sizes of the gradient and the indices may be different expressions of one size:
    # meta checked that they agree)
    same = all(a == b for a, b in zip(idx.geom.shape, gs) if type(a) is int and type(b) is int)
    if (len(gs) < 2 or len(idx.geom.shape) != len(gs) or not same or 0 in out_shape
            or 0 in gs):
        return "an empty or mismatched gradient"
    lw.close_group()
    lw.open_segment()
    out = lw.buffer(dt, out_shape, "temp")
    kname = lw.kernel_name()
    lw.add_kernel(PoolKernel(kname, True, dt, g.buf, g.geom, idx.buf, idx.geom, [out],
                             out_shape[2:], gs[2:], ops=[n.op.name]))
    lw.bind(i, 0, out, Geometry.contiguous(out_shape), dt)
    log("fusion", f"{kname}: {n.op.name} as one pooling scatter-add kernel", 3)
    return None


__all__ = ["lower_max_pool", "lower_pool_scatter"]

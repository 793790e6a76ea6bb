"""Scans -> ``ScanKernel`` (cumsum, cumprod, cummax, cummin, logcumsumexp along a dim).

``lower_scan(lw, i, node, scan=...)`` is registered for each scan OpDef (``scan``: the kernel's
kind, bound at registration) and returns None when the node became a scan kernel, else the
reason it stays an extern.  The input
is read through its view geometry (a transposed or sliced input is not copied); a value of the
open pointwise group is stored by that group first.  The C (``codegen/scan.py``) folds each
line sequentially in eager's order and accumulator type, so results equal eager's: bit for bit
for cumsum/cumprod/cummax/cummin, within double's last bit (``ember_logaddexp`` vs NumPy's) for
logcumsumexp.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.compiler.c.ir.kernels import (
    ScanKernel,
)
from ember.compiler.c.ir.loop_ir import (
    STORAGE_CTYPES,
    Geometry,
    contiguous_strides,
)
from ember.compiler.c.lower.context import LoweringContext, PointwiseValue, log
from ember.compiler.c.lower.registry import lowering
from ember.ops import OPS


def lower_scan(lw: LoweringContext, i: int, n: Any, scan: str) -> str | None:
    """Lower scan node ``i`` (``n``) as a ScanKernel of kind ``scan``; None, or why not."""
    x = n.args[0]
    if not (type(x) is tuple and x and x[0] in ("i", "n")) or x not in lw.vals:
        return "input not lowered"
    dim, reverse = n.params.get("dim"), n.params.get("reverse", False)
    if type(dim) is not int or type(reverse) is not bool:
        return "symbolic dim"
    v = lw.vals[x]
    if v.dtype.np.name not in STORAGE_CTYPES or any(
            s[1].np.name not in STORAGE_CTYPES for s in n.specs):
        return f"dtype {v.dtype.name}"
    if scan == "logcumsumexp" and not v.dtype.is_floating_point:
        return "logcumsumexp of a non-float input"
    if "ember_logaddexp" not in lw.helpers and scan == "logcumsumexp":
        return "C helper ember_logaddexp not in the prelude"
    lw.materialize([x])
    v = lw.vals[x]
    if isinstance(v, PointwiseValue):
        if v.group is not lw.group:
            return "value of a reduction kernel's prologue"
        lw.store_buffer(x, v)
        lw.close_group()  # the value is stored by the group's kernel, before this one
        v = lw.vals[x]
    elif lw.group is not None and id(v.buf) in lw.group.writes:
        lw.close_group()
    geom = v.geom
    oshape = tuple(geom.shape)  # SizeExprs (the specs hold the capture's sizes)
    if not geom.shape:  # a 0-d input is one element
        geom, dim = Geometry((1,), (0,), geom.offset), 0
    lw.open_segment()
    outs = []
    layouts = eager_scan_strides(n, v.geom, v.dtype)
    for j, (_, dt) in enumerate(n.specs):
        buf = lw.buffer(dt, oshape, "temp")
        st = layouts[j] if layouts is not None else contiguous_strides(oshape)
        if st != contiguous_strides(oshape):
            buf.strides = st
        lw.bind(i, j, buf, Geometry(oshape, st, 0), dt)
        outs.append(buf)
    kern = ScanKernel(lw.kernel_name(), scan,
                      v.buf, geom, dim, outs[0], outs[1] if len(outs) > 1 else None,
                      reverse, [n.op.name])
    lw.add_kernel(kern)
    log("fusion", f"{kern.name}: {n.op.name} along dim {dim} of {list(geom.shape)}", 3)
    return None


def eager_scan_strides(n: Any, geom: Geometry, dtype: Any) -> list | None:
    """Element strides of each output in eager's memory order: NumPy's accumulate keeps the
    input's order (a transposed input gives a transposed result; reverse cumsum and
    logcumsumexp are C-ordered), read back from the eager kernel run on a small stand-in laid
    out like the input.  None: C order (symbolic or 0-d geometry)."""
    shape, strides = geom.shape, geom.strides
    if not shape or any(type(x) is not int for x in tuple(shape) + tuple(strides)):
        return None
    small = tuple(1 if m == 1 else 2 for m in shape)
    npdt = np.dtype(dtype.np)
    order = sorted(range(len(shape)), key=lambda d: -abs(strides[d]))
    sst = [0] * len(shape)
    acc0 = 1
    for d in reversed(order):  # broadcast dims keep stride 0 (a lowp kernel's astype sees it)
        if strides[d] != 0:
            sst[d] = acc0
            acc0 *= small[d]
    a = np.lib.stride_tricks.as_strided(np.ones(acc0, npdt), small,
                                        tuple(x * npdt.itemsize for x in sst))
    try:
        with np.errstate(all="ignore"):
            outs = n.op.eager(a, **n.params)
    except Exception:  # noqa: BLE001 - a kernel that rejects the stand-in: C order
        return None
    outs = outs if isinstance(outs, tuple) else (outs,)
    res = []
    for o in outs:
        if not isinstance(o, np.ndarray) or o.shape != small:
            return None
        od = sorted(range(o.ndim), key=lambda d: -o.strides[d])
        st = [0] * len(shape)
        acc: Any = 1
        for d in reversed(od):
            st[d] = acc
            acc *= shape[d]
        res.append(tuple(st))
    return res


for _opdef, _scan in ((OPS.cumsum, "cumsum"), (OPS.cumprod, "cumprod"), (OPS.cummax, "cummax"),
                   (OPS.cummin, "cummin"), (OPS.logcumsumexp, "logcumsumexp")):
    lowering(_opdef, scan=_scan)(lower_scan)

__all__ = ["eager_scan_strides", "lower_scan"]

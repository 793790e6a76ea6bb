"""Layout copies -> plain copy ``Kernel``s: ``reshape_copy`` (a reshape no view can express,
e.g. attention's ``(B, H, T, E) -> (B, T, H*E)`` after a transpose) and ``cat``.

Both produce a fresh C-contiguous value, as eager does: ``reshape_copy`` is one kernel over the
source's shape that loads through the source's geometry (any strides) and stores in C order;
``cat`` is one kernel per input storing its block of the output.  Values are copied exactly
(float16/bfloat16 as their bits through float, which is exact).  Static sizes only.
"""

from __future__ import annotations

from typing import Any

from ember.compiler.loop_ir import (
    COMPUTE_CTYPES,
    STORAGE_CTYPES,
    Geometry,
    Index,
    Kernel,
    Let,
    Load,
    Local,
    Store,
    contiguous_strides,
)

COPY_OPS = frozenset({"reshape_copy", "cat"})


def lower(lw: Any, i: int, n: Any) -> str | None:
    """Lower node ``i`` (reshape_copy or cat) into ``lw``'s open segment; None, or why not."""
    from ember.compiler import lower as L
    from ember.compiler.lower_gemm import _materialize

    if any(not L._is_ref(a) for a in n.args):
        return "a non-tensor operand"
    out_shape, dt = n.specs[0]
    out_shape = tuple(out_shape)
    if dt.np.name not in STORAGE_CTYPES:
        return f"dtype {dt.name} (no C storage type)"
    if any(lw._dtype(r) != dt for r in n.args):
        return "mixed dtypes"
    mats = [_materialize(lw, r) for r in n.args]
    if any(m is None for m in mats):
        return "an operand is not in memory"
    for m in mats:
        if any(type(x) is not int for x in tuple(m.geom.shape) + tuple(m.geom.strides)
               + (m.geom.offset,)):
            return "dynamic sizes"
    if any(type(x) is not int for x in out_shape):
        return "dynamic sizes"
    if 0 in out_shape:
        return "an empty result"
    dim = 0
    if n.op.name == "cat":
        dim = n.params.get("dim")
        if type(dim) is not int or not 0 <= dim < len(out_shape):
            return "cat dim"
    lw._close_group()
    lw._open_segment()
    out = lw._buffer(dt, out_shape, "temp")
    ct = COMPUTE_CTYPES[dt.np.name]
    if n.op.name == "reshape_copy":
        pieces = [(mats[0], 0, contiguous_strides(tuple(mats[0].geom.shape)))]
    else:
        ost = contiguous_strides(out_shape)
        pieces, off = [], 0
        for m in mats:
            pieces.append((m, off * ost[dim], ost))
            off += m.geom.shape[dim]
    for m, offset, strides in pieces:
        shape = tuple(m.geom.shape)
        if 0 in shape:
            continue
        loop_vars = [f"i{d}" for d in range(len(shape))]
        src = L._index(m.geom, loop_vars, False)
        dst = Index(offset, tuple((v, s) for v, s, k in zip(loop_vars, strides, shape)
                                  if k != 1))
        body = [Let("t0", ct, Load(m.buf, src)), Store(out, dst, Local("t0"))]
        kname = lw._kernel_name()
        lw.segment.kernels.append(Kernel(kname, shape, body, False, [n.op.name]))
        lw.stats.kernels += 1
    lw._bind(i, 0, out, Geometry.contiguous(out_shape), dt)
    L._log("fusion", f"{n.op.name} as {len(pieces)} copy kernel(s)", 3)
    return None

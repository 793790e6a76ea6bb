"""``sort`` and ``topk`` -> ``SortKernel``s: a stable merge sort of every slice along ``dim``
(NaN largest, equal keys in their order, as eager's stable argsort), values copied exactly.
Static sizes only.  An empty result is a kernel of no iterations (``fill_outputs``); a 0-d
input is sorted as one slice of one element.  (Their gradients' gather and
scatter-add are ``DimIndexKernel``s: ``lower/index.py``.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.compiler.c.ir.kernels import SearchKernel, SortKernel
from ember.compiler.c.ir.loop_ir import STORAGE_CTYPES, Geometry, contiguous_strides
from ember.compiler.c.lower.context import LoweringContext, is_ref, log
from ember.compiler.c.lower.index import _static
from ember.compiler.c.lower.pointwise import fill_outputs
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
    if 0 in tuple(vshape):
        fill_outputs(lw, i, n)
        return None
    if 0 in xs:
        return "an empty input"
    geom, count = _one_d(x.geom), int(tuple(vshape)[dim]) if xs else 1
    if not xs:
        dim = 0
    lw.close_group()
    lw.open_segment()
    vals = lw.buffer(dt, tuple(vshape), "temp")
    idx = lw.buffer(idt, tuple(ishape), "temp")
    kname = lw.kernel_name()
    lw.add_kernel(SortKernel(kname, dt, x.buf, geom, dim, bool(p[order]), count, [vals, idx],
                             [n.op.name]))
    lw.bind(i, 0, vals, Geometry.contiguous(tuple(vshape)), dt)
    lw.bind(i, 1, idx, Geometry.contiguous(tuple(ishape)), idt)
    log("fusion", f"{kname}: {n.op.name} as one stable-sort kernel along dim {dim}", 3)
    return None


def _one_d(g: Geometry) -> Geometry:
    """``g``, a 0-d geometry as one element of 1-D (a slice of one element)."""
    return g if tuple(g.shape) else Geometry((1,), (1,), g.offset)


def _sorted_operand(lw: LoweringContext, n: Any) -> tuple | str:
    """(x as a MemoryValue, output dtype) for a sort-based reduction, or why not."""
    x_r = n.args[0]
    if not is_ref(x_r):
        return "a non-tensor operand"
    dt = n.specs[0][1]
    if dt.np.name not in STORAGE_CTYPES or lw.dtype_of(x_r) != dt:
        return f"dtype {dt.name}"
    x = lw.in_memory(x_r)
    if x is None:
        return "an operand is not in memory"
    if not _static(x.geom) or any(type(v) not in (int, bool, tuple) for v in n.params.values()):
        return "dynamic sizes"
    if 0 in tuple(x.geom.shape):
        return "an empty input"
    return x, dt


@lowering(OPS.kthvalue)
def lower_kthvalue(lw: LoweringContext, i: int, n: Any) -> str | None:
    """``kthvalue`` (and ``median`` along a dim): sorted position ``k - 1`` of each slice."""
    got = _sorted_operand(lw, n)
    if got == "an empty input" and 0 in tuple(n.specs[0][0]):
        fill_outputs(lw, i, n)  # empty slices elsewhere: no slice to pick from
        return None
    if isinstance(got, str):
        return got
    x, dt = got
    p = n.params
    (vshape, _), (ishape, idt) = n.specs
    lw.close_group()
    lw.open_segment()
    vals = lw.buffer(dt, tuple(vshape), "temp")
    idx = lw.buffer(idt, tuple(ishape), "temp")
    dim = int(p["dim"]) if tuple(x.geom.shape) else 0
    lw.add_kernel(SortKernel(lw.kernel_name(), dt, x.buf, _one_d(x.geom), dim, False, 1,
                             [vals, idx], [n.op.name], pick=int(p["k"]) - 1,
                             nan="first" if p["nan_first"] else ""))
    lw.bind(i, 0, vals, Geometry.contiguous(tuple(vshape)), dt)
    lw.bind(i, 1, idx, Geometry.contiguous(tuple(ishape)), idt)
    return None


@lowering(OPS.median)
def lower_median(lw: LoweringContext, i: int, n: Any) -> str | None:
    """``median`` of all elements: the lower median of the sorted (C-contiguous) input, NaN
    when it holds one."""
    got = _sorted_operand(lw, n)
    if got == "an empty input":
        fill_outputs(lw, i, n, _empty_median(n))
        return None
    if isinstance(got, str):
        return got
    x, dt = got
    shape = tuple(x.geom.shape)
    if tuple(x.geom.strides) != contiguous_strides(shape):
        return "input not C-contiguous"
    size = 1
    for m in shape:
        size *= m
    lw.close_group()
    lw.open_segment()
    out = lw.buffer(dt, (), "temp")
    flat = Geometry((size,), (1,), x.geom.offset)
    lw.add_kernel(SortKernel(lw.kernel_name(), dt, x.buf, flat, 0, False, 1, [out, None],
                             [n.op.name], pick=(size - 1) // 2, nan="value"))
    lw.bind(i, 0, out, Geometry.contiguous(()), dt)
    return None


def _empty_median(n: Any) -> str:
    """The C constant eager's ``median`` gives for an empty input: NaN for floats, and for
    integers NaN cast to the dtype, which is platform-defined (read from eager's kernel here)."""
    dt = n.specs[0][1]
    if dt.is_floating_point:
        return "NAN"
    with np.errstate(all="ignore"):
        v = n.op.eager(np.empty((0,), dt.np), **n.params)
    return f"((int64_t){int(v) % (1 << 64)}ULL)"


@lowering(OPS.searchsorted)
def lower_searchsorted(lw: LoweringContext, i: int, n: Any) -> str | None:
    """``searchsorted`` as one ``SearchKernel`` (values and sequence of one dtype)."""
    if any(not is_ref(a) for a in n.args if a is not None):
        return "a non-tensor operand"
    seq_r, val_r = n.args[0], n.args[1]
    srt_r = n.args[2] if len(n.args) > 2 else None
    out_shape, odt = n.specs[0]
    dt = lw.dtype_of(seq_r)
    if dt.np.name not in STORAGE_CTYPES or lw.dtype_of(val_r) != dt or dt.np.name == "bool":
        return f"dtype {dt.name}"
    if srt_r is not None and lw.dtype_of(srt_r).name != "int64":
        return "sorter dtype is not int64"
    ops = [lw.in_memory(r) for r in (seq_r, val_r, srt_r) if r is not None]
    if any(v is None for v in ops):
        return "an operand is not in memory"
    if not _static(*[v.geom for v in ops]):
        return "dynamic sizes"
    seq, vals = ops[0], ops[1]
    ss, vs = tuple(seq.geom.shape), tuple(vals.geom.shape)
    if not ss or (len(ss) > 1 and vs[:-1] != ss[:-1]):
        return "a 0-d sequence, or values whose leading dims differ from it"
    if 0 in tuple(out_shape):
        fill_outputs(lw, i, n)
        return None
    # an empty row inserts every value at 0; 0-d values are one value
    srt = ops[2] if srt_r is not None else None
    lw.close_group()
    lw.open_segment()
    out = lw.buffer(odt, tuple(out_shape), "temp")
    lw.add_kernel(SearchKernel(lw.kernel_name(), dt, seq.buf, seq.geom, vals.buf, vals.geom,
                               None if srt is None else srt.buf,
                               None if srt is None else srt.geom, bool(n.params["right"]),
                               out, [n.op.name]))
    lw.bind(i, 0, out, Geometry.contiguous(tuple(out_shape)), odt)
    return None


__all__ = ["lower_kthvalue", "lower_median", "lower_searchsorted", "lower_sort"]

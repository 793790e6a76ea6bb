"""Index ops: row gathers and scatter-adds -> ``IndexKernel``s; ``basic_index_backward`` -> copy
kernels; gather/scatter/advanced indexing/masked_fill (below).

* ``embedding`` (``out[r, :] = weight[idx[r], :]``, the token lookup of a language model) is a
  gather over the rows of ``idx`` (any layout of ``idx``, runtime sizes included, and any
  static layout of the 2-D weight), rows split over the threads.  An index outside
  ``[0, num_weights)`` makes the entry return 1 and the graph rerun eagerly, which raises
  eager's ``EmberIndexError``.  A ``masked`` gather (the double backward) multiplies each row
  by eager's factor (0 at ``padding_idx``, 1/count with ``scale_grad_by_freq``) in double and
  rounds once, as eager; otherwise values are copied exactly (any storage dtype).
* ``embedding_backward`` (``out = zeros(num_weights, D); out[idx[r], :] += g[r, :]``) is a
  scatter-add: column blocks are split over the threads and each block adds the rows in index
  order, so every element sums exactly as eager's ``np.add.at`` does (same order, same dtype:
  the result is bit-identical; runtime row counts included).  Rows are scaled as eager does
  (``g * factor`` in the dtype: 0 at ``padding_idx``, 1/count with ``scale_grad_by_freq``);
  float16/bfloat16 accumulate in a float scratch and round once (as eager).
* ``basic_index_backward`` (zeros of the input's shape with the gradient written at the basic
  index, the backward of ``weight[:t]``) is two plain copy kernels: zeros over the output, then
  the gradient stored through the region's geometry.

* ``gather``/``scatter``/``scatter_add``/``scatter_reduce`` and the sort
  gradients' ``_sort_gather``/``_sort_scatter_add`` -> ``DimIndexKernel``s; advanced ``index``
  and ``index_put`` -> ``AdvIndexKernel``s (writes serial in eager's order, so duplicates
  resolve as eager's; an index out of range reruns the graph eagerly, which raises).
* ``masked_fill`` -> a select in the open pointwise group.

The others: static sizes only; anything else stays an extern (a logged fallback).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.compiler.c.ir.kernels import AdvIndexKernel, DimIndexKernel, IndexKernel
from ember.compiler.c.ir.loop_ir import (
    COMPUTE_CTYPES,
    STORAGE_CTYPES,
    Const,
    Geometry,
    Index,
    Kernel,
    Let,
    Load,
    Local,
    Op,
    Store,
    contiguous_strides,
)
from ember.compiler.c.lower.context import (
    LoweringContext,
    MemoryValue,
    c_scalar,
    has_sym,
    is_ref,
    log,
    loop_index,
    size_of,
)
from ember.compiler.c.lower.pointwise import fill_outputs
from ember.compiler.c.lower.registry import lowering
from ember.compiler.c.lower.view import basic_index_geometry
from ember.compiler.frontend.graph import Sym
from ember.ops import OPS
from ember.ops.indexing import index_shape, np_basic_key


def _static(*geoms: Geometry) -> bool:
    return all(type(x) is int for g in geoms
               for x in tuple(g.shape) + tuple(g.strides) + (g.offset,))


@lowering(OPS.embedding, scatter=False)
@lowering(OPS.embedding_backward, scatter=True)
def lower_embedding(lw: LoweringContext, i: int, n: Any, scatter: bool) -> str | None:
    """``embedding`` as a gather of rows, its backward (``scatter``) as a scatter-add."""
    if any(not is_ref(a) for a in n.args):
        return "a non-tensor operand"
    p = n.params
    scaled = scatter or bool(p.get("masked"))
    pad_idx = p.get("padding_idx") if scaled else None
    freq = bool(p.get("scale_grad_by_freq")) and scaled
    src_r, idx_r = n.args
    out_shape, dt = n.specs[0]
    out_shape = tuple(out_shape)
    if lw.dtype_of(idx_r).name != "int64":
        return "index dtype is not int64"
    if scatter and not dt.is_floating_point:
        return f"dtype {dt.name}"
    if dt.np.name not in STORAGE_CTYPES or lw.dtype_of(src_r) != dt:
        return f"dtype {dt.name}"
    src, idx = lw.in_memory(src_r), lw.in_memory(idx_r)
    if src is None or idx is None:
        return "an operand is not in memory"
    # the index's sizes (batch, sequence) may be runtime ones (specs hold one call's sizes, so
    # the gather's result is shaped from the index); the weight's and the rows' width are static
    if scatter:
        num, cols = p["num_weights"], src.geom.shape[-1] if src.geom.shape else None
        if type(num) is not int or type(cols) is not int:
            return "dynamic sizes"
        out_shape = (num, cols)
        if tuple(src.geom.shape) != tuple(idx.geom.shape) + (cols,):
            return "gradient shape"
    else:
        if len(src.geom.shape) != 2:
            return "weight is not 2-D"
        if not _static(src.geom):
            return "dynamic sizes"
        num, cols = src.geom.shape
        out_shape = tuple(idx.geom.shape) + (cols,)
    lw.close_group()
    lw.open_segment()
    out = lw.buffer(dt, out_shape, "temp")
    kname = lw.kernel_name()
    lw.add_kernel(IndexKernel(kname, scatter, src.buf, src.geom, idx.buf, idx.geom,
                              out, int(num), int(cols), [n.op.name], pad_idx, freq))
    lw.bind(i, 0, out, Geometry.contiguous(out_shape), dt)
    log("fusion", f"{kname}: {n.op.name} as one {'scatter-add' if scatter else 'gather'} "
           f"kernel", 3)
    return None


def _region(shape: tuple, spec: tuple) -> Geometry | None:
    """The geometry (element offset and strides into C-contiguous ``shape``) that the basic
    index ``spec`` selects, as eager's view of it; None when it cannot be computed."""
    try:
        probe = np.lib.stride_tricks.as_strided(
            np.zeros(1, np.int64), shape=shape,
            strides=tuple(8 * s for s in contiguous_strides(shape)))
        v = probe[np_basic_key(spec)]
    except Exception:  # noqa: BLE001 - a key we cannot replay stays an extern
        return None
    offset = (v.__array_interface__["data"][0] - probe.__array_interface__["data"][0]) // 8
    return Geometry(tuple(v.shape), tuple(s // 8 for s in v.strides), offset)


@lowering(OPS.basic_index_backward)
def lower_basic_index_backward(lw: LoweringContext, i: int, n: Any) -> str | None:
    """Zeros of the input's shape, then the gradient stored at the basic index's region."""
    _, dt = n.specs[0]
    out_shape = tuple(size_of(x) for x in n.params["shape"])  # (specs: one call's sizes)
    if not is_ref(n.args[0]) or dt.np.name not in STORAGE_CTYPES:
        return f"dtype {dt.name} (no C storage type)"
    if 0 in out_shape:
        return "an empty result"
    g = lw.in_memory(n.args[0])
    if g is None:
        return "an operand is not in memory"
    spec = n.params["spec"]
    if has_sym(spec) or not _static(g.geom) or any(type(x) is not int for x in out_shape):
        # runtime sizes (``weight[:t]`` at a runtime ``t``, ``h[1:]`` at a runtime batch):
        # the region as the view rule computes it; the meta rule made its shape the gradient's
        region = basic_index_geometry(spec, Geometry.contiguous(out_shape))
        if region is None or len(region.shape) != len(g.geom.shape):
            return "index region not computable"
        region = Geometry(tuple(g.geom.shape), region.strides, region.offset)
    else:
        region = _region(out_shape, spec)
        if region is None or tuple(region.shape) != tuple(g.geom.shape):
            return "index region not computable"
    lw.close_group()
    lw.open_segment()
    out = lw.buffer(dt, out_shape, "temp")
    ct = COMPUTE_CTYPES[dt.np.name]
    loop_vars = [f"i{d}" for d in range(len(out_shape))]
    zero = Store(out, Index(0, tuple(zip(loop_vars, contiguous_strides(out_shape)))),
                 Const(f"({ct})0"))
    lw.add_kernel(Kernel(lw.kernel_name(), out_shape, [zero], False, [n.op.name]))
    shape = tuple(g.geom.shape)
    if 0 not in shape:
        loop_vars = [f"i{d}" for d in range(len(shape))]
        dst = Index(region.offset, tuple((v, s) for v, s, k in zip(loop_vars, region.strides,
                                                                     shape) if k != 1))
        body = [Let("t0", ct, Load(g.buf, loop_index(g.geom, loop_vars, False))),
                Store(out, dst, Local("t0"))]
        lw.add_kernel(Kernel(lw.kernel_name(), shape, body, False, [n.op.name]))
    lw.bind(i, 0, out, Geometry.contiguous(out_shape), dt)
    log("fusion", f"{n.op.name} as zeros and a copy kernel", 3)
    return None


@lowering(OPS.gather, mode="gather")
@lowering(OPS.scatter, mode="scatter")
@lowering(OPS.scatter_add, mode="scatter_add")
def lower_dim_index(lw: LoweringContext, i: int, n: Any, mode: str) -> str | None:
    """``gather``/``scatter``/``scatter_add`` along a dim as one ``DimIndexKernel``."""
    x_r, idx_r = n.args[0], n.args[1]
    src_r = n.args[2] if mode != "gather" else None
    out_shape, dt = n.specs[0]
    out_shape = tuple(out_shape)
    if not is_ref(x_r) or not is_ref(idx_r):
        return "a non-tensor operand"
    if dt.np.name not in STORAGE_CTYPES or lw.dtype_of(x_r) != dt:
        return f"dtype {dt.name}"
    if lw.dtype_of(idx_r).name != "int64":
        return "index dtype is not int64"
    x, idx = lw.in_memory(x_r), lw.in_memory(idx_r)
    src = value = None
    if is_ref(src_r):
        src = lw.in_memory(src_r)
        if src is None:
            return "an operand is not in memory"
        if lw.dtype_of(src_r) != dt:
            return "src dtype differs"
    elif src_r is not None:
        if type(src_r) not in (int, float, bool):
            return f"src {src_r!r}"
        value = _scalar_as(src_r, dt)
    if x is None or idx is None:
        return "an operand is not in memory"
    geoms = [x.geom, idx.geom] + ([src.geom] if src is not None else [])
    if not _static(*geoms) or any(type(m) is not int for m in out_shape):
        return "dynamic sizes"
    if src is not None and len(src.geom.shape) != len(idx.geom.shape):
        return "src rank differs from the index's"
    lw.close_group()
    lw.open_segment()
    out = lw.buffer(dt, out_shape, "temp")
    kname = lw.kernel_name()
    lw.add_kernel(DimIndexKernel(
        kname, mode, int(n.params["dim"]), dt, x.buf, x.geom, idx.buf, idx.geom,
        None if src is None else src.buf, None if src is None else src.geom, value, out,
        [n.op.name]))
    lw.bind(i, 0, out, Geometry.contiguous(out_shape), dt)
    log("fusion", f"{kname}: {n.op.name} as one {mode} kernel along dim {n.params['dim']}", 3)
    return None


@lowering(OPS._sort_gather, mode="gather")
@lowering(OPS._sort_scatter_add, mode="scatter_add")
def lower_sort_index(lw: LoweringContext, i: int, n: Any, mode: str) -> str | None:
    """The sort/topk gradients' private pair: ``_sort_gather`` (``take_along_axis``) as a
    gather, ``_sort_scatter_add`` (zeros of ``shape``, ``src`` added at ``index``) as a
    scatter_add into zeros; index and operand shapes must agree (no broadcasting)."""
    if any(not is_ref(a) for a in n.args):
        return "a non-tensor operand"
    a_r, idx_r = n.args
    out_shape, dt = n.specs[0]
    out_shape = tuple(out_shape)
    dim = int(n.params["dim"])
    if dt.np.name not in STORAGE_CTYPES or lw.dtype_of(a_r) != dt:
        return f"dtype {dt.name}"
    if lw.dtype_of(idx_r).name != "int64":
        return "index dtype is not int64"
    a, idx = lw.in_memory(a_r), lw.in_memory(idx_r)
    if a is None or idx is None:
        return "an operand is not in memory"
    if not _static(a.geom, idx.geom) or any(type(m) is not int for m in out_shape):
        return "dynamic sizes"
    ishape = tuple(idx.geom.shape)
    full = out_shape if mode == "scatter_add" else tuple(a.geom.shape)
    if (not ishape or len(full) != len(ishape) or any(
            m != f for d, (m, f) in enumerate(zip(ishape, full)) if d != dim)
            or (mode == "scatter_add" and tuple(a.geom.shape) != ishape)):
        return "index shape differs from the operand's"
    lw.close_group()
    lw.open_segment()
    out = lw.buffer(dt, out_shape, "temp")
    kname = lw.kernel_name()
    if mode == "gather":
        k = DimIndexKernel(kname, mode, dim, dt, a.buf, a.geom, idx.buf, idx.geom, None, None,
                           None, out, [n.op.name])
    else:
        k = DimIndexKernel(kname, mode, dim, dt, None, Geometry.contiguous(out_shape), idx.buf,
                           idx.geom, a.buf, a.geom, None, out, [n.op.name])
    lw.add_kernel(k)
    lw.bind(i, 0, out, Geometry.contiguous(out_shape), dt)
    log("fusion", f"{kname}: {n.op.name} as one {mode} kernel along dim {dim}", 3)
    return None


# scatter_reduce's combinations (NumPy's ufuncs: maximum/minimum keep the first operand on
# ties and propagate NaN) keyed by the ``reduce`` parameter's value
_COMBINE = {"sum": "({a} + {b})", "mean": "({a} + {b})", "prod": "({a} * {b})",
            "amax": "(({a} >= {b} || {a} != {a}) ? {a} : {b})",
            "amin": "(({a} <= {b} || {a} != {a}) ? {a} : {b})"}


@lowering(OPS.scatter_reduce)
def lower_scatter_reduce(lw: LoweringContext, i: int, n: Any) -> str | None:
    """``scatter_reduce`` as a serial ``DimIndexKernel`` combining in order (``mean``: the sums,
    then each element divided by its count)."""
    p = n.params
    combine = _COMBINE.get(p["reduce"])
    if combine is None:
        return f"reduce={p['reduce']!r}"
    if any(not is_ref(a) for a in n.args):
        return "a non-tensor operand"
    x_r, idx_r, src_r = n.args
    out_shape, dt = n.specs[0]
    if dt.np.name not in STORAGE_CTYPES or any(lw.dtype_of(r) != dt for r in (x_r, src_r)):
        return f"dtype {dt.name}"
    if lw.dtype_of(idx_r).name != "int64":
        return "index dtype is not int64"
    x, idx, src = (lw.in_memory(r) for r in n.args)
    if x is None or idx is None or src is None:
        return "an operand is not in memory"
    if not _static(x.geom, idx.geom, src.geom) or not x.geom.shape:
        return "dynamic sizes or a 0-d input"
    if len(src.geom.shape) != len(idx.geom.shape):
        return "src rank differs from the index's"
    mean = p["reduce"] == "mean"
    if mean and dt.np.name == "bool":
        return "mean of bool"
    ident = None
    if not p["include_self"]:
        ident = _scalar_as(_reduce_identity(p["reduce"], dt), dt)
    lw.close_group()
    lw.open_segment()
    out = lw.buffer(dt, tuple(out_shape), "temp")
    lw.add_kernel(DimIndexKernel(
        lw.kernel_name(), "scatter", int(p["dim"]), dt, x.buf, x.geom, idx.buf, idx.geom,
        src.buf, src.geom, None, out, [n.op.name], combine=combine, identity=ident,
        mean_self=int(bool(p["include_self"])) if mean else None))
    lw.bind(i, 0, out, Geometry.contiguous(tuple(out_shape)), dt)
    return None


def _reduce_identity(reduce: str, dt: Any) -> Any:
    """Eager's first value of an element written by ``scatter_reduce(include_self=False)``."""
    from ember.ops.indexing import _identity
    return _identity(reduce, np.dtype(dt.np))


def _scalar_as(v: Any, dt: Any) -> str:
    """C text of ``v`` converted to ``dt`` exactly as eager's NumPy assignment converts it
    (rounded once to float16/bfloat16; truncated to an integer), in ``dt``'s compute type."""
    a = np.empty(1, dt.np)
    a[0] = v
    item = a.astype(np.float64)[0] if dt.is_floating_point else a[0].item()
    return c_scalar(float(item) if dt.is_floating_point else item, COMPUTE_CTYPES[dt.np.name])


_MASKED_FILL = "({1} ? {2} : {0})"


@lowering(OPS.masked_fill)
def lower_masked_fill(lw: LoweringContext, i: int, n: Any) -> str | None:
    """``masked_fill`` as a select in the open pointwise group (a 0-d tensor value is read
    through a broadcast geometry)."""
    x_r, m_r, v_r = n.args
    out_shape, dt = n.specs[0]
    if not is_ref(x_r) or not is_ref(m_r):
        return "a non-tensor operand"
    if dt.np.name not in STORAGE_CTYPES or lw.dtype_of(x_r) != dt:
        return f"dtype {dt.name}"
    shape = lw.shape_of(x_r)
    ct = COMPUTE_CTYPES[dt.np.name]
    refs = [x_r, m_r]
    if is_ref(v_r):
        if lw.dtype_of(v_r) != dt:
            return "value dtype differs"
        v = lw.in_memory(v_r)
        if v is None:
            return "value is not in memory"
        key = ("bcast", i, 2)  # the 0-d value seen with zero strides over the input's shape
        lw.vals[key] = MemoryValue(v.buf, Geometry(shape, (0,) * len(shape), v.geom.offset), dt)
        refs.append(key)
    elif type(v_r) is Sym:   # a lifted scalar (dynamic=True): one rounding from double
        if dt.np.name not in ("float32", "float64"):
            return f"lifted scalar value for {dt.name}"
    elif type(v_r) not in (int, float, bool):
        return f"value {v_r!r}"
    g = lw.join_group(shape, refs)
    value = (lw.operand(g, refs[2]) if len(refs) == 3 else
             Const(c_scalar(v_r, ct) if type(v_r) is Sym else _scalar_as(v_r, dt)))
    args = [lw.operand(g, x_r), lw.operand(g, m_r), value]
    name = g.local()
    g.body.append(Let(name, ct, Op(n.op.name, _MASKED_FILL, tuple(args), (("T", ct),))))
    lw.add_value(g, i, name, shape, dt, contiguous_strides(shape), n.op.name)
    return None


def _adv_layout(ndim: int, nb: int, dims: tuple) -> tuple:
    """For each dim of the indexing result: ("b", k) (dim k of the index's broadcast shape) or
    ("x", d) (dim d of x), as ``ember.ops.indexing.index_shape`` places them."""
    rest = [("x", d) for d in range(ndim) if d not in dims]
    bs = [("b", k) for k in range(nb)]
    if tuple(dims) == tuple(range(dims[0], dims[0] + len(dims))):
        first = sum(1 for d in range(dims[0]) if d not in dims)
        return tuple(rest[:first] + bs + rest[first:])
    return tuple(bs + rest)


def _copy_of(lw: LoweringContext, i: int, n: Any, x_r: tuple) -> None:
    """Output 0 of node ``i`` is a copy of ``x_r`` (a value of the open pointwise group)."""
    shape = tuple(lw.shape_of(x_r))
    g = lw.join_group(shape, [x_r])
    name = g.local()
    dt = lw.dtype_of(x_r)
    g.body.append(Let(name, COMPUTE_CTYPES[dt.np.name], Op("copy", "{0}", (lw.operand(g, x_r),))))
    lw.add_value(g, i, name, shape, dt, contiguous_strides(shape), n.op.name)


@lowering(OPS.index, put=None)
@lowering(OPS.index_put, put="put")
def lower_adv_index(lw: LoweringContext, i: int, n: Any, put: str | None) -> str | None:
    """Advanced indexing (``index``) and ``index_put`` as one ``AdvIndexKernel``."""
    if any(not is_ref(a) for a in n.args):
        return "a non-tensor operand"
    x_r, idx_r = n.args[0], n.args[1]
    dims = tuple(n.params["dims"])
    dt = n.specs[0][1]
    if put is not None and n.params.get("accumulate"):
        put = "add"
    if dt.np.name not in STORAGE_CTYPES or lw.dtype_of(x_r) != dt:
        return f"dtype {dt.name}"
    if lw.dtype_of(idx_r).name != "int64" or not dims:
        return "index dtype is not int64, or no indexed dim"
    ops = [lw.in_memory(r) for r in n.args]
    if any(v is None for v in ops):
        return "an operand is not in memory"
    x, idx = ops[0], ops[1]
    vals = ops[2] if put is not None else None
    if not _static(*[v.geom for v in ops]):
        return "dynamic sizes"
    xshape, ishape = tuple(x.geom.shape), tuple(idx.geom.shape)
    result = index_shape(xshape, ishape, dims)
    if 0 in ishape[1:]:  # no index at all: nothing to check, read or write
        if put is None or 0 in xshape:
            fill_outputs(lw, i, n)
        else:
            _copy_of(lw, i, n, x_r)
        return None
    if 0 in result or 0 in xshape:
        return "an empty result with indices to check"
    lw.close_group()
    lw.open_segment()
    out_shape = xshape if put is not None else result
    out = lw.buffer(dt, out_shape, "temp")
    kname = lw.kernel_name()
    lw.add_kernel(AdvIndexKernel(
        kname, put, dims, _adv_layout(len(xshape), len(ishape) - 1, dims), result, dt, x.buf,
        x.geom, idx.buf, idx.geom, None if vals is None else vals.buf,
        None if vals is None else vals.geom, out, [n.op.name]))
    lw.bind(i, 0, out, Geometry.contiguous(out_shape), dt)
    log("fusion", f"{kname}: {n.op.name} as one advanced-index kernel at dims {dims}", 3)
    return None


__all__ = ["lower_adv_index", "lower_basic_index_backward", "lower_dim_index",
           "lower_embedding", "lower_masked_fill", "lower_scatter_reduce",
           "lower_sort_index"]

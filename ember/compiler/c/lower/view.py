"""View ops (kind ``view``) -> a ``Geometry`` over the source's buffer: consumers load through
index arithmetic and nothing is copied.  ``permute``, ``expand``, ``view``, ``unsqueeze``,
basic indexing and ``split_with_sizes`` have their own geometry rules (runtime sizes
included); any other view runs its eager kernel on a stand-in array of the source's layout and
reads the resulting strides and offset back."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.compiler.c.ir.loop_ir import CTYPES, Geometry, contiguous_strides, s_add, s_mul
from ember.compiler.c.lower.context import (
    LoweringContext,
    MemoryValue,
    PointwiseValue,
    has_sym,
    size_of,
)
from ember.compiler.c.lower.registry import OpTable, lowering_for_kind
from ember.compiler.frontend.graph import Sym
from ember.ops import OPS


@lowering_for_kind("view")
def lower_view(lw: LoweringContext, i: int, n: Any) -> str | None:
    if as_view(lw, i, n):
        return None
    return "view geometry not computable (dynamic size or copy)"


def as_view(lw: LoweringContext, i: int, n: Any) -> bool:
    """Make node ``i``'s outputs views of its first argument's memory; False when it cannot."""
    src_ref = n.args[0]
    lw.materialize([src_ref])
    v = lw.vals.get(src_ref)
    if v is None:
        return False
    if isinstance(v, PointwiseValue):
        if v.group is not lw.group:  # an unstored value of a closed group cannot happen
            return False
        geom = Geometry(v.shape, v.strides, 0)
        buf = None
    else:
        geom, buf = v.geom, v.buf
    try:
        rule = _GEOMETRY.get(n.op, _shadow_geometry)
        outs = rule(n, geom, v.dtype)
    except Exception:  # noqa: BLE001 - an unexpected view form is an extern, not an error
        outs = None
    if outs is None:
        return False
    if isinstance(v, PointwiseValue):
        buf = lw.store_buffer(src_ref, v)
    for j, g2 in enumerate(outs):
        ref = ("n", i, j)
        lw.vals[ref] = MemoryValue(buf, g2, v.dtype)
        lw.sources[ref] = ("view", i, j)
    lw.stats.view_ops += 1
    return True


def _permute(n: Any, geom: Geometry, dt: Any) -> list | None:
    d = n.params["dims"]
    if has_sym(d):  # a dynamic graph lifts every int, even dims
        return None
    shape, st = geom.shape, geom.strides
    return [Geometry(tuple(shape[k] for k in d), tuple(st[k] for k in d), geom.offset)]


def _expand(n: Any, geom: Geometry, dt: Any) -> list | None:
    shape, st = geom.shape, geom.strides
    out = tuple(size_of(x) for x in n.params["shape"])
    lead = len(out) - len(shape)
    strides = []
    for k, m in enumerate(out):
        j = k - lead
        if j < 0 or shape[j] == 1:
            strides.append(0 if m != 1 else 0)
        elif shape[j] == m or m == -1 or type(shape[j]) is int:
            strides.append(st[j])  # (a static source size the meta rule found equal)
        else:
            # a runtime source size: kept, or broadcast when it is 1 at run time (a lifted
            # parameter may be); C and Python read this expression the same
            strides.append(f"(({shape[j]} != 1) * {st[j]})")
    out = tuple(shape[k - lead] if m == -1 or (k >= lead and type(shape[k - lead]) is int
                                               and shape[k - lead] != 1)
                else m for k, m in enumerate(out))
    return [Geometry(out, tuple(strides), geom.offset)]


def _unsqueeze(n: Any, geom: Geometry, dt: Any) -> list | None:
    """New size-1 dims at the output positions ``dims`` with PyTorch's stride (size times
    stride of the dim it goes before; 1 at the end); static geometries replay eager's."""
    dims = n.params["dims"]
    if has_sym(dims):
        return None
    if all(type(x) is int for x in tuple(geom.shape) + tuple(geom.strides) + (geom.offset,)):
        return _shadow_geometry(n, geom, dt)
    shape, st = list(geom.shape), list(geom.strides)
    for d in sorted(dims):
        if not 0 <= d <= len(shape):
            return None
        st.insert(d, s_mul(shape[d], st[d]) if d < len(shape) else 1)
        shape.insert(d, 1)
    return [Geometry(tuple(shape), tuple(st), geom.offset)]


def _reshape_view(n: Any, geom: Geometry, dt: Any) -> list | None:
    if geom.strides != contiguous_strides(geom.shape):
        if any(type(x) is not int for x in tuple(geom.shape) + tuple(geom.strides)) \
                or has_sym(n.params):
            return _strided_reshape(geom, tuple(size_of(x) for x in n.params["shape"]))
        return _shadow_geometry(n, geom, dt)
    out = tuple(size_of(x) for x in n.params["shape"])
    if -1 in out:
        return None
    return [Geometry(out, contiguous_strides(out), geom.offset)]


def _strided_reshape(geom: Geometry, out: tuple) -> list | None:
    """A view of a strided source with runtime sizes: dims equal at the front and at the back
    keep their strides; the static dims between are split/merged as NumPy's no-copy reshape
    does (merged dims must be contiguous with each other).  None when that cannot be shown."""
    shape, st = tuple(geom.shape), tuple(geom.strides)
    if -1 in out:
        return None
    a = 0
    while a < min(len(shape), len(out)) and shape[a] == out[a]:
        a += 1
    b = 0
    while b < min(len(shape), len(out)) - a and shape[-1 - b] == out[-1 - b]:
        b += 1
    mid_in, mid_st = shape[a:len(shape) - b], st[a:len(st) - b]
    mid_out = out[a:len(out) - b]
    if any(type(x) is not int for x in mid_in + mid_out):
        return None
    if int(np.prod(mid_in, dtype=np.int64)) != int(np.prod(mid_out, dtype=np.int64)):
        return None
    new_st = _merge_split(mid_in, mid_st, mid_out)
    if new_st is None:
        return None
    strides = st[:a] + tuple(new_st) + (st[len(st) - b:] if b else ())
    return [Geometry(out, strides, geom.offset)]


def _merge_split(shape: tuple, st: tuple, out: tuple) -> list | None:
    """Strides of ``out`` over static dims ``shape`` with strides ``st`` (SizeExprs)."""
    keep = [k for k, m in enumerate(shape) if m != 1]  # size-1 dims have any stride
    shape, st = tuple(shape[k] for k in keep), tuple(st[k] for k in keep)
    res: list = [1] * len(out)
    i = j = 0
    while j < len(out) and out[j] == 1:
        j += 1
    while i < len(shape) and j < len(out):
        pi, pj, ii, jj = shape[i], out[j], i + 1, j + 1
        while pi != pj:
            if pi < pj:
                pi, ii = pi * shape[ii], ii + 1
            else:
                pj, jj = pj * out[jj], jj + 1
        for k in range(i, ii - 1):
            if st[k] != s_mul(st[k + 1], shape[k + 1]):
                return None
        res[jj - 1] = st[ii - 1]
        for k in range(jj - 2, j - 1, -1):
            res[k] = s_mul(res[k + 1], out[k + 1])
        i, j = ii, jj
        while j < len(out) and out[j] == 1:
            j += 1
    return res


def _s_sub(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        return a - b
    return a if b == 0 else f"({a} - {b})"


def _basic_index(n: Any, geom: Geometry, dt: Any) -> list | None:
    """``x[ints, slices, None]`` as index arithmetic; runtime sizes included (a symbolic slice
    needs step 1: its length ``(stop > start) * (stop - start)`` reads the same in C and in
    the Python that sizes buffers)."""
    if not has_sym(n.params) and not any(type(x) is not int for x in geom.shape):
        return _shadow_geometry(n, geom, dt)
    g = basic_index_geometry(n.params["spec"], geom)
    return None if g is None else [g]


def basic_index_geometry(spec: tuple, geom: Geometry) -> Geometry | None:
    """The geometry the basic index ``spec`` selects from ``geom`` (SizeExprs; None when a
    symbolic slice has a step other than 1).  Also ``basic_index_backward``'s region."""
    shape, st = geom.shape, geom.strides
    off: Any = geom.offset
    out_shape: list = []
    out_st: list = []
    d = 0
    for it in spec:
        if it is None:
            out_shape.append(1)
            out_st.append(s_mul(shape[d], st[d]) if d < len(shape) else 1)
            continue
        if type(it) is tuple:
            start, stop, step = (size_of(v) for v in it)
            if type(step) is not int or step <= 0:
                return None
            off = s_add(off, s_mul(start, st[d]))
            if type(start) is int and type(stop) is int:
                size: Any = max(0, (stop - start + step - 1) // step)
            elif step != 1:
                return None
            elif start == 0:
                size = stop
            else:
                size = f"(({stop} > {start}) * ({stop} - {start}))"
            out_shape.append(size)
            out_st.append(s_mul(st[d], step))
        else:  # a select (non-negative, in range)
            off = s_add(off, s_mul(size_of(it), st[d]))
        d += 1
    return Geometry(tuple(out_shape) + tuple(shape[d:]), tuple(out_st) + tuple(st[d:]), off)


def _split_with_sizes(n: Any, geom: Geometry, dt: Any) -> list | None:
    """Pieces along ``dim``: each a box of the source at a running offset (runtime sizes
    included)."""
    dim = n.params["dim"]
    if type(dim) is not int:
        return None
    shape, st = geom.shape, geom.strides
    dim = dim + len(shape) if dim < 0 else dim
    out, start = [], 0
    for size in n.params["sizes"]:
        k = size_of(size)
        g_shape = tuple(shape[:dim]) + (k,) + tuple(shape[dim + 1:])
        out.append(Geometry(g_shape, tuple(st), s_add(geom.offset, s_mul(start, st[dim]))))
        start = s_add(start, k)
    return out


def _shadow_geometry(n: Any, geom: Geometry, dt: Any) -> list | None:
    """Run the eager view on a stand-in array of the source's (concrete) geometry and read the
    result's strides and offset back; None if anything is symbolic or the kernel copies."""
    items = list(geom.shape) + list(geom.strides) + [geom.offset]
    if any(type(x) is not int for x in items) or any(s < 0 for s in geom.strides):
        return None
    if has_sym(n.params) or any(type(a) is Sym for a in n.args):
        return None
    extent = geom.offset + 1 + sum((m - 1) * s for m, s in zip(geom.shape, geom.strides)
                                   if m > 0)
    npdt = np.dtype(dt.np) if dt.np.name in CTYPES else np.dtype(np.float32)
    root = np.empty(max(extent, 1), npdt)
    item = npdt.itemsize
    shadow = np.ndarray(geom.shape, npdt, buffer=root, offset=geom.offset * item,
                        strides=tuple(s * item for s in geom.strides))
    try:
        out = n.op.eager(shadow, *n.args[1:], **n.params)
    except Exception:  # noqa: BLE001 - a view we cannot replay is an extern, not an error
        return None
    outs = out if isinstance(out, (tuple, list)) else (out,)
    base = root.__array_interface__["data"][0]
    res = []
    for o in outs:
        if not isinstance(o, np.ndarray) or not _derives_from(o, root):
            return None
        off = (o.__array_interface__["data"][0] - base)
        if off % item or any(s % item for s in o.strides):
            return None
        res.append(Geometry(tuple(o.shape), tuple(s // item for s in o.strides), off // item))
    return res


def _derives_from(a: np.ndarray, root: np.ndarray) -> bool:
    b: Any = a
    while b is not None:
        if b is root:
            return True
        b = getattr(b, "base", None)
    return False


_GEOMETRY = OpTable([(OPS.permute, _permute), (OPS.expand, _expand), (OPS.view, _reshape_view),
                     (OPS.unsqueeze, _unsqueeze),
                     (OPS.basic_index, _basic_index),
                     (OPS.split_with_sizes, _split_with_sizes)])

__all__ = ["as_view", "basic_index_geometry", "lower_view"]

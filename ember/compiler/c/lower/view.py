"""View ops (kind ``view``) -> a ``Geometry`` over the source's buffer: consumers load through
index arithmetic and nothing is copied.  ``permute``, ``expand`` and ``view`` have their own
geometry rules; any other view runs its eager kernel on a stand-in array of the source's layout
and reads the resulting strides and offset back."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.compiler.c.ir.loop_ir import CTYPES, Geometry, contiguous_strides
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
        elif shape[j] == m or m == -1:
            strides.append(st[j])
        else:
            return None
    out = tuple(shape[k - lead] if m == -1 else m for k, m in enumerate(out))
    return [Geometry(out, tuple(strides), geom.offset)]


def _reshape_view(n: Any, geom: Geometry, dt: Any) -> list | None:
    if geom.strides != contiguous_strides(geom.shape):
        return _shadow_geometry(n, geom, dt)
    out = tuple(size_of(x) for x in n.params["shape"])
    if -1 in out:
        return None
    return [Geometry(out, contiguous_strides(out), geom.offset)]


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


_GEOMETRY = OpTable([(OPS.permute, _permute), (OPS.expand, _expand), (OPS.view, _reshape_view)])

__all__ = ["as_view", "lower_view"]

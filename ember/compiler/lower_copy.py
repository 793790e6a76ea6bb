"""Layout copies -> plain copy ``Kernel``s: ``reshape_copy`` (a reshape no view can express,
e.g. attention's ``(B, H, T, E) -> (B, T, H*E)`` after a transpose) and ``cat``.

Both produce a fresh C-contiguous value, as eager does: ``reshape_copy`` is one kernel over the
source's shape that loads through the source's geometry (any strides) and stores in C order;
``cat`` is one kernel per input storing its block of the output.  Values are copied exactly
(float16/bfloat16 as their bits through float, which is exact).  Static sizes only.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ember.compiler.loop_ir import (
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

COPY_OPS = frozenset({"reshape_copy", "cat"})


def lower(lw: Any, i: int, n: Any) -> str | None:
    """Lower node ``i`` (reshape_copy, cat or a movement op) into ``lw``'s open segment;
    None, or why not."""
    if n.op.name in MOVE_OPS:
        return _movement(lw, i, n)
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


# ------------------------------------------------------------------------------ movement ops
# Each is a few plain kernels into a fresh buffer: ``fill`` pieces store a constant over a box
# of the output, ``copy`` pieces load the source through a geometry and store it through
# another (both index arithmetic: flips are negative strides, repeats stride-0 loop variables,
# rolls and pads boxes of the output).
MOVE_OPS = frozenset({"clone", "flip", "roll", "repeat", "tril", "triu", "constant_pad",
                      "select_backward", "narrow_backward", "diagonal_backward"})
COPY_OPS = COPY_OPS | MOVE_OPS


class _Piece:
    """One kernel: store ``src`` (a geometry of the source, same shape) or the constant
    ``fill`` at ``dst`` (a geometry over the output buffer's elements); ``tri``: (upper,
    diagonal) keeps the elements of the last two dims on the kept side of that diagonal."""

    __slots__ = ("dst", "src", "fill", "tri")

    def __init__(self, dst: Geometry, src: Geometry | None = None, fill: str | None = None,
                 tri: tuple | None = None) -> None:
        self.dst, self.src, self.fill, self.tri = dst, src, fill, tri


def _static_geom(g: Geometry) -> bool:
    return all(type(x) is int for x in tuple(g.shape) + tuple(g.strides) + (g.offset,))


def _keep_order(g: Geometry) -> tuple:
    """Element strides NumPy gives a copy of ``g`` in order "K" (``np.array(x, copy=True,
    order="K")``: eager's clone and flip), read from ``np.empty_like`` of a stand-in with the
    same geometry (nothing is read; the pages of the stand-in's result are never touched)."""
    shape = tuple(g.shape)
    if 0 in shape or len(shape) <= 1:
        return contiguous_strides(shape)
    probe = np.lib.stride_tricks.as_strided(np.empty(1, np.uint8), shape, tuple(g.strides))
    return tuple(int(s) for s in np.empty_like(probe, order="K").strides)


def _alloc_strides(shape: tuple, order: tuple) -> tuple:
    """The element strides of ``shape`` allocated C-contiguous in dim order ``order``."""
    out = [0] * len(shape)
    acc = 1
    for d in reversed(order):
        out[d] = acc
        acc *= shape[d]
    return tuple(out)


def _layout(shape: tuple, want: tuple) -> tuple | None:
    """(``Buffer.strides``, element strides) making the driver allocate ``shape`` with the
    strides ``want`` (eager's; size-1 dims included), or None when no dim order gives them."""
    nd = len(shape)
    if want == contiguous_strides(shape):
        return None, want
    by = sorted(range(nd), key=lambda d: -want[d])
    if _alloc_strides(shape, tuple(by)) == want:
        return want, want
    for order in itertools.permutations(range(nd)):  # ties between size-1 dims
        if _alloc_strides(shape, order) == want:
            fake = [0] * nd
            for k, d in enumerate(order):
                fake[d] = nd - k   # distinct, so the driver's sort finds ``order``
            return tuple(fake), want
    return None


def _region(shape: tuple, view: Any) -> Geometry | None:
    """The geometry (over C-contiguous ``shape``) that ``view`` (a NumPy view function) selects."""
    try:
        probe = np.lib.stride_tricks.as_strided(
            np.zeros(1, np.int64), shape=shape,
            strides=tuple(8 * s for s in contiguous_strides(shape)))
        v = view(probe)
    except Exception:  # noqa: BLE001 - a view we cannot replay stays an extern
        return None
    if not isinstance(v, np.ndarray):
        return None
    offset = (v.__array_interface__["data"][0] - probe.__array_interface__["data"][0]) // 8
    return Geometry(tuple(v.shape), tuple(s // 8 for s in v.strides), offset)


def _box(ost: tuple, start: tuple, shape: tuple) -> Geometry:
    return Geometry(tuple(shape), ost, sum(a * s for a, s in zip(start, ost)))


def _fill_text(value: Any, dt: Any) -> str | None:
    """C text of ``value`` converted to ``dt`` as eager does (NumPy's cast), in the compute
    type; None when it is not a number."""
    from ember.compiler import lower as L
    if type(value) not in (int, float, bool) and not isinstance(value, (np.number, np.bool_)):
        return None
    with np.errstate(all="ignore"):
        v = np.array(value).astype(dt.np)[()]
    ct = COMPUTE_CTYPES[dt.np.name]
    if dt.np.name == "bool":
        return f"(({ct}){int(bool(v))})"
    if dt.is_floating_point:
        return L._scalar(float(v), ct)
    return L._scalar(int(v), ct)


def _plan(name: str, src: Geometry, out_shape: tuple, p: dict, dt: Any) -> Any:
    """(output element strides, pieces) of a movement op, or the reason it stays an extern."""
    shape, st = tuple(src.shape), tuple(src.strides)
    nd = len(shape)
    cst = contiguous_strides(out_shape)
    if name == "clone":
        ost = cst if p.get("contiguous") or not _static_geom(src) else _keep_order(src)
        return ost, [_Piece(Geometry(shape, ost, 0), src)]
    if name == "flip":
        off, fst = src.offset, list(st)
        for d in set(x % nd for x in p["dims"]) if nd else ():
            off += (shape[d] - 1) * st[d] if shape[d] else 0
            fst[d] = -st[d]
        view = Geometry(shape, tuple(fst), off)
        ost = _keep_order(view)
        return ost, [_Piece(Geometry(shape, ost, 0), view)]
    if name == "roll":
        shift = [0] * nd
        for s, d in zip(p["shifts"], p["dims"]):
            shift[d % nd] += s
        # per dim: (output start, source start, length) of the one or two runs
        runs = []
        for d in range(nd):
            n = shape[d]
            s = shift[d] % n if n else 0
            runs.append([(0, 0, n)] if s == 0 else [(0, n - s, s), (s, 0, n - s)])
        pieces = []
        for combo in itertools.product(*runs):
            box = tuple(r[2] for r in combo)
            sub = Geometry(box, st, src.offset + sum(r[1] * s for r, s in zip(combo, st)))
            pieces.append(_Piece(_box(cst, tuple(r[0] for r in combo), box), sub))
        return cst, pieces
    if name == "repeat":
        reps = tuple(p["repeats"])
        if len(reps) != nd:
            return "repeats do not match the rank"
        # loops (r_0, i_0, r_1, i_1, ...): output index r_d * n_d + i_d, source index i_d
        split = tuple(x for r, n in zip(reps, shape) for x in (r, n))
        dst = Geometry(split, tuple(x for d in range(nd) for x in (shape[d] * cst[d], cst[d])),
                       0)
        sub = Geometry(split, tuple(x for s in st for x in (0, s)), src.offset)
        return cst, [_Piece(dst, sub)]
    if name in ("tril", "triu"):
        return None, [_Piece(None, src, tri=(name == "triu", int(p["diagonal"])))]
    if name == "constant_pad":
        pads = tuple(tuple(x) for x in p["pads"])
        if len(pads) != nd:
            return "pads do not match the rank"
        lo_crop = tuple(max(-lo, 0) for lo, _ in pads)
        box = tuple(n - max(-lo, 0) - max(-hi, 0) for n, (lo, hi) in zip(shape, pads))
        sub = Geometry(box, st, src.offset + sum(c * s for c, s in zip(lo_crop, st)))
        if not any(lo > 0 or hi > 0 for lo, hi in pads):  # a crop: np.array(x, copy=True)
            ost = _keep_order(sub)
            return ost, [_Piece(Geometry(box, ost, 0), sub)]
        value = _fill_text(p["value"], dt)
        if value is None:
            return f"pad value {p['value']!r}"
        return cst, [_Piece(Geometry(out_shape, cst, 0), fill=value),
                     _Piece(_box(cst, tuple(max(lo, 0) for lo, _ in pads), box), sub)]
    # the backward of a view: zeros, then the gradient stored at the view's elements
    from ember.ops import shape as S
    if name == "select_backward":
        dim, index = p["dim"], p["index"]
        region = _region(out_shape, lambda a: a[(slice(None),) * dim + (index, Ellipsis)])
    elif name == "narrow_backward":
        dim, start = p["dim"], p["start"]
        stop = start + shape[dim] if 0 <= dim < nd else None
        region = _region(out_shape, lambda a: a[(slice(None),) * dim + (slice(start, stop),)])
    else:
        region = _region(out_shape, lambda a: S.DIAGONAL.eager(
            a, offset=p["offset"], dim1=p["dim1"], dim2=p["dim2"]))
    if region is None or tuple(region.shape) != shape:
        return "view region not computable"
    zero = _fill_text(0, dt)
    return cst, [_Piece(Geometry(out_shape, cst, 0), fill=zero), _Piece(region, src)]


def _movement(lw: Any, i: int, n: Any) -> str | None:
    from ember.compiler import lower as L
    from ember.compiler.lower_gemm import _materialize

    name = n.op.name
    if not n.args or not L._is_ref(n.args[0]) or len(n.args) != 1:
        return "a non-tensor operand"
    out_shape, dt = n.specs[0]
    out_shape = tuple(out_shape)
    if dt.np.name not in STORAGE_CTYPES:
        return f"dtype {dt.name} (no C storage type)"
    if lw._dtype(n.args[0]) != dt:
        return "mixed dtypes"
    if L._has_sym(n.params):
        return "symbolic parameters (dynamic=True lifts its ints)"
    m = _materialize(lw, n.args[0])
    if m is None:
        return "an operand is not in memory"
    static = _static_geom(m.geom) and all(type(x) is int for x in out_shape)
    if not static and not (name == "clone" and (
            n.params.get("contiguous")
            or tuple(m.geom.strides) == contiguous_strides(tuple(m.geom.shape)))):
        return "dynamic sizes"
    plan = _plan(name, m.geom, out_shape, n.params, dt)
    if type(plan) is str:
        return plan
    ost, pieces = plan
    if ost is None:  # tril/triu: eager's np.where keeps the operand's layout as pointwise ops do
        ost = lw._layout(n, out_shape, [n.args[0]])
        pieces[0].dst = Geometry(out_shape, ost, 0)
    lay = _layout(out_shape, tuple(ost)) if static else (None, contiguous_strides(out_shape))
    if lay is None:
        return "output layout"
    lw._close_group()
    lw._open_segment()
    out = lw._buffer(dt, out_shape, "temp")
    out.strides = lay[0]
    ct = COMPUTE_CTYPES[dt.np.name]
    for pc in pieces:
        shape = tuple(pc.dst.shape)
        lv = [f"i{d}" for d in range(len(shape))]
        dst = Index(pc.dst.offset, tuple((v, s) for v, s, k in zip(lv, pc.dst.strides, shape)
                                         if k != 1))
        if pc.fill is not None:
            body = [Store(out, dst, Const(pc.fill))]
        else:
            body = [Let("t0", ct, Load(m.buf, L._index(pc.src, lv, False)))]
            val = "t0"
            if pc.tri is not None:
                upper, diag = pc.tri
                c, r = lv[-1], lv[-2]
                keep = f"({c} - {r} >= {diag}LL)" if upper else f"({c} - {r} <= {diag}LL)"
                body.append(Let("t1", ct, Op(name, f"({keep} ? {{0}} : ({ct})0)",
                                             (Local("t0"),))))
                val = "t1"
            body.append(Store(out, dst, Local(val)))
        order: tuple = ()
        dstr = tuple(pc.dst.strides)
        if all(type(x) is int for x in dstr) and list(dstr) != sorted(dstr)[::-1]:
            order = tuple(sorted(range(len(shape)), key=lambda d: -abs(dstr[d])))
        lw.segment.kernels.append(Kernel(lw._kernel_name(), shape, body, False, [name],
                                         order))
        lw.stats.kernels += 1
    lw._bind(i, 0, out, Geometry(out_shape, tuple(lay[1]), 0), dt)
    L._log("fusion", f"{name} as {len(pieces)} copy kernel(s)", 3)
    return None

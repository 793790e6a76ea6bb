"""Layout copies -> plain copy ``Kernel``s: ``reshape_copy`` (a reshape no view can express,
e.g. attention's ``(B, H, T, E) -> (B, T, H*E)`` after a transpose) and ``cat``; the movement
ops ``clone``, ``flip``, ``roll``, ``repeat``, ``tril``/``triu``, ``constant_pad`` and the view
backwards ``select_backward``/``narrow_backward``/``diagonal_backward`` (``_movement``: fill
and strided-copy kernels, runtime sizes and parameters included where eager's layout is known).

Both produce a fresh C-contiguous value, as eager does: ``reshape_copy`` is one kernel over the
source's shape that loads through the source's geometry (any strides) and stores in C order;
``cat`` is one kernel per input storing its block of the output.  Values are copied exactly
(float16/bfloat16 as their bits through float, which is exact).  Runtime sizes included: a
``reshape_copy`` takes its sizes from its parameters, a ``cat`` sums its inputs' sizes along
its dim (its pieces' offsets are those running sums).
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np

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
    order_strides,
    s_add,
    s_mul,
)
from ember.compiler.c.lower.context import (
    LoweringContext,
    c_scalar,
    has_sym,
    is_ref,
    log,
    loop_index,
)
from ember.compiler.c.lower.pointwise import eager_layout, fill_outputs
from ember.compiler.c.lower.registry import lowering
from ember.compiler.c.lower.view import as_view
from ember.compiler.frontend.graph import Sym
from ember.ops import OPS


@lowering(OPS.reshape_copy, cat=False)
@lowering(OPS.cat, cat=True)
def lower_copy(lw: LoweringContext, i: int, n: Any, cat: bool) -> str | None:
    """``reshape_copy`` (one kernel) or ``cat`` (one kernel per input) into a fresh
    C-contiguous buffer; None, or why not."""
    if any(not is_ref(a) for a in n.args):
        return "a non-tensor operand"
    out_shape, dt = n.specs[0]
    out_shape = tuple(out_shape)
    if dt.np.name not in STORAGE_CTYPES:
        return f"dtype {dt.name} (no C storage type)"
    if any(lw.dtype_of(r) != dt for r in n.args):
        return "mixed dtypes"
    mats = [lw.in_memory(r) for r in n.args]
    if any(m is None for m in mats):
        return "an operand is not in memory"
    dynamic = any(type(x) is not int for m in mats
                  for x in tuple(m.geom.shape) + tuple(m.geom.strides) + (m.geom.offset,))
    if dynamic or any(type(x) is not int for x in out_shape) or has_sym(n.params):
        if cat:
            out_shape = _cat_shape(mats, n.params.get("dim"))
            if out_shape is None:
                return "dynamic sizes (inputs of unequal rank, or a runtime dim)"
        else:
            # reshape_copy: the sizes the parameters give (runtime ints); the kernel loops
            # over the source's (runtime) shape and loads through its geometry
            out_shape = tuple(_sz(x) for x in n.params["shape"])
            if any(x == -1 for x in out_shape if type(x) is int):
                return "dynamic sizes with an inferred (-1) dim"
    if 0 in out_shape:
        fill_outputs(lw, i, n)
        return None
    return _lower_pieces(lw, i, n, mats, out_shape, dt, cat)


def _cat_shape(mats: list, dim: Any) -> tuple | None:
    """The result's shape of a ``cat`` over runtime sizes: the first input's, with the inputs'
    sizes along ``dim`` summed (the meta rule checked the other dims at export)."""
    shapes = [tuple(m.geom.shape) for m in mats]
    rank = len(shapes[0])
    if type(dim) is not int or any(len(s) != rank for s in shapes) or not 0 <= dim < rank:
        return None
    along: Any = 0
    for s in shapes:
        along = s_add(along, s[dim])
    return shapes[0][:dim] + (along,) + shapes[0][dim + 1:]


def _lower_pieces(lw: LoweringContext, i: int, n: Any, mats: list, out_shape: tuple, dt: Any,
                  cat: bool) -> str | None:
    """One copy kernel per input into a fresh C-contiguous ``out_shape`` (runtime sizes
    included: a piece's offset along the cat dim is the sum of the sizes before it)."""
    dim = 0
    if cat:
        dim = n.params.get("dim")
        if type(dim) is not int or not 0 <= dim < len(out_shape):
            return "cat dim"
    lw.close_group()
    lw.open_segment()
    out = lw.buffer(dt, out_shape, "temp")
    ct = COMPUTE_CTYPES[dt.np.name]
    if not cat:
        pieces = [(mats[0], 0, contiguous_strides(tuple(mats[0].geom.shape)))]
    else:
        ost = contiguous_strides(out_shape)
        pieces, off = [], 0
        for m in mats:
            pieces.append((m, s_mul(off, ost[dim]), ost))
            off = s_add(off, m.geom.shape[dim])
    for m, offset, strides in pieces:
        shape = tuple(m.geom.shape)
        if 0 in shape:
            continue
        loop_vars = [f"i{d}" for d in range(len(shape))]
        src = loop_index(m.geom, loop_vars, False)
        dst = Index(offset, tuple((v, s) for v, s, k in zip(loop_vars, strides, shape)
                                  if k != 1))
        body = [Let("t0", ct, Load(m.buf, src)), Store(out, dst, Local("t0"))]
        kname = lw.kernel_name()
        lw.add_kernel(Kernel(kname, shape, body, False, [n.op.name]))
    lw.bind(i, 0, out, Geometry.contiguous(out_shape), dt)
    log("fusion", f"{n.op.name} as {len(pieces)} copy kernel(s)", 3)
    return None


# ------------------------------------------------------------------------------ movement ops
# Each is a few plain kernels into a fresh buffer: ``fill`` pieces store a constant over a box
# of the output, ``copy`` pieces load the source through a geometry and store it through
# another (both index arithmetic: flips are negative strides, repeats stride-0 loop variables,
# rolls and pads boxes of the output).
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
    try:
        return tuple(int(s) for s in np.empty_like(probe, order="K").strides)
    except MemoryError as e:  # no address space for the stand-in: the op stays an extern
        raise _NoLayoutError from e


class _NoLayoutError(Exception):
    pass


def _layout(shape: tuple, want: tuple) -> tuple | None:
    """(``Buffer.strides``, element strides) making the driver allocate ``shape`` with the
    strides ``want`` (eager's; size-1 dims included), or None when no dim order gives them."""
    nd = len(shape)
    if want == contiguous_strides(shape):
        return None, want
    by = sorted(range(nd), key=lambda d: -want[d])
    if order_strides(shape, tuple(by)) == want:
        return want, want
    for order in itertools.permutations(range(nd)):  # ties between size-1 dims
        if order_strides(shape, order) == want:
            fake = [0] * nd
            for k, d in enumerate(order):
                fake[d] = nd - k   # distinct, so the driver's sort finds ``order``
            return tuple(fake), want
    return None


def _sz(x: Any) -> Any:
    """A size or index parameter as a SizeExpr (a lifted scalar is its runtime name)."""
    if type(x) is Sym:
        return f"s{x.index}"
    return int(x)


def _sub(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        return a - b
    return a if b == 0 else f"({a} - {b})"


def _neg(a: Any) -> Any:
    return -a if type(a) is int else f"(-{a})"


def _max0(a: Any) -> Any:
    return max(a, 0) if type(a) is int else f"({a} > 0 ? {a} : 0)"


def _mod(a: Any, n: Any) -> Any:
    """``a`` modulo ``n`` in ``[0, n)`` (``n`` > 0)."""
    if type(a) is int and type(n) is int:
        return a % n
    return f"((({a} % {n}) + {n}) % {n})"


def _dot(xs: Any, ys: Any) -> Any:
    acc: Any = 0
    for x, y in zip(xs, ys):
        acc = s_add(acc, s_mul(x, y))
    return acc


def _box(ost: tuple, start: tuple, shape: tuple) -> Geometry:
    return Geometry(tuple(shape), ost, _dot(start, ost))


def _fill_text(value: Any, dt: Any) -> str | None:
    """C text of ``value`` converted to ``dt`` as eager does (NumPy's cast), in the compute
    type; None when it cannot be (not a number, or a runtime scalar NumPy would cast in one
    rounding where C needs two)."""
    ct = COMPUTE_CTYPES[dt.np.name]
    if type(value) is Sym:
        return c_scalar(value, ct) if dt.np.name in ("float32", "float64") else None
    if type(value) not in (int, float, bool) and not isinstance(value, (np.number, np.bool_)):
        return None
    with np.errstate(all="ignore"):
        v = np.array(value).astype(dt.np)[()]
    if dt.np.name == "bool":
        return f"(({ct}){int(bool(v))})"
    if dt.is_floating_point:
        return c_scalar(float(v), ct)
    return c_scalar(int(v), ct)


def _unknown_layout(src: Geometry, sym: bool) -> str | None:
    """Why eager's layout of a copy of ``src`` is unknown: with runtime sizes or parameters it
    is known only where it is C order (a C-contiguous source)."""
    if sym and tuple(src.strides) != contiguous_strides(tuple(src.shape)):
        return "dynamic sizes of a non-contiguous source (eager's layout unknown)"
    return None


# Each plan gives (output element strides or None for eager's pointwise layout, pieces, output
# shape) of a movement op, or the reason it stays an extern.  ``sym``: sizes or parameters are
# runtime values, so eager's layout is known only where it is C order.
def _plan_clone(src: Geometry, p: dict, dt: Any, sym: bool) -> Any:
    if not p.get("contiguous"):
        bad = _unknown_layout(src, sym)
        if bad is not None:
            return bad
    shape = tuple(src.shape)
    ost = contiguous_strides(shape) if p.get("contiguous") or sym else _keep_order(src)
    return ost, [_Piece(Geometry(shape, ost, 0), src)], shape


def _plan_flip(src: Geometry, p: dict, dt: Any, sym: bool) -> Any:
    bad = _unknown_layout(src, sym)
    if bad is not None:
        return bad
    shape, st = tuple(src.shape), tuple(src.strides)
    nd = len(shape)
    off, fst = src.offset, list(st)
    for d in set(int(x) % nd for x in p["dims"]) if nd else ():
        if shape[d] != 0:
            off = s_add(off, s_mul(_sub(shape[d], 1), st[d]))
        fst[d] = _neg(st[d])
    view = Geometry(shape, tuple(fst), off)
    ost = contiguous_strides(shape) if sym else _keep_order(view)
    return ost, [_Piece(Geometry(shape, ost, 0), view)], shape


def _plan_roll(src: Geometry, p: dict, dt: Any, sym: bool) -> Any:
    shape, st = tuple(src.shape), tuple(src.strides)
    nd = len(shape)
    cst = contiguous_strides(shape)
    shift: list = [0] * nd
    for s, d in zip(p["shifts"], p["dims"]):
        shift[int(d) % nd] = s_add(shift[int(d) % nd], _sz(s))
    runs = []  # per dim: (output start, source start, length) of the one or two runs
    for d in range(nd):
        n = shape[d]
        s = _mod(shift[d], n) if n != 0 else 0
        runs.append([(0, 0, n)] if s == 0 else [(0, _sub(n, s), s), (s, 0, _sub(n, s))])
    pieces = []
    for combo in itertools.product(*runs):
        box = tuple(r[2] for r in combo)
        sub = Geometry(box, st, s_add(src.offset, _dot([r[1] for r in combo], st)))
        pieces.append(_Piece(_box(cst, tuple(r[0] for r in combo), box), sub))
    return cst, pieces, shape


def _plan_repeat(src: Geometry, p: dict, dt: Any, sym: bool) -> Any:
    shape, st = tuple(src.shape), tuple(src.strides)
    nd = len(shape)
    reps = tuple(_sz(r) for r in p["repeats"])
    if len(reps) != nd:
        return "repeats do not match the rank"
    out_shape = tuple(s_mul(n, r) for n, r in zip(shape, reps))
    ost = contiguous_strides(out_shape)
    # loops (r_0, i_0, r_1, i_1, ...): output index r_d * n_d + i_d, source index i_d
    split = tuple(x for r, n in zip(reps, shape) for x in (r, n))
    dst = Geometry(split, tuple(x for d in range(nd) for x in (s_mul(shape[d], ost[d]),
                                                               ost[d])), 0)
    sub = Geometry(split, tuple(x for s in st for x in (0, s)), src.offset)
    return ost, [_Piece(dst, sub)], out_shape


def _plan_tri(src: Geometry, p: dict, dt: Any, sym: bool, upper: bool) -> Any:
    bad = _unknown_layout(src, sym)
    if bad is not None:
        return bad
    shape = tuple(src.shape)
    if len(shape) < 2:
        return "fewer than 2 dims"
    diag = _sz(p["diagonal"])
    return (contiguous_strides(shape) if sym else None), \
        [_Piece(None, src, tri=(upper, diag))], shape


def _plan_pad(src: Geometry, p: dict, dt: Any, sym: bool) -> Any:
    bad = _unknown_layout(src, sym)
    if bad is not None:
        return bad
    shape, st = tuple(src.shape), tuple(src.strides)
    pads = tuple((_sz(lo), _sz(hi)) for lo, hi in p["pads"])
    if len(pads) != len(shape):
        return "pads do not match the rank"
    out_shape = tuple(s_add(s_add(n, lo), hi) for n, (lo, hi) in zip(shape, pads))
    ost = contiguous_strides(out_shape)
    crop = tuple(_max0(_neg(lo)) for lo, _ in pads)
    box = tuple(_sub(_sub(n, c), _max0(_neg(hi))) for n, c, (_, hi) in zip(shape, crop, pads))
    sub = Geometry(box, st, s_add(src.offset, _dot(crop, st)))
    into = _box(ost, tuple(_max0(lo) for lo, _ in pads), box)
    grows = [x for lo, hi in pads for x in (lo, hi) if type(x) is not int or x > 0]
    if not grows:  # a crop: eager copies it (np.array(x, copy=True): order "K")
        ost = _keep_order(sub)
        return ost, [_Piece(Geometry(box, ost, 0), sub)], out_shape
    value = _fill_text(p["value"], dt)
    if value is None:
        return f"pad value {p['value']!r} for dtype {dt.name}"
    return ost, [_Piece(Geometry(out_shape, ost, 0), fill=value), _Piece(into, sub)], \
        out_shape


# the backward of a view: zeros, then the gradient stored at the view's elements (the region
# of the zeros that the view selects, as a geometry over the C-contiguous output)
def _select_region(p: dict, out_shape: tuple, ost: tuple, shape: tuple) -> Geometry:
    on = len(out_shape)
    dim = int(p["dim"]) % on
    keep = [d for d in range(on) if d != dim]
    return Geometry(tuple(out_shape[d] for d in keep), tuple(ost[d] for d in keep),
                    s_mul(_sz(p["index"]), ost[dim]))


def _narrow_region(p: dict, out_shape: tuple, ost: tuple, shape: tuple) -> Geometry:
    on = len(out_shape)
    dim = int(p["dim"]) % on
    return Geometry(tuple(out_shape[d] if d != dim else shape[d] for d in range(on)), ost,
                    s_mul(_sz(p["start"]), ost[dim]))


def _diagonal_region(p: dict, out_shape: tuple, ost: tuple, shape: tuple) -> Geometry:
    on = len(out_shape)  # eager's diagonal view of the zeros
    d1, d2 = int(p["dim1"]) % on, int(p["dim2"]) % on
    off = _sz(p["offset"])
    if type(off) is int:
        start = off * ost[d2] if off >= 0 else -off * ost[d1]
    else:
        start = f"({off} >= 0 ? {s_mul(off, ost[d2])} : {s_mul(_neg(off), ost[d1])})"
    keep = [d for d in range(on) if d not in (d1, d2)]
    return Geometry(tuple(out_shape[d] for d in keep) + (shape[-1],),
                    tuple(ost[d] for d in keep) + (s_add(ost[d1], ost[d2]),), start)


def _plan_view_backward(src: Geometry, p: dict, dt: Any, sym: bool, region: Any) -> Any:
    shape = tuple(src.shape)
    out_shape = tuple(_sz(x) for x in p["shape"])
    ost = contiguous_strides(out_shape)
    where = region(p, out_shape, ost, shape)
    if tuple(where.shape) != shape:
        return "gradient shape does not match the view"
    zero = _fill_text(0, dt)
    return ost, [_Piece(Geometry(out_shape, ost, 0), fill=zero), _Piece(where, src)], \
        out_shape


def _movement(lw: LoweringContext, i: int, n: Any, plan: Any) -> str | None:
    """A movement op as fill and strided-copy kernels, following ``plan`` (bound at
    registration, below)."""
    name = n.op.name
    if len(n.args) != 1 or not is_ref(n.args[0]):
        return "a non-tensor operand"
    spec_shape, dt = n.specs[0]
    if dt.np.name not in STORAGE_CTYPES:
        return f"dtype {dt.name} (no C storage type)"
    if lw.dtype_of(n.args[0]) != dt:
        return "mixed dtypes"
    m = lw.in_memory(n.args[0])
    if m is None:
        return "an operand is not in memory"
    # (a runtime offset, e.g. of a diagonal view, changes no layout: only sizes and strides)
    sym = lw.dynamic or has_sym(n.params) or not _static_geom(
        Geometry(m.geom.shape, m.geom.strides, 0))
    try:
        plan = plan(m.geom, n.params, dt, sym)
    except (TypeError, ValueError, KeyError):  # e.g. a lifted dim: stays an extern
        return "symbolic dims or unexpected parameters"
    except _NoLayoutError:
        return "eager's layout not computable"
    if type(plan) is str:
        return plan
    ost, pieces, out_shape = plan
    if all(type(x) is int for x in out_shape) and tuple(out_shape) != tuple(spec_shape):
        return f"output shape {out_shape} is not the graph's {tuple(spec_shape)}"
    if ost is None:  # tril/triu: eager's np.where keeps the operand's layout as pointwise ops do
        ost = eager_layout(lw, n, out_shape, [n.args[0]])
    if pieces[0].dst is None:
        pieces[0].dst = Geometry(out_shape, ost, 0)
    lay = (None, ost) if sym else _layout(out_shape, tuple(ost))
    if lay is None:
        return "output layout"
    lw.close_group()
    lw.open_segment()
    out = lw.buffer(dt, out_shape, "temp")
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
            body = [Let("t0", ct, Load(m.buf, loop_index(pc.src, lv, False)))]
            val = "t0"
            if pc.tri is not None:
                upper, diag = pc.tri
                c, r = lv[-1], lv[-2]
                keep = f"({c} - {r} {'>=' if upper else '<='} (int64_t)({diag}))"
                body.append(Let("t1", ct, Op(name, f"({keep} ? {{0}} : ({ct})0)",
                                             (Local("t0"),))))
                val = "t1"
            body.append(Store(out, dst, Local(val)))
        order: tuple = ()
        dstr = tuple(pc.dst.strides)
        if all(type(x) is int for x in dstr) and list(dstr) != sorted(dstr)[::-1]:
            order = tuple(sorted(range(len(shape)), key=lambda d: -abs(dstr[d])))
        lw.add_kernel(Kernel(lw.kernel_name(), shape, body, False, [name], order))
    lw.bind(i, 0, out, Geometry(tuple(out_shape), tuple(lay[1]), 0), dt)
    log("fusion", f"{name} as {len(pieces)} copy kernel(s)", 3)
    return None


@lowering(OPS.storage_write)
def lower_storage_write(lw: LoweringContext, i: int, n: Any) -> str | None:
    """``out = storage`` (C order, as eager's copy) then ``out[region] = src``: two kernels."""
    if len(n.args) != 2 or not all(is_ref(a) for a in n.args):
        return "a non-tensor operand"
    _, dt = n.specs[0]
    if dt.np.name not in STORAGE_CTYPES:
        return f"dtype {dt.name} (no C storage type)"
    if any(lw.dtype_of(r) != dt for r in n.args):
        return "mixed dtypes"
    try:
        shape, strides, offset = n.params["geom"]
        region = Geometry(tuple(_sz(x) for x in shape), tuple(_sz(x) for x in strides),
                          _sz(offset))
    except (TypeError, ValueError, KeyError):
        return "geometry parameters"
    ms = [lw.in_memory(r) for r in n.args]
    if any(m is None for m in ms):
        return "an operand is not in memory"
    st, src = ms
    static = all(type(x) is int for x in tuple(region.shape) + tuple(src.geom.shape))
    if static and tuple(region.shape) != tuple(src.geom.shape):
        return "source shape is not the region's"
    # (runtime sizes: the region's lifted sizes are the source's, as the trace checked)
    region = Geometry(tuple(src.geom.shape), region.strides, region.offset)
    out_shape = tuple(st.geom.shape)
    pieces = [_Piece(Geometry.contiguous(out_shape), st.geom), _Piece(region, src.geom)]
    lw.close_group()
    lw.open_segment()
    out = lw.buffer(dt, out_shape, "temp")
    ct = COMPUTE_CTYPES[dt.np.name]
    for pc, m in zip(pieces, ms):
        shape = tuple(pc.dst.shape)
        lv = [f"i{d}" for d in range(len(shape))]
        dst = Index(pc.dst.offset, tuple((v, s) for v, s, k in zip(lv, pc.dst.strides, shape)
                                         if k != 1))
        body = [Let("t0", ct, Load(m.buf, loop_index(pc.src, lv, False))),
                Store(out, dst, Local("t0"))]
        lw.add_kernel(Kernel(lw.kernel_name(), shape, body, False, [n.op.name]))
    lw.bind(i, 0, out, Geometry.contiguous(out_shape), dt)
    log("fusion", "storage_write as a copy and a region copy kernel", 3)
    return None


@lowering(OPS.storage_read)
def lower_storage_read(lw: LoweringContext, i: int, n: Any) -> str | None:
    """``storage_read``: a view of a C-contiguous storage value; with runtime sizes, the
    region's geometry over the storage value when that is C-contiguous (eager reads a view of
    it), else why not."""
    if as_view(lw, i, n):
        return None
    if len(n.args) != 1:
        return "a non-tensor operand"
    m = lw.in_memory(n.args[0])
    if m is None:
        return "an operand is not in memory"
    if tuple(m.geom.strides) != contiguous_strides(tuple(m.geom.shape)):
        return "storage value not C-contiguous"
    try:
        shape, strides, offset = n.params["geom"]
        geom = Geometry(tuple(_sz(x) for x in shape), tuple(_sz(x) for x in strides),
                        s_add(m.geom.offset, _sz(offset)))
    except (TypeError, ValueError, KeyError):
        return "geometry parameters"
    ref = ("n", i, 0)
    lw.vals[ref] = type(m)(m.buf, geom, m.dtype)
    lw.sources[ref] = ("view", i, 0)
    lw.stats.view_ops += 1
    return None


for _opdef, _plan in ((OPS.clone, _plan_clone), (OPS.flip, _plan_flip), (OPS.roll, _plan_roll),
                   (OPS.repeat, _plan_repeat), (OPS.constant_pad, _plan_pad),
                   (OPS.tril, functools.partial(_plan_tri, upper=False)),
                   (OPS.triu, functools.partial(_plan_tri, upper=True)),
                   (OPS.select_backward, functools.partial(_plan_view_backward,
                                                           region=_select_region)),
                   (OPS.narrow_backward, functools.partial(_plan_view_backward,
                                                           region=_narrow_region)),
                   (OPS.diagonal_backward, functools.partial(_plan_view_backward,
                                                             region=_diagonal_region))):
    lowering(_opdef, plan=_plan)(_movement)

__all__ = ["lower_copy", "lower_storage_read", "lower_storage_write"]

"""Matrix products in the loop IR: ``matmul``, ``addmm``, ``linear``, ``convolution``,
``conv_weight_grad`` and ``conv_input_grad`` become ``GemmKernel``s inside a C segment
(ARCHITECTURE.md §5, "Matrix products"; convolutions add an ``Im2colKernel`` (im2col or
col2im) around a batched GEMM, as eager computes them).

* ``lower_gemm(lowering, i, node)`` (called from ``Lowering._node``) turns a float32/float64
  product into one ``GemmKernel``: operands are buffers seen through their view geometry
  (a transposed or sliced view is a pair of strides, mapped to BLAS trans flags and leading
  dims at run time, copied only when neither layout is one BLAS accepts), batch dims (broadcast
  ones have stride 0) are loops around the product, and ``linear``'s bias and ``addmm``'s
  ``beta * c`` / ``alpha`` become the kernel's epilogue, computed as eager computes them.
* ``fuse_epilogues(program, graph)`` (a pass after lowering) moves a pointwise kernel that
  directly follows a GEMM in its segment and reads the product element by element into the
  GEMM's epilogue; when nothing else needs the raw product, the GEMM writes straight into the
  epilogue's output buffer and the epilogue runs in place (no intermediate buffer).
"""

from __future__ import annotations

import itertools
from typing import Any

from ember.compiler.c.ir.loop_ir import (
    CTYPES,
    Buffer,
    Const,
    GemmKernel,
    Geometry,
    Im2colKernel,
    Index,
    Kernel,
    Let,
    Load,
    Local,
    MatOperand,
    Op,
    Program,
    Store,
    contiguous_strides,
    s_mul,
)
from ember.compiler.c.lower import random as lower_random

GEMM_OPS = frozenset({"matmul", "addmm", "linear", "convolution", "conv_weight_grad",
                      "conv_input_grad"})
_FLOATS = ("float32", "float64")


def lower_gemm(lw: Any, i: int, n: Any) -> str | None:
    """Lower graph node ``n`` (index ``i``) to a GemmKernel in ``lw``'s open segment; returns
    None when lowered, else why not (the node then runs as an extern)."""
    from ember.compiler.c.lower import context as L

    refs = [a for a in n.args if L._is_ref(a)]
    if any(a is not None and not L._is_ref(a) for a in n.args):
        return "a non-tensor operand"
    for r in refs:
        if r not in lw.vals or lw._dtype(r).np.name not in _FLOATS:
            return "not a float32/float64 product"
    out_dt = n.specs[0][1]
    if out_dt.np.name not in _FLOATS or any(lw._dtype(r) != out_dt for r in refs):
        return "mixed dtypes"
    mats = [_materialize(lw, r) for r in refs]
    if any(m is None for m in mats):
        return "an operand is not in memory"
    name = n.op.name
    if name in ("convolution", "conv_weight_grad"):
        return _conv(lw, i, n, mats, out_dt)
    if name == "conv_input_grad":
        return _conv_input_grad(lw, i, n, mats, out_dt)
    if name == "linear":
        x, w = mats[0], mats[1]
        a, batch, m = _rows_operand(x)
        wg = w.geom
        b = MatOperand(w.buf, wg.offset, (0,) * len(batch), wg.strides[1], wg.strides[0])
        k, nn = x.geom.shape[-1], wg.shape[0]
        out_shape = tuple(x.geom.shape[:-1]) + (nn,)
    else:
        x, y = (mats[1], mats[2]) if name == "addmm" else (mats[0], mats[1])
        xg, yg = x.geom, y.geom
        batch = tuple(xg.shape[:-2])
        m, k, nn = xg.shape[-2], xg.shape[-1], yg.shape[-1]
        a = MatOperand(x.buf, xg.offset, tuple(xg.strides[:-2]), xg.strides[-2], xg.strides[-1])
        b = MatOperand(y.buf, yg.offset, tuple(yg.strides[:-2]), yg.strides[-2], yg.strides[-1])
        out_shape = batch + (m, nn)
    lw._close_group()  # operands stored by the segment's earlier kernels
    out = lw._buffer(out_dt, out_shape, "temp")
    lw._open_segment()
    kname = lw._kernel_name()
    gk = GemmKernel(kname, a, b, out, tuple(batch), m, nn, k, [name])
    _bias_epilogue(gk, n, mats, out_shape)
    lw.segment.kernels.append(gk)
    lw.stats.kernels += 1
    lw._bind(i, 0, out, Geometry.contiguous(out_shape), out_dt)
    L._log("fusion", f"{kname}: {name} as a GEMM, batch {list(gk.batch)}, m={gk.m} n={nn} "
           f"k={k}", 3)
    return None


def _conv(lw: Any, i: int, n: Any, mats: list, dt: Any) -> str | None:
    """convolution as eager computes it: im2col into ``(N, G, Cg*K, P)``, then one GEMM per
    (sample, group) of ``w`` as ``(G, Og, Cg*K)`` with the columns, into ``(N, O, *out)``."""
    from ember.compiler.c.lower import context as L

    x, w = mats  # conv_weight_grad: x and the output's gradient (N, O, *out)
    p = n.params
    grad = n.op.name == "conv_weight_grad"
    items = list(x.geom.shape) + list(x.geom.strides) + [x.geom.offset] + list(w.geom.shape) \
        + list(w.geom.strides) + [w.geom.offset]
    if any(type(v) is not int for v in items) or L._has_sym(p):
        return f"{n.op.name} with dynamic sizes or parameters"
    wshape = tuple(p["weight_shape"]) if grad else tuple(w.geom.shape)
    ws, wsh = w.geom.strides, w.geom.shape
    if grad and any(ws[d] != ws[d + 1] * wsh[d + 1] for d in range(2, len(wsh) - 1)):
        return "conv_weight_grad: the gradient's spatial dims do not fold into one"
    if not grad and tuple(ws[1:]) != contiguous_strides(tuple(wsh[1:])):
        return "convolution weight not contiguous per output channel"
    out_shape = tuple(L._size(v) for v in n.specs[0][0])
    nb, c = x.geom.shape[:2]
    o, g = wshape[0], p["groups"]
    kern = wshape[2:]
    spatial = tuple(w.geom.shape[2:]) if grad else out_shape[2:]
    if grad and nb == 0:
        return "conv_weight_grad of an empty batch"
    kk, pp = 1, 1
    for v in kern:
        kk *= v
    for v in spatial:
        pp *= v
    cgk = (c // g) * kk
    lw._close_group()
    seg = lw._open_segment()
    cols = lw._buffer(dt, (nb, c, kk, pp), "temp")
    name = lw._kernel_name()
    seg.kernels.append(Im2colKernel(name, x.buf, x.geom, cols, tuple(kern), tuple(p["stride"]),
                                    tuple(lo for lo, _ in p["padding"]), tuple(p["dilation"]),
                                    tuple(spatial), ["im2col"]))
    kname = lw._kernel_name()
    if grad:
        # eager: per (sample, group) g[n, g] (Og x P) @ cols[n, g]^T, then a sum over samples
        prod = lw._buffer(dt, (nb, o * cgk), "temp")
        a = MatOperand(w.buf, w.geom.offset, (ws[0], (o // g) * ws[1]), ws[1], ws[-1])
        b = MatOperand(cols, 0, (c * kk * pp, cgk * pp), 1, pp)
        seg.kernels.append(GemmKernel(kname, a, b, prod, (nb, g), o // g, cgk, pp,
                                      ["conv_weight_grad"]))
        out = lw._buffer(dt, out_shape, "temp")
        seg.kernels.append(_batch_sum(f"kernel{int(kname[6:]) + 1}", prod, out, nb, o * cgk))
        lw.stats.kernels += 3
    else:
        out = lw._buffer(dt, out_shape, "temp")
        a = MatOperand(w.buf, w.geom.offset, (0, (o // g) * w.geom.strides[0]),
                       w.geom.strides[0], 1)
        b = MatOperand(cols, 0, (c * kk * pp, cgk * pp), pp, 1)
        seg.kernels.append(GemmKernel(kname, a, b, out, (nb, g), o // g, pp, cgk,
                                      ["convolution"]))
        lw.stats.kernels += 2
    lw._bind(i, 0, out, Geometry.contiguous(out_shape), dt)
    L._log("fusion", f"{name}, {kname}: convolution as im2col + GEMM ({nb}x{g} products of "
           f"{o // g}x{cgk} by {cgk}x{pp})", 3)
    return None


def _conv_input_grad(lw: Any, i: int, n: Any, mats: list, dt: Any) -> str | None:
    """conv_input_grad as eager computes it: per (sample, group) ``w[g]^T (Cg*K x Og)`` times
    the output gradient ``(Og x P)`` into columns, then col2im into the input's shape."""
    from ember.compiler.c.lower import context as L

    gy, w = mats
    p = n.params
    items = list(gy.geom.shape) + list(gy.geom.strides) + [gy.geom.offset] \
        + list(w.geom.shape) + list(w.geom.strides) + [w.geom.offset]
    if any(type(v) is not int for v in items) or L._has_sym(p):
        return "conv_input_grad with dynamic sizes or parameters"
    gs, gsh = gy.geom.strides, gy.geom.shape
    ws, wsh = w.geom.strides, tuple(w.geom.shape)
    if any(gs[d] != gs[d + 1] * gsh[d + 1] for d in range(2, len(gsh) - 1)):
        return "conv_input_grad: the gradient's spatial dims do not fold into one"
    if tuple(ws[1:]) != contiguous_strides(wsh[1:]):
        return "conv_input_grad: weight not contiguous per output channel"
    in_shape = tuple(L._size(v) for v in n.specs[0][0])
    nb, c = in_shape[:2]
    o, g = wsh[0], p["groups"]
    kern, spatial = wsh[2:], tuple(gsh[2:])
    kk, pp = 1, 1
    for v in kern:
        kk *= v
    for v in spatial:
        pp *= v
    cgk = (c // g) * kk
    lw._close_group()
    seg = lw._open_segment()
    cols = lw._buffer(dt, (nb, c, kk, pp), "temp")
    kname = lw._kernel_name()
    a = MatOperand(w.buf, w.geom.offset, (0, (o // g) * ws[0]), 1, ws[0])
    b = MatOperand(gy.buf, gy.geom.offset, (gs[0], (o // g) * gs[1]), gs[1], gs[-1])
    seg.kernels.append(GemmKernel(kname, a, b, cols, (nb, g), cgk, pp, o // g,
                                  ["conv_input_grad"]))
    out = lw._buffer(dt, in_shape, "temp")
    name = f"kernel{int(kname[6:]) + 1}"
    seg.kernels.append(Im2colKernel(name, cols, Geometry.contiguous(in_shape), out, tuple(kern),
                                    tuple(p["stride"]), tuple(lo for lo, _ in p["padding"]),
                                    tuple(p["dilation"]), spatial, ["col2im"], col2im=True))
    lw.stats.kernels += 2
    lw._bind(i, 0, out, Geometry.contiguous(in_shape), dt)
    L._log("fusion", f"{kname}, {name}: conv_input_grad as GEMM + col2im", 3)
    return None


def _batch_sum(name: str, src: Buffer, dst: Buffer, nb: int, size: int) -> Kernel:
    """``dst = src[0] + src[1] + ...`` in that order (NumPy's ``sum(axis=0)`` of a C-order
    array adds whole rows one after another)."""
    ct = CTYPES[dst.dtype.np.name]
    here = Index(0, (("i", 1),))
    body: list = [Let("t0", ct, Load(src, here))]
    acc = "t0"
    for j in range(1, nb):
        body.append(Let(f"l{j}", ct, Load(src, Index(j * size, (("i", 1),)))))
        body.append(Let(f"t{j}", ct, Op("add", "({0} + {1})", (Local(acc), Local(f"l{j}")))))
        acc = f"t{j}"
    body.append(Store(dst, here, Local(acc)))
    return Kernel(name, tuple(dst.shape), body, True, ["sum"])


def _materialize(lw: Any, r: tuple) -> Any:
    """The operand as a ``_Mat`` (a value of the open group is stored first)."""
    from ember.compiler.c.lower import context as L

    v = lw.vals[r]
    if isinstance(v, L._Pw):
        if v.group is not lw.group:
            return None
        buf = lw._store_buffer(r, v)
        return L._Mat(buf, Geometry(v.shape, v.strides, 0), v.dtype)
    return v


def _rows_operand(x: Any) -> tuple:
    """(MatOperand, batch, m) of linear's ``x`` (..., in): leading dims fold into the rows when
    their strides allow (eager reshapes to one 2-D product), else they are batch loops."""
    g = x.geom
    shape, st = tuple(g.shape), tuple(g.strides)
    lead = len(shape) - 1
    if lead == 0:  # a vector: one row
        return MatOperand(x.buf, g.offset, (), 0, st[0]), (), 1
    cut = lead - 1  # dims [cut, lead) fold into m
    while cut > 0 and st[cut - 1] == s_mul(st[cut], shape[cut]):
        cut -= 1
    m = 1
    for d in range(cut, lead):
        m = s_mul(m, shape[d])
    return (MatOperand(x.buf, g.offset, st[:cut], st[lead - 1], st[lead]), shape[:cut], m)


def _bias_epilogue(gk: GemmKernel, n: Any, mats: list, out_shape: tuple) -> None:
    """linear's ``+ b`` and addmm's ``* alpha + c * beta``, in eager's order of operations."""
    from ember.compiler.c.lower import context as L

    name = n.op.name
    if name == "matmul" or (name == "linear" and len(mats) < 3):
        return
    ct = CTYPES[gk.out.dtype.np.name]
    evars = [f"i{d}" for d in range(len(out_shape))]
    here = L._index(Geometry.contiguous(out_shape), evars, False)
    body: list = [Let("g0", ct, Load(gk.out, here))]
    val = "g0"
    if name == "linear":
        bg = mats[2].geom
        bias = Geometry(out_shape, (0,) * (len(out_shape) - 1) + (bg.strides[0],), bg.offset)
        body.append(Let("g1", ct, Load(mats[2].buf, L._index(bias, evars, False))))
        body.append(Let("g2", ct, Op("add", "({0} + {1})", (Local("g0"), Local("g1")))))
        val = "g2"
    else:
        alpha, beta = n.params["alpha"], n.params["beta"]
        if not (type(alpha) in (int, float, bool) and alpha == 1):
            body.append(Let("g1", ct, Op("mul", "({0} * {1})",
                                         (Local(val), Const(L._scalar(alpha, ct))))))
            val = "g1"
        if not (type(beta) in (int, float, bool) and beta == 0):
            cg = mats[0].geom
            body.append(Let("g2", ct, Load(mats[0].buf, L._index(cg, evars, False))))
            bt = Const(L._scalar(beta, ct))
            if type(beta) in (int, float, bool) and beta == 1:
                body.append(Let("g3", ct, Op("add", "({0} + {1})", (Local(val), Local("g2")))))
            else:  # beta == 0 ignores c (NaNs included): a lifted beta decides at run time
                body.append(Let("g3", ct, Op("addmm_beta", "({2} == 0 ? {0} : {0} + {1} * {2})",
                                             (Local(val), Local("g2"), bt))))
            val = "g3"
    body.append(Store(gk.out, here, Local(val)))
    gk.epilogue = body
    gk.epi_flat = False


# ------------------------------------------------------------------------------ epilogue fusion
def fuse_epilogues(program: Program, graph: Any) -> int:
    """Merge each pointwise kernel that reads a GEMM's product element by element (same index
    space) into that GEMM's epilogue, when no kernel between the two writes what it reads;
    returns how many merged."""
    from ember.compiler.c.lower import context as L

    merged = 0
    outside = _python_visible(program, graph)
    for seg in program.segments():
        j = 0
        while j < len(seg.kernels):
            k = seg.kernels[j]
            g = _producer(seg.kernels, j) if type(k) is Kernel else None
            if g is None:
                j += 1
                continue
            _merge(g, k, merged)
            del seg.kernels[j]
            merged += 1
            _in_place(g, program, outside)
            L._log("fusion", f"{g.name}: epilogue {' '.join(k.ops)} fused into the GEMM", 3)
    program.stats.kernels -= merged  # type: ignore[attr-defined]
    program.stats.epilogues += merged  # type: ignore[attr-defined]
    return merged


def _producer(kernels: list, j: int) -> GemmKernel | None:
    """The GEMM before ``kernels[j]`` whose epilogue it can join: the nearest one whose product
    it reads, with nothing in between writing a buffer it loads."""
    k = kernels[j]
    reads = set(id(b) for b in k.buffers()[0])
    for p in range(j - 1, -1, -1):
        g = kernels[p]
        if isinstance(g, GemmKernel) and id(g.out) in reads:
            return g if _fusable(g, k) else None
        if any(id(b) in reads for b in g.buffers()[1]):
            return None
    return None


def _fusable(g: GemmKernel, k: Any) -> bool:
    if type(k) is not Kernel or k.order or tuple(k.ranges) != tuple(g.out.shape):
        return False
    if any(op in lower_random.OPS for op in k.ops):
        return False  # a random op's flat index is the plain kernel's loop variables
    here = _here(g.out.shape, k.flat)
    reads = False
    for st in k.body:
        for idx in _loads_of(st.expr, g.out):
            if idx != here:
                return False
            reads = True
    return reads


def _here(shape: tuple, flat: bool) -> Index:
    from ember.compiler.c.lower import context as L
    evars = ["i"] if flat else [f"i{d}" for d in range(len(shape))]
    return L._index(Geometry.contiguous(tuple(shape)), evars, flat)


def _merge(g: GemmKernel, k: Kernel, tag: int) -> None:
    shape = tuple(g.out.shape)
    flat = k.flat and (not g.epilogue or g.epi_flat)
    epi = g.epilogue if (flat or not g.epi_flat) else _unflatten(g.epilogue, shape)
    body = k.body if (flat or not k.flat) else _unflatten(k.body, shape)
    here = _here(shape, flat)
    stored = next((st.expr for st in epi if isinstance(st, Store) and st.buf is g.out), None)
    names = {st.name: f"e{tag}_{st.name}" for st in body if isinstance(st, Let)}
    subst = (lambda e: stored) if stored is not None else None

    def fix(e: Any) -> Any:
        if isinstance(e, Local):
            return Local(names.get(e.name, e.name))
        if isinstance(e, Load):
            if e.buf is g.out and subst is not None:
                return subst(e)
            return e
        if isinstance(e, Op):
            return Op(e.name, e.template, tuple(fix(a) for a in e.args), e.params)
        return e

    out = list(epi)
    for st in body:
        if isinstance(st, Let):
            out.append(Let(names[st.name], st.ctype, fix(st.expr)))
        else:
            out.append(Store(st.buf, st.index, fix(st.expr)))
    g.epilogue, g.epi_flat = out, flat
    g.ops = g.ops + list(k.ops)
    assert all(_loads_of(st.expr, g.out) in ([], [here]) for st in out), g


def _unflatten(stmts: list, shape: tuple) -> list:
    here = _here(shape, False)

    def fix(e: Any) -> Any:
        if isinstance(e, Load):
            return Load(e.buf, here)
        if isinstance(e, Op):
            return Op(e.name, e.template, tuple(fix(a) for a in e.args), e.params)
        return e
    return [Let(st.name, st.ctype, fix(st.expr)) if isinstance(st, Let) else
            Store(st.buf, here, fix(st.expr)) for st in stmts]


def _in_place(g: GemmKernel, program: Program, outside: set) -> None:
    """When nothing but the epilogue needs the raw product, drop its store and let the GEMM
    write into one of the epilogue's own output buffers (same dtype, shape, C order)."""
    x = g.out
    if id(x) in outside:
        return
    for seg in program.segments():
        for k in seg.kernels:
            if k is not g and x in k.buffers()[0]:
                return
    body = [st for st in g.epilogue if not (isinstance(st, Store) and st.buf is x)]
    here = _here(tuple(x.shape), g.epi_flat)
    target = None
    for st in body:
        if (isinstance(st, Store) and st.buf.role == "temp" and st.buf.strides is None
                and st.buf.dtype == x.dtype and tuple(st.buf.shape) == tuple(x.shape)
                and st.index == here and id(st.buf) not in (id(g.a.buf), id(g.b.buf))):
            target = st.buf
            break
    if target is None:
        return

    def fix(e: Any) -> Any:
        if isinstance(e, Load) and e.buf is x:
            return Load(target, e.index)
        if isinstance(e, Op):
            return Op(e.name, e.template, tuple(fix(a) for a in e.args), e.params)
        return e
    g.epilogue = [Let(st.name, st.ctype, fix(st.expr)) if isinstance(st, Let) else
                  Store(st.buf, st.index, fix(st.expr)) for st in body]
    g.out = target


def _loads_of(e: Any, buf: Buffer) -> list:
    if isinstance(e, Load):
        return [e.index] if e.buf is buf else []
    if isinstance(e, Op):
        return [x for a in e.args for x in _loads_of(a, buf)]
    return []


def _python_visible(program: Program, graph: Any) -> set:
    """Ids of buffers the driver reads from Python: graph outputs and extern operands (through
    views, to their base buffer)."""
    srcs = program.sources  # type: ignore[attr-defined]
    seen: set = set()

    def base(r: Any) -> None:
        s = srcs.get(r)
        if s is None:
            return
        if s[0] == "buf":
            seen.add(id(s[1]))
        elif s[0] == "view":
            base(graph.nodes[s[1]].args[0])
    for r in graph.outputs:
        base(r)
    for step in program.externs():
        for a in itertools.chain(step.node.args, *(
                x if isinstance(x, (list, tuple)) else () for x in step.node.args)):
            if type(a) is tuple:
                base(a)
    return seen


__all__ = ["GEMM_OPS", "fuse_epilogues", "lower_gemm"]

"""Row-wise ops: softmax/log_softmax -> a ``RowKernel``; the fused row ops -> ONE
``ReduceKernel`` each (``reduce.py`` builds the nest).

``softmax``/``log_softmax`` over the last dim of a floating value are a ``RowKernel`` (their
producers fused in when the open group exists only to compute the row kernel's input); over
another dim, a three-pass ``ReduceKernel`` (``reduce.softmax``).

``layer_norm`` and ``rms_norm`` (statistics passes, then the normalized row),
``layer_norm_backward`` (row sums, gx, and the weight/bias gradients as column sums over the
rows), ``cross_entropy`` and ``cross_entropy_backward`` of class-index targets (max, sum of
exp, the picked logit; out-of-range targets trip a ``Check`` and the graph reruns eagerly).
Each follows the rounding steps of its eager kernel.
"""

from __future__ import annotations

from typing import Any

from ember.compiler.c.ir.loop_ir import (
    Accum,
    Check,
    ColumnAccum,
    Geometry,
    Index,
    Let,
    Load,
    Local,
    Op,
    ReducePass,
    RowKernel,
    Store,
    contiguous_strides,
    numel,
    s_mul,
)
from ember.compiler.c.lower import reduce
from ember.compiler.c.lower.context import (
    LoweringContext,
    PendingLoad,
    PointwiseValue,
    c_ordered,
    c_scalar,
    is_ref,
    log,
    loop_index,
)
from ember.compiler.c.lower.reduce import _index, _mean, _Nest, _nest, _op, _out, check_inputs
from ember.compiler.c.lower.registry import lowering
from ember.compiler.frontend.graph import Sym
from ember.ops import OPS


# -- softmax / log_softmax ----------------------------------------------------------------------
@lowering(OPS.softmax, log=False)
@lowering(OPS.log_softmax, log=True)
def lower_softmax(lw: LoweringContext, i: int, n: Any, log: bool) -> str | None:
    """A RowKernel over the last dim, else a three-pass ReduceKernel; None, or why not."""
    if _row(lw, i, n, log):
        return None
    return reduce.softmax(lw, i, n, log)


def _row(lw: LoweringContext, i: int, n: Any, log_: bool) -> bool:
    """softmax/log_softmax over the last dim of a floating value as a RowKernel."""
    src = n.args[0]
    v = lw.vals.get(src)
    dim = n.params.get("dim")
    if v is None or type(dim) is not int or not v.dtype.is_floating_point:
        return False
    shape = v.shape if isinstance(v, PointwiseValue) else v.geom.shape
    if not shape or dim not in (len(shape) - 1, -1):
        return False
    if any(type(m) is int and m == 0 for m in shape):
        return False  # empty: eager returns a copy
    if isinstance(v, PointwiseValue) and _fuse_into_row(lw, i, n, src, v, shape, log_):
        return True
    if isinstance(v, PointwiseValue):
        if v.strides != contiguous_strides(shape):
            return False
        buf, offset = lw.store_buffer(src, v), 0
    elif v.geom.strides == contiguous_strides(shape):
        buf, offset = v.buf, v.geom.offset
    else:
        return False
    lw.close_group()  # the source is stored by the kernels before this one
    rows = 1
    for m in shape[:-1]:
        rows = s_mul(rows, m)
    out = lw.buffer(v.dtype, shape, "temp")
    lw.open_segment()
    k = lw.add_kernel(RowKernel(lw.kernel_name(), _ROW_KIND[log_], rows, shape[-1], buf,
                                offset, out, [n.op.name]))
    lw.bind(i, 0, out, Geometry.contiguous(shape), v.dtype)
    log("fusion", f"{k.name}: {n.op.name} over rows of {list(shape)}", 3)
    return True


def _fuse_into_row(lw: LoweringContext, i: int, n: Any, src: tuple, v: PointwiseValue,
                   shape: tuple, log_: bool) -> bool:
    """Make the open group the row kernel's producer when it exists only to compute the
    row kernel's input (nothing else leaves it) and reads its inputs contiguously."""
    g = lw.group
    if g is None or v.group is not g or g.shape != shape or v.buf is not None:
        return False
    if g.has_random():
        return False  # its flat index needs the plain kernel's loop variables
    if v.strides != contiguous_strides(shape):
        return False  # eager keeps a permuted layout through softmax; the row kernel's is C
    if lw.uses.get(src) != [i] or src in lw.outputs:
        return False
    for ref, m in g.members.items():
        if ref == src:
            continue
        if m.buf is not None or ref in lw.outputs or any(
                ("n", c, 0) not in g.members for c in lw.uses.get(ref, ())):
            return False
    lw.group = None
    row_vars = [f"i{d}" for d in range(len(shape) - 1)] + ["c"]
    prologue = [Let(x.name, x.buf.compute_ctype, Load(x.buf, loop_index(x.geom, row_vars,
                                                                          False)))
                if isinstance(x, PendingLoad) else x for x in g.body]
    rows = 1
    for m in shape[:-1]:
        rows = s_mul(rows, m)
    out = lw.buffer(v.dtype, shape, "temp")
    lw.open_segment()
    k = lw.add_kernel(RowKernel(lw.kernel_name(), _ROW_KIND[log_], rows, shape[-1], None, 0,
                                out, list(g.ops) + [n.op.name], prologue, v.local,
                                tuple(shape[:-1])))
    lw.bind(i, 0, out, Geometry.contiguous(shape), v.dtype)
    log("fusion", f"{k.name}: {' '.join(k.ops)} fused into one row kernel over "
        f"{list(shape)}", 3)
    return True


_ROW_KIND = {False: "softmax", True: "log_softmax"}   # RowKernel.kind


def _same_shape(a: tuple, b: tuple) -> bool:
    """Equal shapes; a dim that is a runtime size on either side counts as equal (under
    dynamic=True every size is its own lifted number, and the op's meta, run on every traced
    call, has already checked that they agree)."""
    return len(a) == len(b) and all(x == y or type(x) is not int or type(y) is not int
                                    for x, y in zip(a, b))


def _norm_param_ok(a: tuple, shape: tuple) -> bool:
    """A norm's weight/bias of shape ``a`` can be indexed right-aligned against the input's
    ``shape``: right-aligned, each dim a literal 1 (broadcast) or the input's size.  A runtime
    size on either side counts as agreeing: ints of 0 and 1 always specialize (a lifted size is
    at least 2, so never a broadcast 1), and the op's meta, run on every traced call, has
    checked that the two agree."""
    off = len(shape) - len(a)
    return off >= 0 and all(m == 1 or m == shape[off + j] or type(m) is not int or type(
        shape[off + j]) is not int for j, m in enumerate(a))


# -- layer_norm / rms_norm ----------------------------------------------------------------------
@lowering(OPS.layer_norm, centered=True)
@lowering(OPS.rms_norm, centered=False)
def lower_norm(lw: LoweringContext, i: int, n: Any, centered: bool) -> str | None:
    """layer_norm (``centered``: y, mean, rstd) / rms_norm (y, rstd) over ``dims`` of a
    C-ordered float32/float64 (or float16/bfloat16) value, with weight/bias that broadcast
    against it (layer norm's of the normalized shape; batch norm's ``(C, 1, 1)`` over the kept
    channel dim): one kernel (statistics passes over the normalized dims per kept index, then
    the normalized values), the formulas of the eager kernels."""
    reason = check_inputs(lw, n, row=True, lowp_row=True)
    if reason is not None:
        return reason
    name, dims, eps = n.op.name, n.params.get("dims"), n.params.get("eps")
    x = n.args[0]
    v = lw.vals[x]
    shape = v.shape if isinstance(v, PointwiseValue) else v.geom.shape
    strides = v.strides if isinstance(v, PointwiseValue) else v.geom.strides
    nd = len(shape)
    if type(dims) is not tuple or not dims or list(dims) != sorted(set(dims)) or \
            dims[0] < 0 or dims[-1] >= nd:
        return f"dims={dims!r}"
    if type(eps) not in (int, float, Sym):
        return f"eps={eps!r}"
    if not c_ordered(strides, shape) or any(m == 0 for m in shape):
        return "permuted or empty input"
    params = [a for a in n.args[1:]]
    norm_shape = tuple(shape[d] for d in dims)
    for a in params:
        if a is not None and (not is_ref(a) or not _norm_param_ok(lw.shape_of(a), shape)):
            return "weight/bias do not broadcast against the input"

    def allowed(u: Any) -> bool:
        return u is n
    nest = _nest(lw, i, n, dims, allowed)
    if isinstance(nest, str):
        return nest
    t = nest.ctype
    count = numel(norm_shape)
    if centered:
        mean = _mean(nest, n, None, None, count)
        d = nest.let(1, t, _op("({0} - {1})", nest.value, mean))
        a = nest.accum(1, "sum", "double", "0", _op(f"((double)(({t})({{0}} * {{0}})))", d))
        var = nest.final(1, t, _op(f"(({t})({{0}}) / ({t})({count}))", a))
        k = 2
    else:
        a = nest.accum(0, "sum", "double", "0",
                       _op(f"((double)(({t})({{0}} * {{0}})))", nest.value))
        var = nest.final(0, t, _op(f"(({t})({{0}}) / ({t})({count}))", a))
        k = 1
    e = c_scalar(eps, t) if type(eps) is Sym else f"({t}){float(eps)!r}"
    rstd = nest.final(k - 1, t, _op(f"(({t})1 / ember_sqrt({{0}} + {e}))", var))
    y = nest.let(k, t, _op("({0} - {1})", nest.value, mean) if centered
                 else Local(nest.value))
    y = nest.let(k, t, _op("({0} * {1})", y, rstd))
    for a, fmt in zip(params, ("({0} * {1})", "({0} + {1})")):
        if a is not None:
            pv = lw.vals[a]
            if not hasattr(pv, "geom") or pv.buf is None:
                return "weight/bias not in memory"  # (cannot happen: parameters are inputs)
            pvars = nest.dim_vars[nd - len(pv.geom.shape):]  # right-aligned broadcast
            w = nest.let(k, t, Load(pv.buf, _index(pv.geom, pvars)))
            y = nest.let(k, t, _op(fmt, y, w))
    contig = contiguous_strides(shape)
    ybuf = _out(lw, i, 0, shape, contig, n.specs[0][1])
    nest.pass_(k).body.append(Store(ybuf, _index(Geometry(shape, contig), nest.dim_vars),
                                    Local(y)))
    stat = tuple(1 if d in dims else shape[d] for d in range(nd))
    st = contiguous_strides(stat)
    sidx = Index(0, tuple((nest.dim_vars[d], st[d]) for d in range(nd) if stat[d] != 1))
    outs = [mean, rstd] if centered else [rstd]
    for j, val in enumerate(outs, start=1):
        buf = _out(lw, i, j, stat, st, n.specs[j][1])
        nest.kernel.stores.append(Store(buf, sidx, Local(val)))
    nest.kernel.ops.append(name)
    return None


@lowering(OPS.layer_norm_backward)
def lower_norm_backward(lw: LoweringContext, i: int, n: Any) -> str | None:
    """layer_norm_backward (gx, gw, gb) over trailing dims: per row the two sums of the eager
    formula, then gx; gw and gb are column sums over the rows in the same nest (double
    scratch).  ONE kernel; the op order of ``_ln_bwd_rows``."""
    reason = check_inputs(lw, n, row=True)
    if reason is not None:
        return reason
    dims = n.params.get("dims")
    gy_ref, x_ref, w_ref, m_ref, r_ref, gm_ref, gr_ref = n.args
    v = lw.vals[gy_ref]
    shape = v.shape if isinstance(v, PointwiseValue) else v.geom.shape
    nd = len(shape)
    if type(dims) is not tuple or not dims or dims != tuple(range(nd - len(dims), nd)):
        return "not over trailing dims"
    if any(m == 0 for m in shape):
        return "empty input"
    norm_shape = shape[nd - len(dims):]
    stat = tuple(1 if d in dims else shape[d] for d in range(nd))
    want = {x_ref: shape, w_ref: norm_shape, m_ref: stat, r_ref: stat, gm_ref: stat,
            gr_ref: stat}
    close = False
    for r, sh in want.items():
        if r is None:
            continue
        if not is_ref(r) or not _same_shape(lw.shape_of(r), sh):
            return "operand shapes"
        rv = lw.vals[r]
        if not c_ordered(rv.strides if isinstance(rv, PointwiseValue) else rv.geom.strides, sh):
            return "permuted operand"
        if isinstance(rv, PointwiseValue):
            lw.store_buffer(r, rv)
            close = True
    if close:
        lw.close_group()

    def allowed(u: Any) -> bool:
        return u is n
    nest = _nest(lw, i, n, dims, allowed)
    if isinstance(nest, str):
        return nest
    t, dv = nest.ctype, nest.dim_vars
    wv = dv[nd - len(dims):]

    def ld(k: int, r: Any, vars_: list) -> str:
        m = lw.vals[r]
        return nest.let(k, t, Load(m.buf, _index(m.geom, vars_)))

    def row(k: int) -> tuple:
        xhat = nest.let(k, t, _op("({0} - {1})", ld(k, x_ref, dv), ld(k, m_ref, dv)))
        xhat = nest.let(k, t, _op("({0} * {1})", xhat, ld(k, r_ref, dv)))
        gxh = nest.value if w_ref is None else \
            nest.let(k, t, _op("({0} * {1})", nest.value, ld(k, w_ref, wv)))
        return xhat, gxh
    xhat, gxh = row(0)
    a1 = nest.accum(0, "sum", "double", "0", _op("((double)({0}))", gxh))
    prod = nest.let(0, t, _op("({0} * {1})", gxh, xhat))
    a2 = nest.accum(0, "sum", "double", "0", _op("((double)({0}))", prod))
    count = numel(norm_shape)

    def fin(tmpl: str, *args: Any) -> str:
        return nest.final(0, t, _op(tmpl, *args))
    inv = nest.final(0, t, Op("reduce", f"(({t})(1.0 / (double)({count})))", ()))
    rs = nest.final(0, t, Load(lw.vals[r_ref].buf, _index(lw.vals[r_ref].geom, dv)))
    m1 = fin(f"(({t}){{0}} * {{1}})", a1, inv)
    m2 = fin(f"(({t}){{0}} * {{1}})", a2, inv)
    c1 = fin("({0} * {1})", rs, m2)
    if gr_ref is not None:
        g = nest.final(0, t, Load(lw.vals[gr_ref].buf, _index(lw.vals[gr_ref].geom, dv)))
        c1 = fin("({0} + ((({1} * {2}) * {2}) * {3}))", c1, g, rs, inv)
    c0 = fin("({0} * {1})", rs, m1)
    if gm_ref is not None:
        g = nest.final(0, t, Load(lw.vals[gm_ref].buf, _index(lw.vals[gm_ref].geom, dv)))
        c0 = fin("({0} - ({1} * {2}))", c0, g, inv)
    xhat, gxh = row(1)
    gx = nest.let(1, t, _op("(({0} * {1}) - ({2} * {3}))", gxh, rs, xhat, c1))
    gx = nest.let(1, t, _op("({0} - {1})", gx, c0))
    contig = contiguous_strides(shape)
    gxb = _out(lw, i, 0, shape, contig, n.specs[0][1])
    nest.pass_(1).body.append(Store(gxb, _index(Geometry(shape, contig), dv), Local(gx)))
    wst = contiguous_strides(norm_shape)
    widx = _index(Geometry(norm_shape, wst), wv)
    gyx = nest.let(1, t, _op("({0} * {1})", nest.value, xhat))
    for j, val in ((1, gyx), (2, nest.value)):
        buf = _out(lw, i, j, norm_shape, wst, n.specs[j][1])
        nest.pass_(1).body.append(ColumnAccum(buf, widx, Local(val)))
    nest.kernel.ops.append(n.op.name)
    return None


def _eps_share(eps: float, n_cls: Any) -> str:
    """label_smoothing's share of one class, ``eps / C`` in double, as a C constant (or, with a
    runtime class count, the same quotient computed in C)."""
    return repr(eps / n_cls) if type(n_cls) is int else f"({eps!r} / (double)({n_cls}))"


@lowering(OPS.cross_entropy, backward=False)
@lowering(OPS.cross_entropy_backward, backward=True)
def lower_cross_entropy(lw: LoweringContext, i: int, n: Any, backward: bool) -> str | None:
    """cross_entropy of (N, C) (or (C,)) float logits with int64 class targets, no class
    weights: per row the max and sum of exp (log_softmax), the picked target, label smoothing
    from the row sum; 'sum'/'mean' add the rows in a double scratch (mean divides by the
    number of targets that are not ``ignore_index``).  ONE kernel.  A target out of range
    makes the kernel fail and the graph rerun eagerly, which raises eager's error."""
    reason = check_inputs(lw, n, row=True, targets=True)
    if reason is not None:
        return reason
    g_ref, x_ref, t_ref, w_ref = n.args if backward else (None,) + tuple(n.args)
    p = n.params
    red, ign, eps = p.get("reduction"), p.get("ignore_index"), p.get("label_smoothing")
    if w_ref is not None:
        return "class weights (not lowered)"
    if red not in ("none", "sum", "mean") or type(ign) is not int or type(eps) not in (
            int, float):
        return "symbolic parameters"
    v = lw.vals[x_ref]
    shape = v.shape if isinstance(v, PointwiseValue) else v.geom.shape
    if len(shape) not in (1, 2) or any(m == 0 for m in shape):
        return "class dim not last, or empty"
    if not is_ref(t_ref) or lw.vals[t_ref].dtype.np.name != "int64":
        return "targets are not int64 class indices"
    for r in (t_ref, g_ref):
        rv = lw.vals.get(r) if r is not None else None
        if isinstance(rv, PointwiseValue):
            lw.store_buffer(r, rv)
            lw.close_group()
    tv = lw.vals[t_ref]
    if backward and lw.vals[g_ref].dtype.np.name != lw.vals[x_ref].dtype.np.name:
        return "gradient dtype differs from the logits'"
    strides = v.strides if isinstance(v, PointwiseValue) else v.geom.strides
    if not c_ordered(strides, shape):
        return "permuted logits"
    dims = (len(shape) - 1,)

    # the logits stay in memory (the picked one is gathered): producers are not fused
    if backward:  # the nest iterates the logits
        n = _Shifted(n)
    nest = _nest(lw, i, n, dims, lambda u: False)
    n = getattr(n, "node", n)
    if isinstance(nest, str):
        return nest
    x = lw.vals[x_ref]
    t, n_cls = nest.ctype, shape[-1]
    m = nest.accum(0, "max", t, "-INFINITY", Local(nest.value))
    sx = nest.accum(0, "sum", "double", "0", _op("((double)({0}))", nest.value)) if eps else ""
    m = nest.final(0, t, _op(f"(isfinite({{0}}) ? {{0}} : ({t})0)", m))
    e = nest.let(1, t, _op("ember_exp({0} - {1})", nest.value, m))
    s = nest.accum(1, "sum", "double", "0", _op("((double)({0}))", e))
    ls = nest.final(1, t, _op(f"ember_log(({t})({{0}}))", s))
    tidx = _index(Geometry(tv.geom.shape, tv.geom.strides, tv.geom.offset), nest.dim_vars[:-1])
    tgt = nest.final(1, "int64_t", Load(tv.buf, tidx))
    nest.pass_(1).finals.append(Check(_op(
        f"(({{0}} < 0) | ({{0}} >= {n_cls})) & ({{0}} != {ign})", tgt)))
    valid = nest.final(1, "bool", _op(f"({{0}} != {ign})", tgt))
    safe = nest.final(1, "int64_t", _op("({1} ? {0} : 0)", tgt, valid))
    row = Index(x.geom.offset, tuple(
        (var, st) for var, st, m in zip(nest.dim_vars[:-1], x.geom.strides[:-1],
                                        x.geom.shape[:-1]) if st != 0 and m != 1))
    stride = x.geom.strides[-1]
    xt = nest.final(1, t, _op(f"{x.buf.name}[{row} + ({{0}}) * {stride}]", safe))
    if backward:
        return _ce_grad(lw, i, n, nest, m, ls, tgt, valid, safe, g_ref, tv)
    logp = nest.final(1, t, _op("(({0} - {1}) - {2})", xt, m, ls))
    loss = nest.final(1, t, _op(f"(({t})({{1}} ? -{{0}} : ({t})0) * ({t}){1.0 - eps!r})",
                                logp, valid))
    if eps:
        # sum_c logp_c = sum_c x_c - C (m + log(sum)), in double
        smooth = nest.final(1, t, _op(f"(({t})({{0}} - (double)({n_cls}) * ((double){{1}} + "
                                      f"(double){{2}})))", sx, m, ls))
        loss = nest.final(1, t, _op(f"({{0}} + ({{1}} ? -{{2}} : ({t})0) * "
                                    f"({t}){_eps_share(eps, n_cls)})", loss, valid, smooth))
    out_shape = tuple(shape[:-1]) if red == "none" else ()
    buf = _out(lw, i, 0, out_shape, contiguous_strides(out_shape), n.specs[0][1])
    if red == "none":
        st = contiguous_strides(out_shape)
        nest.kernel.stores.append(Store(buf, Index(0, tuple(
            (f"o{d}", st[d]) for d in range(len(out_shape)) if out_shape[d] != 1)),
            Local(loss)))
    else:
        final = ""
        if red == "mean":
            cnt = lw.buffer(n.specs[0][1], (), "temp")
            nest.kernel.stores.append(ColumnAccum(cnt, Index(0, ()),
                                                  _op("((double){0})", valid)))
            final = f"(({t})({{0}}) / ({t})acc_{cnt.name}[0])"
        nest.kernel.stores.append(ColumnAccum(buf, Index(0, ()), Local(loss), final))
    nest.kernel.ops.append(n.op.name)
    return None


class _Shifted:
    """A cross_entropy_backward node seen with the logits first (what ``_nest`` reduces)."""

    def __init__(self, node: Any) -> None:
        self.node, self.op, self.params = node, node.op, node.params
        self.args = tuple(node.args[1:])


def _ce_grad(lw: LoweringContext, i: int, n: Any, nest: _Nest, m: str, ls: str, tgt: str,
             valid: str, safe: str, g_ref: Any, tv: Any) -> None:
    """cross_entropy_backward: grad = gs * (a * p - b) per element, eager's ``_ce_coefs``
    (p = exp(logp); a = (1 - e) [valid] + e; b = (1 - e) [valid] at the target, + e / C);
    for 'mean' a sweep over the targets first counts the valid ones (the divisor)."""
    t, p = nest.ctype, n.params
    red, ign, eps = p["reduction"], p["ignore_index"], float(p["label_smoothing"])
    k = nest.kernel
    n_cls = k.inner[-1]
    gv = lw.vals[g_ref]
    if red == "none":
        gs = nest.final(1, t, Load(gv.buf, _index(gv.geom, nest.dim_vars[:-1])))
    else:
        gs = nest.final(1, t, Load(gv.buf, Index(gv.geom.offset, ())))
    if red == "mean":
        if k.outer:
            tidx = _index(Geometry(tv.geom.shape, tv.geom.strides, tv.geom.offset),
                          k.outer_vars())
            q = nest.name("q")
            a = nest.name("a")
            k.pre = ReducePass([Let(q, "int64_t", Load(tv.buf, tidx))],
                               [Accum(a, "sum", "int64_t", "0", _op(f"({{0}} != {ign})", q))])
            den = nest.name("f")
            k.pre.finals.append(Let(den, t, _op(f"(({t}){{0}})", a)))
        else:
            den = nest.final(1, t, _op(f"(({t}){{0}})", valid))
        gs = nest.final(1, t, _op("({0} / {1})", gs, den))
    gs = nest.final(1, t, _op(f"({{0}} * ({t}){{1}})", gs, valid))
    wt = f"(({t}){{0}})"
    # eager: eps / C * sum(w = 1)
    es = (repr(eps / n_cls * n_cls) if type(n_cls) is int
          else f"({_eps_share(eps, n_cls)} * (double)({n_cls}))")
    a = nest.final(1, t, _op(f"((({t}){1.0 - eps!r} * {wt}) + ({t}){es})", valid))
    bt = nest.final(1, t, _op(f"(({t}){1.0 - eps!r} * {wt})", valid))
    cls = nest.dim_vars[-1]
    lp = nest.let(2, t, _op("(({0} - {1}) - {2})", nest.value, m, ls))
    pr = nest.let(2, t, _op("ember_exp({0})", lp))
    share = _eps_share(eps, n_cls)
    b = nest.let(2, t, _op(f"((({cls} == {{0}}) ? {{1}} : ({t})0) + ({t}){share})"
                           if eps else f"(({cls} == {{0}}) ? {{1}} : ({t})0)", safe, bt))
    gr = nest.let(2, t, _op("({0} * (({1} * {2}) - {3}))", gs, a, pr, b))
    shape = tuple(k.outer) + (n_cls,)
    contig = contiguous_strides(shape)
    buf = _out(lw, i, 0, shape, contig, n.specs[0][1])
    nest.pass_(2).body.append(Store(buf, _index(Geometry(shape, contig), nest.dim_vars),
                                    Local(gr)))
    k.ops.append(n.op.name)
    return None


__all__ = ["lower_cross_entropy", "lower_norm", "lower_norm_backward", "lower_softmax"]

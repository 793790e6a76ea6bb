"""Reductions and fused row-wise ops -> ``ReduceKernel`` (ARCHITECTURE.md §5).

``lower_reduction(lw, i, node, rule)`` is registered for each reduction OpDef (``rule``: how it
folds, bound at registration) and returns None when the node became (part of) a reduction
kernel, else the reason it stays an extern.  What it does:

* **producers fuse**: when the open pointwise group exists only to compute the reduction's
  input (nothing else leaves it), the group's body becomes the kernel's per-element prologue:
  ``(x * y).sum(-1)`` never stores ``x * y``;
* **horizontal fusion**: reductions over the same input and the same dims share one kernel
  (``x.sum(-1)`` and ``x.amax(-1)``: one loop nest, two accumulators); a reduction joins the
  kernel of an earlier one even when other kernels were emitted in between (it only reads
  what that kernel reads, and its result is used later);
* **multi-pass ops** (mean-then-variance, max-then-sum-of-exp) are passes over the reduced
  dims of one kernel; ``layer_norm``/``rms_norm`` add a last pass that writes the normalized
  output: ONE kernel each (the row ops live in ``rows.py``);
* the reduced value is stored (in eager's memory order) and later pointwise consumers load it;
* index reductions (argmax/argmin, max/min with indices) fold a (value, flat index) pair per
  lane, the first extreme winning and a NaN winning (``arg_better`` in the codegen);
  vector_norm is the eager formula per ``ord``; float16/bfloat16 compute in float and round
  once at the store; softmax/log_softmax of a permuted value over its unit-stride dim are a
  three-pass kernel (``softmax``).

Accumulation: float32/float64 sums, means, products and variances accumulate in double, in
independent lanes (the codegen's ``lane_loop``): at least as accurate as NumPy's pairwise float
sum, and vectorized.  max/min propagate NaN as NumPy does.  ``accumulator`` is the one place
that maps a dtype to accumulator and compute types (float16/bfloat16 plug in there).
"""

from __future__ import annotations

import math
from typing import Any

from ember.compiler.c.ir.loop_ir import (
    CTYPES,
    STORAGE_CTYPES,
    Accum,
    Buffer,
    Geometry,
    Index,
    Let,
    Load,
    Local,
    Op,
    ReduceKernel,
    ReducePass,
    Store,
    compute_ctype,
    contiguous_strides,
    is_lowp,
    numel,
    round_expr,
)
from ember.compiler.c.lower.context import (
    LoweringContext,
    PendingLoad,
    PointwiseValue,
    c_ordered,
    is_ref,
    rename,
    size_of,
)
from ember.compiler.c.lower.registry import OpSet, group_sink, lowering
from ember.compiler.c.lower.scan import eager_scan_strides
from ember.compiler.frontend.graph import Sym
from ember.ops import OPS

# (values, indices) and index reductions along ``dim`` (None: every dim, flattened)
ARG_OPS = OpSet([OPS.argmax, OPS.argmin, OPS.max_dim, OPS.min_dim])
# reductions that raise in eager over an empty dim (vector_norm too, for ord < 0 or inf)
_EMPTY_RAISES = OpSet([OPS.amax, OPS.amin]) | ARG_OPS
_FLOAT = ("float", "double")
_INT_MIN = {"int64_t": "INT64_MIN", "int32_t": "INT32_MIN", "int16_t": "INT16_MIN",
            "int8_t": "INT8_MIN", "uint8_t": "0", "bool": "0"}
_INT_MAX = {"int64_t": "INT64_MAX", "int32_t": "INT32_MAX", "int16_t": "INT16_MAX",
            "int8_t": "INT8_MAX", "uint8_t": "UINT8_MAX", "bool": "1"}


def accumulator(kind: str, dtype: Any, out_dtype: Any) -> tuple[str, str]:
    """(accumulator C type, initial value) of reduction ``kind`` over values of ``dtype``
    giving ``out_dtype``: float sums/products in double, max/min in the value type, integer
    sums in the output type (they wrap as NumPy's do), any/all in bool."""
    t = compute_ctype(dtype)
    if kind in ("any", "all"):
        return "bool", "0" if kind == "any" else "1"
    if kind in ("max", "min", "argmax", "argmin"):
        kind = kind[-3:]
        if t in _FLOAT:
            return t, "-INFINITY" if kind == "max" else "INFINITY"
        return t, (_INT_MIN if kind == "max" else _INT_MAX)[t]
    init = "1" if kind == "prod" else "0"
    if t in _FLOAT:
        return "double", init
    return CTYPES[out_dtype.np.name], init


def check_inputs(lw: LoweringContext, n: Any, row: bool = False, lowp_row: bool = False,
                 targets: bool = False) -> str | None:
    """Why reduction or row node ``n`` cannot be lowered from its inputs and dtypes (None: it
    can); values that live only in another kernel's prologue are stored first.  ``row``: a row
    op (float32/float64 only, or also float16/bfloat16 with ``lowp_row``); ``targets``: its
    second-to-last argument is int64 class targets."""
    x = n.args[0]
    dims = _dims_of(lw, n)
    if not any(key[0] == x and key[-1] == dims for key in lw.reduce_nests):
        lw.materialize([a for a in n.args if is_ref(a)])
    v = lw.vals.get(x)
    if v is None or not is_ref(x):
        return "input not lowered"
    for r in [a for a in n.args if is_ref(a)]:
        if targets and r == n.args[-2]:
            continue  # the int64 targets
        d = lw.vals[r].dtype
        if d.np.name not in ("float32", "float64") and (
                (row and not (is_lowp(d) and lowp_row)) or d.np.name not in STORAGE_CTYPES):
            return f"dtype {d.name} (not lowered for this op)"
    if any(s[1].np.name not in STORAGE_CTYPES for s in n.specs):
        return "output dtype not lowered"
    return None


def lower_reduction(lw: LoweringContext, i: int, n: Any, rule: Any) -> str | None:
    """Lower graph node ``i`` (``n``) into a reduction kernel folding with ``rule``; None, or
    why it stays eager."""
    reason = check_inputs(lw, n)
    if reason is not None:
        return reason
    return _reduction(lw, i, n, rule)


# -- kernel state -------------------------------------------------------------------------------
class _Nest:
    """A ReduceKernel under construction: the per-element prologue (producers) and the
    variable of each input dim."""

    def __init__(self, kernel: ReduceKernel, prologue: list, value: str, dim_vars: list,
                 ctype: str) -> None:
        self.kernel, self.prologue, self.value = kernel, prologue, value
        self.dim_vars, self.ctype = dim_vars, ctype
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count - 1}"

    def pass_(self, k: int) -> ReducePass:
        while len(self.kernel.passes) <= k:
            self.kernel.passes.append(ReducePass(list(self.prologue)))
        return self.kernel.passes[k]

    def accum(self, k: int, kind: str, ctype: str, init: str, value: Any) -> str:
        name = self.name("a")
        self.pass_(k).accums.append(Accum(name, kind, ctype, init, value))
        return name

    def final(self, k: int, ctype: str, expr: Any) -> str:
        name = self.name("f")
        self.pass_(k).finals.append(Let(name, ctype, expr))
        return name

    def arg_accum(self, k: int, kind: str, ctype: str, init: str, value: Any,
                  index: Any) -> str:
        """An argmax/argmin accumulator: after the pass, ``name`` holds the extreme value and
        ``name_i`` (int64_t) the flat index (over the reduced dims, C order) of its first
        occurrence; a NaN wins (the first NaN), as NumPy's and PyTorch's argmax."""
        name = self.name("a")
        self.pass_(k).accums.append(Accum(name, kind, ctype, init, value, index))
        return name

    def let(self, k: int, ctype: str, expr: Any) -> str:
        name = self.name("p")
        self.pass_(k).body.append(Let(name, ctype, expr))
        return name


def _op(template: str, *args: Any) -> Op:
    return Op("reduce", template, tuple(a if not isinstance(a, str) else Local(a)
                                         for a in args))


def _nest(lw: LoweringContext, i: int, n: Any, dims: tuple, allowed: Any) -> _Nest | str:
    """The kernel that reduces node ``n``'s first input over ``dims``: an open one over the
    same input and dims (horizontal fusion), or a new one with the input's producers fused
    in as its prologue when ``allowed(use_node)`` holds for every other use."""
    x = n.args[0]
    v = lw.vals[x]
    state = lw.reduce_nests
    shape = v.shape if isinstance(v, PointwiseValue) else v.geom.shape
    key = (x, dims) if isinstance(v, PointwiseValue) else (id(v.buf), v.geom, dims)
    got = state.get(key)
    if got is not None and n.op in REDUCTIONS:
        return got
    kept = [d for d in range(len(shape)) if d not in dims]
    dim_vars = [f"o{kept.index(d)}" if d in kept else f"r{dims.index(d)}"
                for d in range(len(shape))]
    ct = compute_ctype(v.dtype)
    if isinstance(v, PointwiseValue) and _absorbable(lw, x, v, shape, allowed):
        g = lw.group
        lw.group = None
        prologue = [Let(p.name, p.buf.compute_ctype, Load(p.buf, _index(p.geom, dim_vars)))
                    if isinstance(p, PendingLoad) else p for p in g.body]
        value, ops = v.local, list(g.ops)
    else:
        if isinstance(v, PointwiseValue) and v.group is not lw.group:
            return "value of a reduction kernel's prologue"
        if isinstance(v, PointwiseValue):
            lw.store_buffer(x, v)
            lw.close_group()  # the value is stored by the group's kernel, before this one
            v = lw.vals[x]
        elif lw.group is not None and id(v.buf) in lw.group.writes:
            lw.close_group()
        value, ops = "x0", []
        prologue = [Let(value, ct, Load(v.buf, _index(v.geom, dim_vars)))]
    lw.open_segment()
    inner = tuple(shape[d] for d in dims) or (1,)
    kern = ReduceKernel(lw.kernel_name(),
                        tuple(shape[d] for d in kept), inner, ops=ops,
                        kept_inner=_unit_dim_kept(v, shape, dims))
    lw.add_kernel(kern)
    nest = _Nest(kern, prologue, value, dim_vars, ct)
    lw.reduce_all.append(nest)
    if n.op in REDUCTIONS:
        state[key] = nest
    return nest


def _unit_dim_kept(v: Any, shape: tuple, dims: tuple) -> bool:
    """True when the input's fastest-varying dim (in memory, or the last dim of a fused
    chain in C order) is kept and something is reduced."""
    if not dims or len(dims) == len(shape):
        return False
    strides = v.strides if isinstance(v, PointwiseValue) else v.geom.strides
    live = [d for d in range(len(shape)) if strides[d] != 0 and shape[d] != 1]
    if not live or any(type(strides[d]) is not int for d in live):
        return live[-1] not in dims if live else False
    fastest = min(live, key=lambda d: abs(strides[d]))
    return fastest not in dims


def _absorbable(lw: LoweringContext, x: tuple, v: Any, shape: tuple, allowed: Any) -> bool:
    """True when the open group computes ``x`` only for reductions ``allowed`` accepts."""
    g = lw.group
    if g is None or v.group is not g or g.shape != shape or v.buf is not None:
        return False
    if g.has_random():
        return False  # a random op's flat index needs the plain kernel's loop variables

    def ok(c: int) -> bool:  # a later pointwise consumer of the same shape recomputes it
        u = lw.graph.nodes[c]
        return allowed(u) or (u.op.kind == "pointwise" and len(u.specs) == 1 and
                              tuple(size_of(m) for m in u.specs[0][0]) == shape)
    if x in lw.outputs or not all(ok(c) for c in lw.uses.get(x, ())):
        return False
    again = any(not allowed(lw.graph.nodes[c]) for c in lw.uses.get(x, ()))
    for ref, m in g.members.items():
        if ref == x:
            continue
        if m.buf is not None or ref in lw.outputs or any(
                ("n", c, 0) not in g.members and not ok(c) for c in lw.uses.get(ref, ())):
            return False
        again = again or any(("n", c, 0) not in g.members for c in lw.uses.get(ref, ()))
    # later consumers recompute the chain, unless the plan chose to store it (bytes moved)
    return not again or lw.plan is None or lw.plan.should_recompute(x)


# -- epilogues ---------------------------------------------------------------------------------
@group_sink
def as_epilogue(lw: LoweringContext, g: Any) -> bool:
    """Append closing group ``g`` to a reduction kernel of this segment when it reads only
    what that kernel can see (what was in memory before it, or its reduced results, which
    become registers) and iterates either the kernel's input space (a last pass: softmax
    backward's ``g * y - y * sum(g * y)`` is then ONE kernel) or its reduced space (finals
    once per kept index: ``sum / n``, ``rstd * mean``).  True when it did."""
    seg = lw.segment
    if seg is None:
        return False
    for nest in reversed(lw.reduce_all):
        k = nest.kernel
        if k not in seg.kernels or k.order or k.interchanged():
            continue
        ins = tuple((k.outer if var[0] == "o" else k.inner)[int(var[1:])]
                    for var in nest.dim_vars)
        kept = tuple(1 if var[0] == "r" else m for var, m in zip(nest.dim_vars, ins))
        if tuple(g.shape) == ins:
            dim_vars, full = nest.dim_vars, True
        elif tuple(g.shape) == kept:
            dim_vars, full = nest.dim_vars, False
        elif tuple(g.shape) == tuple(k.outer):
            dim_vars, full = k.outer_vars(), False
        else:
            continue
        if _merge(lw, seg, nest, g, dim_vars, full):
            return True
    return False


def _merge(lw: LoweringContext, seg: Any, nest: _Nest, g: Any, dim_vars: list, full: bool) -> bool:
    k = nest.kernel
    later = set()
    for k2 in seg.kernels[seg.kernels.index(k) + 1:]:
        later.update(id(b) for b in k2.buffers()[1])
    _, kstores = k.buffers()
    reduced = {(id(st.buf), st.index): st.expr for st in k.stores if isinstance(st, Store)}
    names: dict = {}
    if not full:  # outer-level locals share one scope with the finals: fresh names
        for x in g.body:
            if isinstance(x, (PendingLoad, Let)):
                names[x.name] = nest.name("q")
    body: list = []
    stores: list = []
    for x in g.body:
        if isinstance(x, PendingLoad):
            idx = _index(x.geom, dim_vars)
            got = reduced.get((id(x.buf), idx))
            if got is None and (id(x.buf) in later or x.buf in kstores):
                return False
            if got is not None and is_lowp(x.buf.dtype):  # what a load of the stored value
                got = Op("round", round_expr(x.buf.dtype, "{0}"), (got,))  # would give
            expr = got if got is not None else Load(x.buf, idx)
            body.append(Let(names.get(x.name, x.name), x.buf.compute_ctype, expr))
        elif type(x) is tuple:
            v = x[1]
            stores.append(Store(v.buf, _index(Geometry(v.shape, v.strides, 0), dim_vars),
                                rename(Local(v.local), names)))
        else:
            body.append(Let(names.get(x.name, x.name), x.ctype, rename(x.expr, names)))
    if full:
        k.passes.append(ReducePass(body + stores))
    else:
        k.passes[-1].finals.extend(body)
        k.stores.extend(stores)
    k.ops.extend(g.ops)
    # sealed: a later reduction over the same input starts its own kernel (its passes would
    # otherwise land in the epilogue, which does not hold the input's prologue)
    state = lw.reduce_nests
    for key in [key for key, got in state.items() if got is nest]:
        del state[key]
    return True


def _index(geom: Geometry, dim_vars: list) -> Index:
    terms = tuple((var, s) for var, s, m in zip(dim_vars, geom.strides, geom.shape)
                  if s != 0 and m != 1)
    return Index(geom.offset, terms)


def _out(lw: LoweringContext, i: int, j: int, shape: tuple, strides: tuple, dt: Any) -> Buffer:
    buf = lw.buffer(dt, shape, "temp")
    if strides != contiguous_strides(shape):
        buf.strides = strides
    lw.bind(i, j, buf, Geometry(shape, strides, 0), dt)
    return buf


# -- reductions ---------------------------------------------------------------------------------
def _dims_of(lw: LoweringContext, n: Any) -> Any:
    """The reduced dims of reduction node ``n``: its ``dims`` param, or for the index
    reductions (``dim``: an int, or None for every dim) the tuple they amount to."""
    if n.op not in ARG_OPS:
        return n.params.get("dims")
    x = n.args[0]
    if not is_ref(x) or x not in lw.vals:
        return None
    nd = len(lw.shape_of(x))
    d = n.params.get("dim")
    if nd == 0:
        return ()
    if d is None:
        return tuple(range(nd))
    return (d,) if type(d) is int else d


def _reduction(lw: LoweringContext, i: int, n: Any, rule: Any) -> str | None:
    name, p = n.op.name, n.params
    dims, keepdim = _dims_of(lw, n), p.get("keepdim")
    if type(dims) is not tuple or any(type(d) is not int for d in dims) or \
            type(keepdim) is not bool:
        return "symbolic dims"
    if "correction" in p and type(p.get("correction")) not in (int, float, Sym):
        return f"correction={p.get('correction')!r}"
    if n.op is OPS.vector_norm and type(p.get("ord")) not in (int, float):
        return "symbolic ord"
    v = lw.vals[n.args[0]]
    shape = v.shape if isinstance(v, PointwiseValue) else v.geom.shape
    in_strides = v.strides if isinstance(v, PointwiseValue) else v.geom.strides
    if (n.op in _EMPTY_RAISES or (
            n.op is OPS.vector_norm and (p["ord"] < 0 or math.isinf(p["ord"])))) and \
            any(shape[d] == 0 for d in dims):
        return f"empty {name} (eager raises)"
    def allowed(u: Any) -> bool:
        return u.op in REDUCTIONS and u.args[0] == n.args[0] and _dims_of(lw, u) == dims
    nest = _nest(lw, i, n, dims, allowed)
    if isinstance(nest, str):
        return nest
    out_shape = tuple(m for _, m in _out_dims(shape, dims, keepdim))
    results = rule(nest, n, v.dtype, n.specs[0][1],
                           numel(tuple(shape[d] for d in dims)))
    if isinstance(results, str):
        results = (results,)
    strides = _out_strides(n, shape, in_strides, out_shape)
    kept = [d for d in range(len(shape)) if d not in dims]
    pos = kept if keepdim else list(range(len(kept)))
    terms = tuple((f"o{k}", strides[q]) for k, q in enumerate(pos)
                  if strides[q] != 0 and out_shape[q] != 1)
    for j, result in enumerate(results):
        buf = _out(lw, i, j, out_shape, strides, n.specs[j][1])
        nest.kernel.stores.append(Store(buf, Index(0, terms), Local(result)))
    nest.kernel.ops.append(name)
    return None


def _out_dims(shape: tuple, dims: tuple, keepdim: bool) -> list:
    """(input dim, output size) per output dim (sizes from the input's SizeExprs)."""
    if keepdim:
        return [(d, 1 if d in dims else shape[d]) for d in range(len(shape))]
    return [(d, shape[d]) for d in range(len(shape)) if d not in dims]


def _out_strides(n: Any, shape: tuple, strides: tuple, out_shape: tuple) -> tuple:
    """Element strides of the reduction's output in eager's memory order (NumPy keeps the
    input's order for the kept dims)."""
    contig = contiguous_strides(out_shape)
    if c_ordered(strides, shape) or any(type(s) is not int for s in strides + shape):
        return contig
    import numpy as np
    small = tuple(1 if m == 1 else 2 for m in shape)
    order = sorted(range(len(shape)), key=lambda d: -abs(strides[d]))
    a = np.ones(tuple(small[d] for d in order), np.float64).transpose(np.argsort(order))
    try:
        out = n.op.eager(a, **n.params)
    except Exception:  # noqa: BLE001 - a kernel that rejects the stand-in: C order
        return contig
    if not isinstance(out, np.ndarray) or out.ndim != len(out_shape):
        return contig
    o = sorted(range(out.ndim), key=lambda d: -out.strides[d])
    res = [0] * len(out_shape)
    acc: Any = 1
    for d in reversed(o):
        res[d] = acc
        acc = acc * out_shape[d] if type(out_shape[d]) is int and type(acc) is int else \
            f"({acc} * {out_shape[d]})"
    return tuple(res)


def _cast(t: str, expr: str) -> str:
    return f"(({t})({expr}))"


def _sum_like(kind: str, value_tmpl: str):  # noqa: ANN202
    def rule(nest: _Nest, n: Any, dt: Any, out_dt: Any, count: Any) -> str:
        act, init = accumulator(kind, dt, out_dt)
        ot = compute_ctype(out_dt)
        val = value_tmpl.format(v="{0}", A=act, T=nest.ctype)
        a = nest.accum(0, kind, act, init, _op(val, nest.value))
        return nest.final(0, ot, _op(_cast(ot, "{0}"), a))
    return rule


def _mean(nest: _Nest, n: Any, dt: Any, out_dt: Any, count: Any) -> str:
    t = nest.ctype
    a = nest.accum(0, "sum", "double", "0", _op("((double)({0}))", nest.value))
    return nest.final(0, t, _op(f"(({t})({{0}}) / ({t})({count}))", a))


def _var(nest: _Nest, n: Any, dt: Any, out_dt: Any, count: Any, sqrt: bool = False) -> str:
    """Two passes as eager: the mean (float sum / n), then the sum of squared deviations."""
    t = nest.ctype
    mean = _mean(nest, n, dt, out_dt, count)
    d = nest.let(1, t, _op("({0} - {1})", nest.value, mean))
    a = nest.accum(1, "sum", "double", "0", _op(f"((double)(({t})({{0}} * {{0}})))", d))
    c = n.params["correction"]  # a lifted correction (dynamic=True) is read at run time
    corr = f"floats[{c.index}]" if type(c) is Sym else repr(float(c))
    den = f"((double)({count}) - {corr})"
    var = f"(({t})({{0}}) / ({t})({den} > 0 ? {den} : 0.0))"
    return nest.final(1, t, _op(f"ember_sqrt({var})" if sqrt else var, a))


def _logsumexp(nest: _Nest, n: Any, dt: Any, out_dt: Any, count: Any) -> str:
    """max, then log(sum(exp(x - max))) + max; float16/bfloat16 round each step to the
    dtype, as eager (PyTorch composes it from ops that each round)."""
    t = nest.ctype

    def r(tmpl: str) -> str:
        return round_expr(dt, tmpl)
    act, init = accumulator("max", dt, out_dt)
    m = nest.accum(0, "max", act, init, Local(nest.value))
    m = nest.final(0, t, _op(f"(isfinite({{0}}) ? {{0}} : ({t})0)", m))
    e = nest.let(1, t, _op(r(f"ember_exp({r('({0} - {1})')})"), nest.value, m))
    s = nest.accum(1, "sum", "double", "0", _op("((double)({0}))", e))
    total = r(f"(({t})({{0}}))")
    return nest.final(1, t, _op("(" + r(f"ember_log({total})") + " + {1})", s, m))


def _extreme(kind: str):  # noqa: ANN202
    def rule(nest: _Nest, n: Any, dt: Any, out_dt: Any, count: Any) -> str:
        act, init = accumulator(kind, dt, out_dt)
        a = nest.accum(0, kind, act, init, Local(nest.value))
        return nest.final(0, compute_ctype(out_dt), Local(a))
    return rule


def _vector_norm(nest: _Nest, n: Any, dt: Any, out_dt: Any, count: Any) -> str:
    """The eager kernel's formula per ``ord`` on |x|: sums in double (rounded once to the
    compute type), max/min with NaN propagating, a count of non-zeros for ord 0, pow for a
    general p (float16/bfloat16 compute in float and round once at the store, as eager)."""
    t, o = nest.ctype, float(n.params["ord"])
    a = nest.let(0, t, _op("ember_abs({0})", nest.value))
    if o == math.inf or o == -math.inf:
        kind = "max" if o > 0 else "min"
        act, init = accumulator(kind, dt, out_dt)
        return nest.final(0, t, Local(nest.accum(0, kind, act, init, Local(a))))
    if o == 2:
        v = _op(f"((double)(({t})({{0}} * {{0}})))", a)
    elif o == 1:
        v = _op("((double)({0}))", a)
    elif o == 0:
        v = _op("((double)({0} != 0))", a)
    else:
        v = _op(f"((double)ember_pow({{0}}, ({t}){o!r}))", a)
    s = nest.final(0, t, _op(f"(({t})({{0}}))", nest.accum(0, "sum", "double", "0", v)))
    if o == 2:
        return nest.final(0, t, _op("ember_sqrt({0})", s))
    if o in (0, 1):
        return s
    return nest.final(0, t, _op(f"ember_pow({{0}}, ({t}){1.0 / o!r})", s))


def _arg(kind: str, values: bool):  # noqa: ANN202
    """argmax/argmin (the index) and, with ``values``, max_dim/min_dim (value, index) of the
    first extreme."""
    def rule(nest: _Nest, n: Any, dt: Any, out_dt: Any, count: Any) -> Any:
        act, init = accumulator(kind, dt, out_dt)
        inner = nest.kernel.inner
        terms = []
        for d in range(len(inner)):
            stride = numel(tuple(inner[d + 1:]))
            terms.append(f"r{d}" if stride == 1 else f"r{d} * (int64_t)({stride})")
        index = Op("reduce", "(" + " + ".join(terms) + ")", ())
        a = nest.arg_accum(0, "arg" + kind, act, init, Local(nest.value), index)
        idx = nest.final(0, "int64_t", Local(a + "_i"))
        if values:
            return nest.final(0, compute_ctype(n.specs[0][1]), Local(a)), idx
        return idx
    return rule


_RULES = (
    (OPS.sum, _sum_like("sum", "(({A})({v}))")),
    (OPS.nansum, _sum_like("sum", "(({v}) != ({v}) ? ({A})0 : ({A})({v}))")),
    (OPS.prod, _sum_like("prod", "(({A})({v}))")),
    (OPS.any, _sum_like("any", "(({v}) != 0)")),
    (OPS.all, _sum_like("all", "(({v}) != 0)")),
    (OPS.amax, _extreme("max")),
    (OPS.amin, _extreme("min")),
    (OPS.mean, _mean),
    (OPS.var, _var),
    (OPS.std, lambda *a: _var(*a, sqrt=True)),
    (OPS.logsumexp, _logsumexp),
    (OPS.vector_norm, _vector_norm),
    (OPS.argmax, _arg("max", values=False)),
    (OPS.argmin, _arg("min", values=False)),
    (OPS.max_dim, _arg("max", values=True)),
    (OPS.min_dim, _arg("min", values=True)),
)
# reductions over the same input and dims share one kernel (horizontal fusion)
REDUCTIONS = OpSet(op for op, _ in _RULES)
for _opdef, _rule in _RULES:
    lowering(_opdef, rule=_rule)(lower_reduction)


# -- softmax / log_softmax over any dim ----------------------------------------------------------
def softmax(lw: LoweringContext, i: int, n: Any, log: bool) -> str | None:
    """softmax/log_softmax along a dim the RowKernel does not take (a permuted value whose
    softmax dim is its unit-stride dim in memory: ``F.softmax(x.t(), 0)``, attention scores
    laid out transposed) as a three-pass ReduceKernel: the max (NaN propagates), the sum of
    ``exp(x - max)`` in double, then the output (``exp(x - max) / sum`` or ``x - max -
    log(sum)``), with eager's formula and rounding steps; the output keeps eager's memory
    order.  None, or why it stays eager."""
    x = n.args[0]
    dim = n.params.get("dim")
    if not is_ref(x) or x not in lw.vals or type(dim) is not int:
        return "symbolic dim"
    v = lw.vals[x]
    if not v.dtype.is_floating_point or v.dtype.np.name not in STORAGE_CTYPES:
        return f"dtype {v.dtype.name}"
    shape = v.shape if isinstance(v, PointwiseValue) else v.geom.shape
    strides = v.strides if isinstance(v, PointwiseValue) else v.geom.strides
    if not shape or any(type(m) is int and m == 0 for m in shape):
        return "0-d or empty input (eager copies)"
    dims = (dim,)
    if _unit_dim_kept(v, shape, dims) or (
            type(strides[dim]) is int and strides[dim] != 1 and shape[dim] != 1):
        # three strided passes over a column lose to eager's contiguous row-wise NumPy passes
        # (8x at 4096x1024 over dim 0): only the unit-stride dim (a permuted value) lowers
        return "dim is not the unit-stride dim (strided passes: eager is faster)"

    def allowed(u: Any) -> bool:
        return u is n
    geom = Geometry(tuple(shape), tuple(strides), 0)
    layout = eager_scan_strides(n, geom, v.dtype)
    out_strides = layout[0] if layout else contiguous_strides(tuple(shape))
    lw.materialize([x])
    nest = _nest(lw, i, n, dims, allowed)
    if isinstance(nest, str):
        return nest
    t, dt = nest.ctype, v.dtype
    act, init = accumulator("max", dt, dt)
    m = nest.final(0, t, Local(nest.accum(0, "max", act, init, Local(nest.value))))
    e = nest.let(1, t, _op("ember_exp({0} - {1})", nest.value, m))
    s = nest.final(1, t, _op(f"(({t})({{0}}))", nest.accum(1, "sum", "double", "0",
                                                          _op("((double)({0}))", e))))
    if not log:
        e2 = nest.let(2, t, _op("ember_exp({0} - {1})", nest.value, m))
        y = nest.let(2, t, _op("({0} / {1})", e2, s))
    else:
        # PyTorch's last-dim CPU kernel keeps the row sum and its log in a float16/bfloat16
        # input's dtype (eager follows it); other dims keep them in float
        last = is_lowp(dt) and dim == len(shape) - 1
        if last:
            s = nest.final(1, t, _op(round_expr(dt, "{0}"), s))
        ls = nest.final(1, t, _op(round_expr(dt, "ember_log({0})") if last
                                  else "ember_log({0})", s))
        y = nest.let(2, t, _op("(({0} - {1}) - {2})", nest.value, m, ls))
    buf = _out(lw, i, 0, tuple(shape), tuple(out_strides), n.specs[0][1])
    nest.pass_(2).body.append(Store(buf, _index(Geometry(tuple(shape), tuple(out_strides)),
                                                nest.dim_vars), Local(y)))
    nest.kernel.ops.append(n.op.name)
    return None


__all__ = ["ARG_OPS", "REDUCTIONS", "accumulator", "as_epilogue", "check_inputs",
           "lower_reduction", "softmax"]

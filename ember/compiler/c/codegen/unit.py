"""C source from the loop IR: one translation unit per graph (ARCHITECTURE.md §5).

The unit is ``runtime.C_PRELUDE`` (the runtime's exports), the math prelude (``PRELUDE``: the
``ember_*`` helpers that ``c_expr`` templates call), then one ``static`` function per kernel
(typed ``restrict`` pointers, so gcc vectorizes the inner loop) and one exported entry function
per segment with the runtime's ABI::

    int ember_entry(void **bufs, const int64_t *ints, const double *floats);

``<tgmath.h>`` makes ``exp(x)`` on a ``float`` call ``expf``: float32 math stays in float32.
"""

from __future__ import annotations

import re

from ember.compiler.c.build.runtime import C_PRELUDE
from ember.compiler.c.codegen import (
    attention,
    awake,
    csrc,
    flex,
    half,
    index,
    kernel_op,
    pool,
    qlinear,
    resample,
    rnn,
    row_exp,
    sort,
    stream,
)
from ember.compiler.c.codegen.gemm import gemm_kernel, gemm_prelude, im2col_kernel
from ember.compiler.c.codegen.omp import few_iterations, omp_for, omp_loops
from ember.compiler.c.codegen.prefetch import fits_prefetch, flat_prefetched, next_row_prefetch
from ember.compiler.c.codegen.prelude import PRELUDE
from ember.compiler.c.codegen.scan import scan_kernel
from ember.compiler.c.freeze import FREEZE_EXPORT
from ember.compiler.c.ir.kernels import (
    AdvIndexKernel,
    AttentionKernel,
    DimIndexKernel,
    FlexAttentionKernel,
    GemmKernel,
    Im2colKernel,
    IndexKernel,
    PoolKernel,
    ResampleKernel,
    ScanKernel,
    SearchKernel,
    SortKernel,
    UserKernel,
)
from ember.compiler.c.ir.loop_ir import (
    Check,
    ColumnAccum,
    Kernel,
    Program,
    ReduceKernel,
    RowKernel,
    Segment,
    Store,
    contiguous_strides,
    is_lowp,
    load_expr,
    numel,
    round_expr,
    store_expr,
)
from ember.compiler.c.ir.qlinear import QLinearKernel
from ember.compiler.c.ir.rnn import LstmKernel


def generate(program: Program, prelude: bool = True, openmp: bool = False,
             profile: bool = False) -> str:
    """The C translation unit of ``program`` (its segments' entry functions); without the
    preludes when ``prelude`` is false (golden tests compare only the generated part).
    ``openmp`` splits each kernel's outer loop over ``ember_num_threads`` threads.
    ``profile`` times every kernel call of the entries (``profile_block``; EMBER_C_PROFILE)."""
    parts = [C_PRELUDE, PRELUDE, gemm_prelude(program),
             attention.prelude(program), resample.prelude(program),
             rnn.prelude(program), half.prelude(program),
             qlinear.prelude(program)] if prelude else []
    n_pre = len(parts)   # the row exp helpers go after the preludes (they use half_block.h)
    segs = program.segments()
    if profile:
        parts.append(profile_block(program))
    funcs: dict = {}     # canonical text -> [function text, its name, call count]
    calls: dict = {}     # kernel name -> (function it calls, scalar arguments)
    for seg in segs:
        for k in seg.kernels:
            text, scalars = _by_value_scalars(_kernel(k, program, openmp))
            f = funcs.setdefault(_canonical(text), [text, k.name, 0])
            f[2] += 1
            calls[k.name] = (f[1], scalars)
    by_name = {f[1]: f for f in funcs.values()}
    slots = 0
    for seg in segs:
        for k in seg.kernels:
            f = by_name.pop(k.name, None)
            if f is not None:  # the first kernel of its kind: emit its function here
                # a function called from several places stays one function: gcc would
                # otherwise inline a copy into every call site (its time grows with each)
                parts.append(re.sub(r"static (void|int) ",
                                    r"__attribute__((noinline)) static \1 ", f[0], count=1)
                             if f[2] > 1 else f[0])
        parts.append(_entry(seg, calls, slots if profile else None))
        slots += len(seg.kernels)
    if getattr(program, "freeze_export", False):   # frozen weights' switches (c/freeze.py)
        parts.append(FREEZE_EXPORT)
    if prelude and any(row_exp.uses(f[0]) for f in funcs.values()):
        parts.insert(n_pre, row_exp.HEADER)
    if prelude and any("ember_stream_store(" in f[0] for f in funcs.values()):
        parts.insert(2, stream.HELPERS)
    return "\n".join(parts)


# -- EMBER_C_PROFILE: per-kernel timers ----------------------------------------------------------
# A profiled unit times each kernel call of its entries with clock_gettime (wall time on the
# calling thread, OpenMP regions included) and, separately, the time spent inside the BLAS
# calls of GEMM kernels (the macros below wrap ember_gemm_<s>/ember_gemm_batched_<s> at their
# call sites in kernels; the split work inside the helpers is not counted twice).  Slots are
# numbered over all kernels of all segments in order; ``backend.profile`` reads them.
_PROFILE = "\n" + csrc("profile.h.in")   # a %-format template: %(n)d, %(names)s


def profile_label(seg: Segment, k: Kernel) -> str:
    """A profiled kernel's name: ``<entry>:<kernel> <ops> (<kind>)``."""
    if isinstance(k, GemmKernel):
        kind = f"GEMM {k.impl} m={k.m} n={k.n} k={k.k}"
    elif isinstance(k, RowKernel):
        kind = f"row {k.op} {k.rows}x{k.cols}"
    elif isinstance(k, ReduceKernel):
        kind = "reduction, columns" if k.column_accums() else "reduction"
        if k.interchanged():
            kind = "reduction, reduced loops outside"
    elif isinstance(k, Im2colKernel):
        kind = "col2im" if k.col2im else "im2col"
    elif isinstance(k, QLinearKernel):
        kind = f"int8 linear n={k.n} k={k.k} m={k.m}{' per row' if k.per_row else ''}"
    elif isinstance(k, LstmKernel):
        kind = f"{k.mode.lower()}{' backward' if k.backward else ''} T={k.T} B={k.B} H={k.H}"
    elif isinstance(k, AttentionKernel):
        kind = (f"attention{' backward' if k.backward else ''} {'x'.join(map(str, k.batch))} "
                f"heads, L={k.L} S={k.S} E={k.E}")
    elif isinstance(k, FlexAttentionKernel):
        kind = f"flex attention B={k.B} HQ={k.HQ} L={k.L} S={k.S} E={k.E} splits={k.splits}"
    elif isinstance(k, IndexKernel):
        kind = (f"{'scatter-add' if k.scatter else 'gather'} {k.rows} rows x {k.cols}, "
                f"{k.num} weights")
    elif isinstance(k, DimIndexKernel):
        kind = f"{k.mode} along dim {k.dim}, index {list(k.idx_geom.shape)}"
    elif isinstance(k, SortKernel):
        kind = f"stable sort along dim {k.dim}, first {k.count}"
    elif isinstance(k, PoolKernel):
        kind = f"max_pool{' backward' if k.scatter else ''} {list(k.spatial)}"
    elif isinstance(k, ResampleKernel):
        kind = (f"{'resample_backward' if k.backward else 'resample'} {list(k.size_in)} -> "
                f"{list(k.size_out)}")
    elif isinstance(k, AdvIndexKernel):
        kind = f"{'index' if k.put is None else 'index_put'} at dims {list(k.dims)}"
    elif isinstance(k, UserKernel):
        kind = f"ember.kernel, grid {list(k.grid)}"
    elif not hasattr(k, "ranges"):   # other kernel kinds (scans)
        kind = type(k).__name__
    else:
        kind = "pointwise " + ("x".join(str(n) for n in k.ranges) or "scalar")
    return f"{seg.entry}:{k.name} {' '.join(k.ops)} ({kind})"


def profile_block(program: Program) -> str:
    """The timers' tables and readers (exported ``ember_profile_size``, ``_name``, ``_read``,
    ``_reset``) for every kernel of ``program``'s segments."""
    labels = [profile_label(seg, k) for seg in program.segments() for k in seg.kernels]
    names = ", ".join('"' + x.replace("\\", "/").replace('"', "'") + '"' for x in labels)
    return _PROFILE % {"n": len(labels), "names": names + (", " if names else "") + "0"}


# Identical kernels (the same loop over the same shapes in every layer of a model) are emitted
# once: a kernel's text with its own name, its buffers' names and its runtime integers' names
# replaced by their order of appearance is its key, and later kernels with the same key call
# the first one's function.  Runtime scalars (``ints[j]``, ``floats[k]``) that a kernel reads
# become by-value parameters first, so kernels that differ only in which lifted scalar they
# read (AdamW's per-parameter bias corrections) share one function too.  gcc's time is what
# this saves: the 6-layer GPT's training step has 184 kernels but 13 distinct ones.
_BUF_NAME = re.compile(r"\b(?:buf|in)\d+\b")
_SCALAR_READ = re.compile(r"\b(ints|floats)\[(\d+)\]")
_SCALAR_PARAMS = "const int64_t *restrict ints, const double *restrict floats"
_PASS_SCALARS = re.compile(r"\bints, floats\b")


def _by_value_scalars(text: str) -> tuple:
    """``text`` with its ``ints[j]``/``floats[k]`` reads turned into by-value parameters
    ``iv<a>``/``fv<b>`` and the C arguments the call passes for them (unchanged when it reads
    none)."""
    head, brace, body = text.partition("{\n")
    reads: dict = {}
    for m in _SCALAR_READ.finditer(body):
        reads.setdefault(m.group(0), (m.group(1), m.group(2)))
    if not reads or _SCALAR_PARAMS not in head:
        return text, ()
    names: dict = {}
    count = {"ints": 0, "floats": 0}
    params, args = [], []
    for read, (kind, _) in reads.items():
        name = names[read] = f"{'iv' if kind == 'ints' else 'fv'}{count[kind]}"
        count[kind] += 1
        params.append(f"const {'int64_t' if kind == 'ints' else 'double'} {name}")
        args.append(read)
    body = _SCALAR_READ.sub(lambda m: names[m.group(0)], body)
    body = body.replace("  (void)ints; (void)floats;\n", "")
    # a kernel split into a row helper and its driver (chunked reductions): the driver's head
    # and its call of the helper pass the same by-value scalars
    body = body.replace(_SCALAR_PARAMS, ", ".join(params))
    body = _PASS_SCALARS.sub(", ".join(names.values()), body)
    head = head.replace(_SCALAR_PARAMS, ", ".join(params))
    return head + brace + body, tuple(args)


def _canonical(text: str) -> str:
    m = re.search(r"static (?:void|int) ", text)
    rest = text[m.end():]
    ret = m.group(0)  # kernels that report input errors return int: never shared with voids
    rest = ret + rest.split("(", 1)[1]
    seen: dict = {}
    rest = _BUF_NAME.sub(lambda m: seen.setdefault(m.group(0), f"b{len(seen)}"), rest)
    ints: dict = {}
    rest = _INT_NAME.sub(lambda m: ints.setdefault(m.group(0), f"n{len(ints)}"), rest)
    locs: dict = {}   # a GEMM epilogue's locals carry the merged kernel's number (lower_gemm)
    return _EPI_LOCAL.sub(lambda m: locs.setdefault(m.group(0), f"l{len(locs)}_"), rest)


# -- reductions ---------------------------------------------------------------------------------
# Independent partial results per lane: gcc vectorizes the lane loop without reassociating
# anything (no -ffast-math), and the lanes are combined in a fixed order at the end.
LANES = 16


def combine(kind: str, acc: str, v: str, ctype: str) -> str:
    """C expression folding value ``v`` into accumulator ``acc`` for reduction ``kind``."""
    floating = ctype in ("float", "double")
    if kind in ("sum", "nansum"):
        return f"{acc} + {v}"
    if kind == "prod":
        return f"{acc} * {v}"
    if kind in ("max", "min"):
        cmp = ">" if kind == "max" else "<"
        if floating:  # NaN propagates (np.max); `|` keeps it a select gcc if-converts
            return f"((({v}) {cmp} ({acc})) | (({v}) != ({v}))) ? ({v}) : ({acc})"
        return f"(({v}) {cmp} ({acc})) ? ({v}) : ({acc})"
    if kind == "any":
        return f"{acc} | {v}"
    if kind == "all":
        return f"{acc} & {v}"
    raise AssertionError(kind)


def arg_better(kind: str, v: str, vi: str, b: str, bi: str, ctype: str) -> str:
    """C condition: value ``v`` at index ``vi`` replaces the running ``argmax``/``argmin``
    ``(b, bi)``: a strictly better value, an equal one at a smaller index (so the first
    occurrence wins, whatever order the lanes see), or a NaN (floats: NaN beats every number;
    between NaNs the smaller index)."""
    cmp = ">" if kind == "argmax" else "<"
    cond = f"(({v}) {cmp} ({b})) | ((({v}) == ({b})) & (({vi}) < ({bi})))"
    if ctype in ("float", "double"):
        cond += f" | ((({v}) != ({v})) & ((({b}) == ({b})) | (({vi}) < ({bi}))))"
    return cond


def _arg_update(kind: str, ct: str, acc: str, acc_i: str, v: str, vi: str) -> str:
    return (f"{{ const {ct} v_ = {v}; const int64_t vi_ = {vi}; "
            f"const int c_ = {arg_better(kind, 'v_', 'vi_', acc, acc_i, ct)}; "
            f"{acc} = c_ ? v_ : {acc}; {acc_i} = c_ ? vi_ : {acc_i}; }}")


def lane_loop(var: str, n: str, body: list, accs: list, ind: str,
              outer: tuple = (), head: tuple = (), ivdep: bool = False) -> list:
    """Lines of a loop ``for var in 0..n`` (inside the plain loops ``outer``: (var, n) pairs)
    running ``body`` (C lines that may use the loop variables) and folding each accumulator
    ``(name, ctype, kind, init, value)`` over LANES lanes; afterwards ``name`` holds the
    result (lanes combined in order).  ``head``: lines run once per block of LANES elements
    (they may use ``{var}_b``, the block's first index): the next row's prefetches.
    ``ivdep``: the caller knows that the lanes touch disjoint memory (gcc then vectorizes
    without a run-time alias check and a scalar copy of the loop)."""
    if not accs and head:
        return _blocked_loop(var, n, body, ind, outer, head)
    if not accs:
        out, pad = [], ""
        for v, m in list(outer) + [(var, n)]:
            out.append(f"{pad}for (int64_t {v} = 0; {v} < ({m}); {v}++) {{")
            pad += "  "
        out.extend(pad + b for b in body)
        for _ in list(outer) + [(var, n)]:
            pad = pad[:-2]
            out.append(f"{pad}}}")
        return [ind + x for x in out]
    accs = [tuple(a) + (None,) * (6 - len(a)) for a in accs]   # (.., index or None)
    out = [f"{ct} {name};" + (f" int64_t {name}_i;" if ix is not None else "")
           for name, ct, _k, _i, _v, ix in accs] + ["{"]
    for name, ct, _kind, init, _v, ix in accs:
        out.append(f"{ct} {name}_l[{LANES}];")
        out.append(f"for (int j_ = 0; j_ < {LANES}; j_++) {name}_l[j_] = {init};")
        if ix is not None:
            out.append(f"int64_t {name}_il[{LANES}];")
            out.append(f"for (int j_ = 0; j_ < {LANES}; j_++) {name}_il[j_] = INT64_MAX;")
    pad = ""
    for v, m in outer:
        out.append(f"{pad}for (int64_t {v} = 0; {v} < ({m}); {v}++) {{")
        pad += "  "
    out.append(f"{pad}int64_t {var}_b = 0;")
    out.append(f"{pad}for (; {var}_b + {LANES} <= ({n}); {var}_b += {LANES}) {{")
    out.extend(f"{pad}  {h}" for h in head)
    # fully unrolled first, the lane loop would not vectorize (its selects stay scalar)
    out.append(f"{pad}  _Pragma(\"GCC unroll 1\")")
    if ivdep:
        out.append(f"{pad}  _Pragma(\"GCC ivdep\")")
    out.append(f"{pad}  for (int64_t j_ = 0; j_ < {LANES}; j_++) {{")
    out.append(f"{pad}    const int64_t {var} = {var}_b + j_;")
    out.extend(f"{pad}    " + b for b in body)
    for name, ct, kind, _init, v, ix in accs:
        out.append(f"{pad}    " + (_arg_update(kind, ct, f"{name}_l[j_]", f"{name}_il[j_]", v,
                                               ix) if ix is not None else
                                   f"{name}_l[j_] = {combine(kind, f'{name}_l[j_]', v, ct)};"))
    out.append(f"{pad}  }}")
    out.append(f"{pad}}}")
    out.append(f"{pad}for (int64_t {var} = {var}_b; {var} < ({n}); {var}++) {{")
    out.extend(f"{pad}  " + b for b in body)
    for name, ct, kind, _init, v, ix in accs:
        out.append(f"{pad}  " + (_arg_update(kind, ct, f"{name}_l[0]", f"{name}_il[0]", v, ix)
                                 if ix is not None else
                                 f"{name}_l[0] = {combine(kind, f'{name}_l[0]', v, ct)};"))
    out.append(f"{pad}}}")
    for _ in outer:
        pad = pad[:-2]
        out.append(f"{pad}}}")
    for name, ct, kind, _init, _v, ix in accs:
        out.append(f"{name} = {name}_l[0];")
        if ix is not None:
            out.append(f"{name}_i = {name}_il[0];")
            out.append(f"for (int j_ = 1; j_ < {LANES}; j_++) "
                       + _arg_update(kind, ct, name, f"{name}_i", f"{name}_l[j_]",
                                     f"{name}_il[j_]"))
            continue
        out.append(f"for (int j_ = 1; j_ < {LANES}; j_++) "
                   f"{name} = {combine(kind, name, f'{name}_l[j_]', ct)};")
    out.append("}")
    return [ind + x for x in out]


def _blocked_loop(var: str, n: str, body: list, ind: str, outer: tuple, head: tuple) -> list:
    """``for var in 0..n: body`` in blocks of LANES elements, ``head`` once per block (a plain
    loop with a prefetch in it would not vectorize), then the remainder."""
    out, pad = [], ""
    for v, m in outer:
        out.append(f"{pad}for (int64_t {v} = 0; {v} < ({m}); {v}++) {{")
        pad += "  "
    out.append(f"{pad}int64_t {var}_b = 0;")
    out.append(f"{pad}for (; {var}_b + {LANES} <= ({n}); {var}_b += {LANES}) {{")
    out.extend(f"{pad}  {h}" for h in head)
    out.append(f"{pad}  _Pragma(\"GCC unroll 1\")")
    out.append(f"{pad}  for (int64_t j_ = 0; j_ < {LANES}; j_++) {{")
    out.append(f"{pad}    const int64_t {var} = {var}_b + j_;")
    out.extend(f"{pad}    " + b for b in body)
    out.append(f"{pad}  }}")
    out.append(f"{pad}}}")
    out.append(f"{pad}for (int64_t {var} = {var}_b; {var} < ({n}); {var}++) {{")
    out.extend(f"{pad}  " + b for b in body)
    out.append(f"{pad}}}")
    for _ in outer:
        pad = pad[:-2]
        out.append(f"{pad}}}")
    return [ind + "{"] + [ind + x for x in out] + [ind + "}"]


def _interchanged_body(k: ReduceKernel) -> list:
    """Lines of a single-pass kernel with the reduced loops outside and the kept loops inside:
    each output has its own accumulator in a scratch array (loads at unit stride, vectorized
    across the outputs; each accumulator still folds in order, so nothing is reassociated)."""
    p = k.passes[0]
    outer = list(zip(k.outer_vars(), k.outer))
    inner = list(zip(k.inner_vars(), k.inner))
    strides = contiguous_strides(tuple(k.outer))
    flat = " + ".join(f"{v} * ({s})" if s != 1 else v for (v, _), s in zip(outer, strides)) \
        or "0"
    n_out = numel(tuple(k.outer))
    lines = [f"  const int64_t n_out_ = {n_out};"]
    for a in p.accums:
        lines.append(f"  {a.ctype} *{a.name}_o = ({a.ctype} *)malloc((n_out_ ? n_out_ : 1) * "
                     f"sizeof({a.ctype}));")
        lines.append(f"  for (int64_t i = 0; i < n_out_; i++) {a.name}_o[i] = {a.init};")
        if a.index is not None:
            lines.append(f"  int64_t *{a.name}_io = (int64_t *)malloc((n_out_ ? n_out_ : 1) * "
                         f"sizeof(int64_t));")
            lines.append(f"  for (int64_t i = 0; i < n_out_; i++) {a.name}_io[i] = INT64_MAX;")
    ind = "  "
    for v, n in inner + outer:
        lines.append(f"{ind}for (int64_t {v} = 0; {v} < {n}; {v}++) {{")
        ind += "  "
    lines.append(f"{ind}const int64_t oi_ = {flat};")
    lines.extend(f"{ind}{st}" for st in p.body)
    for a in p.accums:
        if a.index is not None:
            lines.append(ind + _arg_update(a.kind, a.ctype, f"{a.name}_o[oi_]",
                                           f"{a.name}_io[oi_]", str(a.value), str(a.index)))
            continue
        lines.append(f"{ind}{a.name}_o[oi_] = "
                     f"{combine(a.kind, f'{a.name}_o[oi_]', str(a.value), a.ctype)};")
    for _ in inner + outer:
        ind = ind[:-2]
        lines.append(f"{ind}}}")
    for v, n in outer:
        lines.append(f"{ind}for (int64_t {v} = 0; {v} < {n}; {v}++) {{")
        ind += "  "
    lines.append(f"{ind}const int64_t oi_ = {flat};")
    lines.extend(f"{ind}const {a.ctype} {a.name} = {a.name}_o[oi_];" for a in p.accums)
    lines.extend(f"{ind}const int64_t {a.name}_i = {a.name}_io[oi_];" for a in p.accums
                 if a.index is not None)
    lines.extend(f"{ind}{st}" for st in p.finals + k.stores)
    for _ in outer:
        ind = ind[:-2]
        lines.append(f"{ind}}}")
    lines.extend(f"  free({a.name}_o);" for a in p.accums)
    lines.extend(f"  free({a.name}_io);" for a in p.accums if a.index is not None)
    return lines


def _reduce_kernel(k: ReduceKernel, program: Program, openmp: bool) -> str:
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    lines = [f"/* {' '.join(k.ops)} (reduction) */",
             f"static int {k.name}({', '.join(params)}) {{", "  int err_ = 0;"]
    lines.append(_INTS)
    lines.append("  (void)ints; (void)floats;")
    if k.interchanged():
        return _declare_ints(lines + _interchanged_body(k) + ["  return err_;", "}"], program)
    outer = list(zip(k.outer_vars(), k.outer))
    if k.pre is not None:
        pre = k.pre
        accs = [(a.name, a.ctype, a.kind, a.init, str(a.value)) for a in pre.accums]
        lines += lane_loop(outer[-1][0], str(outer[-1][1]), [str(st) for st in pre.body],
                           accs, "  ", tuple(outer[:-1]))
        lines.extend(f"  {st}" for st in pre.finals)
    if k.order:
        outer = [outer[d] for d in k.order]
    cols = k.column_accums()
    scratch: list = []
    for st in cols:  # one zeroed double scratch per buffer summed over the rows
        if st.buf not in scratch:
            scratch.append(st.buf)
    # column sums over one kept loop: 16 fixed chunks of its rows, each summed by its own call
    # of a row function (restrict parameters: inside an OpenMP region the row loops would not
    # vectorize) into its own double scratch, added in chunk order at the end: the chunks,
    # not the threads, fix the order of the sums, so any thread count gives the same bits
    chunked = bool(cols) and len(outer) == 1 and k.pre is None
    nch = COLUMN_CHUNKS if chunked else 1
    for b in scratch:
        lines.append(f"  const int64_t n_{b.name} = {numel(b.shape)};")
        lines.append(f"  double *acc_{b.name} = (double *)calloc({nch} * (n_{b.name} ? "
                     f"n_{b.name} : 1), sizeof(double));")
    total = " * ".join(f"(int64_t)({n})" for n in list(k.outer) + list(k.inner))
    inner = list(zip(k.inner_vars(), k.inner))
    last = k.passes[-1] if k.passes else None
    # a large per-element output written row by row: rows go through a stack row and are
    # streamed (codegen/stream.py)
    srow = None if chunked or cols or len(inner) != 1 or last is None or last.accums else \
        stream.row_store([st for st in last.body if isinstance(st, Store)], inner[0][0],
                         outer, inner[0][1])
    closed: list = []
    threaded = openmp and outer and (chunked or not cols) \
        and not few_iterations(list(k.outer) + list(k.inner))
    if srow is not None:
        opened, closed = stream.region(f"{omp_for(f'({total})')} reduction(|:err_)"
                                       if threaded else None, "  ")
        lines += opened
    elif threaded:
        lines.append(f"  {omp_for(f'({total})')} reduction(|:err_)")
    body_lines = lines
    ind = "  "
    if chunked:
        (v, n), = outer
        hparams = params + [f"double *restrict acc_{b.name}" for b in scratch]
        hparams += ["int64_t lo_", "int64_t hi_"]
        body_lines = [f"static __attribute__((noinline)) int {k.name}_rows("
                      f"{', '.join(hparams)}) {{", "  int err_ = 0;", _INTS,
                      "  (void)ints; (void)floats;",
                      f"  for (int64_t {v} = lo_; {v} < hi_; {v}++) {{"]
        ind = "    "
        args = [b.name for b in stores] + [b.name for b in loads] + ["ints", "floats"]
        args += [f"acc_{b.name} + ch_ * n_{b.name}" for b in scratch]
        args += [f"ch_ * (int64_t)({n}) / {nch}", f"(ch_ + 1) * (int64_t)({n}) / {nch}"]
        lines.append(f"  for (int64_t ch_ = 0; ch_ < {nch}; ch_++) "
                     f"err_ |= {k.name}_rows({', '.join(args)});")
    else:
        for v, n in outer:
            lines.append(f"{ind}for (int64_t {v} = 0; {v} < {n}; {v}++) {{")
            ind += "  "
    if srow is not None:
        body_lines.append(f"{ind}{srow[0].buf.ctype} w_[{inner[0][1]}] "
                          f"__attribute__((aligned(64)));")
    head: tuple = ()
    if outer and len(inner) == 1:  # the last pass fetches the next row (kept loop outer[-1])
        head, cond = next_row_prefetch(k.passes[-1].body, outer[-1][0], str(outer[-1][1]),
                                       inner[0][0], str(inner[0][1]), LANES)
        if head:
            body_lines.append(f"{ind}{cond}")
    for p in k.passes:
        accs = [(a.name, a.ctype, a.kind, a.init, str(a.value),
                 None if a.index is None else str(a.index)) for a in p.accums]
        var, n = inner[-1]
        body = [f"acc_{st.buf.name}[{st.index}] += (double)({st.expr});"
                if isinstance(st, ColumnAccum) else
                f"w_[{var}] = {store_expr(st.buf.dtype, str(st.expr))};"
                if srow is not None and st is srow[0] else str(st) for st in p.body]
        body_lines += lane_loop(var, str(n), body, accs, ind, tuple(inner[:-1]),
                                head if p is k.passes[-1] else ())
        body_lines.extend(f"{ind}err_ |= ({st.expr}) != 0;" if isinstance(st, Check) else
                          f"{ind}{st}" for st in p.finals)
        if srow is not None and p is last:
            b = srow[0].buf
            body_lines.append(f"{ind}ember_stream_store({b.name} + ({srow[1]}), w_, "
                              f"(size_t)({inner[0][1]}) * sizeof({b.ctype}));")
    body_lines.extend(f"{ind}acc_{st.buf.name}[{st.index}] += (double)({st.expr});"
                      if isinstance(st, ColumnAccum) else f"{ind}{st}" for st in k.stores)
    helper = ""
    if chunked:
        body_lines += ["  }", "  return err_;", "}"]
        helper = _declare_ints(body_lines, program) + "\n\n"
        for b in scratch:  # the chunks' sums, in chunk order, into the first chunk's scratch
            lines.append(f"  for (int64_t i = 0; i < n_{b.name}; i++) {{")
            lines.append(f"    double s_ = acc_{b.name}[i];")
            lines.append(f"    for (int64_t ch_ = 1; ch_ < {nch}; ch_++) "
                         f"s_ += acc_{b.name}[ch_ * n_{b.name} + i];")
            lines.append(f"    acc_{b.name}[i] = s_;")
            lines.append("  }")
    else:
        for _ in outer:
            ind = ind[:-2]
            lines.append(f"{ind}}}")
        lines += closed
    finals = {id(st.buf): st.final for st in cols if st.final}
    for b in scratch:  # (a final may read other sums: cross_entropy's mean divides by a count)
        val = finals.get(id(b), "{0}").format(f"acc_{b.name}[i]")
        lines.append(f"  for (int64_t i = 0; i < n_{b.name}; i++) {b.name}[i] = "
                     f"({b.ctype})({val});")
    for b in scratch:
        lines.append(f"  free(acc_{b.name});")
    lines.append("  return err_;")
    lines.append("}")
    return helper + _declare_ints(lines, program)


COLUMN_CHUNKS = 16
"""Fixed row chunks of a kernel's column sums (layer_norm backward's dW/db): enough for the
threads of a small machine, few enough that the chunks' scratch stays small."""


def _row_kernel(k: RowKernel, program: Program, openmp: bool) -> str:
    t = k.dst.compute_ctype          # float for float16/bfloat16
    st = k.dst.ctype                 # what the row holds in memory
    lowp = is_lowp(k.dst.dtype)
    loads, _ = k.buffers()
    params = [f"{st} *restrict {k.dst.name}"]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    lines = [f"/* {' '.join(k.ops)}: {k.op} over the last dim */",
             f"static void {k.name}({', '.join(params)}) {{", _INTS,
             "  (void)ints; (void)floats;"]
    lines.append(f"  const int64_t R = {k.rows}, C = {k.cols};")
    # a large output: each row is computed in a stack row, then streamed (codegen/stream.py)
    # (float16/bfloat16 rows stream when converted once into a float row: the block store
    # of the output goes to the stack row, codegen/half.py)
    streamed = not k.prologue and (not lowp or half.row_blocked(k)) and type(k.rows) is int and \
        type(k.cols) is int and k.cols * k.dst.dtype.np.itemsize <= stream.ROW_MAX_BYTES and \
        stream.streams(k.rows * k.cols * k.dst.dtype.np.itemsize)
    closed: list = []
    if streamed:
        opened, closed = stream.region(omp_for("R * C") if openmp else None, "  ")
        lines += opened
    elif openmp:
        lines.append(f"  {omp_for('R * C')}")
    body = ["for (int64_t r = 0; r < R; r++) {",
            f"  {st} *restrict y = {k.dst.name} + r * C;"]
    if streamed:
        body[1:] = [f"  {st} w_[{k.cols}] __attribute__((aligned(64)));",
                    f"  {st} *restrict y = w_;"]
    if k.prologue:  # the fused producers write x into the output row once
        body.append("  int64_t rest_ = r; (void)rest_;")
        for d in range(len(k.lead) - 1, -1, -1):  # the row's leading indices, last dim fastest
            if d:
                body.append(f"  const int64_t i{d} = rest_ % ({k.lead[d]}); "
                            f"rest_ /= ({k.lead[d]});")
            else:
                body.append("  const int64_t i0 = rest_;")
        body.append("  for (int64_t c = 0; c < C; c++) {")
        body.extend(f"    {st_}" for st_ in k.prologue)
        # a float16/bfloat16 row is rounded here, as eager's producers round their output
        body.append(f"    y[c] = {store_expr(k.dst.dtype, k.value)};")
        body.append("  }")
        body.append(f"  const {st} *x = y;")
    else:
        body.append(f"  const {st} *restrict x = {k.src.name} + ({k.offset}) + r * C;")
    # the max in lanes (NaN propagates), then exp and the sum: float lanes of double partial
    # sums (at least as accurate as NumPy's pairwise float sum), vectorized; iteration c of
    # the exp pass touches only x[c], y[c] and its lane (ivdep: gcc's alias check for y and
    # x, made per block of 16, and the loop's scalar copy go)
    xv = load_expr(k.dst.dtype, "x[c]")  # float16/bfloat16 widen to float
    blocked = lowp and half.row_blocked(k)
    if blocked:  # the row converted once into floats on the stack (codegen/half.py)
        sfx = "f16" if k.dst.dtype.np.name == "float16" else "bf16"
        body += [f"  float xf_[{k.cols}];", f"  ember_{sfx}_load_n(xf_, x, C);"]
        xv = "xf_[c]"
    if t == "float" and (blocked or not lowp):   # float rows: csrc/row_exp.h
        body.append(f"  const float m = ember_row_max({'xf_' if blocked else 'x'}, C);")
    else:
        body += lane_loop("c", "C", [], [("m", t, "max", "-INFINITY", xv)], "  ")
    total = [("s", "double", "sum", "0.0", "(double)e")]
    head: tuple = ()
    size = k.dst.dtype.np.itemsize
    fits = fits_prefetch(str(k.cols), size)
    if not k.prologue and fits is not None:  # the exp pass fetches the next row
        body.append(f"  const int pf_ = r + 1 < R{fits};")  # (see next_row_prefetch)
        head = tuple(f"if (pf_) __builtin_prefetch(x + C + c_b + {off // size}, 0, 3);"
                     for off in range(0, LANES * size, 64))
    pf = row_exp.prefetch_arg(k, fits)   # (codegen/row_exp.py)
    if blocked:
        body += half.row_tail(k.op, sfx, pf, size, round_expr(k.dst.dtype, "{0}"))
    elif t == "float" and k.op == "softmax" and not lowp:
        body += row_exp.softmax_tail("y", "x", pf, size)
    elif t == "float" and not lowp:
        body += row_exp.logsumexp_sum("x", pf, size)
        body += ["  const float ls = ember_log(s);",
                 "  for (int64_t c = 0; c < C; c++) y[c] = (x[c] - m) - ls;"]
    elif k.op == "softmax" and not lowp:
        body += lane_loop("c", "C", [f"const {t} e = ember_exp(x[c] - m);", "y[c] = e;"],
                          total, "  ", head=head, ivdep=True)
        body += [f"  const {t} st = ({t})s;",
                 "  for (int64_t c = 0; c < C; c++) y[c] = y[c] / st;"]
    elif k.op == "softmax":  # y cannot hold exp's float values: recompute them
        body += lane_loop("c", "C", [f"const {t} e = ember_exp({xv} - m);"], total, "  ",
                          head=head, ivdep=True)
        body += [f"  const {t} st = ({t})s;",
                 f"  for (int64_t c = 0; c < C; c++) y[c] = "
                 f"{store_expr(k.dst.dtype, f'ember_exp({xv} - m) / st')};"]
    else:
        # float16/bfloat16: the row sum and its log are rounded to the dtype (eager, after
        # PyTorch's last-dim CPU kernel, keeps them in the input dtype)
        body += lane_loop("c", "C", [f"const {t} e = ember_exp({xv} - m);"], total, "  ",
                          head=head, ivdep=True)
        rounded = round_expr(k.dst.dtype, f"({t})s")
        body += [f"  const {t} ls = {round_expr(k.dst.dtype, f'ember_log({rounded})')};",
                 f"  for (int64_t c = 0; c < C; c++) y[c] = "
                 f"{store_expr(k.dst.dtype, f'({xv} - m) - ls')};"]
    if streamed:
        body.append(f"  ember_stream_store({k.dst.name} + r * C, w_, (size_t)C * sizeof({st}));")
    body.append("}")
    lines.extend("  " + b for b in body)
    lines += closed
    lines.append("}")
    return _declare_ints(lines, program)


def _kernel(k: Kernel, program: Program, openmp: bool = False) -> str:
    if isinstance(k, RowKernel):
        return _row_kernel(k, program, openmp)
    if isinstance(k, GemmKernel):
        return gemm_kernel(k, program, openmp)
    if isinstance(k, Im2colKernel):
        return _declare_ints(im2col_kernel(k, _INTS).splitlines(), program)
    if isinstance(k, ReduceKernel):
        return _reduce_kernel(k, program, openmp)
    if isinstance(k, ScanKernel):
        return scan_kernel(k, program, openmp, omp_for, _declare_ints, _INTS)
    if isinstance(k, AttentionKernel):
        return _declare_ints(attention.kernel_source(k, _INTS).splitlines(), program)
    if isinstance(k, LstmKernel):
        return rnn.kernel_source(k)
    if isinstance(k, QLinearKernel):
        return _declare_ints(qlinear.kernel_source(k, _INTS), program)
    if isinstance(k, FlexAttentionKernel):
        return flex.kernel_source(k, openmp)
    if isinstance(k, IndexKernel):
        return _declare_ints(index.kernel_source(k, openmp, _INTS).splitlines(), program)
    if isinstance(k, DimIndexKernel):
        return index.dim_index_source(k, openmp)
    if isinstance(k, AdvIndexKernel):
        return index.adv_index_source(k, openmp)
    if isinstance(k, PoolKernel):
        return _declare_ints(pool.pool_source(k, openmp, _INTS).splitlines(), program)
    if isinstance(k, ResampleKernel):
        return _declare_ints(resample.resample_source(k, openmp, _INTS), program)
    if isinstance(k, SortKernel):
        return sort.sort_source(k, openmp)
    if isinstance(k, SearchKernel):
        return sort.search_source(k, openmp)
    if isinstance(k, UserKernel):
        return _declare_ints(kernel_op.kernel_source(k, _INTS).splitlines(), program)
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    st_stream = stream.pointwise_store(k)
    if st_stream is not None:  # a large output: tiles in L1, streamed (codegen/stream.py)
        return _declare_ints(stream.pointwise_source(k, st_stream, params, openmp, _INTS),
                             program)
    checks = k.has_checks()  # input checks (lower_random's bernoulli): returns 1 when bad
    lines = [f"/* {' '.join(k.ops)} */",
             f"static {'int' if checks else 'void'} {k.name}({', '.join(params)}) {{", _INTS,
             "  (void)ints; (void)floats;"] + (["  int err_ = 0;"] if checks else [])
    blocked = half.blocked_kernel(k, openmp, lines) if type(k) is Kernel else None
    if blocked is not None:  # float16 at unit stride: converted in blocks (codegen/half.py)
        return _declare_ints(blocked, program)
    blocked = flat_prefetched(k, openmp, lines) if type(k) is Kernel else None
    if blocked is not None:  # large inputs: prefetched a page ahead (codegen/prefetch.py)
        return _declare_ints(blocked, program)
    loops, ind = omp_loops(k.loops(), "  ", openmp and bool(k.ranges), checks)
    lines += loops
    lines.extend(f"{ind}{st}" for st in k.body)
    for _ in k.loop_vars():
        ind = ind[:-2]
        lines.append(f"{ind}}}")
    if checks:
        lines.append("  return err_;")
    lines.append("}")
    return _declare_ints(lines, program)


_INTS = "\0ints"  # where a kernel's runtime-integer declarations go
_INT_NAME = re.compile(r"\b(?:s\d+|e\d+_\d+_\d+)\b")
_EPI_LOCAL = re.compile(r"\be\d+_(?=t\d+\b)")


def _declare_ints(lines: list, program: Program) -> str:
    """The kernel's text with ``const int64_t <name> = ints[j];`` for the runtime integers it
    uses (only those: a graph with many lifted scalars would otherwise repeat all of them in
    every kernel, which multiplies gcc's time)."""
    text = "\n".join(lines) + "\n"
    used = set(_INT_NAME.findall(text))
    decls = [f"  const int64_t {n} = ints[{j}];" for j, n in enumerate(program.int_names)
             if n in used]
    return text.replace(_INTS + "\n", "".join(d + "\n" for d in decls), 1)


def _entry(seg: Segment, calls: dict, slot: int | None = None) -> str:
    """The segment's exported entry; ``slot`` (profiled units) is its first kernel's timer."""
    index = {id(b): j for j, b in enumerate(seg.buffers())}
    lines = [f"EMBER_EXPORT int {seg.entry}(void **bufs, const int64_t *ints, "
             f"const double *floats) {{"]
    for j, k in enumerate(seg.kernels):
        loads, stores = k.buffers()
        args = [f"({b.ctype} *)bufs[{index[id(b)]}]" for b in stores]
        args += [f"(const {b.ctype} *)bufs[{index[id(b)]}]" for b in loads]
        name, scalars = calls.get(k.name, (k.name, None))
        args += list(scalars) if scalars else ["ints", "floats"]
        call = f"{name}({', '.join(args)})"
        checks = (isinstance(k, (ReduceKernel, AttentionKernel, FlexAttentionKernel, LstmKernel,
                                 QLinearKernel,
                                 IndexKernel, DimIndexKernel, AdvIndexKernel, PoolKernel,
                                 SortKernel, SearchKernel, ResampleKernel))
                  and k.has_checks()) or (
            type(k) is Kernel and k.has_checks())
        if slot is not None:
            lines.append(f"  {{ EMBER_PROF_BEGIN_(); {'const int r_ = ' if checks else ''}"
                         f"{call}; EMBER_PROF_END_({slot + j});"
                         f"{' if (r_) return 1;' if checks else ''} }}")
        elif checks:
            lines.append(f"  if ({call}) return 1;  /* invalid input: eager raises */")
        else:
            lines.append(f"  {call};")
    lines.append("  return 0;")
    lines.append("}")
    if awake.uses_pool(seg):   # one-row products split over threads kept awake for the call
        lines = awake.wrap_entry(lines, seg.entry)
    return "\n".join(lines) + "\n"


__all__ = ["PRELUDE", "generate", "profile_block", "profile_label"]

"""float16 pointwise kernels in blocks converted in vector registers (``csrc/half_block.h``).

gcc 12 vectorizes no per-element float16 conversion (with F16C it emits one scalar
``vcvtph2ps`` a value; the portable bit-manipulation helpers vectorize to ~20 operations a value
each way), so a flat pointwise kernel that loads or stores float16 buffers at unit stride is
strip-mined: per block of ``EMBER_HB`` elements its contiguous float16 loads are converted into
float arrays on the stack (``ember_f16_load_n``: AVX-512/F16C ``vcvtph2ps``), the unchanged
float body runs over the block as a ``simd`` loop reading those arrays, and its float16 stores
go to a float array converted back at the end (``ember_f16_store_n``: ``vcvtps2ph``, round to
nearest even).  The values are the same: each element is loaded exactly and rounded once, as
before.  bfloat16 needs none of this (its load is a shift and its rounding integer arithmetic,
which gcc vectorizes).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ember.compiler.c.codegen import csrc, prefetch, row_exp
from ember.compiler.c.codegen.omp import few_iterations, omp_for
from ember.compiler.c.ir.loop_ir import (
    Kernel,
    Let,
    Load,
    Local,
    Op,
    RowKernel,
    Store,
    round_expr,
    store_expr,
)

HEADER = csrc("half_block.h")
BLOCK = 128
"""EMBER_HB of half_block.h: elements per converted block."""


_SUFFIX = {"float16": "f16", "bfloat16": "bf16"}


def _half(buf: Any) -> str | None:
    """``f16``/``bf16`` for a float16/bfloat16 buffer, else None."""
    np_dtype = getattr(buf.dtype, "np", None)
    return None if np_dtype is None else _SUFFIX.get(np_dtype.name)


def _is_f16(buf: Any) -> bool:
    return _half(buf) is not None


def prelude(program: Any) -> str:
    """``half_block.h`` when ``program`` has a kernel that converts float16 blocks."""
    for k in program.kernels():
        if type(k) is Kernel and plan(k) is not None:
            return HEADER
        if isinstance(k, RowKernel) and row_blocked(k):
            return HEADER
    return ""


def _unit(index: Any) -> bool:
    return tuple(index.terms) == (("i", 1),)


def plan(k: Kernel) -> Any:
    """(loads, stores) of ``k`` to convert in blocks: ``{(buffer name, offset): slot}`` each,
    or None when ``k`` is not a flat pointwise kernel touching float16 at unit stride."""
    if not k.flat or not k.ranges or k.has_checks():
        return None
    lets = {st.name: st.ctype for st in k.body if isinstance(st, Let)}
    loads: dict = {}
    stores: dict = {}
    for st in k.body:
        found: list = []
        prefetch.walk_loads(st.expr, found)
        for ld in found:
            if _is_f16(ld.buf) and _unit(ld.index):
                loads.setdefault((ld.buf.name, str(ld.index.offset)), (ld.buf, len(loads)))
        if (isinstance(st, Store) and _is_f16(st.buf) and _unit(st.index)
                and isinstance(st.expr, Local) and lets.get(st.expr.name) == "float"):
            stores.setdefault((st.buf.name, str(st.index.offset)), (st.buf, len(stores)))
    if not loads and not stores:
        return None
    return loads, stores


def _subst(e: Any, loads: dict) -> Any:
    if isinstance(e, Load):
        hit = loads.get((e.buf.name, str(e.index.offset))) if _unit(e.index) else None
        return e if hit is None or not _is_f16(e.buf) else Local(f"hl{hit[1]}_[j_]")
    if isinstance(e, Op):
        return dataclasses.replace(e, args=tuple(_subst(a, loads) for a in e.args))
    return e


def blocked_kernel(k: Kernel, openmp: bool, head: list) -> list | None:
    """The lines of ``k`` strip-mined over float16 blocks (``head``: its signature lines), or
    None when ``k`` does not qualify."""
    found = plan(k)
    if found is None:
        return None
    n = str(k.loop_ranges()[0])
    lines = list(head)
    if openmp and not few_iterations([k.loop_ranges()[0]]):
        lines.append("  " + omp_for(f"((int64_t)({n}))"))
    lines.append(f"  for (int64_t ib_ = 0; ib_ < {n}; ib_ += EMBER_HB) {{")
    lines.append(f"    const int64_t nb_ = {n} - ib_ < EMBER_HB ? {n} - ib_ : EMBER_HB;")
    if prefetch.big_inputs(k):   # inputs from memory: a page ahead (codegen/prefetch.py)
        lines += ["    " + p for p in prefetch.stream_prefetch(prefetch.unit_loads(k.body),
                                                                  "ib_", BLOCK)]
    lines += block_body(k, found, "    ")
    lines.append("  }")
    lines.append("}")
    return lines


def _float_local(e: Any, lets: dict) -> Local | None:
    """``e`` when it is a float Local, or a float Local widened to double (exactly: its
    rounding to a half dtype is the float's); else None."""
    if (isinstance(e, Op) and e.name == "convert_element_type" and len(e.args) == 1
            and dict(e.params).get("dtype") == "double"):
        e = e.args[0]
    if isinstance(e, Local) and getattr(lets.get(e.name), "ctype", None) == "float":
        return e
    return None


def drop_store_rounding(body: list) -> list:
    """``body`` (Lets and Stores) with each float16/bfloat16 Store of a Local whose Let only
    rounds a float Local to the store's dtype (a cast, ``to_float16``) storing that Local
    instead: the store rounds it once to the same bits (rounding to nearest even is
    idempotent), and the Let's rounding, unused by the store, goes where nothing else reads
    it (a float32 result cast to float16 took a second software rounding and a widening per
    element before its store's).

    >>> from ember.compiler.c.ir.loop_ir import Buffer, Index
    >>> import ember
    >>> out = Buffer("y", ember.float16, (4,), "output")
    >>> rnd = Op("to_float16", round_expr(ember.float16, "{0}"), (Local("t0"),))
    >>> body = [Let("t0", "float", Local("x")), Let("t1", "float", rnd),
    ...         Store(out, Index(0, (("i", 1),)), Local("t1"))]
    >>> str(drop_store_rounding(body)[2].expr)
    't0'
    """
    lets = {st.name: st for st in body if isinstance(st, Let)}
    out = []
    for st in body:
        let = lets.get(st.expr.name) if isinstance(st, Store) and isinstance(
            st.expr, Local) else None
        if (let is not None and _is_f16(st.buf) and isinstance(let.expr, Op)
                and len(let.expr.args) == 1
                and let.expr.template == round_expr(st.buf.dtype, "{0}")):
            arg = _float_local(let.expr.args[0], lets)
            if arg is not None:
                st = dataclasses.replace(st, expr=arg)
        out.append(st)
    return out


def block_body(k: Kernel, plan: Any, ind: str, tile: Any = None) -> list:
    """The lines of one block of ``nb_`` elements from ``ib_`` of the blocked kernel ``k``
    (``plan``: ``plan(k)``): convert its float16 loads, the float body as a ``simd`` loop,
    convert its float16 stores.  ``tile``: (the streamed Store, the tile's C name, the tile's
    first element): that store goes to ``tile + (ib_ - first)`` instead (codegen/stream.py)."""
    loads, stores = plan
    lines = []
    for (name, off), (buf, j) in loads.items():
        lines.append(f"{ind}float hl{j}_[EMBER_HB];")
        lines.append(f"{ind}ember_{_half(buf)}_load_n(hl{j}_, {name} + ({off}) + ib_, nb_);")
    for _, j in stores.values():
        lines.append(f"{ind}float hs{j}_[EMBER_HB];")
    lines.append(f"{ind}#pragma omp simd")
    lines.append(f"{ind}for (int64_t j_ = 0; j_ < nb_; j_++) {{")
    lines.append(f"{ind}  const int64_t i = ib_ + j_; (void)i;")
    for st in drop_store_rounding(k.body):
        if isinstance(st, Store):
            hit = stores.get((st.buf.name, str(st.index.offset))) if _unit(st.index) else None
            if hit is not None and _is_f16(st.buf) and isinstance(st.expr, Local):
                lines.append(f"{ind}  hs{hit[1]}_[j_] = {st.expr};")
                continue
            st = dataclasses.replace(st, expr=_subst(st.expr, loads))
            if tile is not None and st.buf is tile[0].buf:
                lines.append(f"{ind}  {tile[1]}[ib_ - {tile[2]} + j_] = "
                             f"{store_expr(st.buf.dtype, str(st.expr))};")
                continue
        elif isinstance(st, Let):
            st = dataclasses.replace(st, expr=_subst(st.expr, loads))
        lines.append(f"{ind}  {st}")
    lines.append(f"{ind}}}")
    for (name, off), (buf, j) in stores.items():
        dst = f"{name} + ({off}) + ib_"
        if tile is not None and buf is tile[0].buf:
            dst = f"{tile[1]} + (ib_ - {tile[2]})"
        lines.append(f"{ind}ember_{_half(buf)}_store_n({dst}, hs{j}_, nb_);")
    return lines


def row_blocked(k: RowKernel) -> bool:
    """Whether the float16 row kernel ``k`` converts each row once into a float array on the
    stack (rows of at most ``ROW_MAX`` known columns)."""
    return _is_f16(k.dst) and type(k.cols) is int and k.cols <= ROW_MAX


ROW_MAX = 4096


def row_tail(op: str, sfx: str, pf: str, pfsz: int, rnd: str) -> list:
    """The exp/sum and output passes of a float16/bfloat16 row kernel over its float copy
    ``xf_`` (``row_blocked``): the float32 kernel's helpers (``codegen/row_exp.py``; ``pf``,
    ``pfsz``: the next row to prefetch and its element size), then one rounding per element by
    a block store.  ``rnd``: C rounding ``{0}`` to the dtype."""
    if op == "softmax":   # keeps exp's values in xf_; scaled and rounded in one pass
        return [f"  const float st = ember_row_expsum(xf_, xf_, m, C, {pf}, {pfsz});",
                f"  ember_row_scale_{sfx}(y, xf_, st, C);"]
    else:                 # log_softmax: the row sum and its log rounded to the dtype
        out = row_exp.logsumexp_sum("xf_", pf, pfsz)
        out += [f"  const float ls_s = {rnd.format('s')};",
                f"  const float ls = {rnd.format('ember_log(ls_s)')};",
                "  for (int64_t c = 0; c < C; c++) xf_[c] = (xf_[c] - m) - ls;"]
    return out + [f"  ember_{sfx}_store_n(y, xf_, C);"]


__all__ = ["BLOCK", "HEADER", "ROW_MAX", "block_body", "blocked_kernel", "drop_store_rounding",
           "plan", "prelude", "row_blocked", "row_tail"]

"""C of ``ResampleKernel`` (``ir/kernels.py``): the per-compute-type pass helper (the template
``csrc/resample.h.in``), the kernel's index/weight tables as static arrays, and the kernel
function: OpenMP over the planes (leading rows), each plane run through its separable passes in
two per-thread scratch planes.  The lowering: ``lower/resample.py``.

A plane is read in place when it is contiguous in the compute type (float32, float64), else
first gathered (and float16/bfloat16 widened) into scratch; the last pass writes the output
directly in the compute type, else through scratch with one rounding per element.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember.compiler.c.codegen import csrc
from ember.compiler.c.codegen.index import _dot
from ember.compiler.c.codegen.omp import OMP_MIN_ITERATIONS
from ember.compiler.c.ir.kernels import ResampleKernel
from ember.compiler.c.ir.loop_ir import compute_ctype, load_expr, s_mul, store_expr

# the pass helper per compute type, a str.format template ({T}: the C type, {s}: a suffix)
_TEMPLATE = csrc("resample.h.in")
_SUFFIX = {"float": "f", "double": "d", "uint8_t": "u8"}


def prelude(program: Any) -> str:
    """The pass helpers of ``program``'s ResampleKernels ("" when it has none)."""
    types: list = []
    for k in program.kernels():
        if isinstance(k, ResampleKernel) and compute_ctype(k.dtype) not in types:
            types.append(compute_ctype(k.dtype))
    return "\n".join(_TEMPLATE.format(T=t, s=_SUFFIX[t]) for t in types)


def _literal(v: Any, ct: str) -> str:
    """An exact C literal of weight ``v`` in ``ct`` (hex floats round-trip every bit)."""
    return float(v).hex() + ("f" if ct == "float" else "")


def _tables(k: ResampleKernel, ct: str) -> list:
    lines = []
    for p, (_, idx, w) in enumerate(k.passes):
        ints = ", ".join(str(int(v)) for v in np.asarray(idx).ravel())
        lines.append(f"static const int32_t {k.name}_i{p}[] = {{{ints}}};")
        if w is not None:
            ws = ", ".join(_literal(v, ct) for v in np.asarray(w).ravel())
            lines.append(f"static const {ct} {k.name}_w{p}[] = {{{ws}}};")
    return lines


def _lead_offset(lead: tuple, strides: tuple) -> str:
    """C text: the element offset of plane ``r`` (C order over the leading dims ``lead``,
    sizes and strides ints or C expressions over runtime integers)."""
    terms, inner = [], 1
    for d in reversed(range(len(lead))):
        n, s = lead[d], strides[d]
        if n != 1 and s != 0:
            terms.append(f"((r) / {inner} % {n}) * {s}" if inner != 1 else f"((r) % {n}) * {s}")
        inner = s_mul(inner, n)
    return " + ".join(terms) or "0"


def _plane_in(k: ResampleKernel, ct: str) -> tuple:
    """(lines that set ``src_``, whether the plane is read in place)."""
    g = k.x_geom
    nl = len(k.lead)
    st = tuple(g.strides)
    base = f"({g.offset}) + {_lead_offset(tuple(k.lead), st[:nl])}"
    contiguous, acc = True, 1
    for n, s in zip(reversed(k.size_in), reversed(st[nl:])):
        if n != 1 and s != acc:
            contiguous = False
        acc *= n
    if contiguous and ct == k.x.ctype:
        return [f"      const {ct} *src_ = {k.x.name} + {base};"], True
    at = _dot("t", tuple(k.size_in), st[nl:])
    n = math.prod(k.size_in)
    return [f"      const int64_t base_ = {base};",
            f"      for (int64_t t = 0; t < {n}; t++) "
            f"a_[t] = {load_expr(k.dtype, f'{k.x.name}[base_ + {at}]')};",
            f"      const {ct} *src_ = a_;"], False


def _passes(k: ResampleKernel, ct: str, direct_in: bool, direct_out: bool) -> list:
    s = _SUFFIX[ct]
    cur = list(k.size_in)
    src, free = "src_", ["b_", "a_"] if not direct_in else ["a_", "b_"]
    lines = []
    last = len(k.passes) - 1
    po = math.prod(k.size_out)
    for p, (d, idx, w) in enumerate(k.passes):
        outer, inner = math.prod(cur[:d]), math.prod(cur[d + 1:])
        n_in, n_out = cur[d], idx.shape[1]
        dst = f"{k.out.name} + r * {po}" if (p == last and direct_out) else free[0]
        wt = f"{k.name}_w{p}" if w is not None else "NULL"
        lines.append(f"      ember_rs_pass_{s}({src}, {dst}, {outer}, {n_in}, {n_out}, {inner}, "
                     f"{idx.shape[0]}, {k.name}_i{p}, {wt});")
        if p != last or not direct_out:
            src = free[0]
            free = [free[1], free[0]]
        cur[d] = n_out
    if not direct_out:
        lines.append(f"      for (int64_t t = 0; t < {po}; t++) "
                     f"{k.out.name}[r * {po} + t] = {store_expr(k.dtype, f'{src}[t]')};")
    return lines


def resample_source(k: ResampleKernel, openmp: bool, ints: str) -> list:
    """The lines of the C function of one ResampleKernel (its tables first, as static arrays);
    ``ints`` is the line where the caller declares the runtime integers the kernel uses."""
    ct = compute_ctype(k.dtype)
    rows: object = 1
    for m in k.lead:
        rows = s_mul(rows, m)
    cur, scratch = list(k.size_in), math.prod(k.size_in)
    for d, idx, _ in k.passes:
        cur[d] = idx.shape[1]
        scratch = max(scratch, math.prod(cur))
    load, direct_in = _plane_in(k, ct)
    direct_out = ct == k.out.ctype
    what = "resample_backward" if k.backward else "resample"
    lines = _tables(k, ct) + [
        f"/* {' '.join(k.ops)} ({what} {list(k.size_in)} -> {list(k.size_out)}) */",
        f"static int {k.name}({k.out.ctype} *restrict {k.out.name}, "
        f"const {k.x.ctype} *restrict {k.x.name}, const int64_t *restrict ints, "
        f"const double *restrict floats) {{",
        ints, "  (void)ints; (void)floats;",
        "  int bad_ = 0;"]
    if openmp:
        total = f"(int64_t)({rows}) * {math.prod(k.size_out)}"
        lines.append(f"  #pragma omp parallel num_threads(ember_num_threads) "
                     f"if(ember_num_threads > 1 && ({rows}) > 1 && {total} >= "
                     f"{OMP_MIN_ITERATIONS}) reduction(|: bad_)")
    lines += ["  {",
              f"    {ct} *a_ = ({ct} *)malloc({scratch} * sizeof({ct}));",
              f"    {ct} *b_ = ({ct} *)malloc({scratch} * sizeof({ct}));"]
    if openmp:
        lines.append("    #pragma omp for schedule(static)")
    lines += [f"    for (int64_t r = 0; r < ({rows}); r++) {{",
              "      if (!a_ || !b_) { bad_ = 1; continue; }"]
    lines += load + _passes(k, ct, direct_in, direct_out)
    lines += ["    }", "    free(a_); free(b_);", "  }", "  return bad_;", "}"]
    return lines


__all__ = ["prelude", "resample_source"]

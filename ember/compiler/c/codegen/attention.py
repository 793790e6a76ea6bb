"""C of ``AttentionKernel`` (``ir/kernels.py``): the per-dtype helpers (a pthread job over
(batch, head) pairs, blocks of ``BLOCK_ROWS`` query rows, BLAS products) and the kernel
function that fills in one job.  The lowering and the formulas: ``lower/attention.py``."""

from __future__ import annotations

from typing import Any

from ember.compiler.c.build import blas
from ember.compiler.c.codegen import csrc
from ember.compiler.c.ir.kernels import ATTENTION_MAX_BATCH_DIMS as MAX_BATCH_DIMS
from ember.compiler.c.ir.kernels import AttentionKernel, FlexAttentionKernel

BLOCK_ROWS = 64
_HALF_KIND = {"bfloat16": 1, "float16": 2}   # the job's half_in: how q, k, v are widened


# the C helpers per dtype, a str.format template ({T}: the C type, {s}: f or d, ...)
_PRELUDE = csrc("attention.h.in")


# an attention call with fewer multiply-adds than this (batch*heads * L * S * (E + Ev)) runs on
# the calling thread: a decode step's (L = 1) work is smaller than the cost of starting threads
SERIAL_BELOW = 1 << 21


def prelude(program: Any) -> str:
    """The attention helpers of ``program``'s AttentionKernels ("" when it has none)."""
    # FlexAttentionKernels call the same per-thread product helper
    kernels = [k for k in program.kernels() if isinstance(k, (AttentionKernel,
                                                              FlexAttentionKernel))]
    if not kernels:
        return ""
    lib = blas.load_blas()
    parts = []
    done: set = set()
    setter = None if lib is None else lib.set_num_threads
    if setter is not None:
        parts.append(f"extern void {setter}(int);")
    for k in kernels:
        t = k.out.ctype
        s = "f" if t == "float" else "d"
        if s in done:
            continue
        done.add(s)
        fn = None if lib is None else (lib.sgemm if s == "f" else lib.dgemm)
        decl = ""
        if fn is not None:
            it = "int64_t" if lib.int64 else "int"
            decl = (f"extern void {fn}(int order, int trans_a, int trans_b, {it} m, {it} n, "
                    f"{it} k, {t} alpha, const {t} *a, {it} lda, const {t} *b, {it} ldb, "
                    f"{t} beta, {t} *c, {it} ldc);")
        parts.append(_PRELUDE.format(
            T=t, s=s, blas_decl=decl, have_blas=int(fn is not None), blasfn=fn or "(void)",
            maxd=MAX_BATCH_DIMS, br=BLOCK_ROWS, serial_below=SERIAL_BELOW,
            set_threads1=f"{setter}(1);" if setter else "",
            set_threads_back=f"{setter}(threads);" if setter else ""))
    return "\n".join(parts)


def kernel_source(k: AttentionKernel, ints_marker: str | None = None) -> str:
    """The C function of one AttentionKernel (stores, then loads, then ints/floats);
    ``ints_marker`` is the line where the runtime sizes (``s<k>``) it uses get declared."""
    loads, stores = k.buffers()
    t = k.out.ctype
    s = "f" if t == "float" else "d"
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    what = "backward" if k.backward else "forward"
    lines = [f"/* {' '.join(k.ops)} (attention {what}) */",
             f"static int {k.name}({', '.join(params)}) {{",
             *([ints_marker] if ints_marker else []),
             "  (void)ints; (void)floats;",
             f"  ember_attn_job_{s} job;",
             "  memset(&job, 0, sizeof job);",
             f"  job.nd = {len(k.batch)}; job.L = {k.L}; job.S = {k.S}; job.E = {k.E}; "
             f"job.Ev = {k.Ev}; job.backward = {int(k.backward)};",
             f"  job.scale = ({t}){k.scale!r};"]
    if getattr(k, "round_p", 0):
        lines.append(f"  job.round_p = {k.round_p};")
    for d, n in enumerate(k.batch):
        lines.append(f"  job.bshape[{d}] = {n};")
    for tag, x in (("q", k.q), ("k", k.k), ("v", k.v), ("m", k.mask), ("g", k.g)):
        if x is None:
            continue
        for d, st in enumerate(x.batch_strides):
            if st != 0:
                lines.append(f"  job.{tag}b[{d}] = {st};")
        lines.append(f"  job.{tag}rs = {x.rs}; job.{tag}cs = {x.cs};")
        half = x.buf.dtype.np.name in _HALF_KIND
        lines.append(f"  job.{tag.upper()}{'H' * half} = {x.buf.name} + {x.offset};")
        if half:   # (the lowering passes half q, k, v of one dtype, forward only)
            lines.append(f"  job.half_in = {_HALF_KIND[x.buf.dtype.np.name]};")
    if k.backward:
        gq, gk, gv, gm = k.outs
        lines.append(f"  job.GQ = {gq.name}; job.GK = {gk.name}; job.GV = {gv.name};")
        if gm is not None:
            lines.append(f"  job.GM = {gm.name};")
    else:
        lines.append(f"  job.O = {k.outs[0].name};")
    lines.append(f"  return ember_attn_run_{s}(&job);")
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["BLOCK_ROWS", "SERIAL_BELOW", "kernel_source", "prelude"]

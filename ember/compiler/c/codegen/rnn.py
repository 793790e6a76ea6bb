"""C of ``LstmKernel`` (``ir/rnn.py``): the per-dtype helpers (template ``csrc/lstm.h.in``: the
step loops, a thread's share of hidden units, BLAS products) and the kernel function that fills
in one job.  The lowering and the formulas: ``lower/rnn.py``."""

from __future__ import annotations

from typing import Any

from ember.compiler.c.build import blas
from ember.compiler.c.codegen import csrc
from ember.compiler.c.ir.rnn import LstmKernel

_PRELUDE = csrc("lstm.h.in")
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_PACKED = csrc("lstm_packed.h")


def prelude(program: Any) -> str:
    """The recurrence helpers of ``program``'s LstmKernels ("" when it has none)."""
    kernels = [k for k in program.kernels() if isinstance(k, LstmKernel)]
    if not kernels:
        return ""
    lib = blas.load_blas()
    setter = None if lib is None else lib.set_num_threads
    parts = [f"extern void {setter}(int);"] if setter is not None else []
    parts.append(_PACKED)
    done: set = set()
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
            T=t, s=s, packed=int(s == "f"), blas_decl=decl, have_blas=int(fn is not None),
            blasfn=fn or "(void)",
            set_threads1=f"{setter}(1);" if setter else "",
            set_threads_back=f"{setter}(threads);" if setter else ""))
    return "\n".join(parts)


def kernel_source(k: LstmKernel) -> str:
    """The C function of one LstmKernel (stores, then loads, then ints/floats)."""
    loads, stores = k.buffers()
    t = k.out.ctype
    s = "f" if t == "float" else "d"
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    what = "backward" if k.backward else "forward"
    lines = [f"/* {' '.join(k.ops)} ({k.mode.lower()} {what}) */",
             f"static int {k.name}({', '.join(params)}) {{",
             "  (void)ints; (void)floats;",
             f"  ember_lstm_job_{s} job;",
             "  memset(&job, 0, sizeof job);",
             f"  job.T = {k.T}; job.B = {k.B}; job.H = {k.H}; job.reverse = {int(k.reverse)}; "
             f"job.ldw = {k.w.strides[1]};",
             f"  job.ng = {_GATES[k.mode]}; job.gru = {int(k.mode == 'GRU')}; "
             f"job.rnn = {int(k.mode == 'RNN')}; job.relu = {int(k.relu)}; "
             f"job.nx = {len(k.ins)};",
             f"  job.W = {k.w.buf.name} + {k.w.offset};"]
    for j, (x, dims) in enumerate(zip(k.ins, k.dims)):
        lines.append(f"  job.dims[{j}][0] = {dims[0]}; job.dims[{j}][1] = {dims[1]}; "
                     f"job.dims[{j}][2] = {dims[2]};")
        s0, s1, s2 = x.strides
        lines.append(f"  job.x[{j}].p = {x.buf.name} + {x.offset}; job.x[{j}].s0 = {s0}; "
                     f"job.x[{j}].s1 = {s1}; job.x[{j}].s2 = {s2};")
    for j, b in enumerate(k.outs):
        lines.append(f"  job.o[{j}] = {b.name};")
    lines.append(f"  return ember_lstm_run_{s}(&job, {int(k.backward)});")
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["kernel_source", "prelude"]

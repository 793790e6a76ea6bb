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

from ember.compiler.codegen_gemm import gemm_kernel, gemm_prelude, im2col_kernel
from ember.compiler.loop_ir import GemmKernel, Im2colKernel, Kernel, Program, RowKernel, Segment
from ember.compiler.runtime import C_PRELUDE

# --- FALLBACK PRELUDE ---------------------------------------------------------------------------
# A minimal stand-in for the real math prelude (ember/compiler/cprelude.py, branch h-cmath):
# only the ember_* helpers this slice's tests reach, in float/double (and int64/int32/bool where
# the template needs it) variants, on top of libm.  Replace by importing cprelude.PRELUDE.
_FALLBACK_HELPERS = r"""/* ember fallback math helpers (codegen_c._FALLBACK_HELPERS) */
#include <stdbool.h>
#include <tgmath.h>

static inline float ember_maximum_f(float a, float b) {
  return (a != a || b != b) ? a + b : (a > b ? a : b);
}
static inline double ember_maximum_d(double a, double b) {
  return (a != a || b != b) ? a + b : (a > b ? a : b);
}
static inline int64_t ember_maximum_l(int64_t a, int64_t b) { return a > b ? a : b; }
static inline float ember_minimum_f(float a, float b) {
  return (a != a || b != b) ? a + b : (a < b ? a : b);
}
static inline double ember_minimum_d(double a, double b) {
  return (a != a || b != b) ? a + b : (a < b ? a : b);
}
static inline int64_t ember_minimum_l(int64_t a, int64_t b) { return a < b ? a : b; }
#define ember_maximum(a, b) _Generic((a) + (b), float: ember_maximum_f, double: ember_maximum_d, \
    default: ember_maximum_l)((a), (b))
#define ember_minimum(a, b) _Generic((a) + (b), float: ember_minimum_f, double: ember_minimum_d, \
    default: ember_minimum_l)((a), (b))

static inline int64_t ember_abs_l(int64_t a) { return a < 0 ? -a : a; }
#define ember_abs(a) _Generic((a), float: fabsf, double: fabs, default: ember_abs_l)(a)

/* Python-style floor division and remainder (NumPy's semantics, incl. the sign rules). */
static inline double ember_div_floor_d(double a, double b) {
  if (b == 0) return a / b;
  double m = fmod(a, b), d = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) d -= 1.0;
  if (d == 0) return copysign(0.0, a / b);
  double f = floor(d);
  return d - f > 0.5 ? f + 1.0 : f;
}
static inline float ember_div_floor_f(float a, float b) {
  if (b == 0) return a / b;
  float m = fmodf(a, b), d = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) d -= 1.0f;
  if (d == 0) return copysignf(0.0f, a / b);
  float f = floorf(d);
  return d - f > 0.5f ? f + 1.0f : f;
}
static inline int64_t ember_div_floor_l(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
#define ember_div_floor(a, b) _Generic((a) + (b), float: ember_div_floor_f, \
    double: ember_div_floor_d, default: ember_div_floor_l)((a), (b))

static inline double ember_remainder_d(double a, double b) {
  double m = fmod(a, b);
  if (m != 0 && ((b < 0) != (m < 0))) m += b;
  else if (m == 0) m = copysign(0.0, b);
  return m;
}
static inline float ember_remainder_f(float a, float b) {
  float m = fmodf(a, b);
  if (m != 0 && ((b < 0) != (m < 0))) m += b;
  else if (m == 0) m = copysignf(0.0f, b);
  return m;
}
static inline int64_t ember_remainder_l(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t m = a % b;
  return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}
#define ember_remainder(a, b) _Generic((a) + (b), float: ember_remainder_f, \
    double: ember_remainder_d, default: ember_remainder_l)((a), (b))
"""

try:  # the real prelude (vectorizable exp/log/tanh/erf and every ember_* helper) when present
    from ember.compiler.cprelude import PRELUDE  # type: ignore[import-not-found]
except ImportError:
    PRELUDE = _FALLBACK_HELPERS


# below this many iterations a kernel runs on one thread (an OpenMP fork/join costs ~µs)
OMP_MIN_ITERATIONS = 32768


def generate(program: Program, prelude: bool = True, openmp: bool = False) -> str:
    """The C translation unit of ``program`` (its segments' entry functions); without the
    preludes when ``prelude`` is false (golden tests compare only the generated part).
    ``openmp`` splits each kernel's outer loop over ``ember_num_threads`` threads."""
    parts = [C_PRELUDE, PRELUDE, gemm_prelude(program)] if prelude else []
    funcs: dict = {}     # canonical text -> [function text, its name, call count]
    calls: dict = {}     # kernel name -> (function it calls, scalar arguments)
    segs = program.segments()
    for seg in segs:
        for k in seg.kernels:
            text, scalars = _by_value_scalars(_kernel(k, program, openmp))
            f = funcs.setdefault(_canonical(text), [text, k.name, 0])
            f[2] += 1
            calls[k.name] = (f[1], scalars)
    by_name = {f[1]: f for f in funcs.values()}
    for seg in segs:
        for k in seg.kernels:
            f = by_name.pop(k.name, None)
            if f is not None:  # the first kernel of its kind: emit its function here
                # a function called from several places stays one function: gcc would
                # otherwise inline a copy into every call site (its time grows with each)
                parts.append(f[0].replace("static void ", "__attribute__((noinline)) static "
                                          "void ", 1) if f[2] > 1 else f[0])
        parts.append(_entry(seg, calls))
    return "\n".join(parts)


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
    body = body.replace("  (void)ints; (void)floats;\n", "", 1)
    head = head.replace(_SCALAR_PARAMS, ", ".join(params))
    return head + brace + body, tuple(args)


def _canonical(text: str) -> str:
    head, _, rest = text.partition("static void ")
    rest = rest.split("(", 1)[1]
    seen: dict = {}
    rest = _BUF_NAME.sub(lambda m: seen.setdefault(m.group(0), f"b{len(seen)}"), rest)
    ints: dict = {}
    return _INT_NAME.sub(lambda m: ints.setdefault(m.group(0), f"n{len(ints)}"), rest)


def _row_kernel(k: RowKernel, program: Program, openmp: bool) -> str:
    t = k.dst.ctype
    loads, _ = k.buffers()
    params = [f"{t} *restrict {k.dst.name}"]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    lines = [f"/* {' '.join(k.ops)}: {k.op} over the last dim */",
             f"static void {k.name}({', '.join(params)}) {{", _INTS,
             "  (void)ints; (void)floats;"]
    lines.append(f"  const int64_t R = {k.rows}, C = {k.cols};")
    if openmp:
        lines.append(f"  #pragma omp parallel for num_threads(ember_num_threads) "
                     f"if(R * C >= {OMP_MIN_ITERATIONS})")
    body = ["for (int64_t r = 0; r < R; r++) {",
            f"  {t} *restrict y = {k.dst.name} + r * C;"]
    if k.prologue:  # the fused producers write x into the output row once
        body.append("  int64_t rest_ = r; (void)rest_;")
        for d in range(len(k.lead) - 1, -1, -1):  # the row's leading indices, last dim fastest
            if d:
                body.append(f"  const int64_t i{d} = rest_ % ({k.lead[d]}); "
                            f"rest_ /= ({k.lead[d]});")
            else:
                body.append("  const int64_t i0 = rest_;")
        body.append("  for (int64_t c = 0; c < C; c++) {")
        body.extend(f"    {st}" for st in k.prologue)
        body.append(f"    y[c] = {k.value};")
        body.append("  }")
        body.append(f"  const {t} *x = y;")
    else:
        body.append(f"  const {t} *restrict x = {k.src.name} + ({k.offset}) + r * C;")
    body += [
        f"  {t} m = x[0];",
        "  for (int64_t c = 1; c < C; c++) m = (x[c] > m || x[c] != x[c]) ? x[c] : m;",
        "  double s = 0;",
    ]
    if k.op == "softmax":
        body += [
            f"  for (int64_t c = 0; c < C; c++) {{ const {t} e = exp(x[c] - m); y[c] = e; "
            f"s += e; }}",
            f"  const {t} st = ({t})s;",
            "  for (int64_t c = 0; c < C; c++) y[c] = y[c] / st;",
        ]
    else:
        body += [
            "  for (int64_t c = 0; c < C; c++) s += exp(x[c] - m);",
            f"  const {t} ls = log(({t})s);",
            "  for (int64_t c = 0; c < C; c++) y[c] = (x[c] - m) - ls;",
        ]
    body.append("}")
    lines.extend("  " + b for b in body)
    lines.append("}")
    return _declare_ints(lines, program)


def _kernel(k: Kernel, program: Program, openmp: bool = False) -> str:
    if isinstance(k, RowKernel):
        return _row_kernel(k, program, openmp)
    if isinstance(k, GemmKernel):
        return gemm_kernel(k, program, openmp)
    if isinstance(k, Im2colKernel):
        return im2col_kernel(k)
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    lines = [f"/* {' '.join(k.ops)} */",
             f"static void {k.name}({', '.join(params)}) {{", _INTS,
             "  (void)ints; (void)floats;"]
    ind = "  "
    if openmp and k.ranges:
        total = " * ".join(f"(int64_t)({n})" for n in k.ranges)
        lines.append(f"  #pragma omp parallel for num_threads(ember_num_threads) "
                     f"if({total} >= {OMP_MIN_ITERATIONS})")
    for v, n in k.loops():
        lines.append(f"{ind}for (int64_t {v} = 0; {v} < {n}; {v}++) {{")
        ind += "  "
    lines.extend(f"{ind}{st}" for st in k.body)
    for _ in k.loop_vars():
        ind = ind[:-2]
        lines.append(f"{ind}}}")
    lines.append("}")
    return _declare_ints(lines, program)


_INTS = "\0ints"  # where a kernel's runtime-integer declarations go
_INT_NAME = re.compile(r"\b(?:s\d+|e\d+_\d+_\d+)\b")


def _declare_ints(lines: list, program: Program) -> str:
    """The kernel's text with ``const int64_t <name> = ints[j];`` for the runtime integers it
    uses (only those: a graph with many lifted scalars would otherwise repeat all of them in
    every kernel, which multiplies gcc's time)."""
    text = "\n".join(lines) + "\n"
    used = set(_INT_NAME.findall(text))
    decls = [f"  const int64_t {n} = ints[{j}];" for j, n in enumerate(program.int_names)
             if n in used]
    return text.replace(_INTS + "\n", "".join(d + "\n" for d in decls), 1)


def _entry(seg: Segment, calls: dict) -> str:
    index = {id(b): j for j, b in enumerate(seg.buffers())}
    lines = [f"EMBER_EXPORT int {seg.entry}(void **bufs, const int64_t *ints, "
             f"const double *floats) {{"]
    for k in seg.kernels:
        loads, stores = k.buffers()
        args = [f"({b.ctype} *)bufs[{index[id(b)]}]" for b in stores]
        args += [f"(const {b.ctype} *)bufs[{index[id(b)]}]" for b in loads]
        name, scalars = calls.get(k.name, (k.name, None))
        args += list(scalars) if scalars else ["ints", "floats"]
        lines.append(f"  {name}({', '.join(args)});")
    lines.append("  return 0;")
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["PRELUDE", "generate"]

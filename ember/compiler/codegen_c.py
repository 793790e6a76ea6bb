"""C source from the loop IR: one translation unit per graph (ARCHITECTURE.md §5).

The unit is ``runtime.C_PRELUDE`` (the runtime's exports), the math prelude (``PRELUDE``: the
``ember_*`` helpers that ``c_expr`` templates call), then one ``static`` function per kernel
(typed ``restrict`` pointers, so gcc vectorizes the inner loop) and one exported entry function
per segment with the runtime's ABI::

    int ember_entry(void **bufs, const int64_t *ints, const double *floats);

``<tgmath.h>`` makes ``exp(x)`` on a ``float`` call ``expf``: float32 math stays in float32.
"""

from __future__ import annotations

from ember.compiler.loop_ir import (
    Kernel,
    Program,
    RowKernel,
    Segment,
    is_lowp,
    load_expr,
    round_expr,
    store_expr,
)
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
    parts = [C_PRELUDE, PRELUDE] if prelude else []
    for seg in program.segments():
        for k in seg.kernels:
            parts.append(_kernel(k, program, openmp))
        parts.append(_entry(seg))
    return "\n".join(parts)


def _omp_for(iterations: str) -> str:
    """The pragma that splits the next loop over the runtime's thread count.  The ``if`` keeps
    small loops and one-thread runs (``ember.set_num_threads(1)``, a fork()ed child) off the
    thread pool: libgomp then runs the loop on the calling thread."""
    return (f"#pragma omp parallel for num_threads(ember_num_threads) "
            f"if(ember_num_threads > 1 && {iterations} >= {OMP_MIN_ITERATIONS})")


def _row_kernel(k: RowKernel, program: Program, openmp: bool) -> str:
    t = k.dst.compute_ctype          # float for float16/bfloat16
    st = k.dst.ctype                 # what the row holds in memory
    lowp = is_lowp(k.dst.dtype)
    loads, _ = k.buffers()
    params = [f"{st} *restrict {k.dst.name}"]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    lines = [f"/* {' '.join(k.ops)}: {k.op} over the last dim */",
             f"static void {k.name}({', '.join(params)}) {{"]
    for j, name in enumerate(program.int_names):
        lines.append(f"  const int64_t {name} = ints[{j}];")
    lines.append("  (void)ints; (void)floats;")
    lines.append(f"  const int64_t R = {k.rows}, C = {k.cols};")
    if openmp:
        lines.append(f"  {_omp_for('R * C')}")
    body = ["for (int64_t r = 0; r < R; r++) {",
            f"  {st} *restrict y = {k.dst.name} + r * C;"]
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
    x = load_expr(k.dst.dtype, "x[c]")
    body += [
        f"  {t} m = {load_expr(k.dst.dtype, 'x[0]')};",
        f"  for (int64_t c = 1; c < C; c++) {{ const {t} v = {x}; "
        f"m = (v > m || v != v) ? v : m; }}",
        "  double s = 0;",
    ]
    if k.op == "softmax" and not lowp:
        body += [
            f"  for (int64_t c = 0; c < C; c++) {{ const {t} e = exp(x[c] - m); y[c] = e; "
            f"s += e; }}",
            f"  const {t} st = ({t})s;",
            "  for (int64_t c = 0; c < C; c++) y[c] = y[c] / st;",
        ]
    elif k.op == "softmax":  # y cannot hold exp's float values: recompute them
        body += [
            f"  for (int64_t c = 0; c < C; c++) s += ({t})exp({x} - m);",
            f"  const {t} st = ({t})s;",
            f"  for (int64_t c = 0; c < C; c++) y[c] = "
            f"{store_expr(k.dst.dtype, f'({t})exp({x} - m) / st')};",
        ]
    else:
        # float16/bfloat16: the row sum and its log are rounded to the dtype (eager, after
        # PyTorch's last-dim CPU kernel, keeps them in the input dtype)
        total = round_expr(k.dst.dtype, f"({t})s")
        body += [
            f"  for (int64_t c = 0; c < C; c++) s += exp({x} - m);",
            f"  const {t} ls = {round_expr(k.dst.dtype, f'log({total})')};",
            f"  for (int64_t c = 0; c < C; c++) y[c] = "
            f"{store_expr(k.dst.dtype, f'({x} - m) - ls')};",
        ]
    body.append("}")
    lines.extend("  " + b for b in body)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _kernel(k: Kernel, program: Program, openmp: bool = False) -> str:
    if isinstance(k, RowKernel):
        return _row_kernel(k, program, openmp)
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    lines = [f"/* {' '.join(k.ops)} */",
             f"static void {k.name}({', '.join(params)}) {{"]
    for j, name in enumerate(program.int_names):
        lines.append(f"  const int64_t {name} = ints[{j}];")
    lines.append("  (void)ints; (void)floats;")
    ind = "  "
    if openmp and k.ranges:
        total = " * ".join(f"(int64_t)({n})" for n in k.ranges)
        lines.append(f"  {_omp_for(total)}")
    for v, n in k.loops():
        lines.append(f"{ind}for (int64_t {v} = 0; {v} < {n}; {v}++) {{")
        ind += "  "
    lines.extend(f"{ind}{st}" for st in k.body)
    for _ in k.loop_vars():
        ind = ind[:-2]
        lines.append(f"{ind}}}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _entry(seg: Segment) -> str:
    index = {id(b): j for j, b in enumerate(seg.buffers())}
    lines = [f"EMBER_EXPORT int {seg.entry}(void **bufs, const int64_t *ints, "
             f"const double *floats) {{"]
    for k in seg.kernels:
        loads, stores = k.buffers()
        args = [f"({b.ctype} *)bufs[{index[id(b)]}]" for b in stores]
        args += [f"(const {b.ctype} *)bufs[{index[id(b)]}]" for b in loads]
        lines.append(f"  {k.name}({', '.join(args + ['ints', 'floats'])});")
    lines.append("  return 0;")
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["PRELUDE", "generate"]

"""The gelu chain's loop with one vector per iteration against two interleaved (issue 21).

``gelu(x*w + b) * sigmoid(x)`` (erf gelu, the prelude's ``ember_normal_cdf``/``ember_sigmoid``)
as the C backend writes it (``v0``: one ``simd`` loop, one vector per iteration) and three ways
of giving each iteration two independent vectors: ``v1`` two halves of the array in one
``simd`` loop (statements of the two interleaved), ``v2`` blocks of two vectors with the
statements interleaved, ``v3`` blocks of two vectors as one inner loop; ``floor`` is
``x*w + b + x`` (the same traffic).  Built per ISA (``x86-64-v3``: 8 lanes; ``x86-64-v4`` with
512-bit vectors: 16 lanes), run where the host can, ns per element (median and minimum), in
cache (2^14) and from memory (2^24), one thread; results bitwise checked against ``v0``.
``--mca``: ``llvm-mca -mcpu=sapphirerapids`` cycles per 16 (v4) / 8 (v3) lanes of v0's and
v1's vector loops (needs llvm-mca).
Run: python benchmarks/bench_interleave.py [--mca] [--reps 9]
"""

# ruff: noqa: E501  (the C harness below keeps its long lines)
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ember.compiler.c.build.runtime import C_PRELUDE
from ember.compiler.c.build.toolchain import host_can_run
from ember.compiler.c.codegen.prelude import PRELUDE

ISAS = {"x86-64-v3": ("-march=x86-64-v3", "-DW=8"),
        "x86-64-v4": ("-march=x86-64-v4", "-mprefer-vector-width=512", "-DW=16")}
FLAGS = ("-O3", "-ffp-contract=off", "-fopenmp")

HARNESS = r"""#include "prelude_part.h"  /* C_PRELUDE + PRELUDE */
#include <stdio.h>
#include <omp.h>
#ifndef NT
#define NT 1
#endif
#include <time.h>
#include <string.h>
#ifndef W
#define W 16
#endif
#define BODY(S, I) \
    const float t0##S = in0[I]; const float t1##S = in1[I]; \
    const float t2##S = t0##S * t1##S; const float t3##S = in2[I]; \
    const float t4##S = t2##S + t3##S; \
    const float t5##S = t4##S * ember_normal_cdf(t4##S); \
    const float t6##S = ember_sigmoid(t0##S); \
    out[I] = t5##S * t6##S;

__attribute__((noinline)) void v0(float *restrict out, const float *restrict in0, const float *restrict in1, const float *restrict in2, int64_t n) {
  #pragma omp simd
  for (int64_t i = 0; i < n; i++) { BODY(a, i) }
}

/* two streams half the array apart, one simd loop: two independent chains per vector iteration */
__attribute__((noinline)) void v1(float *restrict out, const float *restrict in0, const float *restrict in1, const float *restrict in2, int64_t n) {
  const int64_t h = n / 2;
  #pragma omp simd
  for (int64_t i = 0; i < h; i++) {
      const int64_t ia = i, ib = i + h;
      const float t0a = in0[ia]; const float t0b = in0[ib];
      const float t4a = t0a * in1[ia] + in2[ia]; const float t4b = t0b * in1[ib] + in2[ib];
      const float pa = ember_normal_cdf(t4a); const float pb = ember_normal_cdf(t4b);
      const float sa = ember_sigmoid(t0a); const float sb = ember_sigmoid(t0b);
      out[ia] = t4a * pa * sa; out[ib] = t4b * pb * sb;
  }
  for (int64_t i = 2 * h; i < n; i++) { BODY(a, i) }
}
/* blocks of 2W: two vectors per iteration, statements interleaved */
__attribute__((noinline)) void v2(float *restrict out, const float *restrict in0, const float *restrict in1, const float *restrict in2, int64_t n) {
  int64_t i0 = 0;
  for (; i0 + 2 * W <= n; i0 += 2 * W) {
    #pragma omp simd
    for (int64_t j = 0; j < W; j++) {
      const int64_t ia = i0 + j, ib = i0 + W + j;
      const float t0a = in0[ia]; const float t0b = in0[ib];
      const float t1a = in1[ia]; const float t1b = in1[ib];
      const float t4a = t0a * t1a + in2[ia]; const float t4b = t0b * t1b + in2[ib];
      const float pa = ember_normal_cdf(t4a); const float pb = ember_normal_cdf(t4b);
      const float sa = ember_sigmoid(t0a); const float sb = ember_sigmoid(t0b);
      out[ia] = t4a * pa * sa; out[ib] = t4b * pb * sb;
    }
  }
  #pragma omp simd
  for (int64_t i = i0; i < n; i++) { BODY(a, i) }
}
/* the same with the helpers' order: a, b ... (no statement interleave, just 2 vectors a block) */
__attribute__((noinline)) void v3(float *restrict out, const float *restrict in0, const float *restrict in1, const float *restrict in2, int64_t n) {
  int64_t i0 = 0;
  for (; i0 + 2 * W <= n; i0 += 2 * W) {
    #pragma omp simd
    for (int64_t j = 0; j < 2 * W; j++) { BODY(a, i0 + j) }
  }
  #pragma omp simd
  for (int64_t i = i0; i < n; i++) { BODY(a, i) }
}
/* simdlen 2W */
__attribute__((noinline)) void v4(float *restrict out, const float *restrict in0, const float *restrict in1, const float *restrict in2, int64_t n) {
  #pragma omp simd simdlen(2 * W)
  for (int64_t i = 0; i < n; i++) { BODY(a, i) }
}
__attribute__((noinline)) void fl(float *restrict out, const float *restrict in0, const float *restrict in1, const float *restrict in2, int64_t n) {
  #pragma omp simd
  for (int64_t i = 0; i < n; i++) out[i] = in0[i] * in1[i] + in2[i] + in0[i];
}
typedef void (*fn)(float *restrict, const float *restrict, const float *restrict, const float *restrict, int64_t);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmpd(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
  int64_t n = argc > 1 ? atoll(argv[1]) : (1 << 24);
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  int64_t inner = (1 << 24) / n; if (inner < 1) inner = 1;
  float *a = aligned_alloc(4096, n * 4 + 4096), *b = aligned_alloc(4096, n * 4 + 4096), *c = aligned_alloc(4096, n * 4 + 4096);
  float *o = aligned_alloc(4096, n * 4 + 8192), *o2 = aligned_alloc(4096, n * 4 + 8192);
  o += 16; o2 += 16;  /* like the runtime's page-aligned buffers + an offset: avoid 4K aliasing */
  srand(1);
  for (int64_t i = 0; i < n; i++) { a[i] = (rand() / (float)RAND_MAX - 0.5f) * 8; b[i] = (rand() / (float)RAND_MAX - 0.5f) * 2; c[i] = (rand() / (float)RAND_MAX - 0.5f); }
  fn f[] = {v0, v1, v2, v3, fl}; const char *nm[] = {"v0 base", "v1 two streams", "v2 interleave", "v3 2W block", "floor"};
  int nf = 5;
  double t[5][64];
  v0(o2, a, b, c, n);
  for (int k = 0; k < nf; k++) { memset(o, 0, n * 4); f[k](o, a, b, c, n); if (k < 4 && memcmp(o, o2, n * 4)) printf("%s DIFFERS\n", nm[k]); }
  for (int r = 0; r < reps; r++)
    for (int k = 0; k < nf; k++) { double t0 = now(); for (int64_t q = 0; q < inner; q++) {
  #pragma omp parallel num_threads(NT)
  { int nt = omp_get_num_threads(), id = omp_get_thread_num(); int64_t ch = (n / nt + 63) & ~63LL, lo = id * ch, hi = lo + ch < n ? lo + ch : n;
    if (lo < hi) f[k](o + lo, a + lo, b + lo, c + lo, hi - lo); } } t[k][r] = (now() - t0) / inner / n * 1e9; }
  for (int k = 0; k < nf; k++) { qsort(t[k], reps, sizeof(double), cmpd); printf("%-16s median %.3f ns/elem  min %.3f\n", nm[k], t[k][reps / 2], t[k][0]); }
  return 0;
}
"""


def _loop(asm: str, fn: str, reg: str) -> list:
    """The instructions of ``fn``'s vector loop with the most ``reg`` operands."""
    lines = asm.split("\n")
    i = lines.index(fn + ":")
    j = next(k for k in range(i, len(lines)) if lines[k].strip().startswith(".cfi_endproc"))
    body = lines[i:j]
    labels = {ln.strip()[:-1]: k for k, ln in enumerate(body) if re.match(r"^\.L\d+:", ln.strip())}
    best: tuple = (-1, [])
    for k, ln in enumerate(body):
        m = re.match(r"\s+j\w+\s+(\.L\d+)", ln)
        if m and m.group(1) in labels and labels[m.group(1)] < k:
            seg = body[labels[m.group(1)]:k + 1]
            best = max(best, (sum(reg in x for x in seg), seg), key=lambda b: b[0])
    return [x for x in best[1] if x.startswith("\t") and not x.strip().startswith(".")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--mca", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "prelude_part.h").write_text(C_PRELUDE + "\n" + PRELUDE)
        (d / "h.c").write_text(HARNESS)
        for isa, flags in ISAS.items():
            exe = d / isa
            subprocess.run(["gcc", *FLAGS, *flags, str(d / "h.c"), "-o", str(exe), "-lm"],
                           check=True)
            if host_can_run(isa):
                for n in (1 << 14, 1 << 24):
                    out = subprocess.run([str(exe), str(n), str(a.reps)], capture_output=True,
                                         text=True, check=True).stdout
                    print(f"\n{isa}, n = 2^{n.bit_length() - 1}:\n{out.rstrip()}")
            else:
                print(f"\n{isa}: the host cannot run it")
            if a.mca and shutil.which("llvm-mca"):
                asm = subprocess.run(["gcc", *FLAGS, *flags, "-S", "-o", "-", str(d / "h.c")],
                                     capture_output=True, text=True, check=True).stdout
                reg = "zmm" if isa == "x86-64-v4" else "ymm"
                for fn, vecs in (("v0", 1), ("v1", 2)):
                    (d / "l.s").write_text("\n".join(_loop(asm, fn, reg)) + "\n")
                    mca = subprocess.run(["llvm-mca", "-mcpu=sapphirerapids", "-iterations=300",
                                          str(d / "l.s")], capture_output=True, text=True).stdout
                    m = re.search(r"Total Cycles:\s+(\d+)", mca)
                    if m:
                        print(f"llvm-mca {isa} {fn}: {int(m.group(1)) / 300 / vecs:.1f} cycles "
                              f"per vector")


if __name__ == "__main__":
    main()

"""Threads kept awake across one C call (issue 21, ``codegen/awake.py``): the char GPT's KV-cache
decode step, replayed (``mode="reduce-overhead"``: each token one C call), built with and without
the awake pool, at 1 and 2 threads, interleaved in one process.

Run: ``python benchmarks/bench_awake.py [--tokens N] [--rounds R] [--gemv]``.  Each round generates
``--tokens`` greedy tokens once per configuration (in turn); every decode call is timed alone
(wall, ``perf_counter``) and the process CPU time of each generation is summed (all threads:
spinning workers count).  Printed per configuration: the median and the 10th percentile of
the per-call wall time over all calls (the 10th percentile stands for a quiet moment on a
loaded machine), and the CPU time per call.  Also the CPU time of the process during a 0.5 s
sleep after the last call (workers must not spin between calls: ~0).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(HERE))
else:
    sys.path.insert(0, os.path.dirname(HERE))

import ember  # noqa: E402
from ember import demo  # noqa: E402
from ember.compiler.c.codegen import awake  # noqa: E402

LAYERS, HEADS, D, BLOCK = 6, 6, 384, 256


# --gemv: the mechanism alone, in C: the char GPT's 24 weight matrices (42.5 MB) through
# y = W x per "entry", serial against split over the pool (ember_pool.h, 2 threads)
_GEMV_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#define EMBER_EXPORT
static int ember_num_threads = 2;
#include "POOL_H"
static double now_(clockid_t c) { struct timespec t; clock_gettime(c, &t);
                                  return t.tv_sec + t.tv_nsec * 1e-9; }
static void gemv(const float *restrict W, const float *restrict x, float *restrict y,
                 int64_t K, int64_t lo, int64_t hi) {
  for (int64_t j = lo; j < hi; j++) {
    float s[16] = {0}, t = 0;
    for (int64_t p = 0; p < K; p += 16)
      for (int l = 0; l < 16; l++) s[l] += W[j * K + p + l] * x[p + l];
    for (int l = 0; l < 16; l++) t += s[l];
    y[j] = t;
  }
}
typedef struct { const float *W, *x; float *y; int64_t N, K, step; } job_t;
static void part(void *a, int64_t p, int64_t n) {
  job_t *j = a;
  int64_t lo = p * j->step, hi = p + 1 == n ? j->N : lo + j->step;
  gemv(j->W, j->x, j->y, j->K, lo, hi);
}
int main(void) {
  int64_t shp[4][2] = {{1152, 384}, {384, 384}, {1536, 384}, {384, 1536}};
  float *W[24], x[1536], y[1536];
  for (int i = 0; i < 1536; i++) x[i] = 1;
  for (int i = 0; i < 24; i++) {
    int64_t n = shp[i % 4][0] * shp[i % 4][1];
    W[i] = aligned_alloc(64, n * 4);
    for (int64_t q = 0; q < n; q++) W[i][q] = 1e-3f * (q % 7);
  }
  for (int round = 0; round < 3; round++)
    for (int m = 0; m < 2; m++) {
      double best = 1e9, tot = 0, ctot = 0;
      for (int r = 0; r < 100; r++) {
        double w = now_(CLOCK_MONOTONIC), c = now_(CLOCK_PROCESS_CPUTIME_ID);
        if (m) ember_pool_begin_();
        for (int i = 0; i < 24; i++) {
          job_t j = {W[i], x, y, shp[i % 4][0], shp[i % 4][1], (shp[i % 4][0] / 2 + 15) / 16 * 16};
          if (m) ember_pool_run_(part, &j, 2);
          else gemv(W[i], x, y, shp[i % 4][1], 0, shp[i % 4][0]);
        }
        if (m) ember_pool_end_();
        w = now_(CLOCK_MONOTONIC) - w;
        tot += w;
        ctot += now_(CLOCK_PROCESS_CPUTIME_ID) - c;
        if (w < best) best = w;
        usleep(200);
      }
      int64_t st[3];
      ember_pool_stats(st);
      printf("%s: best %.3f ms (%.1f GB/s), mean %.3f ms, CPU mean %.3f ms%s\n",
             m ? "pool, 2 threads" : "one thread     ", best * 1e3, 42.5e-3 / best, tot / 100 * 1e3,
             ctot / 100 * 1e3, m ? "" : "");
      if (m) printf("  so far: %ld products split, %ld alone, %ld parts run by the worker\n",
                    (long)st[0], (long)st[1], (long)st[2]);
    }
  return 0;
}
"""


def gemv_only() -> None:
    """Build and run ``_GEMV_C`` (gcc -O3 -march=native -pthread)."""
    import subprocess
    import tempfile
    from pathlib import Path

    from ember.compiler.c.codegen import CSRC
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "gemv.c"
        src.write_text(_GEMV_C.replace("POOL_H", str(CSRC / "ember_pool.h")))
        subprocess.run(["gcc", "-O3", "-march=native", "-pthread", str(src), "-o",
                        str(Path(d) / "gemv")], check=True)
        subprocess.run([str(Path(d) / "gemv")], check=True)


def fresh_step(m: demo.CharGPT, tag: str):
    """``m.decode_step`` compiled in ``reduce-overhead`` mode through a wrapper of its own:
    ember's code cache is keyed by the code object, so each configuration builds its own graph
    (``CharGPT.compiled_decode_step`` would return the one step made first)."""
    ns: dict = {}
    exec(f"def step_{tag}(tok, pos, k, v):\n    return m.decode_step(tok, pos, k, v)\n",
         {"m": m}, ns)
    return ember.compile(ns[f"step_{tag}"], mode="reduce-overhead")


def generate(m: demo.CharGPT, step, n: int, walls: list) -> list:
    cache = demo.KVCache(m, 1)
    tok = ember.tensor([[1]])
    out = [1]
    for p in range(n - 1):
        pos = ember.tensor(p)
        t = time.perf_counter()
        logits = step(tok, pos, cache.k, cache.v)
        walls.append(time.perf_counter() - t)
        tok = logits.argmax(-1, keepdim=True)
        out.append(int(tok.item()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--gemv", action="store_true",
                    help="only the mechanism, in C: 24 GEMVs over the model's 42.5 MB of "
                         "weights per entry, one thread against the pool at 2")
    a = ap.parse_args()
    print(f"ember {ember.__file__}")
    if a.gemv:
        gemv_only()
        return
    ember.manual_seed(0)
    vocab = len(set(demo.load_text()))
    em = demo.CharGPT(vocab, block=BLOCK, d=D, layers=LAYERS, heads=HEADS).eval()
    configs = {"awake pool, 2 threads": (True, 2), "no pool, 2 threads": (False, 2),
               "1 thread": (True, 1)}
    steps, tokens = {}, {}
    for name, (on, nt) in configs.items():
        awake.ENABLED = on   # read when the step's graph is built (its first call)
        ember.set_num_threads(nt)
        steps[name] = fresh_step(em, f"c{len(steps)}")
        tokens[name] = generate(em, steps[name], a.tokens, [])
    awake.ENABLED = True
    first = next(iter(tokens.values()))
    print("same tokens in every configuration:", all(t == first for t in tokens.values()))
    walls: dict = {k: [] for k in configs}
    cpus: dict = {k: [] for k in configs}
    for _ in range(a.rounds):
        for name, (_, nt) in configs.items():
            ember.set_num_threads(nt)
            c = time.process_time()
            generate(em, steps[name], a.tokens, walls[name])
            cpus[name].append((time.process_time() - c) / (a.tokens - 1))
    c = time.process_time()
    time.sleep(0.5)
    idle = time.process_time() - c
    print(f"\n{a.tokens - 1} decode calls x {a.rounds} rounds per configuration "
          f"(load: {os.getloadavg()[0]:.1f})")
    print("| configuration | wall per call, median | 10th percentile | CPU per call (median) |")
    print("|---|---|---|---|")
    for name in configs:
        w = sorted(walls[name])
        print(f"| {name} | {statistics.median(w) * 1e3:.3f} ms | "
              f"{w[len(w) // 10] * 1e3:.3f} ms | {statistics.median(cpus[name]) * 1e3:.3f} ms |")
    print(f"process CPU time during 0.5 s of sleep after the calls: {idle * 1e3:.1f} ms")


if __name__ == "__main__":
    main()

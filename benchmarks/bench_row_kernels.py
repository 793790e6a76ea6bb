"""The C row kernels alone: softmax, log_softmax, layer_norm over 8192x1024 float32.

``bench_cbackend --rows`` times whole calls, which include allocating the output (a fresh
32 MiB array: its page faults cost about as much as copying it).  This script times only the
generated kernels: it writes the C of each graph (``ember.compiler.codegen``) from this tree and
from the trees given with ``--base`` (their ember, imported in a subprocess), builds each with
the backend's flags, and a small C driver calls the entry functions on preallocated arrays,
interleaved, with a ``memcpy`` of the same array as the memory floor.  It also checks that every
tree's kernels give the same bits as the first tree's.
``--no-stream`` adds this tree built with ``EMBER_STREAM_STORE_BYTES=0`` (plain stores instead
of the non-temporal stores of large outputs, ``codegen/stream.py``).
``--cpu`` times the process's CPU time instead of wall time (one thread on a loaded machine);
``--dtype float16|bfloat16`` times the half kernels (float32 math, half rows) against a memcpy
of the half array; ``--ops softmax,log_softmax`` picks kernels.
Run: python -m benchmarks.bench_row_kernels [--base /path/to/other/tree] [--no-stream]
     [--threads 1,2] [--cpu] [--dtype float32|float16|bfloat16] [--ops softmax,...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROWS, COLS = 8192, 1024
OPS = {"softmax": 1, "log_softmax": 1, "layer_norm": 3}  # outputs (y; y, mean, rstd)

_GEN = f"""
import sys
import numpy as np
import ember
from ember.compiler import codegen
dt = getattr(ember, sys.argv[2])
x = ember.tensor(np.zeros(({ROWS}, {COLS}), np.float32)).to(dt)
w = ember.tensor(np.ones({COLS}, np.float32)).to(dt)
b = ember.tensor(np.zeros({COLS}, np.float32)).to(dt)
fns = {{"softmax": lambda x, w, b: ember.softmax(x, -1),
        "log_softmax": lambda x, w, b: ember.log_softmax(x, -1),
        "layer_norm": lambda x, w, b: ember.nn.functional.layer_norm(x, ({COLS},), w, b)}}
for name, fn in fns.items():
    open(f"{{sys.argv[1]}}/{{name}}.c", "w").write(codegen(fn, x, w, b))
"""

_DRIVER = r"""
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef int (*entry_t)(void **, const int64_t *, const double *);
#ifndef EMBER_CLOCK
#define EMBER_CLOCK CLOCK_MONOTONIC
#endif
static double now(void) { struct timespec t; clock_gettime(EMBER_CLOCK, &t);
                          return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmpd(const void *a, const void *b) { double x = *(const double *)a,
                                                y = *(const double *)b; return x < y ? -1 : x > y; }
/* one value into element i of a float32 (esz 4), float16 (esz 2) or bfloat16 (esz 3) array */
static void put(void *a, size_t i, int esz, float v) {
  if (esz == 4) { ((float *)a)[i] = v; return; }
  uint32_t u; _Float16 h = (_Float16)v; uint16_t hb;
  memcpy(&u, &v, 4); memcpy(&hb, &h, 2);
  ((uint16_t *)a)[i] = esz == 3 ? (uint16_t)(u >> 16) : hb;
}
/* driver THREADS NOUT ROWS COLS ESZ lib.so... : medians and minimums of 15 rounds of 4 calls */
int main(int argc, char **argv) {
  int th = atoi(argv[1]), nout = atoi(argv[2]), nl = argc - 6, esz = atoi(argv[5]);
  size_t R = atol(argv[3]), C = atol(argv[4]), n = R * C, sz = esz == 4 ? 4 : 2;
  char *x = aligned_alloc(64, n * sz), *cp = aligned_alloc(64, n * sz), *w = malloc(C * sz);
  char *b = malloc(C * sz), *y = aligned_alloc(64, n * sz), *m = malloc(R * 4), *rs = malloc(R * 4);
  char *ref = malloc(n * sz);
  unsigned s = 1;
  for (size_t i = 0; i < n; i++) { s = s * 1103515245u + 12345u;
                                   put(x, i, esz, ((s >> 8) & 0xffff) / 8192.0f - 4.0f); }
  for (size_t i = 0; i < C; i++) { put(w, i, esz, 1.0f + i * 1e-3f); put(b, i, esz, 0.1f); }
  memset(y, 0, n * sz); memset(cp, 0, n * sz);
  void *one[] = {x, y}, *three[] = {x, w, b, y, m, rs};
  entry_t fn[32];
  for (int l = 0; l < nl; l++) {
    void *h = dlopen(argv[6 + l], RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("%s\n", dlerror()); return 1; }
    ((void (*)(int))dlsym(h, "ember_set_num_threads"))(th);
    fn[l] = (entry_t)dlsym(h, "ember_entry");
  }
  enum { IT = 15, K = 4 };
  static double t[33][IT];
  for (int it = 0; it < IT; it++)
    for (int l = 0; l <= nl; l++) {
      double t0 = now();
      for (int k = 0; k < K; k++) {
        if (l == nl) memcpy(cp, x, n * sz);
        else fn[l](nout == 1 ? one : three, NULL, NULL);
      }
      t[l][it] = (now() - t0) / K;
      if (it == 0 && l < nl) {
        if (l == 0) memcpy(ref, y, n * sz);
        else if (memcmp(ref, y, n * sz))
          printf("%s: NOT bitwise equal to the first\n", argv[6 + l]);
      }
    }
  for (int l = 0; l <= nl; l++) {
    qsort(t[l], IT, sizeof(double), cmpd);
    printf("| %s | %.2f ms | %.2f ms |\n", l == nl ? "memcpy (floor)" : argv[6 + l],
           t[l][IT / 2] * 1e3, t[l][0] * 1e3);
  }
  return 0;
}
"""


def main() -> None:
    from ember.compiler.c.build import toolchain
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", action="append", default=[], help="another tree to compare")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--no-stream", action="store_true",
                    help="also this tree with non-temporal stores off")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"],
                    help="the rows' dtype (the memcpy floor copies an array of it)")
    ap.add_argument("--ops", default=",".join(OPS), help="comma list of the kernels to time")
    ap.add_argument("--cpu", action="store_true",
                    help="time CPU time of the process (all threads) instead of wall time: "
                         "the figure a loaded machine disturbs least at one thread")
    a = ap.parse_args()
    here = Path(__file__).resolve().parent.parent
    trees = [here] + [Path(b).resolve() for b in a.base] + ([here] if a.no_stream else [])
    cc = os.environ.get("CC", "gcc")
    flags = [*toolchain.FLAGS, *toolchain.machine_flags(), toolchain.OPENMP_FLAG]
    with tempfile.TemporaryDirectory() as tmp:
        libs: dict = {op: [] for op in OPS}
        for j, tree in enumerate(trees):
            d = Path(tmp) / f"tree{j}"
            d.mkdir()
            env = dict(os.environ, PYTHONPATH=str(tree))
            if a.no_stream and j == len(trees) - 1:
                env["EMBER_STREAM_STORE_BYTES"] = "0"
            subprocess.run([sys.executable, "-c", _GEN, str(d), a.dtype], env=env, check=True,
                           cwd=tmp)
            for op in OPS:
                so = d / f"{op}.so"
                subprocess.run([cc, *flags, str(d / f"{op}.c"), "-o", str(so), *toolchain.LIBS],
                               check=True)
                libs[op].append(str(so))
        driver = Path(tmp) / "driver"
        (Path(tmp) / "driver.c").write_text(_DRIVER)
        clock = ["-DEMBER_CLOCK=CLOCK_PROCESS_CPUTIME_ID"] if a.cpu else []
        subprocess.run([cc, "-O2", *clock, str(Path(tmp) / "driver.c"), "-o", str(driver),
                        "-ldl"], check=True)
        print("trees: " + ", ".join(f"tree{j} = {t}" for j, t in enumerate(trees))
              + ("; CPU time" if a.cpu else "; wall time"))
        for t in a.threads.split(","):
            for op, nout in OPS.items():
                if op not in a.ops.split(","):
                    continue
                print(f"\n{op} {a.dtype}, {t} thread(s), load {os.getloadavg()[0]:.2f}")
                print("| kernel | median | min |\n|---|---|---|")
                esz = {"float32": "4", "float16": "2", "bfloat16": "3"}[a.dtype]
                out = subprocess.run([str(driver), t, str(nout), str(ROWS), str(COLS), esz,
                                      *libs[op]], capture_output=True, text=True, check=True)
                print(out.stdout.replace(tmp + "/", "").rstrip())


if __name__ == "__main__":
    main()

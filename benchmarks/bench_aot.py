"""AOT packages: ember against ``torch._inductor`` on the demo's char GPT (inference, batch 1).

- build: ``ember.aot.compile_and_package`` with an empty C cache (cold) and again (warm), vs
  ``torch._inductor.aoti_compile_and_package`` with an empty inductor cache, timed once (it
  takes minutes on a loaded 2-core machine); issue 16's goal: ember <= 0.25x torch;
- load: ``ember.aot.load_package`` vs ``torch._inductor.aoti_load_package`` (goal <= 50 ms);
- run, batch 1: the loaded package called from Python, and from C (a C program linked with
  libember_aot times its own loop), vs torch's loaded AOTI model from Python (goal: faster).

Both sides use one thread.  The torch model runs the very same source (``ember/demo.py``
re-executed against torch, as benchmarks/bench_export.py does) with ember's weights copied in,
and the outputs are compared.  Run: ``python benchmarks/bench_aot.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
WORK = tempfile.mkdtemp(prefix="bench-aot-")
os.environ["EMBER_CACHE_DIR"] = os.path.join(WORK, "ember-cache")      # cold ember build
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(WORK, "inductor")  # cold torch build

import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_export import _as_torch  # noqa: E402
from common import compare, fmt_time  # noqa: E402

import ember  # noqa: E402
import ember.aot  # noqa: E402
import ember.demo  # noqa: E402

SHAPE = (1, 64)   # batch 1, a full block of 64 characters
C_BENCH = r"""
#include <ember/aot/runner.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
                          return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv) {
  int n = atoi(argv[2]);
  ember_aot_model *m;
  double t0 = now();
  if (ember_aot_load(argv[1], "model", &m)) { fprintf(stderr, "%s\n", ember_aot_last_error());
                                              return 1; }
  double load = now() - t0;
  int64_t shape[2] = {1, 64}, idx[64];
  for (int i = 0; i < 64; i++) idx[i] = (i * 7) % 65;
  DLTensor x = {idx, {kDLCPU, 0}, 2, {kDLInt, 64, 1}, shape, NULL, 0};
  DLTensor *in[1] = {&x}, *out[1];
  double best[7];
  for (int r = 0; r < 7 + 2; r++) {
    t0 = now();
    for (int i = 0; i < n; i++) {
      if (ember_aot_run(m, in, 1, out, 1)) { fprintf(stderr, "%s\n", ember_aot_last_error());
                                             return 1; }
      ember_aot_free_output(out[0]);
    }
    if (r >= 2) best[r - 2] = (now() - t0) / n;
  }
  for (int i = 0; i < 7; i++) for (int j = i + 1; j < 7; j++)
    if (best[j] < best[i]) { double t = best[i]; best[i] = best[j]; best[j] = t; }
  printf("%.9f %.9f\n", load, best[3]);
  ember_aot_unload(m);
  return 0;
}
"""


def _models():
    tdemo = _as_torch(os.path.join(ROOT, "ember", "demo.py"), ["CharGPT"])
    ember.manual_seed(0)
    em = ember.demo.CharGPT(65, block=64, d=96, layers=2, heads=4).eval()
    tm = tdemo.CharGPT(65, block=64, d=96, layers=2, heads=4).eval()
    tm.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy())
                        for k, v in em.state_dict().items()})
    idx = (np.arange(64) * 7 % 65).reshape(SHAPE).astype(np.int64)
    return em, tm, idx


def _c_runner(pkg: str) -> tuple[float, float]:
    inc, lib = ember.aot.include_dir(), ember.aot.lib_dir()
    src, exe = os.path.join(WORK, "bench.c"), os.path.join(WORK, "bench")
    with open(src, "w") as f:
        f.write(C_BENCH)
    subprocess.run(["gcc", "-O2", src, f"-I{inc}", f"-L{lib}", f"-Wl,-rpath,{lib}",
                    "-lember_aot", "-ldl", "-o", exe], check=True)
    out = subprocess.run([exe, pkg, "200"], capture_output=True, text=True, check=True,
                         env={**os.environ, "EMBER_NUM_THREADS": "1"})
    load, run = (float(v) for v in out.stdout.split())
    return load, run


def main() -> None:
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    em, tm, idx = _models()
    e_ep = ember.export.export(em, (ember.tensor(idx),))
    t_ep = torch.export.export(tm, (torch.from_numpy(idx),))
    pkg = os.path.join(WORK, "ember_gpt.pt2")
    t0 = time.perf_counter()
    ember.aot.compile_and_package(e_ep, package_path=pkg)
    e_cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    ember.aot.compile_and_package(e_ep, package_path=pkg)
    e_warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    tpkg = torch._inductor.aoti_compile_and_package(
        t_ep, package_path=os.path.join(WORK, "torch_gpt.pt2"))
    t_cold = time.perf_counter() - t0

    (_, e_load, t_load, _), = compare({"load": (lambda: ember.aot.load_package(pkg),
                                                 lambda: torch._inductor.aoti_load_package(tpkg),
                                                 1)}, rounds=5, warmup=1)
    e_model, t_model = ember.aot.load_package(pkg), torch._inductor.aoti_load_package(tpkg)
    ex, tx = ember.tensor(idx), torch.from_numpy(idx)
    with torch.inference_mode():  # ember and torch rounds alternate (common.compare)
        want = t_model(tx)
        diff = float(np.abs(e_model(ex).numpy() - want.numpy()).max())
        (_, e_run, t_run, _), = compare({"run": (lambda: e_model(ex), lambda: t_model(tx),
                                                 100)}, rounds=9)
    c_load, c_run = _c_runner(pkg)

    rows = [("package build (cold caches)", e_cold, t_cold),
            ("package build (warm ember cache)", e_warm, t_cold),
            ("load (Python)", e_load, t_load),
            ("load (C runner, ember only)", c_load, t_load),
            ("run batch 1x64 (Python)", e_run, t_run),
            ("run batch 1x64 (C runner vs torch Python)", c_run, t_run)]
    print(f"char GPT (2 layers, d=96, vocab 65), static [1, 64] input, 1 thread; "
          f"max |ember - torch| = {diff:.2e}")
    print(f"| {'measure':44} | {'ember':>10} | {'torch':>10} | {'ember/torch':>11} |")
    print(f"|{'-' * 46}|{'-' * 12}:|{'-' * 12}:|{'-' * 13}:|")
    for name, e, t in rows:
        print(f"| {name:44} | {fmt_time(e):>10} | {fmt_time(t):>10} | {e / t:>11.3f} |")
    print(f"package sizes: ember {os.path.getsize(pkg) / 1024:.0f} KiB, torch "
          f"{os.path.getsize(tpkg) / 1024:.0f} KiB")


if __name__ == "__main__":
    import shutil
    try:
        main()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)

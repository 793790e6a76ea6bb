"""Batch-1 run latency of the demo char GPT's AOT package against torch's AOTI model (issue 16,
"Performance"): the loaded package called from Python and from C, torch's
``aoti_load_package`` model from Python, one thread each, interleaved round by round, medians
of the wall time (``perf_counter``) and of the CPU time (``process_time``; the C runner:
``CLOCK_PROCESS_CPUTIME_ID``) per call.  CPU time is the figure to read on a loaded machine.

    PYTHONPATH=. python benchmarks/bench_aot_latency.py [--rounds 11] [--calls 50]

torch's package takes minutes to build; it is kept in ``$EMBER_BENCH_DIR`` (default
``/tmp/ember-bench-aot``) and reused by later runs (delete it after changing the model).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
OUT = os.environ.get("EMBER_BENCH_DIR", "/tmp/ember-bench-aot")
os.makedirs(OUT, exist_ok=True)
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import ember  # noqa: E402
import ember.aot  # noqa: E402

C_BENCH = r"""
#include <ember/aot/runner.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double clk(clockid_t c) { struct timespec t; clock_gettime(c, &t);
                                 return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv) {
  int n = atoi(argv[2]), rounds = atoi(argv[3]);
  ember_aot_model *m;
  if (ember_aot_load(argv[1], "model", &m)) { fprintf(stderr, "%s\n", ember_aot_last_error());
                                              return 1; }
  int64_t shape[2] = {1, 64}, idx[64];
  for (int i = 0; i < 64; i++) idx[i] = (i * 7) % 65;
  DLTensor x = {idx, {kDLCPU, 0}, 2, {kDLInt, 64, 1}, shape, NULL, 0};
  DLTensor *in[1] = {&x}, *out[1];
  for (int r = 0; r < rounds + 1; r++) {
    double w0 = clk(CLOCK_MONOTONIC), c0 = clk(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < n; i++) {
      if (ember_aot_run(m, in, 1, out, 1)) { fprintf(stderr, "%s\n", ember_aot_last_error());
                                             return 1; }
      ember_aot_free_output(out[0]);
    }
    if (r) printf("%.9f %.9f\n", (clk(CLOCK_MONOTONIC) - w0) / n,
                  (clk(CLOCK_PROCESS_CPUTIME_ID) - c0) / n);
  }
  ember_aot_unload(m);
  return 0;
}
"""


def _packages() -> tuple:
    from bench_aot import _models
    em, tm, idx = _models()
    pkg = os.path.join(OUT, "ember_gpt.pt2")
    ember.aot.compile_and_package(ember.export.export(em, (ember.tensor(idx),)),
                                  package_path=pkg)
    tpkg = os.path.join(OUT, "torch_gpt.pt2")
    if not os.path.exists(tpkg):
        t_ep = torch.export.export(tm, (torch.from_numpy(idx),))
        torch._inductor.aoti_compile_and_package(t_ep, package_path=tpkg)
    return pkg, tpkg, idx


def _c_exe() -> str:
    inc, lib = ember.aot.include_dir(), ember.aot.lib_dir()
    src, exe = os.path.join(OUT, "bench.c"), os.path.join(OUT, "bench")
    with open(src, "w") as f:
        f.write(C_BENCH)
    subprocess.run(["gcc", "-O2", src, f"-I{inc}", f"-L{lib}", f"-Wl,-rpath,{lib}",
                    "-lember_aot", "-ldl", "-o", exe], check=True)
    return exe


def _timed(fn, n: int) -> tuple:
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        fn()
    return (time.perf_counter() - w0) / n, (time.process_time() - c0) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--calls", type=int, default=50)
    a = ap.parse_args()
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    pkg, tpkg, idx = _packages()
    em, tm = ember.aot.load_package(pkg), torch._inductor.aoti_load_package(tpkg)
    os.environ["EMBER_AOT_PREPACK"] = "0"   # the same package, B packed per call
    em0 = ember.aot.load_package(pkg)
    del os.environ["EMBER_AOT_PREPACK"]
    exe = _c_exe()
    ex, tx = ember.tensor(idx), torch.from_numpy(idx)

    def c_run(prepack: str) -> tuple:
        out = subprocess.run([exe, pkg, str(a.calls), "1"], capture_output=True, text=True,
                             check=True, env={**os.environ, "EMBER_NUM_THREADS": "1",
                                              "EMBER_AOT_PREPACK": prepack})
        return tuple(float(v) for v in out.stdout.split())

    runs = {"ember (Python)": lambda: _timed(lambda: em(ex), a.calls),
            "ember (Python), B packed per call": lambda: _timed(lambda: em0(ex), a.calls),
            "ember (C runner)": lambda: c_run("1"),
            "ember (C runner), B packed per call": lambda: c_run("0"),
            "torch AOTI (Python)": lambda: _timed(lambda: tm(tx), a.calls)}
    res: dict = {k: [] for k in runs}
    names = list(runs)
    with torch.inference_mode():
        diff = float(np.abs(em(ex).numpy() - tm(tx).numpy()).max())
        assert np.array_equal(em(ex).numpy(), em0(ex).numpy())
        for _ in range(3):
            em(ex), em0(ex), tm(tx)
        for r in range(a.rounds):   # variants in turn, the first one rotating
            for name in names[r % len(names):] + names[:r % len(names)]:
                res[name].append(runs[name]())
    tw, tc = (statistics.median(x[i] for x in res["torch AOTI (Python)"]) for i in (0, 1))
    print(f"char GPT b1x64, 1 thread, {a.rounds} rounds x {a.calls} calls, medians; "
          f"max |ember - torch| = {diff:.1e}; load avg {os.getloadavg()[0]:.1f}")
    print("| run | wall | CPU | wall / torch | CPU / torch |\n|---|---:|---:|---:|---:|")
    for name, v in res.items():
        w, c = statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)
        print(f"| {name} | {w * 1e3:.3f} ms | {c * 1e3:.3f} ms | {w / tw:.2f} | {c / tc:.2f} |")


if __name__ == "__main__":
    main()

"""AOT packages of half-precision models: constant weights packed once per load against packed
per call (``EMBER_AOT_PREPACK=0``), from Python and from the C runner, one thread, interleaved
round by round; medians of the CPU time per call (``process_time``; the C runner:
``CLOCK_PROCESS_CPUTIME_ID``) and of the wall time.

Models: the demo char GPT of ``bench_aot_latency.py`` (b1 x 64 tokens) in float32, in
bfloat16 (``model.to(bfloat16)``) and float32 under bfloat16 autocast; and a transformer FFN
(768 -> 3072 -> 768, GELU, 64 rows) in float32, bfloat16, float16, bfloat16 autocast and int8
(``quantize_dynamic``, per tensor and per token: stored packed, nothing to pre-pack).

    PYTHONPATH=. python benchmarks/bench_aot_half_prepack.py [--rounds 7] [--calls 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
OUT = os.environ.get("EMBER_BENCH_DIR", "/tmp/ember-bench-aot-half")
os.makedirs(OUT, exist_ok=True)
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from bench_aot_latency import _timed  # noqa: E402

import ember  # noqa: E402
import ember.aot  # noqa: E402
import ember.demo  # noqa: E402
import ember.nn as nn  # noqa: E402

C_BENCH = r"""
#include <ember/aot/runner.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double clk(clockid_t c) { struct timespec t; clock_gettime(c, &t);
                                 return t.tv_sec + 1e-9 * t.tv_nsec; }
/* argv: package calls rounds kind rows cols (kind: i64 / f32 / bf16 / f16) */
int main(int argc, char **argv) {
  int n = atoi(argv[2]), rounds = atoi(argv[3]);
  int64_t shape[2] = {atoll(argv[5]), atoll(argv[6])}, numel = shape[0] * shape[1];
  ember_aot_model *m;
  if (ember_aot_load(argv[1], "model", &m)) { fprintf(stderr, "%s\n", ember_aot_last_error());
                                              return 1; }
  DLTensor x = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
  void *buf = calloc((size_t)numel, 8);
  if (!strcmp(argv[4], "i64")) {
    x.dtype = (DLDataType){kDLInt, 64, 1};
    for (int64_t i = 0; i < numel; i++) ((int64_t *)buf)[i] = (i * 7) % 65;
  } else if (!strcmp(argv[4], "f32")) {
    for (int64_t i = 0; i < numel; i++) ((float *)buf)[i] = (float)(i % 13) * 0.1f - 0.6f;
  } else {   /* 0x3f80 / 0x3c00: 1.0 in bfloat16 / float16 */
    x.dtype = (DLDataType){strcmp(argv[4], "bf16") ? kDLFloat : kDLBfloat, 16, 1};
    for (int64_t i = 0; i < numel; i++)
      ((uint16_t *)buf)[i] = strcmp(argv[4], "bf16") ? 0x3c00 : 0x3f80;
  }
  x.data = buf;
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
  free(buf);
  return 0;
}
"""


class Autocast(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x):
        with ember.autocast("cpu", dtype=ember.bfloat16):
            return self.inner(x)


def _variants() -> list:
    """(name, module, example input, C input kind)"""
    ember.manual_seed(0)
    gpt = ember.demo.CharGPT(65, block=64, d=96, layers=2, heads=4).eval()
    idx = ember.tensor((np.arange(64) * 7 % 65).reshape(1, 64).astype(np.int64))
    ffn = nn.Sequential(nn.Linear(768, 3072), nn.GELU(), nn.Linear(3072, 768)).eval()
    x = ember.randn(64, 768)
    return [("char GPT float32", gpt, idx, "i64"),
            ("char GPT bfloat16", _to(gpt, "bf"), idx, "i64"),
            ("char GPT bf16 autocast", Autocast(gpt), idx, "i64"),
            ("FFN float32", ffn, x, "f32"),
            ("FFN bfloat16", _to(ffn, "bf"), x.to(ember.bfloat16), "bf16"),
            ("FFN float16", _to(ffn, "f16"), x.to(ember.float16), "f16"),
            ("FFN bf16 autocast", Autocast(ffn), x, "f32"),
            # int8: stored packed, nothing to pre-pack (both columns should agree)
            ("FFN int8 per-tensor", _quantized(ffn, False), x, "f32"),
            ("FFN int8 per-token", _quantized(ffn, True), x, "f32")]


def _quantized(m: nn.Module, per_token: bool) -> nn.Module:
    import copy
    Q = ember.ao.quantization
    spec = {nn.Linear: Q.per_token_dynamic_qconfig} if per_token else {nn.Linear}
    return Q.quantize_dynamic(copy.deepcopy(m), spec, dtype=ember.qint8)


def _to(m: nn.Module, kind: str) -> nn.Module:
    import copy
    return copy.deepcopy(m).to(ember.bfloat16 if kind == "bf" else ember.float16)


def _c_exe() -> str:
    inc, lib = ember.aot.include_dir(), ember.aot.lib_dir()
    src, exe = os.path.join(OUT, "bench_half.c"), os.path.join(OUT, "bench_half")
    with open(src, "w") as f:
        f.write(C_BENCH)
    subprocess.run(["gcc", "-O2", src, f"-I{inc}", f"-L{lib}", f"-Wl,-rpath,{lib}",
                    "-lember_aot", "-ldl", "-o", exe], check=True)
    return exe


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--only", default="", help="run the variants whose name contains this")
    a = ap.parse_args()
    ember.set_num_threads(1)
    exe = _c_exe()
    print(f"1 thread, {a.rounds} rounds x {a.calls} calls, medians (ms per call, CPU / wall); "
          f"load avg {os.getloadavg()[0]:.1f}")
    print("| model | Python, packed once | Python, per call | per call / once | "
          "C, packed once | C, per call | per call / once |\n|---|---:|---:|---:|---:|---:|---:|")
    for name, m, x, kind in _variants():
        if a.only not in name:
            continue
        pkg = os.path.join(OUT, name.replace(" ", "_") + ".pt2")
        ember.aot.compile_and_package(ember.export.export(m, (x,)), package_path=pkg)
        once = ember.aot.load_package(pkg)
        os.environ["EMBER_AOT_PREPACK"] = "0"
        per_call = ember.aot.load_package(pkg)
        del os.environ["EMBER_AOT_PREPACK"]
        assert np.array_equal(once(x).float().numpy(), per_call(x).float().numpy())

        def c_run(prepack: str, pkg: str = pkg, x: ember.Tensor = x, kind: str = kind) -> tuple:
            out = subprocess.run([exe, pkg, str(a.calls), "1", kind, *map(str, x.shape)],
                                 capture_output=True, text=True, check=True,
                                 env={**os.environ, "EMBER_NUM_THREADS": "1",
                                      "EMBER_AOT_PREPACK": prepack})
            w, c = (float(v) for v in out.stdout.split())
            return w, c

        runs = {"py1": lambda m=once, x=x: _timed(lambda: m(x), a.calls),
                "py0": lambda m=per_call, x=x: _timed(lambda: m(x), a.calls),
                "c1": lambda: c_run("1"), "c0": lambda: c_run("0")}
        res: dict = {k: [] for k in runs}
        keys = list(runs)
        for _ in range(2):
            once(x), per_call(x)
        for r in range(a.rounds):
            for k in keys[r % 4:] + keys[:r % 4]:
                res[k].append(runs[k]())
        med = {k: (statistics.median(v[1] for v in res[k]) * 1e3,
                   statistics.median(v[0] for v in res[k]) * 1e3) for k in res}

        def cell(k: str, med: dict = med) -> str:
            return f"{med[k][0]:.3f} / {med[k][1]:.3f}"

        print(f"| {name} | {cell('py1')} | {cell('py0')} | {med['py0'][0] / med['py1'][0]:.2f}x"
              f" | {cell('c1')} | {cell('c0')} | {med['c0'][0] / med['c1'][0]:.2f}x |",
              flush=True)


if __name__ == "__main__":
    main()

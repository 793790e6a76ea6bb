"""Eager single-rounding arithmetic (``add(alpha=)``, ``addcmul``, ``lerp``, Adam/AdamW/SGD
steps on 1M parameters): this checkout against an older one, and torch.

Run: ``python benchmarks/bench_fma.py [--old PATH] [--rounds N]``.  ``--old`` is a checkout of
an earlier ember (e.g. ``git worktree add /tmp/fma_old 0001558^1``, before the exact fma).
One worker process per variant (old ember; this ember with the C fma kernel; this ember with
the NumPy emulation, EMBER_EAGER_C_FMA=0; torch), all importing the library as ``torch`` and
running the same case code; the driver asks the workers in turn for one timing round per case,
so every variant sees the same machine load.  Prints medians over rounds and ratios to "old".
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
N = 1 << 20


def _cases(torch: object) -> dict:
    """name -> (callable, calls per round); the same code for ember and torch."""
    torch.manual_seed(0)
    cases = {}
    for dt in ("float32", "float64"):
        d = getattr(torch, dt)
        x, y = torch.randn(N, dtype=d), torch.randn(N, dtype=d)
        cases[f"add(alpha=0.5) {dt}"] = (lambda x=x, y=y: torch.add(x, y, alpha=0.5), 10)
    x, t1, t2 = (torch.randn(N) for _ in range(3))
    cases["add(alpha=1) float32"] = (lambda: torch.add(x, t1, alpha=1), 10)
    cases["addcmul(value=0.5) float32"] = (lambda: torch.addcmul(x, t1, t2, value=0.5), 10)
    cases["lerp(w=0.3) float32"] = (lambda: torch.lerp(x, t1, 0.3), 10)
    cases["lerp(w=0.7) float32"] = (lambda: torch.lerp(x, t1, 0.7), 10)
    optims = {"Adam": lambda ps: torch.optim.Adam(ps, lr=1e-3),
              "AdamW": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=1e-2),
              "SGD(momentum, wd)": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9,
                                                              weight_decay=1e-4)}
    for name, make in optims.items():
        p = torch.nn.Parameter(torch.randn(N))
        p.grad = torch.randn(N) * 1e-2
        opt = make([p])
        cases[f"{name} step, 1M float32"] = (opt.step, 5)
    return cases


def worker(lib: str) -> None:
    """Answer 'name' lines on stdin with the seconds per call of that case."""
    torch = __import__(lib)
    torch.set_num_threads(2)
    cases = _cases(torch)
    for fn, _ in cases.values():   # warm-up (builds the C kernel once, fills caches)
        fn()
        fn()
    print(json.dumps(list(cases)), flush=True)
    for line in sys.stdin:
        fn, number = cases[line.strip()]
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        print((time.perf_counter() - t0) / number, flush=True)


def _start(root: str, lib: str, env_extra: dict) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=root, OMP_WAIT_POLICY="PASSIVE", **env_extra)
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", lib],
                            cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", default="/tmp/fma_old")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--worker")
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker)
    variants = {"old": _start(args.old, "ember", {}),
                "new (C fma)": _start(ROOT, "ember", {"EMBER_EAGER_C_FMA": "1"}),
                "new (NumPy fma)": _start(ROOT, "ember", {"EMBER_EAGER_C_FMA": "0"}),
                "torch": _start(ROOT, "torch", {})}
    names = [json.loads(p.stdout.readline()) for p in variants.values()][0]
    times = {(c, v): [] for c in names for v in variants}
    for _ in range(args.rounds):
        for case in names:
            for v, proc in variants.items():
                proc.stdin.write(case + "\n")
                proc.stdin.flush()
                times[case, v].append(float(proc.stdout.readline()))
    for proc in variants.values():
        proc.stdin.close()
        proc.wait()
    print("| case | " + " | ".join(variants) + " | new C / old | new NumPy / old |")
    print("|---" * (len(variants) + 3) + "|")
    for case in names:
        med = {v: statistics.median(times[case, v]) for v in variants}
        cells = " | ".join(f"{med[v] * 1e3:.2f} ms" for v in variants)
        print(f"| {case} | {cells} | {med['new (C fma)'] / med['old']:.2f} | "
              f"{med['new (NumPy fma)'] / med['old']:.2f} |")


if __name__ == "__main__":
    main()

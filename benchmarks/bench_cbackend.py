"""The C backend's first slice (issue 5): one fused pointwise kernel vs eager.

gelu(x*w + b) * sigmoid(x) on 2^22 float32: ember eager, ember compiled with backend="c",
torch eager (interleaved rounds, medians).  Run: python -m benchmarks.bench_cbackend
"""

from __future__ import annotations

import statistics

import numpy as np
import torch

import ember
from benchmarks.common import fmt_time, time_per_call
from ember.compiler import cbackend


def main(n: int = 1 << 22, rounds: int = 9, number: int = 5) -> None:
    rng = np.random.default_rng(0)
    xs, ws, bs = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    ex, ew, eb = (ember.tensor(a) for a in (xs, ws, bs))
    tx, tw, tb = (torch.from_numpy(a) for a in (xs, ws, bs))

    def f(x, w, b):
        return ember.nn.functional.gelu(x * w + b) * ember.sigmoid(x)

    def ft(x, w, b):
        return torch.nn.functional.gelu(x * w + b) * torch.sigmoid(x)

    fc = ember.compile(f, backend="c")
    got, want = fc(ex, ew, eb).numpy(), f(ex, ew, eb).numpy()
    cg = cbackend.last_compiled()
    print(f"kernels: {cg.stats.kernels}, fallbacks: {cg.stats.fallback_count}, "
          f"max |c - eager| = {np.abs(got - want).max():.3g}")
    cases = {"ember eager": lambda: f(ex, ew, eb), "ember backend='c'": lambda: fc(ex, ew, eb),
             "torch eager": lambda: ft(tx, tw, tb)}
    for fn in cases.values():
        fn()
    times: dict = {k: [] for k in cases}
    for _ in range(rounds):
        for k, fn in cases.items():
            times[k].append(time_per_call(fn, number))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"gelu(x*w+b)*sigmoid(x), n = 2^{n.bit_length() - 1} float32, "
          f"torch threads {torch.get_num_threads()}")
    print("| implementation | median | vs torch eager |")
    print("|---|---|---|")
    for k, t in med.items():
        print(f"| {k} | {fmt_time(t)} | {t / med['torch eager']:.2f} |")


def softmax(rows: int = 8192, cols: int = 1024, rounds: int = 9, number: int = 5) -> None:
    """softmax over the last dim of rows x cols float32: one C row kernel."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((rows, cols), dtype=np.float32)
    ex, tx = ember.tensor(xs), torch.from_numpy(xs)

    def f(x):
        return ember.softmax(x, -1)

    fc = ember.compile(f, backend="c")
    got, want = fc(ex).numpy(), f(ex).numpy()
    cg = cbackend.last_compiled()
    print(f"\nkernels: {cg.stats.kernels}, fallbacks: {cg.stats.fallback_count}, "
          f"max |c - eager| = {np.abs(got - want).max():.3g}")
    cases = {"ember eager": lambda: f(ex), "ember backend='c'": lambda: fc(ex),
             "torch eager": lambda: torch.softmax(tx, -1)}
    times: dict = {k: [] for k in cases}
    for _ in range(rounds):
        for k, fn in cases.items():
            times[k].append(time_per_call(fn, number))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"softmax(x, -1), x float32 {rows}x{cols}")
    print("| implementation | median | vs torch eager |")
    print("|---|---|---|")
    for k, t in med.items():
        print(f"| {k} | {fmt_time(t)} | {t / med['torch eager']:.2f} |")


if __name__ == "__main__":
    main()
    softmax()

"""The MLP training step compiled with the C backend (issue 5 goal: >= 1.15x torch.compile).

Run: ``python benchmarks/bench_mlp_c.py [--rounds N] [--mode reduce-overhead|max-autotune]
[--threads T]`` (needs torch); ``--gemms`` times only the step's 9 products (NumPy's OpenBLAS vs
torch).  With ``--mode`` the C step is timed in that mode and in the default one.  ``--profile``
builds the C step with per-kernel timers (EMBER_C_PROFILE, docs/compiler.md) and prints each
kernel's time per step.

MLP 784-512-512-10 (ReLU), batch 256, cross_entropy, backward, AdamW step, zero_grad: four
copies with the same initial weights (``bench_models.mlp_case``), run as

* ember, the whole step under ``ember.compile(step, backend="c")``;
* ember eager;
* torch eager;
* torch, the whole step under ``torch.compile(step)``.

The four losses are printed side by side over the first steps (they must agree), then rounds
of 10 steps each are interleaved and the medians printed, with each time over torch.compile's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

sys.path.insert(0, os.path.dirname(__file__))
from bench_models import mlp_case  # noqa: E402
from common import fmt_time, time_per_call  # noqa: E402

import ember  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    sys.exit("benchmarks need torch (pip install torch==2.13.0)")


# (m, k, n) of the step's products: 3 forward, 2 + 2 + 2 backward (input and weight grads)
GEMMS = [(256, 784, 512), (256, 512, 512), (256, 512, 10), (256, 10, 512), (10, 256, 512),
         (256, 512, 512), (512, 256, 512), (256, 512, 512), (512, 256, 784)]


def gemms_only(rounds: int) -> None:
    """The step's products alone, NumPy's OpenBLAS vs torch, on the current thread settings."""
    import numpy as np
    rng = np.random.default_rng(0)
    ops = [(rng.standard_normal((m, k), dtype=np.float32),
            rng.standard_normal((k, n), dtype=np.float32)) for m, k, n in GEMMS]
    tops = [(torch.from_numpy(a), torch.from_numpy(b)) for a, b in ops]
    tn, tt = [], []
    for _ in range(rounds):
        tn.append(time_per_call(lambda: [a @ b for a, b in ops], 1))
        tt.append(time_per_call(lambda: [a @ b for a, b in tops], 1))
    flops = sum(2 * m * k * n for m, k, n in GEMMS)
    print(f"the step's {len(GEMMS)} products ({flops / 1e9:.2f} GFLOP): NumPy/OpenBLAS "
          f"{fmt_time(statistics.median(tn))}, torch {fmt_time(statistics.median(tt))}")


def profile_c(args: argparse.Namespace) -> None:
    """The C step's kernels timed inside the entry (EMBER_C_PROFILE), per step."""
    from ember.compiler.c import backend as cbackend
    from ember.config import config
    config.c_profile = True
    step = ember.compile(mlp_case().ember_step, backend="c", mode=args.mode)
    for _ in range(5):
        step()
    cbackend.reset_profile()
    n = args.rounds * args.calls
    t = time_per_call(step, n)
    print(f"MLP step, ember C with timers: {fmt_time(t)} per step ({args.threads} threads, "
          f"{n} steps; load {os.getloadavg()[0]:.2f})")
    print(cbackend.format_profile(cbackend.profile(), per=n))


def _cpu_time_per_call(fn, number: int) -> float:  # noqa: ANN001
    t0 = time.process_time()
    for _ in range(number):
        fn()
    return (time.process_time() - t0) / number


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--mode", default=None, help="ember.compile mode (e.g. max-autotune)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5, help="steps whose losses are compared")
    ap.add_argument("--gemms", action="store_true", help="time only the step's products")
    ap.add_argument("--profile", action="store_true", help="per-kernel times of the C step")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time.process_time instead of wall time (CPU time of all threads: "
                         "less sensitive to other jobs on a loaded machine)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ember.set_num_threads(args.threads)
    if args.gemms:
        gemms_only(args.rounds)
        return
    if args.profile:
        profile_c(args)
        return
    cases = [mlp_case() for _ in range(5)]   # same seed: the same weights and batch
    steps = {
        "ember c": ember.compile(cases[0].ember_step, backend="c", mode=args.mode),
        "ember eager": cases[1].ember_step,
        "torch eager": cases[2].torch_step,
        "torch.compile": torch.compile(cases[3].torch_step),
    }
    if args.mode is not None:   # the default mode too, for comparison
        steps = {f"ember c {args.mode}": steps.pop("ember c"),
                 "ember c": ember.compile(cases[4].ember_step, backend="c"), **steps}
    print(f"losses over {args.steps} identical steps ({', '.join(steps)}):")
    worst = 0.0
    for _ in range(args.steps):
        losses = [float(f().item()) for f in steps.values()]
        worst = max(worst, max(losses) - min(losses))
        print("  " + "  ".join(f"{v:.6f}" for v in losses))
    print(f"largest spread {worst:.2e}")
    times: dict = {k: [] for k in steps}
    for _ in range(2):
        for f in steps.values():
            f()
    timer = _cpu_time_per_call if args.cpu_time else time_per_call
    for _ in range(args.rounds):
        for name, f in steps.items():
            times[name].append(timer(f, args.calls))
    med = {k: statistics.median(v) for k, v in times.items()}
    ref = med["torch.compile"]
    print(f"\nMLP 784-512-512-10, batch 256, AdamW step; {args.threads} threads, "
          f"mode={args.mode}, {args.rounds} rounds x {args.calls} steps, medians"
          + (" of CPU time" if args.cpu_time else ""))
    print("| variant | time per step | torch.compile / variant |")
    print("|---|---|---|")
    for name, t in med.items():
        print(f"| {name} | {fmt_time(t)} | {ref / t:.2f}x |")
    for name, f in steps.items():
        if hasattr(f, "replay_count"):   # mode="reduce-overhead": did the steps replay?
            print(f"\n{name}: {f.record_count} recorded calls, {f.replay_count} replayed"
                  + (f" (last recording not replayable: {f.why_not})" if f.why_not else ""))


if __name__ == "__main__":
    main()

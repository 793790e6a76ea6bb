"""A compiled AdamW step alone, over the MLP 784-512-512-10's six parameters.

Run: ``python benchmarks/bench_optim_step.py [--rounds R] [--steps N] [--threads T]``.  The
gradients are fixed; each call is ``opt.step()`` under ``ember.compile`` in the default mode
(its Python records the optimizer every call: one ``adam_step`` node per parameter group,
``ember/ops/optim_step.py``), in ``mode="reduce-overhead"`` (replayed), and
``torch.compile(opt.step)``.  Times are CPU time of the calling thread (``time.thread_time``,
steady on a loaded machine at one thread), the median of ``R`` rounds of ``N`` calls, the
variants interleaved round by round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
else:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ember  # noqa: E402

SHAPES = [(512, 784), (512,), (512, 512), (512,), (10, 512), (10,)]


def _ember(rng: np.random.Generator, mode: str | None) -> object:
    ps = [ember.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
          for s in SHAPES]
    for p in ps:
        p.grad = ember.tensor(rng.standard_normal(p.shape).astype(np.float32))
    opt = ember.optim.AdamW(ps, lr=1e-3)
    return ember.compile(lambda: opt.step(), backend="c", mode=mode)


def _torch(rng: np.random.Generator) -> object:
    import torch
    ps = [torch.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
          for s in SHAPES]
    for p in ps:
        p.grad = torch.tensor(rng.standard_normal(p.shape).astype(np.float32))
    opt = torch.optim.AdamW(ps, lr=1e-3)
    return torch.compile(opt.step)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    ember.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    variants = {"ember default mode": _ember(rng, None),
                "ember reduce-overhead": _ember(rng, "reduce-overhead")}
    try:
        import torch
        torch.set_num_threads(args.threads)
        variants["torch.compile"] = _torch(rng)
    except ImportError:
        pass
    times: dict = {k: [] for k in variants}
    for f in variants.values():
        for _ in range(5):
            f()
    for _ in range(args.rounds):
        for name, f in variants.items():
            t0 = time.thread_time()
            for _ in range(args.steps):
                f()
            times[name].append((time.thread_time() - t0) / args.steps)
    print(f"AdamW step over the MLP's 6 parameters (670k), {args.threads} thread(s), CPU time "
          f"of the thread, medians of {args.rounds} x {args.steps} (load "
          f"{os.getloadavg()[0]:.1f})")
    for name, ts in times.items():
        print(f"  {name:24s} {statistics.median(ts) * 1e3:7.3f} ms")


if __name__ == "__main__":
    main()

"""Where the default-mode compiled MLP step's time goes: the C entry and the Python around it.

Run: ``python benchmarks/bench_mlp_parts.py [--steps N] [--threads T]``.  The MLP training step
of ``bench_mlp_c.py`` (784-512-512-10, batch 256, cross_entropy, backward, AdamW, zero_grad)
under ``ember.compile(step, backend="c")`` in the default mode (its Python runs on lazy tensors
every call).  Each part is timed as CPU time of the calling thread (``time.thread_time``), so
with ``--threads 1`` (the default here: the C entry runs on the calling thread) it is steady on
a loaded machine: the model's forward, ``cross_entropy``, ``backward()``, the optimizer's
``step()`` and ``zero_grad()`` (all recording), the C entry (``runtime.py``'s call) and
``Trace.realize`` around it; "other Python" is the step minus all of those.

``--python-only``: after the warm-up the C entry does nothing (the step's values are then
wrong, but the Python runs the same path: the trace is followed and nothing reads a value),
and only the step's CPU time is printed (medians of 7 rounds, no per-part wrappers): the
step's Python without the C entry evicting its caches, steady on a loaded machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

sys.path.insert(0, os.path.dirname(__file__))
from bench_models import mlp_case  # noqa: E402

import ember  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from ember import _lazy  # noqa: E402
from ember.compiler.c.build import runtime  # noqa: E402
from ember.optim.optimizer import Optimizer  # noqa: E402
from ember.tensor import Tensor  # noqa: E402


def _timed(acc: dict, owner: object, name: str, key: str) -> None:
    orig = getattr(owner, name)

    def wrapper(*a, **k):  # noqa: ANN002, ANN003, ANN202
        t0 = time.thread_time()
        try:
            return orig(*a, **k)
        finally:
            acc[key] = acc.get(key, 0.0) + time.thread_time() - t0
    setattr(owner, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--python-only", action="store_true")
    args = ap.parse_args()
    ember.set_num_threads(args.threads)
    if args.python_only:
        _python_only(args.steps)
        return
    acc: dict = {}
    case = mlp_case()
    _timed(acc, type(case.em), "__call__", "forward")
    _timed(acc, F, "cross_entropy", "cross_entropy")
    _timed(acc, Tensor, "backward", "backward")
    _timed(acc, Optimizer, "step", "optimizer step")
    _timed(acc, Optimizer, "zero_grad", "zero_grad")
    _timed(acc, _lazy.Trace, "realize", "realize")
    _timed(acc, runtime.Entry, "__call__", "C entry")
    step = ember.compile(case.ember_step, backend="c")
    for _ in range(5):
        step()
    acc.clear()
    t0 = time.thread_time()
    for _ in range(args.steps):
        step()
    total = (time.thread_time() - t0) / args.steps
    per = {k: v / args.steps for k, v in acc.items()}
    per["realize"] -= per.get("C entry", 0.0)   # realize's own Python
    known = sum(per.values())
    print(f"MLP step, default mode, {args.threads} thread(s), {args.steps} steps, CPU time of "
          f"the thread (load {os.getloadavg()[0]:.1f}): {total * 1e3:.2f} ms per step")
    for k, v in per.items():
        print(f"  {k:16s} {v * 1e3:7.3f} ms")
    print(f"  {'other Python':16s} {(total - known) * 1e3:7.3f} ms")
    print(f"  Python in all    {(total - per.get('C entry', 0.0)) * 1e3:7.3f} ms")


def _python_only(steps: int) -> None:
    case = mlp_case()
    step = ember.compile(case.ember_step, backend="c")
    for _ in range(5):
        step()
    runtime.Entry.__call__ = lambda self, *a, **k: None   # the C work left out
    rounds = []
    for _ in range(7):
        t0 = time.thread_time()
        for _ in range(steps):
            step()
        rounds.append((time.thread_time() - t0) / steps)
    rounds.sort()
    print(f"MLP step, default mode, the C entry a no-op, {steps} steps x 7 rounds, CPU time "
          f"(load {os.getloadavg()[0]:.1f}): Python {rounds[3] * 1e6:.0f} us per step (median; "
          f"min {rounds[0] * 1e6:.0f})")


if __name__ == "__main__":
    main()

"""Per-call cost of compiled functions in the default mode (issue 21), on tiny tensors.

Cases, all cache hits, under ``no_grad`` (``--grad``: tensors that require grad, grad on):

- ``ops5`` / ``ops10``: 5 and 10 pointwise ops (and a sum) on two 4-float tensors, compiled with
  ``ember.compile`` (default mode, the C backend: the function's Python runs on lazy tensors at
  every call) and with ``torch.compile`` (default mode, inductor), in the same process,
  interleaved, plus both eager;
- recording cost per op: ``bind(MUL, x, 1.0001)`` 200 times under a trace (what recording one op
  costs: binder, graph node, lazy payload) and ``x * 1.0001`` 200 times (the frontend too),
  each minus the same function with 10 ops, divided by 190.

Timed as CPU time of the calling thread (``--wall``: wall clock): the work runs on that thread,
and on a shared machine thread time is far steadier than wall time.  Medians of ``--rounds``
rounds (default 7) of ``--number`` calls (default 2000).

Run: ``python benchmarks/bench_calls.py [--grad] [--wall] [--no-torch] [--profile]``
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Any, Callable

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
else:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import ember  # noqa: E402
from ember.ops.pointwise import MUL  # noqa: E402
from ember.ops.registry import bind  # noqa: E402

CLOCK = time.perf_counter if "--wall" in sys.argv else time.thread_time


def _arg(name: str, default: int) -> int:
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


ROUNDS, NUMBER = _arg("--rounds", 7), _arg("--number", 2000)


def ops5(x: Any, y: Any) -> Any:
    a = x + y
    b = a * 2.0
    c = b.exp()
    d = c - x
    return d.tanh()


def ops10(x: Any, y: Any) -> Any:
    a = x + y
    b = a * 2.0
    c = b.exp()
    d = c - x
    e = d.tanh()
    g = e * y
    h = g.relu()
    i = h + 1.0
    j = i.sigmoid()
    return j.sum()


def _binds(n: int) -> Callable:
    def f(x: Any) -> Any:
        for _ in range(n):
            x = bind(MUL, x, 1.0001)
        return x
    return f


def _muls(n: int) -> Callable:
    def f(x: Any) -> Any:
        for _ in range(n):
            x = x * 1.0001
        return x
    return f


def per_call(fn: Callable[[], object], number: int) -> float:
    t0 = CLOCK()
    for _ in range(number):
        fn()
    return (CLOCK() - t0) / number


def run(cases: dict, number: int = NUMBER) -> dict:
    """Interleaved rounds: every case once per round; medians in seconds per call."""
    for fn in cases.values():
        for _ in range(5):
            fn()
    times: dict = {k: [] for k in cases}
    for _ in range(ROUNDS):
        for k, fn in cases.items():
            times[k].append(per_call(fn, number))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    grad = "--grad" in sys.argv
    ember.set_num_threads(1)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    ex, ey = ember.tensor(a, requires_grad=grad), ember.tensor(b, requires_grad=grad)
    cases: dict = {}
    for name, f in (("ops5", ops5), ("ops10", ops10)):
        c = ember.compile(f)
        cases[f"{name} ember eager"] = lambda f=f: f(ex, ey)
        cases[f"{name} ember.compile"] = lambda c=c: c(ex, ey)
    rec = {n: (ember.compile(_binds(n)), ember.compile(_muls(n))) for n in (10, 200)}
    torch = None
    if "--no-torch" not in sys.argv:
        import torch
        torch.set_num_threads(1)
        tx = torch.tensor(a, requires_grad=grad)
        ty = torch.tensor(b, requires_grad=grad)
        for name, f in (("ops5", ops5), ("ops10", ops10)):
            c = torch.compile(f)
            cases[f"{name} torch eager"] = lambda f=f: f(tx, ty)
            cases[f"{name} torch.compile"] = lambda c=c: c(tx, ty)
    with ember.set_grad_enabled(grad), (torch.set_grad_enabled(grad) if torch else _Null()):
        if "--profile" in sys.argv:
            return _profile(cases)
        got = run(cases)
        x1 = ember.ones(4)
        rc = run({f"{kind} {n}": (lambda c=c: c(x1)) for n, (cb, cm) in rec.items()
                  for kind, c in (("bind", cb), ("op", cm))}, number=max(NUMBER // 10, 50))
    print(f"| case ({'grad' if grad else 'no_grad'}) | per call |")
    print("|---|---|")
    for k, s in got.items():
        print(f"| {k} | {s * 1e6:.1f} us |")
    for kind in ("bind", "op"):
        per_op = (rc[f"{kind} 200"] - rc[f"{kind} 10"]) / 190
        what = "recording (bind under a trace)" if kind == "bind" else "x * 1.0001 under a trace"
        print(f"| {what}, per op | {per_op * 1e6:.2f} us |")


def _profile(cases: dict) -> None:
    import cProfile
    import pstats
    fn = cases["ops10 ember.compile"]
    for _ in range(10):
        fn()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(NUMBER):
        fn()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: Any) -> None:
        return None


if __name__ == "__main__":
    main()

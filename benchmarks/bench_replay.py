"""Per-call overhead of ``mode="reduce-overhead"`` (issue 4), under no_grad, on two programs:

- ``mlp``: a 3-Linear MLP (32-64-64-10, ReLU between), batch 8;
- ``ops10``: a 10-op pointwise chain on a 4-element tensor (the issue's overhead case).

Each is timed eagerly, with ``ember.compile`` (default mode, eager backend: Python runs every
call), with ``mode="reduce-overhead"`` (replay), and the replayed graph alone (the eager backend
interpreting it: the floor for this backend).  torch eager and ``torch.compile`` are peers, timed
in a child process (inductor's cache-key pickler trips over ember's lazy module attributes when
both are imported in one process).  Medians of 7 rounds after warm-up, timed as CPU time of the
calling thread (``--wall`` for wall-clock): everything here runs on that thread, and on a shared
machine wall-clock medians swing 2-3x with other processes' load while thread CPU time does not.

Run: ``python benchmarks/bench_replay.py``
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(str(Path(__file__).resolve().parents[1]))
else:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import fmt_time  # noqa: E402

NUMBER = 2000
CLOCK = time.perf_counter if "--wall" in sys.argv else time.thread_time


def time_per_call(fn: Callable[[], object], number: int) -> float:
    t0 = CLOCK()
    for _ in range(number):
        fn()
    return (CLOCK() - t0) / number


def _mlp(lib: Any) -> Any:
    nn = lib.nn
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 10)).eval()


def _ops10(x: Any) -> Any:
    return ((((x * 2 + 1).sin() * x).exp() - 1).abs().sqrt() + x).relu()


def _median(fn: Callable, number: int = NUMBER, rounds: int = 7) -> float:
    for _ in range(3):
        fn()
    return statistics.median(time_per_call(fn, number) for _ in range(rounds))


def torch_cases() -> dict:
    import torch
    torch.manual_seed(0)
    out = {}
    with torch.no_grad():
        for prog, f, x in (("mlp", _mlp(torch), torch.randn(8, 32)),
                           ("ops10", _ops10, torch.randn(4))):
            out[(prog, "torch eager")] = _median(lambda f=f, x=x: f(x))
            for mode in ("default", "reduce-overhead"):
                c = torch.compile(f, mode=mode)
                out[(prog, f"torch.compile {mode}")] = _median(lambda c=c, x=x: c(x))
    return out


def ember_cases() -> dict:
    import numpy as np

    import ember
    ember.manual_seed(0)
    out = {}
    with ember.no_grad():
        for prog, f, x in (("mlp", _mlp(ember), ember.randn(8, 32)),
                           ("ops10", _ops10, ember.randn(4))):
            default = ember.compile(f)
            replay = ember.compile(f, mode="reduce-overhead")
            ref = f(x).numpy()
            for name, g in (("ember eager", f), ("ember.compile default", default),
                            ("ember.compile reduce-overhead", replay)):
                np.testing.assert_allclose(g(x).numpy(), ref, rtol=1e-6, atol=1e-6)
                out[(prog, name)] = _median(lambda g=g, x=x: g(x))
            rf = getattr(replay, "_compiled", replay)
            assert rf.replay_count > 0, rf.why_not
            r = next(iter(rf._entries.values()))[0].replay
            arrays = [x._data if kind != 2 else a for kind, a in r.sources]
            out[(prog, "graph alone (eager backend)")] = _median(
                lambda r=r, arrays=arrays: r.fn(arrays, r.scalars))
    return out


def main() -> None:
    cases = ember_cases()
    child = subprocess.run([sys.executable, __file__, "--torch", *sys.argv[1:]],
                           capture_output=True, text=True)
    if child.returncode == 0:
        cases.update(eval(child.stdout.strip().splitlines()[-1]))  # noqa: S307 (our own dict)
    else:
        print(f"(torch peers skipped: {child.stderr.strip().splitlines()[-1:]})")
    print("| program | case | per call |")
    print("|---|---|---|")
    for (prog, name), s in cases.items():
        print(f"| {prog} | {name} | {fmt_time(s)} |")


if __name__ == "__main__":
    if "--torch" in sys.argv:
        print(repr(torch_cases()))
    else:
        main()

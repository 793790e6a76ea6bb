"""Per-call overhead of mode="reduce-overhead" (issue 4): a 3-layer MLP forward, batch 8, under
no_grad: eager vs ember.compile (default mode, eager backend) vs reduce-overhead, with torch
eager and torch.compile as peers when torch is installed (timed in a child process: inductor's
cache-key pickler trips over ember's lazy module attributes when both are imported).

Run: ``python benchmarks/bench_replay.py``
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import subprocess  # noqa: E402

from benchmarks.common import fmt_time, time_per_call  # noqa: E402


def _mlp(lib: object) -> object:
    nn = lib.nn
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def _median(fn: object, number: int, rounds: int = 7) -> float:
    for _ in range(3):
        fn()
    return statistics.median(time_per_call(fn, number) for _ in range(rounds))


def torch_cases() -> dict:
    import torch
    tm = _mlp(torch).eval()
    tx = torch.randn(8, 32)
    cases = {}
    with torch.no_grad():
        cases["torch eager"] = _median(lambda: tm(tx), 2000)
        for mode in ("default", "reduce-overhead"):
            tc = torch.compile(tm, mode=mode)
            cases[f"torch.compile {mode}"] = _median(lambda tc=tc: tc(tx), 2000)
    return cases


def main() -> None:
    import numpy as np

    import ember
    ember.manual_seed(0)
    model = _mlp(ember).eval()
    x = ember.randn(8, 32)
    default = ember.compile(model)
    replay = ember.compile(model, mode="reduce-overhead")
    cases = {}
    with ember.no_grad():
        ref = model(x).numpy()
        for name, f in (("ember eager", model), ("ember.compile default", default),
                        ("ember.compile reduce-overhead", replay)):
            np.testing.assert_allclose(f(x).numpy(), ref, rtol=1e-6, atol=1e-6)
            cases[name] = _median(lambda f=f: f(x), 2000)
        g = replay._compiled._entries and next(iter(replay._compiled._entries.values()))[0]
        fn, arrays = g.replay.fn, [x._data] + [a for k, a in g.replay.sources[1:]]
        cases["graph only (eager backend run)"] = _median(
            lambda: fn(arrays, g.replay.scalars), 2000)
    child = subprocess.run([sys.executable, __file__, "--torch"], capture_output=True, text=True)
    if child.returncode == 0:
        cases.update(eval(child.stdout.strip().splitlines()[-1]))  # noqa: S307 (our own dict)
    print("| case | per call |")
    print("|---|---|")
    for name, s in cases.items():
        print(f"| {name} | {fmt_time(s)} |")


if __name__ == "__main__":
    if "--torch" in sys.argv:
        print(repr(torch_cases()))
    else:
        main()

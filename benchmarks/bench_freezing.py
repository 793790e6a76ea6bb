"""Frozen weights (``ember._inductor.config.freezing``): a compiled MLP block's inference with
its weights packed once against packing them per call (docs/compiler.md, "Frozen weights
packed once (ember.compile)").

Run: ``python benchmarks/bench_freezing.py [--threads 1] [--rounds 15] [--d 384] [--hidden 1536]
[--rows 256,64]``.  The block is ``Linear(d, hidden) -> GELU -> Linear(hidden, d)`` on
``rows x d`` inputs, compiled once; each round calls it ``--calls`` times under ``no_grad``
without and with ``freezing`` (interleaved, CPU time of the process, medians), after checking
that both give the same bits.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = os.path.dirname(os.path.abspath(__file__))
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(HERE))
else:
    sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

import ember  # noqa: E402
import ember._inductor.config as icfg  # noqa: E402
import ember.nn as nn  # noqa: E402


def one(d: int, hidden: int, rows: int, rounds: int, calls: int) -> tuple:
    """(median ms per call packing per call, frozen, their ratio) for one block shape."""
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d))
    x = ember.randn(rows, d)
    cm = ember.compile(m)

    def plain() -> np.ndarray:
        with ember.no_grad():
            return cm(x).numpy()

    def frozen() -> np.ndarray:
        with ember.no_grad(), icfg.patch(freezing=True):
            return cm(x).numpy()

    plain(), frozen(), frozen()
    assert np.array_equal(plain(), frozen()), "freezing changed the results"
    ts: dict = {"per call": [], "frozen": []}
    for _ in range(rounds):
        for name, fn in (("per call", plain), ("frozen", frozen)):
            t0 = time.process_time()
            for _ in range(calls):
                fn()
            ts[name].append((time.process_time() - t0) / calls)
    a, b = statistics.median(ts["per call"]), statistics.median(ts["frozen"])
    return a * 1e3, b * 1e3, b / a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--d", type=int, default=384)
    ap.add_argument("--hidden", type=int, default=1536)
    ap.add_argument("--rows", default="256,64")
    a = ap.parse_args()
    ember.set_num_threads(a.threads)
    print(f"ember {ember.__file__}; threads {a.threads}; load {os.getloadavg()[0]:.1f}; "
          f"median CPU time per call")
    print("| block | B packed per call | B packed once (freezing) | frozen / per call |")
    print("|---|---|---|---|")
    for rows in (int(r) for r in a.rows.split(",")):
        p, f, r = one(a.d, a.hidden, rows, a.rounds, a.calls)
        print(f"| {rows}x{a.d} -> {a.hidden} -> {a.d} | {p:.3f} ms | {f:.3f} ms | {r:.2f} |")


if __name__ == "__main__":
    main()

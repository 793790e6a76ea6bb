"""Timing helpers: ember and torch interleaved in one process, medians and ratios."""

from __future__ import annotations

import statistics
import time
from typing import Callable

CLOCK = time.perf_counter   # a benchmark may set time.thread_time (CPU time of this thread)


def time_per_call(fn: Callable[[], object], number: int) -> float:
    """Seconds per call of ``fn`` over ``number`` back-to-back calls (by ``CLOCK``)."""
    clock = CLOCK
    t0 = clock()
    for _ in range(number):
        fn()
    return (clock() - t0) / number


def compare(cases: dict[str, tuple[Callable, Callable, int]], rounds: int = 7,
            warmup: int = 2) -> list[tuple[str, float, float, float]]:
    """For each case (ember_fn, torch_fn, calls per round), alternate ember and torch rounds and
    return (name, ember median s, torch median s, ratio ember/torch)."""
    rows = []
    for name, (fe, ft, number) in cases.items():
        for _ in range(warmup):
            fe()
            ft()
        te, tt = [], []
        for _ in range(rounds):
            te.append(time_per_call(fe, number))
            tt.append(time_per_call(ft, number))
        me, mt = statistics.median(te), statistics.median(tt)
        rows.append((name, me, mt, me / mt))
    return rows


def fmt_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.2f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


def print_table(rows: list[tuple[str, float, float, float]]) -> None:
    print("| case | ember | torch | ember/torch |")
    print("|---|---|---|---|")
    for name, me, mt, r in rows:
        print(f"| {name} | {fmt_time(me)} | {fmt_time(mt)} | {r:.2f} |")

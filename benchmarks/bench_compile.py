"""Per-call overhead of compiled functions (issue 4): a 10-op function on tiny tensors.

Run: ``python benchmarks/bench_compile.py`` (needs torch; torch.compile's default backend
needs a C++ compiler, gcc here).  Cases, all on cache hits: ember eager, ember.compile with the
eager backend, ember.compile(mode="reduce-overhead"), torch eager, torch.compile (inductor) and
torch.compile(backend="eager").  Also prints ember's recording overhead per op.
"""

from __future__ import annotations

import os
import statistics
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import fmt_time, time_per_call  # noqa: E402

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
else:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ember  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    sys.exit("benchmarks need torch (pip install torch==2.13.0)")


def ten_ops(lib):
    def f(x, y):
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
    return f


def main() -> None:
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    ex, ey = ember.tensor(a), ember.tensor(b)
    tx, ty = torch.tensor(a), torch.tensor(b)
    fe, ft = ten_ops(ember), ten_ops(torch)
    cases = {
        "ember eager": lambda: fe(ex, ey),
        "ember.compile (eager backend)": (lambda c: lambda: c(ex, ey))(ember.compile(fe)),
        "torch eager": lambda: ft(tx, ty),
        "torch.compile (inductor)": (lambda c: lambda: c(tx, ty))(torch.compile(ft)),
        "torch.compile (backend=eager)": (lambda c: lambda: c(tx, ty))(
            torch.compile(ft, backend="eager")),
    }
    try:
        ro = ember.compile(fe, mode="reduce-overhead")
        with ember.no_grad():
            ro(ex, ey)
        cases["ember.compile reduce-overhead"] = lambda: ro(ex, ey)
    except Exception as e:  # noqa: BLE001 (reported, not fatal)
        print(f"reduce-overhead unavailable: {e}")
    with ember.no_grad(), torch.no_grad():
        for fn in cases.values():  # warm up / compile
            for _ in range(3):
                fn()
        times: dict = {k: [] for k in cases}
        for _ in range(7):
            for k, fn in cases.items():
                times[k].append(time_per_call(fn, 2000))
    print("| case (10 ops on 4 floats, cache hit) | per call |")
    print("|---|---|")
    for k, ts in times.items():
        print(f"| {k} | {fmt_time(statistics.median(ts))} |")
    # recording overhead per op: trace 200 ops without realizing anything but the result
    big = ember.compile(lambda x: _chain(x, 200))
    with ember.no_grad():
        big(ex)
        t_rec = statistics.median(time_per_call(lambda: big(ex), 200) for _ in range(5))
        t_eager = statistics.median(time_per_call(lambda: _chain(ex, 200), 200) for _ in range(5))
    print(f"\nrecording + realizing a 200-op chain: {fmt_time(t_rec)} per call "
          f"({fmt_time(t_rec / 200)} per op; eager {fmt_time(t_eager / 200)} per op)")


def _chain(x, n):
    for _ in range(n):
        x = x * 1.0001
    return x


if __name__ == "__main__":
    main()

"""Index reductions, norms, scans and float16 reductions: C backend vs ember eager vs torch eager.

Each case runs interleaved rounds in one process and reports medians (``common.compare``):
``C`` is ``ember.compile(f, backend="c")``, ``eager`` the same function uncompiled; torch runs
the same op eagerly.  Threads: ember's and torch's both set to ``--threads``.

    python benchmarks/bench_reduce_more.py [--rows 4096] [--cols 1024] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(str(Path(__file__).resolve().parents[1]))
else:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import ember  # noqa: E402
from benchmarks.common import fmt_time, time_per_call  # noqa: E402

F = ember.nn.functional


def cases(rows: int, cols: int) -> dict:
    a = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    x, t = ember.tensor(a), torch.from_numpy(a)
    xh, th = x.to(ember.float16), t.to(torch.float16)
    return {
        "argmax(-1)": (lambda x: x.argmax(-1), x, lambda: t.argmax(-1)),
        "max(-1) values+indices": (lambda x: x.max(-1), x, lambda: t.max(-1)),
        "argmax(0)": (lambda x: x.argmax(0), x, lambda: t.argmax(0)),
        "vector_norm(2, -1)": (lambda x: ember.linalg.vector_norm(x, 2, -1), x,
                               lambda: torch.linalg.vector_norm(t, 2, -1)),
        "cumsum(-1)": (lambda x: x.cumsum(-1), x, lambda: t.cumsum(-1)),
        "cumsum(0)": (lambda x: x.cumsum(0), x, lambda: t.cumsum(0)),
        "softmax(0)": (lambda x: F.softmax(x, 0), x, lambda: torch.softmax(t, 0)),
        "float16 sum(-1)": (lambda x: x.sum(-1), xh, lambda: th.sum(-1)),
        "float16 layer_norm": (lambda x: F.layer_norm(x, (cols,)), xh,
                               lambda: torch.nn.functional.layer_norm(th, (cols,))),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=5)
    a = ap.parse_args()
    ember.set_num_threads(a.threads)
    torch.set_num_threads(a.threads)
    print(f"{a.rows}x{a.cols} float32 (float16 where named), {a.threads} thread(s), medians of "
          f"{a.rounds} rounds x {a.number} calls")
    print("| case | C | ember eager | torch eager | C externs |")
    print("|---|---|---|---|---|")
    from ember.compiler.c import backend as cbackend
    for name, (f, x, ft) in cases(a.rows, a.cols).items():
        cf = ember.compile(f, backend="c")
        cf(x)
        externs = cbackend.last_compiled().stats.externs
        runs = {"c": [], "e": [], "t": []}
        for _ in range(a.rounds):
            runs["c"].append(time_per_call(lambda cf=cf, x=x: cf(x), a.number))
            runs["e"].append(time_per_call(lambda f=f, x=x: f(x), a.number))
            runs["t"].append(time_per_call(ft, a.number))
        c, e, t = (statistics.median(runs[k]) for k in "cet")
        print(f"| {name} | {fmt_time(c)} | {fmt_time(e)} | {fmt_time(t)} | {externs} |")


if __name__ == "__main__":
    main()

"""Whole compiled calls with and without non-temporal stores (codegen/stream.py), A/B.

The gelu chain on 2^24 float32 and its same-traffic floor (``x*w + b + x``), softmax,
log_softmax and layer_norm on 8192x1024 float32, ``-x`` compiled (a copy through the C
backend's own path: a fresh output per call) and a NumPy copy into an existing array.  Each
side runs in its own process (``EMBER_STREAM_STORE_BYTES=0`` turns streaming off; the other
keeps the default threshold), the two sides alternate ``--pairs`` times; each process
interleaves its cases over ``--rounds`` rounds of 3 calls and prints medians and minimums (ms).
Run: python benchmarks/bench_stream_stores.py [--threads 1,2] [--pairs 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def child(threads: list, rounds: int) -> dict:
    import numpy as np

    import ember
    from benchmarks.common import time_per_call
    F = ember.nn.functional
    rng = np.random.default_rng(0)
    xs, ws, bs = (rng.standard_normal(1 << 24, dtype=np.float32) for _ in range(3))
    ex, ew, eb = (ember.tensor(a) for a in (xs, ws, bs))
    R, C = 8192, 1024
    x2 = rng.standard_normal((R, C), dtype=np.float32)
    e2, ew2 = ember.tensor(x2), ember.tensor(rng.standard_normal(C, dtype=np.float32))
    gelu = ember.compile(lambda x, w, b: F.gelu(x * w + b) * ember.sigmoid(x), backend="c")
    pfloor = ember.compile(lambda x, w, b: x * w + b + x, backend="c")
    sm = ember.compile(lambda x: ember.softmax(x, -1), backend="c")
    lsm = ember.compile(lambda x: ember.log_softmax(x, -1), backend="c")
    ln = ember.compile(lambda x, w: F.layer_norm(x, (C,), w, w), backend="c")
    neg = ember.compile(lambda x: -x, backend="c")
    out = np.empty_like(x2)
    cases = {"gelu chain 2^24": lambda: gelu(ex, ew, eb),
             "floor x*w+b+x (C)": lambda: pfloor(ex, ew, eb),
             "softmax": lambda: sm(e2), "log_softmax": lambda: lsm(e2),
             "layer_norm": lambda: ln(e2, ew2), "floor -x (C)": lambda: neg(e2),
             "np.copyto": lambda: np.copyto(out, x2)}
    res = {}
    for t in threads:
        ember.set_num_threads(t)
        for f in cases.values():
            f()
        times: dict = {k: [] for k in cases}
        for _ in range(rounds):
            for k, f in cases.items():
                times[k].append(time_per_call(f, 3))
        res[t] = {k: (statistics.median(v) * 1e3, min(v) * 1e3) for k, v in times.items()}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    if a.child:
        print(json.dumps(child(threads, a.rounds)))
        return
    env = {k: v for k, v in os.environ.items() if k != "EMBER_STREAM_STORE_BYTES"}
    env["PYTHONPATH"] = os.path.dirname(HERE)
    for p in range(a.pairs):
        for side, extra in (("streaming", {}), ("plain stores", {"EMBER_STREAM_STORE_BYTES": "0"})):
            out = subprocess.run([sys.executable, "-m", "benchmarks.bench_stream_stores",
                                  "--child", "--threads", a.threads, "--rounds", str(a.rounds)],
                                 env={**env, **extra}, cwd=os.path.dirname(HERE),
                                 capture_output=True, text=True, check=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            for t, r in res.items():
                print(f"\npair {p + 1}, {side}, {t} thread(s), load {os.getloadavg()[0]:.2f}: "
                      "median / min ms")
                print(" | ".join(f"{k} {m:.1f} / {n:.1f}" for k, (m, n) in r.items()))


if __name__ == "__main__":
    main()

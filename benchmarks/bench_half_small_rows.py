"""Eager float16/bfloat16 products of 1-4 rows (a decode step) against eager float32 and the
previous widen + BLAS path, one thread, CPU time (``process_time``), interleaved round by
round, medians.  The half products run ``ember/ops/_hsmall_c.py`` (the weight widened in
registers, read once); "widen+BLAS" is the same call with that kernel off
(``_hsmall_c.set_enabled(False)``), in the same process.

    PYTHONPATH=. python benchmarks/bench_half_small_rows.py [--rounds 7] [--calls 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import ember
from ember.ops import _hsmall_c

F = ember.nn.functional
# (name, x shape, weight shape (linear) or b shape (bmm), kind)
CASES = [("linear 1x4096 -> 4096", (1, 4096), (4096, 4096), "linear"),
         ("linear 4x1024 -> 4096 + bias", (4, 1024), (4096, 1024), "linear+bias"),
         ("linear 1x384 -> 1536 + bias", (1, 384), (1536, 384), "linear+bias"),
         ("bmm q k^T 32x(1x64 @ 64x512)", (32, 1, 64), (32, 512, 64), "qk"),
         ("bmm p v 32x(1x512 @ 512x64)", (32, 1, 512), (32, 512, 64), "pv")]


def _fn(kind: str, x, w, b):  # noqa: ANN001, ANN202
    if kind.startswith("linear"):
        return lambda: F.linear(x, w, b)
    if kind == "qk":
        return lambda: ember.bmm(x, w.transpose(1, 2))
    return lambda: ember.bmm(x, w)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20)
    a = ap.parse_args()
    ember.set_num_threads(1)
    print(f"{ember.__file__}; 1 thread, CPU ms per call, medians of {a.rounds} x {a.calls}; "
          f"load avg {os.getloadavg()[0]:.1f}")
    print("| eager | f32 | bf16 | f16 | bf16 widen+BLAS | f16 widen+BLAS | bf16 / f32 | "
          "f16 / f32 | bf16 vs widen+BLAS | f16 vs widen+BLAS |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, xs, ws, kind in CASES:
        ember.manual_seed(0)
        x32, w32, b32 = ember.randn(*xs), ember.randn(*ws) * 0.05, ember.randn(ws[0])
        runs = {}
        for tag, dt, on in (("f32", ember.float32, True), ("bf16", ember.bfloat16, True),
                            ("f16", ember.float16, True), ("bf16 w", ember.bfloat16, False),
                            ("f16 w", ember.float16, False)):
            b = b32.to(dt) if kind == "linear+bias" else None
            runs[tag] = (_fn(kind, x32.to(dt), w32.to(dt), b), on)
        res: dict = {k: [] for k in runs}
        keys = list(runs)
        for r in range(a.rounds):
            for k in keys[r % len(keys):] + keys[:r % len(keys)]:
                fn, on = runs[k]
                _hsmall_c.set_enabled(on)
                c0 = time.process_time()
                for _ in range(a.calls):
                    fn()
                res[k].append((time.process_time() - c0) / a.calls * 1e3)
        _hsmall_c.set_enabled(True)
        m = {k: statistics.median(v) for k, v in res.items()}
        print(f"| {name} | {m['f32']:.3f} | {m['bf16']:.3f} | {m['f16']:.3f} | "
              f"{m['bf16 w']:.3f} | {m['f16 w']:.3f} | {m['f32'] / m['bf16']:.2f}x | "
              f"{m['f32'] / m['f16']:.2f}x | {m['bf16 w'] / m['bf16']:.2f}x | "
              f"{m['f16 w'] / m['f16']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()

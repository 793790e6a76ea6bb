"""Eager float16/bfloat16 convolutions against eager float32, one thread, CPU time
(``process_time``), variants interleaved round by round, medians.  For each case: the forward
(``conv2d``/``conv1d``) and a training step (forward + both backward products), in float32,
bfloat16 and float16 on the half GEMM kernels (``ember/ops/_hconv.py``) and, for bfloat16,
the previous widen + BLAS path (``_hgemm_c.set_enabled(False)``) in the same process.
Speed = float32 time / this time (> 1: faster than float32).

    PYTHONPATH=. python benchmarks/bench_half_conv_eager.py [--rounds 7] [--calls 3]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time

import ember
from ember.ops import _hgemm_c

F = ember.nn.functional
# (name, input shape, weight shape, stride, padding)
CASES = [("3x3 64->64, 8x64x28x28", (8, 64, 28, 28), (64, 64, 3, 3), 1, 1),
         ("1x1 256->64, 8x256x14x14", (8, 256, 14, 14), (64, 256, 1, 1), 1, 0),
         ("3x3/2 64->128, 8x64x28x28", (8, 64, 28, 28), (128, 64, 3, 3), 2, 1),
         ("stem 7x7/2 3->64, 4x3x112x112", (4, 3, 112, 112), (64, 3, 7, 7), 2, 3),
         ("conv1d k5 128->128, 8x128x256", (8, 128, 256), (128, 128, 5), 1, 2)]


def _cpu(fn, n: int) -> float:
    c0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - c0) / n


def _interleaved(runs: dict, rounds: int, calls: int) -> dict:
    """Median CPU ms per call of each of ``runs`` (a (fn, half C on) pair), rotated."""
    res: dict = {k: [] for k in runs}
    keys = list(runs)
    for r in range(rounds):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            fn, on = runs[k]
            _hgemm_c.set_enabled(on)
            res[k].append(_cpu(fn, calls))
    _hgemm_c.set_enabled(True)
    return {k: statistics.median(v) * 1e3 for k, v in res.items()}


def _conv(x, w, s: int, p: int):  # noqa: ANN001, ANN202
    return (F.conv1d if x.dim() == 3 else F.conv2d)(x, w, stride=s, padding=p)


def _step(x, w, gy, s: int, p: int) -> None:  # noqa: ANN001
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    _conv(x, w, s, p).backward(gy)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=3)
    a = ap.parse_args()
    ember.set_num_threads(1)
    print(f"{ember.__file__}; AMX {_hgemm_c.uses_amx()}; 1 thread, CPU ms per call, medians "
          f"of {a.rounds} x {a.calls}; load avg {os.getloadavg()[0]:.1f}")
    print("| eager | what | f32 | bf16 | f16 | bf16 widen+BLAS | bf16 speed | f16 speed | "
          "widen+BLAS speed |\n|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, xs, wsh, s, p in CASES:
        ember.manual_seed(0)
        x32, w32 = ember.randn(*xs), ember.randn(*wsh) * 0.1
        g32 = ember.randn(*_conv(x32, w32, s, p).shape)
        for what in ("forward", "fwd+bwd step"):
            runs = {}
            for tag, dt, on in (("f32", ember.float32, True), ("bf16", ember.bfloat16, True),
                                ("f16", ember.float16, True), ("wb", ember.bfloat16, False)):
                x, w, gy = x32.to(dt), w32.to(dt), g32.to(dt)
                runs[tag] = (functools.partial(_conv, x, w, s, p) if what == "forward"
                             else functools.partial(_step, x, w, gy, s, p), on)
            m = _interleaved(runs, a.rounds, a.calls)
            print(f"| {name} | {what} | {m['f32']:.2f} | {m['bf16']:.2f} | {m['f16']:.2f} | "
                  f"{m['wb']:.2f} | {m['f32'] / m['bf16']:.2f}x | {m['f32'] / m['f16']:.2f}x | "
                  f"{m['f32'] / m['wb']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()

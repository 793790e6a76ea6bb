"""Compiled float16/bfloat16 conv2d against compiled float32 (and eager), one thread, CPU time
(``process_time``), variants interleaved round by round, medians.  ``--backward``: a compiled
training step (conv2d forward, then ``conv_input_grad`` and ``conv_weight_grad`` for a given
output gradient) and a compiled ``conv_transpose2d`` (the input-gradient product alone) of the
same shapes, in each dtype.

    PYTHONPATH=. python benchmarks/bench_half_conv.py [--rounds 7] [--calls 5] [--backward]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import ember

F = ember.nn.functional
# (name, input shape, weight shape, stride, padding)
CASES = [("3x3 64->64, 8x64x28x28", (8, 64, 28, 28), (64, 64, 3, 3), 1, 1),
         ("1x1 256->64, 8x256x14x14", (8, 256, 14, 14), (64, 256, 1, 1), 1, 0),
         ("stem 7x7/2 3->64, 4x3x112x112", (4, 3, 112, 112), (64, 3, 7, 7), 2, 3)]


def _cpu(fn, n: int) -> float:
    c0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - c0) / n


def _interleaved(runs: dict, rounds: int, calls: int) -> dict:
    """Median CPU ms per call of each of ``runs``, rotated round by round."""
    res: dict = {k: [] for k in runs}
    keys = list(runs)
    for r in range(rounds):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            res[k].append(_cpu(runs[k], calls))
    return {k: statistics.median(v) * 1e3 for k, v in res.items()}


def _step(x, w, gy, s: int, p: int):  # noqa: ANN001, ANN202
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    (F.conv2d(x, w, stride=s, padding=p) * gy).sum().backward()
    return x.grad, w.grad


def backward(rounds: int, calls: int) -> None:
    """The training step (forward + both backward products) and conv_transpose2d."""
    print("| conv2d | what | f32 compiled | bf16 compiled | f16 compiled | bf16 / f32 speed | "
          "f16 / f32 speed |\n|---|---|---:|---:|---:|---:|---:|")
    tags = (("f32", ember.float32), ("bf16", ember.bfloat16), ("f16", ember.float16))
    for name, xs, wsh, s, p in CASES:
        ember.manual_seed(0)
        x32, w32 = ember.randn(*xs), ember.randn(*wsh) * 0.1
        g32 = ember.randn(*F.conv2d(x32, w32, stride=s, padding=p).shape)
        for what in ("fwd+bwd step", "conv_transpose2d"):
            runs = {}
            for tag, dt in tags:
                x, w, gy = x32.to(dt), w32.to(dt), g32.to(dt)
                if what == "conv_transpose2d":   # gy (N, O, ...) back to x's shape
                    op = (xs[2] + 2 * p - wsh[2]) % s
                    f = ember.compile(lambda g, w, s=s, p=p, op=op: F.conv_transpose2d(
                        g, w, stride=s, padding=p, output_padding=op))
                    args = (gy, w)
                else:
                    f = ember.compile(lambda x, w, gy, s=s, p=p: _step(x, w, gy, s, p))
                    args = (x, w, gy)
                f(*args)
                runs[tag] = (lambda f=f, args=args: f(*args))
            med = _interleaved(runs, rounds, calls)
            print(f"| {name} | {what} | {med['f32']:.2f} | {med['bf16']:.2f} | "
                  f"{med['f16']:.2f} | {med['f32'] / med['bf16']:.2f}x | "
                  f"{med['f32'] / med['f16']:.2f}x |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--backward", action="store_true")
    a = ap.parse_args()
    ember.set_num_threads(1)
    ember.compiler.config.recompile_limit = 64   # one function, every case and dtype
    if a.backward:
        print(f"{ember.__file__}; 1 thread, CPU ms per call, medians of {a.rounds} x "
              f"{a.calls}; load avg {os.getloadavg()[0]:.1f}")
        backward(a.rounds, a.calls)
        return
    print(f"1 thread, CPU ms per call, medians of {a.rounds} x {a.calls}; load avg "
          f"{os.getloadavg()[0]:.1f}")
    print("| conv2d | f32 compiled | bf16 compiled | f16 compiled | bf16 eager | "
          "bf16 / f32 speed | f16 / f32 speed |\n|---|---:|---:|---:|---:|---:|---:|")
    for name, xs, wsh, s, p in CASES:
        ember.manual_seed(0)
        x32, w32 = ember.randn(*xs), ember.randn(*wsh) * 0.1
        runs = {}
        for tag, dt in (("f32", ember.float32), ("bf16", ember.bfloat16),
                        ("f16", ember.float16)):
            x, w = x32.to(dt), w32.to(dt)
            f = ember.compile(lambda x, w, s=s, p=p: F.conv2d(x, w, stride=s, padding=p))
            f(x, w)
            runs[tag] = (lambda f=f, x=x, w=w: f(x, w))
        xb, wb = x32.to(ember.bfloat16), w32.to(ember.bfloat16)
        runs["bf16 eager"] = lambda xb=xb, wb=wb, s=s, p=p: F.conv2d(xb, wb, stride=s, padding=p)
        med = _interleaved(runs, a.rounds, a.calls)
        print(f"| {name} | {med['f32']:.2f} | {med['bf16']:.2f} | {med['f16']:.2f} | "
              f"{med['bf16 eager']:.2f} | {med['f32'] / med['bf16']:.2f}x | "
              f"{med['f32'] / med['f16']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()

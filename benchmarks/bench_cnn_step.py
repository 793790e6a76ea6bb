"""Small CNN training step: conv 3->16->32 with BatchNorm2d + ReLU(inplace), 32 images of
32x32, SGD with momentum; ember compiled (default mode) against torch eager and, with
``--torch-compile``, torch.compile.  One process, interleaved rounds, medians.

    python benchmarks/bench_cnn_step.py --rounds 15 --threads 1 --cpu-time
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def _model(nn):  # noqa: ANN001, ANN202
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def _step_fn(lib, model, opt):  # noqa: ANN001, ANN202
    lossf = lib.nn.CrossEntropyLoss()

    def step(x, y):  # noqa: ANN001, ANN202
        opt.zero_grad()
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _setup(lib, compiled: bool, x: np.ndarray, y: np.ndarray):  # noqa: ANN001, ANN202
    lib.manual_seed(0)
    model = _model(lib.nn)
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    step = _step_fn(lib, model, opt)
    if compiled:
        step = lib.compile(step)
    return step, lib.tensor(x), lib.tensor(y)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=3, help="steps timed per round")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--cpu-time", action="store_true", help="process CPU time, not wall")
    ap.add_argument("--torch-compile", action="store_true")
    a = ap.parse_args()
    import torch

    import ember
    torch.set_num_threads(a.threads)
    ember.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.batch, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, a.batch).astype(np.int64)
    cases = {"ember compiled": _setup(ember, True, x, y),
             "torch eager": _setup(torch, False, x, y)}
    if a.torch_compile:
        cases["torch.compile"] = _setup(torch, True, x, y)
    clock = time.process_time if a.cpu_time else time.perf_counter
    for fn, xt, yt in cases.values():
        for _ in range(3):
            fn(xt, yt)
    times: dict = {k: [] for k in cases}
    for _ in range(a.rounds):
        for k, (fn, xt, yt) in cases.items():
            t0 = clock()
            for _ in range(a.steps):
                fn(xt, yt)
            times[k].append((clock() - t0) / a.steps)
    base = statistics.median(times["torch eager"])
    print(f"CNN step b{a.batch}, {a.threads} thread(s), {'CPU time' if a.cpu_time else 'wall'}, "
          f"medians of {a.rounds}")
    for k, v in times.items():
        m = statistics.median(v)
        print(f"  {k:16s} {m * 1e3:8.2f} ms   {m / base:5.2f}x torch eager")


if __name__ == "__main__":
    main()

"""The C backend (issue 5): one fused pointwise kernel vs torch eager and torch.compile.

gelu(x*w + b) * sigmoid(x) on 2^24 float32 (erf gelu): ember compiled with backend="c" (OpenMP
on, the default), torch eager and torch.compile (inductor), at 1 and at 2 threads (ember and
torch set alike), interleaved rounds, medians; ember eager optionally (``--eager``); the memory
floor (``x*w + b + x`` compiled the same way: the same three reads and one write); then
softmax, log_softmax and layer_norm rows (``--rows``, at the same thread counts).
Run: python -m benchmarks.bench_cbackend [--eager] [--threads 1,2] [--log2n 24] [--rows] [--cpu]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

import ember
from benchmarks.common import fmt_time, time_per_call
from ember.compiler.c import backend as cbackend
from ember.config import config


def gelu_chain(n: int = 1 << 24, threads: tuple = (1, 2), rounds: int = 11, number: int = 3,
               eager: bool = False) -> None:
    rng = np.random.default_rng(0)
    xs, ws, bs = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    ex, ew, eb = (ember.tensor(a) for a in (xs, ws, bs))
    tx, tw, tb = (torch.from_numpy(a) for a in (xs, ws, bs))

    def f(x, w, b):
        return ember.nn.functional.gelu(x * w + b) * ember.sigmoid(x)

    def ft(x, w, b):
        return torch.nn.functional.gelu(x * w + b) * torch.sigmoid(x)

    fc = ember.compile(f, backend="c")
    ftc = torch.compile(ft)
    got, want = fc(ex, ew, eb).numpy(), f(ex, ew, eb).numpy()
    cg = cbackend.last_compiled()
    tc = ftc(tx, tw, tb).numpy()
    print(f"kernels: {cg.stats.kernels}, fallbacks: {cg.stats.fallback_count}, openmp: "
          f"{config.c_openmp}, max |c - eager| = {np.abs(got - want).max():.3g}, "
          f"max |c - torch.compile| = {np.abs(got - tc).max():.3g}")
    cases = {"ember backend='c'": lambda: fc(ex, ew, eb),
             "torch.compile": lambda: ftc(tx, tw, tb),
             "torch eager": lambda: ft(tx, tw, tb)}
    if eager:
        cases["ember eager"] = lambda: f(ex, ew, eb)
    # the machine's floor for this memory traffic (read x, w, b; write one array) with no
    # transcendental work: the same C backend on x*w + b + x (one kernel, same threads)
    floor = ember.compile(lambda x, w, b: x * w + b + x, backend="c")
    cases["floor: x*w+b+x in C (same traffic)"] = lambda: floor(ex, ew, eb)
    for t in threads:
        ember.set_num_threads(t)
        torch.set_num_threads(t)
        for fn in cases.values():
            fn()
        times: dict = {k: [] for k in cases}
        cpu: dict = {k: [] for k in cases}   # process CPU time: less sensitive to other jobs
        for _ in range(rounds):
            for k, fn in cases.items():
                c0 = time.process_time()
                times[k].append(time_per_call(fn, number))
                cpu[k].append((time.process_time() - c0) / number)
        med = {k: statistics.median(v) for k, v in times.items()}
        mcpu = {k: statistics.median(v) for k, v in cpu.items()}
        print(f"\ngelu(x*w+b)*sigmoid(x), n = 2^{n.bit_length() - 1} float32, {t} thread(s) "
              f"(ember and torch), load {os.getloadavg()[0]:.2f}")
        print("| implementation | wall median | vs torch.compile | CPU time median | "
              "vs torch.compile |")
        print("|---|---|---|---|---|")
        for k, v in med.items():
            print(f"| {k} | {fmt_time(v)} | {v / med['torch.compile']:.2f} | "
                  f"{fmt_time(mcpu[k])} | {mcpu[k] / mcpu['torch.compile']:.2f} |")


def rows(n_rows: int = 8192, cols: int = 1024, threads: tuple = (1, 2), rounds: int = 9,
         number: int = 5, with_torch_compile: bool = True) -> None:
    """softmax, log_softmax and layer_norm over the last dim of n_rows x cols float32: each ONE
    C kernel whose row loop runs on ``ember.set_num_threads(t)`` OpenMP threads, at each t of
    ``threads`` (torch set alike).  Interleaved rounds, medians; a NumPy copy of the same array
    into an existing one, and ``-x`` compiled with the C backend (a fresh output per call, as
    the ops get) give the memory floor (each op reads the input once and writes the output
    once)."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((n_rows, cols), dtype=np.float32)
    ws, bs = rng.standard_normal(cols, dtype=np.float32), rng.standard_normal(cols,
                                                                               dtype=np.float32)
    ex, ew, eb = ember.tensor(xs), ember.tensor(ws), ember.tensor(bs)
    tx, tw, tb = torch.from_numpy(xs), torch.from_numpy(ws), torch.from_numpy(bs)
    F, TF = ember.nn.functional, torch.nn.functional
    ops = {
        "softmax": (lambda x, w, b: ember.softmax(x, -1), lambda x, w, b: torch.softmax(x, -1)),
        "log_softmax": (lambda x, w, b: ember.log_softmax(x, -1),
                        lambda x, w, b: torch.log_softmax(x, -1)),
        "layer_norm": (lambda x, w, b: F.layer_norm(x, (cols,), w, b),
                       lambda x, w, b: TF.layer_norm(x, (cols,), w, b)),
    }
    out = np.empty_like(xs)
    neg = ember.compile(lambda x: -x, backend="c")
    print(f"\n{n_rows}x{cols} float32; ember C kernels and torch at {threads} thread(s)")
    for name, (fe, ft) in ops.items():
        fc = ember.compile(fe, backend="c")
        got, want = fc(ex, ew, eb).numpy(), fe(ex, ew, eb).numpy()
        cg = cbackend.last_compiled()
        cases = {"ember backend='c'": lambda fc=fc: fc(ex, ew, eb),
                 "ember eager": lambda fe=fe: fe(ex, ew, eb),
                 "torch eager": lambda ft=ft: ft(tx, tw, tb)}
        if with_torch_compile:
            try:
                tc = torch.compile(ft)
                tc(tx, tw, tb)
                cases["torch.compile"] = lambda tc=tc: tc(tx, tw, tb)
            except Exception as e:  # noqa: BLE001 - report and go on without it
                print(f"torch.compile unavailable: {type(e).__name__}: {e}")
        cases["copy (memory floor)"] = lambda: np.copyto(out, xs)
        # the same traffic through the C backend's own path (a fresh output each call,
        # streaming stores from codegen/stream.py's threshold on): one read, one write
        cases["floor: -x in C (same traffic)"] = lambda: neg(ex)
        print(f"\n{name}: kernels {cg.stats.kernels}, externs {cg.stats.externs}, "
              f"max |c - eager| = {np.abs(got - want).max():.3g}")
        ref = None
        for t in threads:
            ember.set_num_threads(t)
            torch.set_num_threads(t)
            res = fc(ex, ew, eb).numpy()
            ref = res if ref is None else ref
            same = np.array_equal(res, ref, equal_nan=True)
            for fn in cases.values():
                fn()
            times: dict = {k: [] for k in cases}
            for _ in range(rounds):
                for k, fn in cases.items():
                    times[k].append(time_per_call(fn, number))
            med = {k: statistics.median(v) for k, v in times.items()}
            print(f"\n{name}, {t} thread(s), load {os.getloadavg()[0]:.2f}, C result "
                  f"{'bitwise equal to' if same else 'DIFFERS from'} {threads[0]} thread(s)")
            print("| implementation | median | vs torch eager |")
            print("|---|---|---|")
            for k, v in med.items():
                print(f"| {k} | {fmt_time(v)} | {v / med['torch eager']:.2f} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--eager", action="store_true", help="also time ember eager")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--log2n", type=int, default=24)
    ap.add_argument("--rows", action="store_true",
                    help="only the softmax/log_softmax/layer_norm rows")
    ap.add_argument("--cpu", action="store_true",
                    help="time CPU time of the process instead of wall time (for one thread "
                         "on a loaded machine)")
    a = ap.parse_args()
    if a.cpu:
        import benchmarks.common as common
        common.CLOCK = time.process_time
    if a.rows:
        rows(threads=tuple(int(t) for t in a.threads.split(",")))
        raise SystemExit
    gelu_chain(1 << a.log2n, tuple(int(t) for t in a.threads.split(",")), eager=a.eager)

"""Call overhead of a stable-ABI extension op from Python (issue 19 goal: <= 5 us).

A C++ extension built with ``ember.utils.cpp_extension.load_inline`` (the C++ layer over the
stable C ABI); a 4-element float32 tensor, so the time is the call, not the work.  Rows:

- ``noop``: a kernel that reads its tensor argument and returns an int (no result tensor);
- ``mul_scalar, direct``: ``ext.mul_scalar(x, c)`` (the module function: the boxed kernel,
  no custom-op dispatch);
- ``mul_scalar, ember.ops``: ``ember.ops.ns.mul_scalar(x, c)`` (custom-op dispatch: the fast
  path for positional, no-autograd, non-mutating eager calls, and the output aliasing check),
  written out each call and with the op bound once;
- a Python custom op whose body is ``x * 2`` (the dispatch plus ember's own ``x * 2``);
- ``x * c``: ember's own eager op, for scale.

The PyTorch rows are the nearest PyTorch calls: ``torch.ops.aten.mul.Scalar`` (a C++ op through
the dispatcher from Python) and ``x * c``.  All rows run interleaved in one process; on a loaded
machine the best round is the closer estimate of the unloaded cost, and ``--cpu`` times this
thread's CPU time (``time.thread_time``) instead of the wall clock.  Run:
``PYTHONPATH=$PWD python benchmarks/bench_extension.py [--cpu] [--rounds N] [--number N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import torch  # noqa: E402
from common import fmt_time, time_per_call  # noqa: E402

import ember  # noqa: E402
from ember.utils import cpp_extension  # noqa: E402

SRC = r"""
using ember::stable::Tensor;
int64_t noop(const Tensor& x, double c) { return x.dim(); }
Tensor mul_scalar(const Tensor& x, double c) {
  Tensor src = x.is_contiguous() ? x : ember::stable::clone(x);
  Tensor y = ember::stable::empty_like(src);
  const float* p = src.const_data_ptr<float>();
  float* q = y.mutable_data_ptr<float>();
  for (int64_t i = 0; i < src.numel(); i++) q[i] = p[i] * static_cast<float>(c);
  return y;
}
EMBER_STABLE_LIBRARY(bench_ext, m) {
  m.def("noop(Tensor x, float c) -> int");
  m.def("mul_scalar(Tensor x, float c) -> Tensor");
}
EMBER_STABLE_LIBRARY_IMPL(bench_ext, CPU, m) {
  m.impl("noop", EMBER_BOX(&noop));
  m.impl("mul_scalar", EMBER_BOX(&mul_scalar));
}
"""


def _rounds(cases: dict, rounds: int, number: int) -> dict:
    """Interleaved rounds of ``number`` calls per case: {name: [seconds per call, ...]}."""
    times: dict = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            times[name].append(time_per_call(fn, number))
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true", help="time CPU time (time.thread_time)")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--number", type=int, default=500)
    opts = ap.parse_args()
    if opts.cpu:
        common.CLOCK = time.thread_time
    ext = cpp_extension.load_inline("bench_ext", SRC)
    x, xt = ember.ones(4), torch.ones(4)
    op = ember.ops.bench_ext.mul_scalar
    aten_mul = torch.ops.aten.mul.Scalar

    @ember.library.custom_op("bench_ext::twice", mutates_args=())
    def twice(x: ember.Tensor) -> ember.Tensor:
        return x * 2

    cases = {
        "ext.noop(x, c) (no result tensor)": lambda: ext.noop(x, 2.0),
        "ext.mul_scalar(x, c) (direct)": lambda: ext.mul_scalar(x, 2.0),
        "ember.ops.bench_ext.mul_scalar(x, c)": lambda: ember.ops.bench_ext.mul_scalar(x, 2.0),
        "op = ember.ops.bench_ext.mul_scalar; op(x, c)": lambda: op(x, 2.0),
        "Python custom op (x * 2 inside)": lambda: twice(x),
        "ember x * c": lambda: x * 2.0,
        "torch.ops.aten.mul.Scalar(x, c)": lambda: aten_mul(xt, 2.0),
        "torch x * c": lambda: xt * 2.0,
    }
    for fn in cases.values():
        fn()
    times = _rounds(cases, rounds=opts.rounds, number=opts.number)
    clock = "thread CPU time" if opts.cpu else "wall time"
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores; {clock}, "
          f"{opts.rounds} interleaved rounds of {opts.number} calls")
    print("| call | median | best round |")
    print("|---|---|---|")
    for name, ts in times.items():
        print(f"| {name} | {fmt_time(statistics.median(ts))} | {fmt_time(min(ts))} |")


if __name__ == "__main__":
    main()

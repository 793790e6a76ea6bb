"""ember.kernel: kernel-language softmax and layer norm against the C backend's own generated
kernels, and a compiled graph calling a kernel op against the same graph in ember ops.

Cases (each a pair timed interleaved in one process, medians; ratio = kernel / baseline):

* ``softmax``/``layer_norm`` ``R x C``, compiled: ``ember.compile`` of the ``triton_op``
  (the kernel's C inside the graph, one entry call) vs ``ember.compile`` of ``ember.softmax`` /
  ``F.layer_norm`` (the backend's row kernel).  Same Python-to-C call path on both sides.
* ``... eager launch``: ``kernel[grid](...)`` from Python (binding, grid, one ctypes call) vs
  the compiled ember op.
* ``graph``: ``softmax(x * 2) + 1`` with the softmax a kernel op vs ``ember.softmax``.

Run: PYTHONPATH=. python -m benchmarks.bench_kernel [--rows 2048] [--cols 1024]
     [--threads 1] [--cpu-best] [--cpu-calls 200]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import ember
from benchmarks.common import compare, fmt_time
from ember import Tensor
from ember.library import triton_op, wrap_triton

_EX = Path(__file__).resolve().parents[1] / "examples" / "kernels"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_kernel_{name}", _EX / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


sm, ln = _load("softmax"), _load("layer_norm")


@triton_op("bench_kernel::softmax", mutates_args=())
def k_softmax(x: Tensor) -> Tensor:
    rows, cols = x.shape
    out = ember.empty_like(x)
    wrap_triton(sm.softmax_kernel)[(rows,)](out, x, x.stride(0), out.stride(0), cols,
                                           BLOCK=sm.next_power_of_2(cols))
    return out


@triton_op("bench_kernel::layer_norm", mutates_args=())
def k_layer_norm(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    rows, cols = x.shape
    y = ember.empty_like(x)
    wrap_triton(ln.layer_norm_kernel)[(rows,)](x, w, b, y, x.stride(0), cols, 1e-5,
                                               BLOCK=ln.next_power_of_2(cols))
    return y


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=0, help="ember.set_num_threads (0: keep)")
    ap.add_argument("--cpu-best", action="store_true",
                    help="also the best CPU time per call (steadier on a loaded machine)")
    ap.add_argument("--cpu-calls", type=int, default=0,
                    help="interleaved calls per case for --cpu-best (default 4 x rounds)")
    a = ap.parse_args()
    if a.threads:
        ember.set_num_threads(a.threads)
    R, C = a.rows, a.cols  # noqa: N806
    x, w, b = ember.randn(R, C), ember.randn(C), ember.randn(C)
    F = ember.nn.functional  # noqa: N806
    ksm = ember.compile(k_softmax, fullgraph=True)
    bsm = ember.compile(lambda x: ember.softmax(x, -1), fullgraph=True)
    kln = ember.compile(k_layer_norm, fullgraph=True)
    bln = ember.compile(lambda x, w, b: F.layer_norm(x, (C,), w, b), fullgraph=True)
    kg = ember.compile(lambda x: k_softmax(x * 2) + 1, fullgraph=True)
    bg = ember.compile(lambda x: ember.softmax(x * 2, -1) + 1, fullgraph=True)
    n = max(1, int(2e7 // (R * C)))
    cases = {
        f"softmax {R}x{C}, compiled": (lambda: ksm(x), lambda: bsm(x), n),
        f"softmax {R}x{C}, eager launch": (lambda: sm.softmax(x), lambda: bsm(x), n),
        f"layer_norm {R}x{C}, compiled": (lambda: kln(x, w, b), lambda: bln(x, w, b), n),
        f"layer_norm {R}x{C}, eager launch": (lambda: ln.layer_norm(x, w, b),
                                              lambda: bln(x, w, b), n),
        f"graph softmax(x*2)+1 {R}x{C}": (lambda: kg(x), lambda: bg(x), n),
    }
    rows = compare(cases, rounds=a.rounds)
    print(f"threads: {ember.get_num_threads()}; wall time, medians of {a.rounds} rounds")
    print("| case | ember.kernel | C backend / ember ops | ratio |")
    print("|---|---|---|---|")
    for name, mk, mb, r in rows:
        print(f"| {name} | {fmt_time(mk)} | {fmt_time(mb)} | {r:.2f} |")
    if a.cpu_best:
        calls = a.cpu_calls or 4 * a.rounds
        print(f"\nCPU time (user + system) per call, best of {calls} interleaved calls")
        print("| case | ember.kernel | C backend / ember ops | ratio |")
        print("|---|---|---|---|")
        for name, (fk, fb, _) in cases.items():
            best = [1e9, 1e9]
            for _ in range(calls):
                for j, fn in enumerate((fk, fb)):
                    t0 = time.process_time()
                    fn()
                    best[j] = min(best[j], time.process_time() - t0)
            print(f"| {name} | {fmt_time(best[0])} | {fmt_time(best[1])} | "
                  f"{best[0] / best[1]:.2f} |")


if __name__ == "__main__":
    main()

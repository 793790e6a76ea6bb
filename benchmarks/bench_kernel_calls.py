"""Per-call cost of a compiled graph with a kernel op vs the same graph in ember ops (issue 19).

Cases (``ember.compile``, default mode, cache hits, ``no_grad``, 1 thread):

- ``softmax``: ``softmax(x * 2) + 1`` with the softmax a ``triton_op`` (the kernel-language
  softmax of ``examples/kernels/softmax.py``) vs ``ember.softmax``;
- ``axpy``: ``axpy(x * 2, y, 1.5) + 1`` with ``axpy`` a 1-D kernel op (grid
  ``cdiv(n, 256)``) vs ``x * 2 * 1.5 + y + 1`` in ember ops;

each on small tensors (the call overhead: 4 x 32, 64 elements) and large ones (2048 x 1024,
2M elements).  ``--no-replay`` runs every kernel op's body at every call (the behaviour before
the replay of its recorded nodes).  Timed as the calling thread's CPU time (steadier than wall
time on a shared machine): median and best of ``--rounds`` interleaved rounds.

Run: ``PYTHONPATH=. python benchmarks/bench_kernel_calls.py [--rounds 9] [--no-replay]``
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
else:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ember  # noqa: E402
import ember.kernel as tl  # noqa: E402
from ember import Tensor  # noqa: E402
from ember.library import triton_op, wrap_triton  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "bench_softmax_example", Path(__file__).resolve().parents[1] / "examples/kernels/softmax.py")
sm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sm)


@triton_op("bench_calls::softmax", mutates_args=())
def k_softmax(x: Tensor) -> Tensor:
    rows, cols = x.shape
    out = ember.empty_like(x)
    wrap_triton(sm.softmax_kernel)[(rows,)](out, x, x.stride(0), out.stride(0), cols,
                                           BLOCK=sm.next_power_of_2(cols))
    return out


@tl.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, a, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
             mask=m)


@triton_op("bench_calls::axpy", mutates_args=())
def k_axpy(x: Tensor, y: Tensor, a: float) -> Tensor:
    out = ember.empty_like(x)
    n = x.numel()
    wrap_triton(axpy_kernel)[(tl.cdiv(n, 256),)](x, y, out, n, a, BLOCK=256)
    return out


def _cases() -> dict:
    return {
        "softmax": (lambda x, y: k_softmax(x * 2) + 1,
                    lambda x, y: ember.softmax(x * 2, -1) + 1),
        "axpy": (lambda x, y: k_axpy(x * 2, y, 1.5) + 1,
                 lambda x, y: x * 2 * 1.5 + y + 1),
    }



SIZES = {"small": {"softmax": (4, 32), "axpy": (64,)},
         "large": {"softmax": (2048, 1024), "axpy": (2048 * 1024,)}}


def _time(f, args, number: int) -> float:
    t0 = time.thread_time()
    for _ in range(number):
        f(*args)
    return (time.thread_time() - t0) / number


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--no-replay", action="store_true")
    opts = ap.parse_args()
    if opts.no_replay:
        from ember.library import _custom_op, _triton
        _triton.replay = lambda *a: _custom_op._SLOW
    ember.set_num_threads(1)
    print(f"{'case':<18}{'kernel op':>22}{'ember ops':>22}{'ratio':>8}   (median / best)")
    with ember.no_grad():
        for size, shapes in SIZES.items():
            for name, (fk, fe) in _cases().items():
                args = (ember.randn(*shapes[name]), ember.randn(*shapes[name]))
                # static graphs per size (the same code at a second size would get a size-generic
                # graph, in which pointwise work does not fuse into a kernel op)
                ck, ce = ember.compile(fk, dynamic=False), ember.compile(fe, dynamic=False)
                number = 2000 if size == "small" else 20
                for f in (ck, ce):
                    for _ in range(3):
                        f(*args)
                tk, te = [], []
                for _ in range(opts.rounds):
                    tk.append(_time(ck, args, number))
                    te.append(_time(ce, args, number))
                mk, me = statistics.median(tk), statistics.median(te)
                print(f"{size + ' ' + name:<18}{_fmt(mk) + ' / ' + _fmt(min(tk)):>22}"
                      f"{_fmt(me) + ' / ' + _fmt(min(te)):>22}{mk / me:>8.2f}")


def _fmt(s: float) -> str:
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


if __name__ == "__main__":
    main()

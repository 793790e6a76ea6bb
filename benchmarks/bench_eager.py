"""Eager core against torch eager: per-op overhead, large elementwise ops, reductions, matmul.

Run: ``python benchmarks/bench_eager.py`` (needs torch).  Prints a Markdown table of medians
(ember and torch interleaved in one process) and ember/torch ratios.  Both libraries run with 2
threads.  ``--small``: only the per-op overhead cases (4 floats); ``--cpu-time``: time CPU time
of the calling thread instead of wall clock (steadier on a shared machine; the small cases run
on that thread).
"""

from __future__ import annotations

import os
import sys
import time

# Both libraries run in one process: idle worker threads must sleep, not spin, or each
# library's spinning pool steals the cores the other one is timed on.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # torch's OpenMP pool
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")    # NumPy's OpenBLAS pool (2^4 cycles)

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
from common import compare, print_table  # noqa: E402

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
else:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ember  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    sys.exit("benchmarks need torch (pip install torch==2.13.0)")


def main() -> None:
    torch.set_num_threads(2)
    ember.set_num_threads(2)
    if "--cpu-time" in sys.argv:
        common.CLOCK = time.thread_time
    rng = np.random.default_rng(0)
    small = rng.standard_normal(4).astype(np.float32)
    ea, eb = ember.tensor(small), ember.tensor(small)
    ta, tb = torch.tensor(small), torch.tensor(small)
    eg, tg = ember.tensor(small, requires_grad=True), torch.tensor(small, requires_grad=True)
    ew, tw = ember.tensor(small, requires_grad=True), torch.tensor(small, requires_grad=True)
    ey, ty = (eg * ew).sum(), (tg * tw).sum()  # a 2-node graph (MulBackward0, SumBackward0)
    es, ts = (eg + eb).sum(), (tg + tb).sum()  # AddBackward0, SumBackward0

    big = rng.standard_normal(1 << 22).astype(np.float32)
    eB, tB = ember.tensor(big), torch.tensor(big)
    eB2, tB2 = ember.tensor(big[::-1].copy()), torch.tensor(big[::-1].copy())
    mat = rng.standard_normal((8192, 1024)).astype(np.float32)
    eM, tM = ember.tensor(mat), torch.tensor(mat)
    m1 = rng.standard_normal((1024, 1024)).astype(np.float32)
    m2 = rng.standard_normal((1024, 1024)).astype(np.float32)
    eA, eC, tA, tC = ember.tensor(m1), ember.tensor(m2), torch.tensor(m1), torch.tensor(m2)

    cases = {
        "add 4 floats": (lambda: ea + eb, lambda: ta + tb, 20000),
        "add 4 floats, requires_grad": (lambda: eg + eb, lambda: tg + tb, 20000),
        "sum 4 floats, requires_grad": (lambda: eg.sum(), lambda: tg.sum(), 20000),
        "mean 4 floats, requires_grad": (lambda: eg.mean(), lambda: tg.mean(), 20000),
        "(a+b).sum().backward() 4 floats": (
            lambda: (eg + eb).sum().backward(), lambda: (tg + tb).sum().backward(), 2000),
        "(x*w).sum().backward() 4 floats": (
            lambda: (eg * ew).sum().backward(), lambda: (tg * tw).sum().backward(), 2000),
        "backward only, 2-node graph (retain_graph)": (
            lambda: ey.backward(retain_graph=True), lambda: ty.backward(retain_graph=True), 2000),
        "backward only, (a+b).sum() (retain_graph)": (
            lambda: es.backward(retain_graph=True), lambda: ts.backward(retain_graph=True), 2000),
    }
    if "--small" in sys.argv:
        print_table(compare(cases))
        return
    cases |= {
        "add 2^22 floats": (lambda: eB + eB2, lambda: tB + tB2, 20),
        "mul 2^22 floats": (lambda: eB * eB2, lambda: tB * tB2, 20),
        "exp 2^22 floats": (lambda: eB.exp(), lambda: tB.exp(), 20),
        "sum 8192x1024": (lambda: eM.sum(), lambda: tM.sum(), 20),
        "amax dim=1 8192x1024": (lambda: eM.amax(1), lambda: tM.amax(1), 10),
        "mean 8192x1024": (lambda: eM.mean(), lambda: tM.mean(), 20),
        "sum dim=1 8192x1024": (lambda: eM.sum(1), lambda: tM.sum(1), 20),
    }
    if hasattr(ember, "softmax"):
        cases["softmax 8192x1024"] = (lambda: ember.softmax(eM, 1), lambda: torch.softmax(tM, 1),
                                      5)
    if hasattr(ember, "matmul"):
        cases["matmul 1024^3"] = (lambda: ember.matmul(eA, eC), lambda: torch.matmul(tA, tC), 5)
    cases["layer_norm 8192x1024"] = (
        lambda: ember.nn.functional.layer_norm(eM, (1024,)),
        lambda: torch.nn.functional.layer_norm(tM, (1024,)), 5)
    cases["gelu 2^22 floats"] = (lambda: ember.nn.functional.gelu(eB),
                                 lambda: torch.nn.functional.gelu(tB), 5)
    if hasattr(ember, "tanh"):
        cases["tanh 2^22 floats"] = (lambda: eB.tanh(), lambda: tB.tanh(), 10)
    print_table(compare(cases))


if __name__ == "__main__":
    main()

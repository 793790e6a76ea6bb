"""Per-op overhead of ~40 frequent eager ops on tiny tensors, ember against torch eager.

Run: ``python benchmarks/bench_ops_overhead.py [--grad] [names...]`` (needs torch).  Each op
runs on 4x4 float32 tensors (vectors of 4, a 3x4 weight); ``--grad`` makes the inputs require
grad, so the autograd node is part of the cost.  ember and torch alternate, three rounds of
3 x 1000 calls each, timed as CPU time of the calling thread (steadier on a shared machine);
prints the median per call and the ratio ember/torch.
"""

from __future__ import annotations

import sys
import time
import timeit
from typing import Any, Callable

import numpy as np


def cases(lib: Any, grad: bool) -> dict[str, Callable[[], object]]:
    F = lib.nn.functional
    a = lib.tensor(np.ones((4, 4), np.float32), requires_grad=grad)
    b = lib.tensor(np.ones((4, 4), np.float32), requires_grad=grad)
    v = lib.tensor(np.ones(4, np.float32), requires_grad=grad)
    w = lib.tensor(np.ones((3, 4), np.float32), requires_grad=grad)
    return {
        "add": lambda: a + b, "mul": lambda: a * b, "sub": lambda: a - b, "div": lambda: a / b,
        "add_scalar": lambda: a + 1.0, "mul_scalar": lambda: a * 2.0,
        "add_broadcast": lambda: a + v, "matmul": lambda: a @ b, "mv": lambda: a @ v,
        "dot": lambda: v @ v, "linear": lambda: F.linear(a, w), "relu": lambda: a.relu(),
        "F.relu": lambda: F.relu(a), "gelu": lambda: F.gelu(a),
        "softmax": lambda: a.softmax(-1), "log_softmax": lambda: F.log_softmax(a, -1),
        "exp": lambda: a.exp(), "tanh": lambda: a.tanh(), "sigmoid": lambda: a.sigmoid(),
        "sqrt": lambda: a.sqrt(), "neg": lambda: -a, "pow2": lambda: a ** 2,
        "view": lambda: a.view(16), "reshape": lambda: a.reshape(2, 8),
        "transpose": lambda: a.transpose(0, 1), "t": lambda: a.t(),
        "permute": lambda: a.permute(1, 0), "unsqueeze": lambda: a.unsqueeze(0),
        "getitem": lambda: a[0], "clone": lambda: a.clone(), "cat": lambda: lib.cat([a, b]),
        "sum": lambda: a.sum(), "sum_dim": lambda: a.sum(-1), "mean": lambda: a.mean(),
        "mean_dim": lambda: a.mean(-1, keepdim=True), "max_dim": lambda: a.max(-1),
        "layer_norm": lambda: F.layer_norm(a, (4,)),
    }


def per_call(fn: Callable[[], object]) -> float:
    return min(timeit.repeat(fn, number=1000, repeat=3, timer=time.thread_time)) / 1000


def main() -> None:
    import torch

    import ember
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    grad = "--grad" in sys.argv
    names = [a for a in sys.argv[1:] if not a.startswith("--")]
    ec, tc = cases(ember, grad), cases(torch, grad)
    print(f"| op ({'requires_grad' if grad else 'no grad'}) | ember | torch | ember/torch |")
    print("|---|---|---|---|")
    for k in names or list(ec):
        e, t = [], []
        for _ in range(3):
            e.append(per_call(ec[k]))
            t.append(per_call(tc[k]))
        me, mt = sorted(e)[1] * 1e6, sorted(t)[1] * 1e6
        print(f"| {k} | {me:.2f} us | {mt:.2f} us | {me / mt:.2f} |", flush=True)


if __name__ == "__main__":
    main()

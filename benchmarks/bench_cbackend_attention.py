"""Causal attention of the char GPT's shape (8 x 6 heads x 256 x 64), forward and forward +
backward: ember's C backend (``AttentionKernel``, lower_attention.py) against ember eager,
torch eager and torch.compile, interleaved, medians, 2 threads.

Run: ``python benchmarks/bench_cbackend_attention.py [--rounds N]`` (needs torch).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(HERE))
else:
    sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402
from common import fmt_time, time_per_call  # noqa: E402

import ember  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    sys.exit("benchmarks need torch (pip install torch==2.13.0)")

F = ember.nn.functional
B, H, T, E = 8, 6, 256, 64


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    ember.set_num_threads(2)
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal((B, H, T, E)).astype(np.float32) for _ in range(4)]
    q, k, v, g = (ember.tensor(a) for a in arrs)
    tq, tk, tv, tg = (torch.from_numpy(a) for a in arrs)

    def e_fwd(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def e_bwd(q, k, v, g):
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True)
        (out * g).sum().backward()
        return qq.grad, kk.grad, vv.grad

    def t_fwd(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def t_bwd(q, k, v, g):
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        out = torch.nn.functional.scaled_dot_product_attention(qq, kk, vv, is_causal=True)
        (out * g).sum().backward()
        return qq.grad, kk.grad, vv.grad

    c_fwd, c_bwd = ember.compile(e_fwd, backend="c"), ember.compile(e_bwd, backend="c")
    tc_fwd, tc_bwd = torch.compile(t_fwd), torch.compile(t_bwd)
    for name, cases in (
            ("forward", {"ember eager": lambda: e_fwd(q, k, v).numpy(),
                         "ember backend='c'": lambda: c_fwd(q, k, v).numpy(),
                         "torch eager": lambda: t_fwd(tq, tk, tv),
                         "torch.compile": lambda: tc_fwd(tq, tk, tv)}),
            ("forward + backward", {
                "ember eager": lambda: [x.numpy() for x in e_bwd(q, k, v, g)],
                "ember backend='c'": lambda: [x.numpy() for x in c_bwd(q, k, v, g)],
                "torch eager": lambda: t_bwd(tq, tk, tv, tg),
                "torch.compile": lambda: tc_bwd(tq, tk, tv, tg)})):
        for fn in cases.values():
            fn()
        times: dict = {k_: [] for k_ in cases}
        for _ in range(args.rounds):
            for k_, fn in cases.items():
                times[k_].append(time_per_call(fn, 3))
        med = {k_: statistics.median(t) for k_, t in times.items()}
        ref = med["torch.compile"]
        print(f"\ncausal attention {name}, {B}x{H}x{T}x{E} float32 "
              f"(load {os.getloadavg()[0]:.1f})")
        print("| implementation | median | vs torch.compile |")
        print("|---|---|---|")
        for k_, t in med.items():
            print(f"| {k_} | {fmt_time(t)} | {t / ref:.2f} |")


if __name__ == "__main__":
    main()

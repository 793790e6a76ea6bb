"""Compiled FlexAttention backward (issue 17): single-thread CPU time of a compiled causal
training step (forward + backward of flex_attention) and of the forward alone, so the
backward's share is their difference.  CPU time (``time.process_time``) on ONE thread, so the
numbers hold up on a loaded machine where wall times do not.

Run: ``python benchmarks/bench_flex_backward.py [--seq 1024] [--heads 8] [--dim 64]
[--rounds 7] [--threads 1]``; ``EMBER_FLEX_BWD=two_pass`` selects the two-pass backward.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(HERE))
else:
    sys.path.insert(0, os.path.dirname(HERE))

import ember  # noqa: E402
from ember.nn.attention import flex_attention as efa  # noqa: E402


def causal(b, h, q, kv):
    return q >= kv


def _cpu(fn, rounds: int) -> float:
    fn()
    fn()
    times = []
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    ember.set_num_threads(a.threads)
    ember.manual_seed(0)
    S, H, D = a.seq, a.heads, a.dim
    q, k, v = (ember.randn(1, H, S, D, requires_grad=True) for _ in range(3))
    bm = efa.create_block_mask(causal, None, None, S, S)

    def step(q, k, v):
        efa.flex_attention(q, k, v, block_mask=bm).sum().backward()

    def fwd(q, k, v):
        return efa.flex_attention(q, k, v, block_mask=bm)

    cstep, cfwd = ember.compile(step), ember.compile(fwd)
    with ember.no_grad():
        t_fwd = _cpu(lambda: cfwd(q, k, v), a.rounds)
    t_step = _cpu(lambda: cstep(q, k, v), a.rounds)
    flop = 4 * H * S * S * D / 2  # causal forward: 2 products of H*S*S/2*D multiply-adds
    print(f"causal B=1 H={H} S={S} D={D}, {a.threads} thread(s), CPU ms (median of "
          f"{a.rounds}): forward {t_fwd:.1f}, fwd+bwd {t_step:.1f}, backward ~"
          f"{t_step - t_fwd:.1f} ({flop * 2.5 / (t_step - t_fwd) / 1e6:.1f} GFLOP/s at 5 "
          f"products)")


if __name__ == "__main__":
    main()

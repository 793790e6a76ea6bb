"""Eager FlexAttention (issue 17, eager part): ember's blockwise flex_attention with a causal
BlockMask against ember's dense SDPA and torch (eager flex_attention, SDPA) on the CPU.

Run: ``python benchmarks/bench_flex_attention.py [--seq 1024] [--heads 8] [--dim 64]
[--rounds 7] [--backward]`` (needs torch).  float32, B=1; all cases in this one process,
interleaved rounds after warm-up, medians; ratios are to torch's SDPA(is_causal=True).
``--backward`` also times forward+backward of ember flex (torch's CPU flex has no backward)
against ember and torch SDPA forward+backward.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # torch's OpenMP pool
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")    # NumPy's OpenBLAS pool

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402
from torch.nn.attention import flex_attention as tfa  # noqa: E402

import ember  # noqa: E402
from ember.nn.attention import flex_attention as efa  # noqa: E402

warnings.filterwarnings("ignore")


def causal(b, h, q_idx, kv_idx):  # noqa: ANN001, ANN201
    return q_idx >= kv_idx


def _cases(seq: int, heads: int, dim: int, backward: bool) -> dict:
    g = np.random.default_rng(0)
    arrs = [g.standard_normal((1, heads, seq, dim)).astype(np.float32) for _ in range(3)]
    eq, ek, ev = (ember.tensor(a) for a in arrs)
    tq, tk, tv = (torch.from_numpy(a) for a in arrs)
    ebm = efa.create_block_mask(causal, None, None, seq, seq)
    tbm = tfa.create_block_mask(causal, None, None, seq, seq, device="cpu")
    cases = {
        "ember flex causal (eager, blockwise)": lambda: efa.flex_attention(eq, ek, ev,
                                                                            block_mask=ebm),
        "ember SDPA is_causal (dense)": lambda: ember.nn.functional.scaled_dot_product_attention(
            eq, ek, ev, is_causal=True),
        "torch flex causal (eager)": lambda: tfa.flex_attention(tq, tk, tv, block_mask=tbm),
        "torch SDPA is_causal": lambda: torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv, is_causal=True),
    }
    if backward:
        eg = [x.detach().requires_grad_(True) for x in (eq, ek, ev)]
        tg = [x.detach().requires_grad_(True) for x in (tq, tk, tv)]
        cases["ember flex causal fwd+bwd"] = lambda: efa.flex_attention(
            *eg, block_mask=ebm).sum().backward()
        cases["ember SDPA is_causal fwd+bwd"] = lambda: (
            ember.nn.functional.scaled_dot_product_attention(*eg, is_causal=True).sum().backward())
        cases["torch SDPA is_causal fwd+bwd"] = lambda: (
            torch.nn.functional.scaled_dot_product_attention(*tg, is_causal=True).sum().backward())
    return cases


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--backward", action="store_true")
    args = ap.parse_args()
    cases = _cases(args.seq, args.heads, args.dim, args.backward)
    for fn in cases.values():  # warm-up (torch's eager flex compiles its graph once)
        fn()
        fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    ref = statistics.median(times["torch SDPA is_causal"])
    print(f"B=1 H={args.heads} S={args.seq} D={args.dim} float32, medians of {args.rounds}")
    print("| case | median | / torch SDPA |")
    print("|---|---|---|")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"| {name} | {m * 1e3:.2f} ms | {m / ref:.2f} |")


if __name__ == "__main__":
    main()

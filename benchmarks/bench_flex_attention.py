"""Eager FlexAttention (issue 17, eager part): ember's blockwise flex_attention with a causal
BlockMask against ember's dense SDPA and torch (eager flex_attention, SDPA) on the CPU.

Run: ``python benchmarks/bench_flex_attention.py [--seq 1024] [--heads 8] [--dim 64]
[--rounds 7] [--backward]`` (needs torch).  float32, B=1; all cases in this one process,
interleaved rounds after warm-up, medians; ratios are to torch's SDPA(is_causal=True).
``--backward`` also times forward+backward of ember flex (torch's CPU flex has no backward)
against ember and torch SDPA forward+backward.

``--memory`` prints the peak traced memory of eager causal flex at ``--seq`` (issue 17: 8192)
against the dense score matrix.  ``--compiled`` runs issue 17's compiled cases instead
(``ember.compile``: one C kernel per flex_attention): causal S=1024 forward vs
``torch.compile(flex_attention)`` and SDPA(is_causal);
sliding window 256 at S=4096 vs SDPA with the dense mask; decode q_len=1 over 32768 keys vs
``torch.compile(flex_attention)``; compiled forward+backward of causal S=1024 vs torch SDPA
forward+backward (torch's eager CPU flex raises on backward, so it cannot be timed).  Each group
prints its own table; ratios are torch / ember (> 1: ember faster).
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
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(HERE))
else:
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


def _time(cases: dict, rounds: int) -> dict:
    for fn in cases.values():  # warm-up (compiles)
        fn()
        fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {n: statistics.median(ts) for n, ts in times.items()}


def _report(title: str, med: dict, ember_case: str) -> None:
    print(f"\n{title}")
    print("| case | median | torch / ember |")
    print("|---|---|---|")
    ref = med[ember_case]
    for name, m in med.items():
        print(f"| {name} | {m * 1e3:.2f} ms | {m / ref:.2f} |")


def _arrays(shape_q: tuple, shape_kv: tuple) -> tuple:
    g = np.random.default_rng(0)
    arrs = [g.standard_normal(s).astype(np.float32) for s in (shape_q, shape_kv, shape_kv)]
    return [ember.tensor(a) for a in arrs], [torch.from_numpy(a) for a in arrs]


def compiled_cases(heads: int, dim: int, rounds: int) -> None:
    """Issue 17's compiled benchmarks (see the module docstring)."""
    t_flex = torch.compile(tfa.flex_attention, dynamic=False)
    S = 1024
    (eq, ek, ev), (tq, tk, tv) = _arrays((1, heads, S, dim), (1, heads, S, dim))
    ebm = efa.create_block_mask(causal, None, None, S, S)
    tbm = tfa.create_block_mask(causal, None, None, S, S, device="cpu")
    e_fwd = ember.compile(lambda q, k, v: efa.flex_attention(q, k, v, block_mask=ebm))
    _report(f"causal S={S} forward", _time({
        "ember compiled flex": lambda: e_fwd(eq, ek, ev),
        "torch compiled flex": lambda: t_flex(tq, tk, tv, block_mask=tbm),
        "torch SDPA is_causal": lambda: torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv, is_causal=True)}, rounds), "ember compiled flex")

    eg = [x.detach().requires_grad_(True) for x in (eq, ek, ev)]
    tg = [x.detach().requires_grad_(True) for x in (tq, tk, tv)]
    e_step = ember.compile(lambda q, k, v: efa.flex_attention(q, k, v, block_mask=ebm)
                           .sum().backward())
    _report(f"causal S={S} forward+backward", _time({
        "ember compiled flex fwd+bwd": lambda: e_step(*eg),
        "torch SDPA is_causal fwd+bwd": lambda: torch.nn.functional.scaled_dot_product_attention(
            *tg, is_causal=True).sum().backward()}, rounds), "ember compiled flex fwd+bwd")

    S, W = 4096, 256

    def window(b, h, q, kv):  # noqa: ANN001, ANN202
        return (q - kv <= W) & (kv - q <= W)

    (eq, ek, ev), (tq, tk, tv) = _arrays((1, heads, S, dim), (1, heads, S, dim))
    ebm = efa.create_block_mask(window, None, None, S, S)
    idx = torch.arange(S)
    dense = (idx[:, None] - idx[None, :]).abs() <= W
    e_win = ember.compile(lambda q, k, v: efa.flex_attention(q, k, v, block_mask=ebm))
    _report(f"sliding window {W} at S={S} forward", _time({
        "ember compiled flex": lambda: e_win(eq, ek, ev),
        "torch SDPA dense mask": lambda: torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv, attn_mask=dense)}, rounds), "ember compiled flex")

    S = 32768
    (eq, ek, ev), (tq, tk, tv) = _arrays((1, heads, 1, dim), (1, heads, S, dim))
    e_dec = ember.compile(lambda q, k, v: efa.flex_attention(q, k, v))
    _report(f"decode q_len=1 kv={S}", _time({
        "ember compiled flex (flash-decoding)": lambda: e_dec(eq, ek, ev),
        "torch compiled flex": lambda: t_flex(tq, tk, tv),
        # the floor: K and V are 134 MB that every decode step must read once
        "read K and V once (NumPy sum, 1 thread)": lambda: (ek.numpy().sum(), ev.numpy().sum())},
        rounds),
        "ember compiled flex (flash-decoding)")


def peak_memory(seq: int, heads: int, dim: int) -> None:
    """Peak traced allocation of ember's eager causal flex_attention (tracemalloc sees NumPy's
    buffers) against the size of the dense float32 score matrix it never builds."""
    import tracemalloc

    g = np.random.default_rng(0)
    q, k, v = (ember.tensor(g.standard_normal((1, heads, seq, dim)).astype(np.float32))
               for _ in range(3))
    tracemalloc.start()
    t0 = time.perf_counter()
    bm = efa.create_block_mask(causal, None, None, seq, seq)
    out = efa.flex_attention(q, k, v, block_mask=bm)
    dt = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    dense = heads * seq * seq * 4
    print(f"eager causal flex_attention B=1 H={heads} S={seq} D={dim}: peak {peak / 2**20:.1f} "
          f"MiB traced (output {out.numel() * 4 / 2**20:.1f} MiB) vs dense scores "
          f"{dense / 2**20:.0f} MiB: {peak / dense:.4f} of it; {dt:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--compiled", action="store_true")
    ap.add_argument("--memory", action="store_true",
                    help="peak memory of eager causal flex at --seq (the issue: 8192)")
    args = ap.parse_args()
    if args.memory:
        peak_memory(args.seq, args.heads, args.dim)
        return
    if args.compiled:
        compiled_cases(args.heads, args.dim, args.rounds)
        return
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

"""Token-by-token generation of the char GPT with a KV cache (issue 21): ember compiled against
torch.compile of the same model, both with static KV buffers written in place.

Run: ``python benchmarks/bench_generate.py [--tokens N] [--rounds R] [--threads T] [--profile]
[--cpu-time] [--pool-ab]`` (needs torch; ``--pool-ab`` also times the replayed step built
without the threads kept awake across the call, ``codegen/awake.py``; ``--cpu-time``: process
CPU time instead of wall time, steadier on a loaded machine).  The model is
``ember.demo.CharGPT`` at 6 layers, 6 heads, width 384, block 256; torch runs its mirror
``TorchCharGPT`` (``bench_models.py``) with ember's initial weights and the same decode step
written with torch (``torch_decode_step`` below: ``index_copy_`` into ``(1, 6, 256, 64)``
buffers at a 0-d position tensor, attention over the whole buffer with a mask from the
position).

One generation = ``--tokens`` decode calls (default 256: a 1-token prompt and 255 greedy new
tokens), batch 1, each call one compiled function followed by an eager ``argmax`` (with
``--argmax-in-step`` the argmax is compiled into the step, in both libraries): ember's
``CharGPT.compiled_decode_step()`` in ``mode="reduce-overhead"`` (the first call records, later
calls replay the graph: one C call, no Python of the step) and in the default mode (the step's
Python runs on lazy tensors every call; timed under ``set_stance("fail_on_recompile")``, so a
recompile as the position grows would raise), and ``torch.compile(torch_decode_step)``.
Implementations run interleaved in one process (``--rounds`` generations each, medians).
Before timing, the two libraries' token sequences are compared (greedy; random initial weights
give near-uniform logits, so an argmax can differ at a near-tie: the count of equal tokens is
printed).  ``--profile`` runs cProfile over one ember generation and splits the time
per call into the C entry (``runtime.py`` ``__call__``) and the Python around it (recording the
ops, capture, guards, realize).  ``--split`` does that split for the replayed step without a
profiler (thread CPU time around each C entry call; use ``--threads 1``).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(HERE))
else:
    sys.path.insert(0, os.path.dirname(HERE))

import ember  # noqa: E402
from ember import demo  # noqa: E402
from ember.compiler.c.codegen import awake  # noqa: E402

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover
    sys.exit("benchmarks need torch (pip install torch==2.13.0)")

from bench_awake import fresh_step  # noqa: E402
from bench_models import TorchCharGPT, copy_weights  # noqa: E402
from common import fmt_time  # noqa: E402

LAYERS, HEADS, D, BLOCK = 6, 6, 384, 256


def torch_decode_step(tm: TorchCharGPT, tok: torch.Tensor, pos: torch.Tensor, ks: list,
                      vs: list, positions: torch.Tensor) -> torch.Tensor:
    """``CharGPT.decode_step`` written with torch."""
    x = tm.tok(tok) + tm.pos(pos)
    mask = (positions <= pos).view(1, 1, 1, -1)
    for blk, kb, vb in zip(tm.blocks, ks, vs):
        b, t, d = x.shape
        q, k, v = blk.qkv(blk.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, blk.heads, d // blk.heads).transpose(1, 2) for z in (q, k, v))
        kb.index_copy_(2, pos.view(1), k)
        vb.index_copy_(2, pos.view(1), v)
        y = TF.scaled_dot_product_attention(q, kb, vb, attn_mask=mask)
        x = x + blk.proj(y.transpose(1, 2).reshape(b, t, d))
        x = x + blk.out(TF.gelu(blk.fc(blk.ln2(x)), approximate="tanh"))
    return TF.linear(tm.ln(x), tm.tok.weight)[:, -1]


def torch_greedy_step(tm: TorchCharGPT, tok: torch.Tensor, pos: torch.Tensor, ks: list,
                      vs: list, positions: torch.Tensor) -> torch.Tensor:
    """``torch_decode_step`` and its greedy ``argmax`` in one function (``--argmax-in-step``)."""
    return torch_decode_step(tm, tok, pos, ks, vs, positions).argmax(-1, keepdim=True)


def ember_greedy_step(m: demo.CharGPT, mode: str | None):
    """``m.decode_step`` and its greedy ``argmax`` compiled as one function."""
    def greedy(tok, pos, keys, values):
        return m.decode_step(tok, pos, keys, values).argmax(-1, keepdim=True)
    return ember.compile(greedy, mode=mode)


_FUSED = [False]   # --argmax-in-step: the steps return the next token


def ember_generate(m: demo.CharGPT, step, first: int, n: int) -> list:
    cache = demo.KVCache(m, 1)
    tok = ember.tensor([[first]])
    out = [first]
    for p in range(n - 1):
        tok = step(tok, ember.tensor(p), cache.k, cache.v)
        if not _FUSED[0]:
            tok = tok.argmax(-1, keepdim=True)
        out.append(tok)
    return [int(t) if isinstance(t, int) else int(t.item()) for t in out]


def torch_generate(tm: TorchCharGPT, step, first: int, n: int) -> list:
    shape = (1, HEADS, BLOCK, D // HEADS)
    ks = [torch.zeros(shape) for _ in tm.blocks]
    vs = [torch.zeros(shape) for _ in tm.blocks]
    positions = torch.arange(BLOCK)
    tok = torch.tensor([[first]])
    out = [first]
    with torch.no_grad():
        for p in range(n - 1):
            tok = step(tm, tok, torch.tensor(p), ks, vs, positions)
            if not _FUSED[0]:
                tok = tok.argmax(-1, keepdim=True)
            out.append(tok)
    return [int(t) if isinstance(t, int) else int(t.item()) for t in out]


def profile(m: demo.CharGPT, step, n: int, label: str) -> None:
    """cProfile over one ember generation: per-call time in C and in Python around it."""
    prof = cProfile.Profile()
    prof.enable()
    ember_generate(m, step, 1, n)
    prof.disable()
    st = pstats.Stats(prof)
    total = sum(v[3] for k, v in st.stats.items() if k[2] == "ember_generate")
    c_time = sum(v[3] for k, v in st.stats.items()
                 if k[0].endswith(os.path.join("build", "runtime.py")) and k[2] == "__call__")
    calls = n - 1
    print(f"\ncProfile, {label} (one generation, {calls} calls, profiler overhead included): "
          f"{fmt_time(total / calls)} per token, of which C entry {fmt_time(c_time / calls)}, "
          f"Python around it {fmt_time((total - c_time) / calls)}")
    st.sort_stats("tottime").print_stats(12)


def split(m: demo.CharGPT, step, n: int, rounds: int) -> None:
    """Thread CPU time per token of the replayed step, split into the C entry (every
    ``Entry.__call__``, timed around the call) and the Python around it (the replay's guards
    and arguments, the outputs, the loop's ``argmax`` and ``ember.tensor(p)``); medians of
    ``rounds`` generations, without a profiler's overhead."""
    from ember.compiler.c.build import runtime
    spent = [0.0]
    orig = runtime.Entry.__call__

    def timed_entry(self, *args, **kwargs):
        s = time.thread_time()
        try:
            return orig(self, *args, **kwargs)
        finally:
            spent[0] += time.thread_time() - s
    runtime.Entry.__call__ = timed_entry
    tot, cs = [], []
    try:
        for _ in range(rounds):
            spent[0] = 0.0
            s = time.thread_time()
            ember_generate(m, step, 1, n)
            tot.append((time.thread_time() - s) / (n - 1))
            cs.append(spent[0] / (n - 1))
    finally:
        runtime.Entry.__call__ = orig
    py = [t - c for t, c in zip(tot, cs)]
    print(f"\nper token (thread CPU time, medians of {rounds}): total "
          f"{fmt_time(statistics.median(tot))}, C entry {fmt_time(statistics.median(cs))}, "
          f"Python around it {fmt_time(statistics.median(py))} (best: {fmt_time(min(py))})")


_CLOCK = [time.perf_counter]


def timed(fn) -> float:
    clock = _CLOCK[0]
    s = clock()
    fn()
    return clock() - s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokens", type=int, default=256, help="decode calls per generation")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--argmax-in-step", action="store_true",
                    help="compile the greedy argmax into the step (both libraries) instead of "
                         "running it eagerly after each call")
    ap.add_argument("--split", action="store_true",
                    help="also time the reduce-overhead step's C entry apart from the Python "
                         "around it (thread CPU time; meaningful with --threads 1)")
    ap.add_argument("--pool-ab", action="store_true",
                    help="also time the reduce-overhead step built without the threads kept "
                         "awake across the call (codegen/awake.py; what EMBER_C_POOL=0 does)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time.process_time instead of wall time (CPU time of all threads: "
                         "less sensitive to other jobs on a loaded machine)")
    a = ap.parse_args()
    if a.cpu_time:
        _CLOCK[0] = time.process_time
    if a.pool_ab and a.argmax_in_step:
        sys.exit("--pool-ab times the decode step without --argmax-in-step")
    if not 2 <= a.tokens <= BLOCK:
        sys.exit(f"--tokens must be in 2..{BLOCK}")
    torch.set_num_threads(a.threads)
    ember.set_num_threads(a.threads)
    ember.manual_seed(0)
    vocab = len(set(demo.load_text()))
    em = demo.CharGPT(vocab, block=BLOCK, d=D, layers=LAYERS, heads=HEADS).eval()
    tm = TorchCharGPT(vocab, BLOCK, D, LAYERS, HEADS).eval()
    copy_weights(em, tm)
    _FUSED[0] = a.argmax_in_step
    if a.argmax_in_step:
        steps = {"ember compiled (C), reduce-overhead": ember_greedy_step(em, "reduce-overhead"),
                 "ember compiled (C), default mode": ember_greedy_step(em, None)}
        tstep = torch.compile(torch_greedy_step)
    else:
        steps = {"ember compiled (C), reduce-overhead": em.compiled_decode_step(),
                 "ember compiled (C), default mode": em.compiled_decode_step(mode=None)}
        tstep = torch.compile(torch_decode_step)
    off = "ember compiled (C), reduce-overhead, no awake pool"
    if a.pool_ab:   # the same step built with the awake pool off (EMBER_C_POOL=0)
        # (a wrapper of its own: ember's code cache is keyed by the code object)
        steps[off] = fresh_step(em, "nopool")
    tokens = {}
    for name, step in steps.items():
        awake.ENABLED = name != off   # read when the step's graph is built (its first call)
        t = timed(lambda s=step, n=name: tokens.setdefault(n, ember_generate(em, s, 1, a.tokens)))
        print(f"first generation (compiles): {name} {t:.1f} s")
    awake.ENABLED = True
    t = timed(lambda: tokens.setdefault("torch", torch_generate(tm, tstep, 1, a.tokens)))
    print(f"first generation (compiles): torch.compile {t:.1f} s")
    for name in steps:
        same = sum(x == y for x, y in zip(tokens[name], tokens["torch"]))
        print(f"greedy tokens of {name} equal to torch's: {same}/{a.tokens}")
    times: dict = {name: [] for name in list(steps) + ["torch.compile"]}
    for _ in range(a.rounds):
        for name, step in steps.items():
            if step.mode is None:  # a recompile as the position grows would raise
                with ember.compiler.set_stance("fail_on_recompile"):
                    times[name].append(timed(lambda s=step: ember_generate(em, s, 1, a.tokens)))
            else:  # (the stance turns replay off)
                times[name].append(timed(lambda s=step: ember_generate(em, s, 1, a.tokens)))
        times["torch.compile"].append(timed(lambda: torch_generate(tm, tstep, 1, a.tokens)))
    ro = steps["ember compiled (C), reduce-overhead"]
    print(f"reduce-overhead: {ro.record_count} recorded call(s), {ro.replay_count} replayed")
    med = {k: statistics.median(v) for k, v in times.items()}
    calls = a.tokens - 1
    print(f"\n{a.tokens} positions ({calls} decode calls), batch 1, {a.threads} threads, "
          f"{a.rounds} rounds (medians{' of CPU time' if a.cpu_time else ''})")
    print("| implementation | generation | per token | / torch.compile |")
    print("|---|---|---|---|")
    for name, m in med.items():
        print(f"| {name} | {fmt_time(m)} | {fmt_time(m / calls)} | "
              f"{m / med['torch.compile']:.2f} |")
    print("rounds (s): " + "; ".join(f"{k}: {[round(x, 3) for x in v]}"
                                     for k, v in times.items()))
    if a.split:
        split(em, ro, a.tokens, a.rounds)
    if a.profile:
        for name, step in steps.items():
            profile(em, step, a.tokens, name)


if __name__ == "__main__":
    main()

"""Threads kept awake across one C call (issue 21, ``codegen/awake.py``): the char GPT's KV-cache
decode step, replayed (``mode="reduce-overhead"``: each token one C call), built with and without
the awake pool, at 1 and 2 threads, interleaved in one process.

Run: ``python benchmarks/bench_awake.py [--tokens N] [--rounds R]``.  Each round generates
``--tokens`` greedy tokens once per configuration (in turn); every decode call is timed alone
(wall, ``perf_counter``) and the process CPU time of each generation is summed (all threads:
spinning workers count).  Printed per configuration: the median and the 10th percentile of
the per-call wall time over all calls (the 10th percentile stands for a quiet moment on a
loaded machine), and the CPU time per call.  Also the CPU time of the process during a 0.5 s
sleep after the last call (workers must not spin between calls: ~0).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import ember  # noqa: E402
from ember import demo  # noqa: E402
from ember.compiler.c.codegen import awake  # noqa: E402

LAYERS, HEADS, D, BLOCK = 6, 6, 384, 256


def fresh_step(m: demo.CharGPT, tag: str):
    """``m.decode_step`` compiled in ``reduce-overhead`` mode through a wrapper of its own:
    ember's code cache is keyed by the code object, so each configuration builds its own graph
    (``CharGPT.compiled_decode_step`` would return the one step made first)."""
    ns: dict = {}
    exec(f"def step_{tag}(tok, pos, k, v):\n    return m.decode_step(tok, pos, k, v)\n",
         {"m": m}, ns)
    return ember.compile(ns[f"step_{tag}"], mode="reduce-overhead")


def generate(m: demo.CharGPT, step, n: int, walls: list) -> list:
    cache = demo.KVCache(m, 1)
    tok = ember.tensor([[1]])
    out = [1]
    for p in range(n - 1):
        pos = ember.tensor(p)
        t = time.perf_counter()
        logits = step(tok, pos, cache.k, cache.v)
        walls.append(time.perf_counter() - t)
        tok = logits.argmax(-1, keepdim=True)
        out.append(int(tok.item()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    print(f"ember {ember.__file__}")
    ember.manual_seed(0)
    vocab = len(set(demo.load_text()))
    em = demo.CharGPT(vocab, block=BLOCK, d=D, layers=LAYERS, heads=HEADS).eval()
    configs = {"awake pool, 2 threads": (True, 2), "no pool, 2 threads": (False, 2),
               "1 thread": (True, 1)}
    steps, tokens = {}, {}
    for name, (on, nt) in configs.items():
        awake.ENABLED = on   # read when the step's graph is built (its first call)
        ember.set_num_threads(nt)
        steps[name] = fresh_step(em, f"c{len(steps)}")
        tokens[name] = generate(em, steps[name], a.tokens, [])
    awake.ENABLED = True
    first = next(iter(tokens.values()))
    print("same tokens in every configuration:", all(t == first for t in tokens.values()))
    walls: dict = {k: [] for k in configs}
    cpus: dict = {k: [] for k in configs}
    for _ in range(a.rounds):
        for name, (_, nt) in configs.items():
            ember.set_num_threads(nt)
            c = time.process_time()
            generate(em, steps[name], a.tokens, walls[name])
            cpus[name].append((time.process_time() - c) / (a.tokens - 1))
    c = time.process_time()
    time.sleep(0.5)
    idle = time.process_time() - c
    print(f"\n{a.tokens - 1} decode calls x {a.rounds} rounds per configuration "
          f"(load: {os.getloadavg()[0]:.1f})")
    print("| configuration | wall per call, median | 10th percentile | CPU per call (median) |")
    print("|---|---|---|---|")
    for name in configs:
        w = sorted(walls[name])
        print(f"| {name} | {statistics.median(w) * 1e3:.3f} ms | "
              f"{w[len(w) // 10] * 1e3:.3f} ms | {statistics.median(cpus[name]) * 1e3:.3f} ms |")
    print(f"process CPU time during 0.5 s of sleep after the calls: {idle * 1e3:.1f} ms")


if __name__ == "__main__":
    main()

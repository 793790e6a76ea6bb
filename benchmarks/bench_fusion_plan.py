"""The fusion plan (issue 14) on the char GPT's training step: kernels, bytes and lowering time
with the plan (``schedule.plan``, what the C backend does) and without it (greedy lowering in
graph order), in one process.  Lowering only: no C compiler runs.

Run: ``python benchmarks/bench_fusion_plan.py [--small] [--rounds N]``; the model is
``ember.demo.CharGPT`` at 6 layers, 6 heads, width 384, block 256, batch 8 (``--small``: the
tests' 2x32, block 16, batch 2), one AdamW training step (``tests/compiler/helpers.lm_step``).
"bytes" sums, over kernels, the bytes of every buffer each kernel touches (once per kernel).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(str(Path(__file__).resolve().parents[1]))
else:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import ember  # noqa: E402
from ember import demo  # noqa: E402
from ember.compiler.c import backend as cbackend  # noqa: E402
from ember.compiler.c.decompose import decompose  # noqa: E402
from ember.compiler.c.lower import lower  # noqa: E402
from ember.compiler.c.schedule import plan, schedule  # noqa: E402
from tests.compiler.helpers import lm_step  # noqa: E402


def step_graph(small: bool):
    """The decomposed graph of one compiled training step."""
    graphs = []

    def capture(graph, example_inputs):
        graphs.append(graph)
        return cbackend._eager_runner(graph)
    ember.manual_seed(0)
    vocab, block, d, layers, heads, batch = (40, 16, 32, 2, 2, 2) if small else \
        (65, 256, 384, 6, 6, 8)
    m = demo.CharGPT(vocab, block=block, d=d, layers=layers, heads=heads)
    opt = ember.optim.AdamW(m.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.integers(0, vocab, (batch, block)), dtype=ember.int64)
    ember.compile(lm_step, backend=capture)(m, opt, x, x)
    return decompose(graphs[-1])


def bytes_touched(program) -> int:
    total = 0
    for k in program.kernels():
        ins, outs = k.buffers()
        for b in {id(b): b for b in list(ins) + list(outs)}.values():
            if all(type(m) is int for m in b.shape):
                total += math.prod(b.shape) * b.dtype.np.itemsize
    return total


def build(graph, planned: bool):
    fp = plan(graph, cbackend._HELPERS) if planned else None
    program = lower(graph, cbackend._HELPERS, fp)
    schedule(program, graph)
    program.verify()
    return program


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    graph = step_graph(args.small)
    print(f"char GPT training step: {len(graph.nodes)} nodes")
    print("| lowering | kernels | GEMM epilogues | MB touched | lower+schedule CPU ms (median) |")
    print("|---|---|---|---|---|")
    times: dict = {True: [], False: []}
    for _ in range(args.rounds):  # interleaved
        for planned in (False, True):
            t = time.process_time()
            build(graph, planned)
            times[planned].append(time.process_time() - t)
    for planned in (False, True):
        p = build(graph, planned)
        print(f"| {'fusion plan' if planned else 'greedy, graph order'} | {p.stats.kernels} | "
              f"{p.stats.epilogues} | {bytes_touched(p) / 1e6:.1f} | "
              f"{statistics.median(times[planned]) * 1e3:.0f} |")
    pt = []
    for _ in range(args.rounds):
        t = time.process_time()
        plan(graph, cbackend._HELPERS)
        pt.append(time.process_time() - t)
    print(f"plan alone: {statistics.median(pt) * 1e3:.1f} ms CPU (median)")


if __name__ == "__main__":
    main()

"""The half GEMM template's packed panels: the kept 64-byte-aligned per-thread blocks
(``ember_gemm_alloc_``, gemm_common.h.in) against the plain ``malloc`` per product it used
before, in one process: the old variant is the same generated source with the allocation
lines put back (a different unit), compiled bfloat16/float16 1024^3 matmul and MiniLM's
linear shapes (32 sentences x 92 tokens, hidden 384, FFN 1536).  One thread, CPU time
(``process_time``), variants interleaved round by round, medians.

    PYTHONPATH=. python benchmarks/bench_half_gemm_alloc.py [--rounds 9] [--calls 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
else:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np  # noqa: E402

import ember  # noqa: E402
from ember.compiler.c import backend as cbackend  # noqa: E402
from ember.compiler.c.codegen import gemm as gemm_codegen  # noqa: E402

F = ember.nn.functional
CASES = [("matmul 1024^3", (1024, 1024), (1024, 1024), "mm"),
         ("MiniLM qkv 2944x384 -> 384", (2944, 384), (384, 384), "lin"),
         ("MiniLM FFN up 2944x384 -> 1536", (2944, 384), (1536, 384), "lin"),
         ("MiniLM FFN down 2944x1536 -> 384", (2944, 1536), (384, 1536), "lin")]
_OLD = (("ember_gemm_alloc_(0, ", "malloc("), ("ember_gemm_alloc_(1, ", "malloc("),
        ("ember_gemm_release_(0, pas_)", "free(pas_)"),
        ("ember_gemm_release_(1, pb_)", "free(pb_)"))
_NEW_BODY = gemm_codegen._half_template_body


def _old_body(k):  # noqa: ANN001, ANN202
    lines = []
    for line in _NEW_BODY(k):
        for a, b in _OLD:
            line = line.replace(a, b)
        lines.append(line)
    return lines


def _compiled(kind: str, old: bool, x, w):  # noqa: ANN001, ANN202
    # compiled graphs are cached per code object (equal code, one entry): each variant its own
    body = "a @ b" if kind == "mm" else "F.linear(a, b)"
    ns: dict = {"F": F}
    exec(f"def product_{'old' if old else 'new'}(a, b):\n    return {body}", ns)
    fn = ns[f"product_{'old' if old else 'new'}"]
    f = ember.compile(fn, backend="c", fullgraph=True)
    gemm_codegen._half_template_body = _old_body if old else _NEW_BODY
    try:
        f(x, w)   # compiles now, with this variant's source
    finally:
        gemm_codegen._half_template_body = _NEW_BODY
    src = cbackend.last_compiled().source
    assert ("ember_gemm_alloc_(0, " in src.split("ember_gemm_release_(int slot")[1]) != old
    return lambda: f(x, w)


def _cpu(fn, n: int) -> float:  # noqa: ANN001
    c0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - c0) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=5)
    a = ap.parse_args()
    ember.set_num_threads(1)
    ember.compiler.config.recompile_limit = 64
    cbackend._load_plan = lambda key: None   # a warm run plan would reuse the other's library
    print(f"{ember.__file__}; 1 thread, CPU ms per call, medians of {a.rounds} x {a.calls}; "
          f"load avg {os.getloadavg()[0]:.1f}")
    print("| product | dtype | malloc per product | kept aligned | speedup |\n"
          "|---|---|---:|---:|---:|")
    rng = np.random.default_rng(0)
    for name, xs, ws, kind in CASES:
        x32 = rng.standard_normal(xs).astype(np.float32)
        w32 = (rng.standard_normal(ws) * 0.05).astype(np.float32)
        for dt in ("bfloat16", "float16"):
            x, w = (ember.tensor(v).to(getattr(ember, dt)) for v in (x32, w32))
            runs = {old: _compiled(kind, old, x, w) for old in (True, False)}
            res: dict = {k: [] for k in runs}
            keys = list(runs)
            for r in range(a.rounds):
                for k in keys[r % 2:] + keys[:r % 2]:
                    res[k].append(_cpu(runs[k], a.calls))
            old, new = (statistics.median(res[k]) * 1e3 for k in (True, False))
            print(f"| {name} | {dt} | {old:.2f} | {new:.2f} | {old / new:.2f}x |", flush=True)


if __name__ == "__main__":
    main()

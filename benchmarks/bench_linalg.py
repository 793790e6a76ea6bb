"""Time ember's matrix products against PyTorch and NumPy (one process, interleaved, medians).

    python benchmarks/bench_linalg.py [--threads 1,2] [--rounds 15] [--only gemm|eager]
                                      [--shapes gpt,mlp,minilm,aot]

Both libraries run on the same thread count (``ember.set_num_threads`` and
``torch.set_num_threads``; NumPy's OpenBLAS is ember's BLAS, so it follows ember's setting).
Every round calls each variant once, in turn, so load from other processes hits all variants
alike; the figure is the median over rounds.

* ``eager``: ember eager matmul / linear / sdpa vs torch eager.
* ``gemm``: per product shape of the models (char GPT 6L/384 training b8x256 with the
  backward's transposed products, its inference b1x256 = the AOT package's batch-1 run, MLP
  784-512-512-10 b256, MiniLM 32x92 tokens, a decode step M=1), the compiled product
  ``ember.compile(..., backend="c")`` with the generated template (``EMBER_C_GEMM=template``)
  and with BLAS pieces (``blas``), the default choice (``auto``), NumPy's ``@`` (OpenBLAS with
  its own threads) and torch (MKL/oneDNN).  Ratios are against torch.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # idle pools sleep (see RESULTS.md)
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))
else:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

# (group, name, M, K, N, form): "nt" = x (M,K) @ W^T with W (N,K) stored (a linear layer's
# forward), "nn" = (M,K) @ (K,N) (the input gradient dY @ W), "tn" = A^T @ B with A (K,M)
# stored (the weight gradient dY^T @ X)
SHAPES = [
    ("gpt", "gpt qkv fwd", 2048, 384, 1152, "nt"),
    ("gpt", "gpt proj fwd", 2048, 384, 384, "nt"),
    ("gpt", "gpt fc1 fwd", 2048, 384, 1536, "nt"),
    ("gpt", "gpt fc2 fwd", 2048, 1536, 384, "nt"),
    ("gpt", "gpt fc1 dX", 2048, 1536, 384, "nn"),
    ("gpt", "gpt fc2 dX", 2048, 384, 1536, "nn"),
    ("gpt", "gpt fc1 dW", 1536, 2048, 384, "tn"),
    ("gpt", "gpt qkv dW", 1152, 2048, 384, "tn"),
    ("aot", "gpt b1 qkv", 256, 384, 1152, "nt"),
    ("aot", "gpt b1 proj", 256, 384, 384, "nt"),
    ("aot", "gpt b1 fc1", 256, 384, 1536, "nt"),
    ("aot", "gpt b1 fc2", 256, 1536, 384, "nt"),
    ("aot", "gpt b1 head", 256, 384, 65, "nt"),
    ("aot", "decode fc1", 1, 384, 1536, "nt"),
    ("mlp", "mlp fc1 fwd", 256, 784, 512, "nt"),
    ("mlp", "mlp fc2 fwd", 256, 512, 512, "nt"),
    ("mlp", "mlp fc3 fwd", 256, 512, 10, "nt"),
    ("mlp", "mlp fc1 dW", 512, 256, 784, "tn"),
    ("mlp", "mlp fc2 dX", 256, 512, 512, "nn"),
    ("minilm", "minilm qkv", 2944, 384, 384, "nt"),
    ("minilm", "minilm ffn1", 2944, 384, 1536, "nt"),
    ("minilm", "minilm ffn2", 2944, 1536, 384, "nt"),
]


def _interleaved(fns: dict, rounds: int) -> dict:
    """(median, min) seconds per call of each function, calling each once per round in turn
    (the starting one rotates) after two warm-up calls each."""
    for f in fns.values():
        f()
        f()
    names = list(fns)
    ts: dict = {n: [] for n in names}
    for r in range(rounds):
        for j in range(len(names)):
            n = names[(r + j) % len(names)]
            t = time.perf_counter()
            fns[n]()
            ts[n].append(time.perf_counter() - t)
    return {n: (float(np.median(v)), float(np.min(v))) for n, v in ts.items()}


def _operands(rng, m: int, k: int, n: int, form: str) -> tuple:
    if form == "nt":
        return (rng.standard_normal((m, k), dtype=np.float32),
                rng.standard_normal((n, k), dtype=np.float32))
    if form == "nn":
        return (rng.standard_normal((m, k), dtype=np.float32),
                rng.standard_normal((k, n), dtype=np.float32))
    return (rng.standard_normal((k, m), dtype=np.float32),
            rng.standard_normal((k, n), dtype=np.float32))


def _compiled(ember, form: str, way: str, a, b):
    from ember.config import config
    ember.compiler.reset()   # a new graph per way (the frame cache would reuse the last)
    f = {"nt": lambda x, w: ember.nn.functional.linear(x, w),
         "nn": lambda x, w: x @ w,
         "tn": lambda x, w: x.t() @ w}[form]
    old = config.c_gemm
    config.c_gemm = way
    try:
        g = ember.compile(f, backend="c", fullgraph=True, dynamic=False)
        g(a, b)   # built now, with this way
    finally:
        config.c_gemm = old
    from ember.compiler.c import backend as cbackend
    impl = [k.impl for k in cbackend.last_compiled().program.kernels()
            if type(k).__name__ == "GemmKernel"]
    return (lambda: g(a, b)), impl[0]


def bench_gemm(ember, torch, threads: int, rounds: int, groups: set) -> None:
    rng = np.random.default_rng(0)
    print(f"\n# products, {threads} thread(s): median / min ms; ratios of medians (of mins)")
    print(f"{'shape':14s} {'M':>5s} {'K':>5s} {'N':>5s} {'':2s} | {'template':>13s} "
          f"{'blas pieces':>13s} {'numpy':>13s} {'torch':>13s} | {'tmpl/blas':>11s} "
          f"{'tmpl/torch':>11s} {'numpy/torch':>11s} | auto")
    for group, name, m, k, n, form in SHAPES:
        if group in groups:
            _one_shape(ember, torch, rng, rounds, name, m, k, n, form)


def _one_shape(ember, torch, rng, rounds: int, name: str, m: int, k: int, n: int,
               form: str) -> None:
    a, b = _operands(rng, m, k, n, form)
    ea, eb = ember.from_numpy(a), ember.from_numpy(b)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    tmpl, _ = _compiled(ember, form, "template", ea, eb)
    blas, _ = _compiled(ember, form, "blas", ea, eb)
    _, auto = _compiled(ember, form, "auto", ea, eb)
    tf = {"nt": lambda: torch.nn.functional.linear(ta, tb), "nn": lambda: ta @ tb,
          "tn": lambda: ta.t() @ tb}[form]
    nf = {"nt": lambda: a @ b.T, "nn": lambda: a @ b, "tn": lambda: a.T @ b}[form]
    t = _interleaved({"template": tmpl, "blas": blas, "numpy": nf, "torch": tf}, rounds)

    def cell(x: tuple) -> str:
        return f"{x[0] * 1e3:6.2f}/{x[1] * 1e3:6.2f}"

    def ratio(p: str, q: str) -> str:
        return f"{t[p][0] / t[q][0]:4.2f} ({t[p][1] / t[q][1]:4.2f})"

    print(f"{name:14s} {m:5d} {k:5d} {n:5d} {form:2s} | {cell(t['template'])} "
          f"{cell(t['blas'])} {cell(t['numpy'])} {cell(t['torch'])} | "
          f"{ratio('template', 'blas')} {ratio('template', 'torch')} "
          f"{ratio('numpy', 'torch')} | {'tmpl' if auto.startswith('tmpl') else 'blas'}",
          flush=True)


def bench_eager(ember, torch, rounds: int) -> None:
    rng = np.random.default_rng(0)

    def pair(*arrays):
        return [ember.from_numpy(a) for a in arrays], [torch.from_numpy(a) for a in arrays]

    a, b = (rng.standard_normal((1024, 1024), dtype=np.float32) for _ in range(2))
    (ea, eb), (ta, tb) = pair(a, b)
    x = rng.standard_normal((64, 128, 256), dtype=np.float32)
    w = rng.standard_normal((512, 256), dtype=np.float32)
    bias = rng.standard_normal((512,), dtype=np.float32)
    (ex, ew, ebias), (tx, tw, tbias) = pair(x, w, bias)
    xs = rng.standard_normal((4, 16), dtype=np.float32)
    ws = rng.standard_normal((8, 16), dtype=np.float32)
    bs = rng.standard_normal((8,), dtype=np.float32)
    (exs, ews, ebs), (txs, tws, tbs) = pair(xs, ws, bs)
    q = rng.standard_normal((4, 8, 256, 64), dtype=np.float32)
    (eq,), (tq,) = pair(q)
    ef, tf = ember.nn.functional, torch.nn.functional
    cases = [
        ("matmul 1024^3 f32", lambda: ea @ eb, lambda: ta @ tb, 1),
        ("matmul transposed lhs", lambda: ea.permute(1, 0) @ eb, lambda: ta.t() @ tb, 1),
        ("linear (64,128,256)x(512,256)", lambda: ef.linear(ex, ew, ebias),
         lambda: tf.linear(tx, tw, tbias), 1),
        ("linear small (4,16)x(8,16)", lambda: ef.linear(exs, ews, ebs),
         lambda: tf.linear(txs, tws, tbs), 100),
        ("sdpa causal (4,8,256,64)", lambda: ef.scaled_dot_product_attention(
            eq, eq, eq, is_causal=True),
         lambda: tf.scaled_dot_product_attention(tq, tq, tq, is_causal=True), 1),
    ]
    print("\n# eager, interleaved: median per call")
    for name, e_fn, t_fn, inner in cases:
        def rep(f, n=inner):
            return lambda: [f() for _ in range(n)]
        t = _interleaved({"ember": rep(e_fn), "torch": rep(t_fn)}, rounds)
        e, tt = t["ember"][0] / inner, t["torch"][0] / inner
        print(f"{name:34s} ember {e * 1e3:9.3f} ms  torch {tt * 1e3:9.3f} ms  "
              f"ratio {e / tt:5.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--only", choices=("gemm", "eager"), default=None)
    ap.add_argument("--shapes", default="gpt,aot,mlp,minilm")
    args = ap.parse_args()
    import subprocess

    import torch

    import ember
    cpu = subprocess.run(["sh", "-c", "lscpu | grep 'Model name'"], capture_output=True,
                         text=True).stdout.strip()
    print(f"{cpu}; torch {torch.__version__}; numpy {np.__version__}; load average "
          f"{os.getloadavg()[0]:.1f}")
    for threads in [int(x) for x in args.threads.split(",")]:
        ember.set_num_threads(threads)
        torch.set_num_threads(threads)
        if args.only != "eager":
            bench_gemm(ember, torch, threads, args.rounds, set(args.shapes.split(",")))
        if args.only != "gemm":
            bench_eager(ember, torch, args.rounds)


if __name__ == "__main__":
    main()

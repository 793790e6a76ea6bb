"""Time ember's matmul, linear and attention against PyTorch (same process, interleaved,
after warm-up; medians and ember/torch ratios).

    python benchmarks/bench_linalg.py [--threads N]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # this checkout's ember


def _median(fn, n: int) -> float:
    for _ in range(3):
        fn()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = ap.parse_args()
    import torch

    import ember
    if args.threads:
        torch.set_num_threads(args.threads)
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
        ("matmul 1024^3 f32", lambda: ea @ eb, lambda: ta @ tb, 20),
        ("matmul transposed lhs", lambda: ea.permute(1, 0) @ eb, lambda: ta.t() @ tb, 20),
        ("linear (64,128,256)x(512,256)", lambda: ef.linear(ex, ew, ebias),
         lambda: tf.linear(tx, tw, tbias), 20),
        ("linear small (4,16)x(8,16)", lambda: ef.linear(exs, ews, ebs),
         lambda: tf.linear(txs, tws, tbs), 2000),
        ("sdpa causal (4,8,256,64)", lambda: ef.scaled_dot_product_attention(
            eq, eq, eq, is_causal=True),
         lambda: tf.scaled_dot_product_attention(tq, tq, tq, is_causal=True), 20),
    ]
    for name, e_fn, t_fn, n in cases:
        e, t = _median(e_fn, n), _median(t_fn, n)
        print(f"{name:34s} ember {e * 1e3:9.3f} ms  torch {t * 1e3:9.3f} ms  ratio {e / t:5.2f}")


if __name__ == "__main__":
    main()

"""Compiled forward + backward of scaled_dot_product_attention (2x4 heads, L = S = 256, E = 64),
full and causal, in bfloat16/float16/float32: one thread, CPU time (``time.process_time``),
median of 9 after 3 warm-up calls.  Run it on two trees to compare (benchmarks/RESULTS.md)."""

from __future__ import annotations

import time

import numpy as np

import ember

F = ember.nn.functional


def main() -> None:
    ember.set_num_threads(1)
    rng = np.random.default_rng(0)
    for dt in ("bfloat16", "float16", "float32"):
        for causal in (False, True):
            ed = getattr(ember, dt)
            qkv = [ember.tensor(rng.standard_normal((2, 4, 256, 64)).astype(np.float32))
                   .to(ed).requires_grad_() for _ in range(3)]

            def step(q, k, v, causal=causal):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal).float().sum()\
                    .backward()

            f = ember.compile(step, backend="c")
            times = []
            for it in range(12):
                for t in qkv:
                    t.grad = None
                t0 = time.process_time()
                f(*qkv)
                if it >= 3:
                    times.append(time.process_time() - t0)
            print(f"{dt:9s} {'causal' if causal else 'full':6s} "
                  f"{1e3 * float(np.median(times)):.2f} ms", flush=True)


if __name__ == "__main__":
    main()

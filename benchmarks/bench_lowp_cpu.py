"""float16/bfloat16 against float32 measured in CPU time on one thread (what a loaded machine
disturbs least): memory-bound ops on 2^24 elements (add, exact GELU, softmax over rows of 1024),
eager and compiled, and with ``--minilm`` the MiniLM encoder (32 sentences) under bfloat16
autocast against float32, eager and compiled.

Run: ``python benchmarks/bench_lowp_cpu.py [--minilm] [--rounds 7] [--threads 1]
[--ops softmax]``.  Variants
are interleaved, medians; speedup = float32 time / half time in the same mode.  With
``--threads 2`` it times wall clock instead (CPU time would count both threads).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(HERE))
else:
    sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

import ember  # noqa: E402

warnings.filterwarnings("ignore")


def _median_times(fns: dict, rounds: int, clock) -> dict:
    for fn in fns.values():
        fn()
    res: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t = clock()
            fn()
            res[k].append(clock() - t)
    return {k: statistics.median(v) for k, v in res.items()}


def ops(rounds: int, clock, only: str = "") -> None:
    F = ember.nn.functional
    fns = {"add": lambda x: x + x, "gelu": F.gelu, "softmax": lambda x: F.softmax(x, -1)}
    if only:
        fns = {k: v for k, v in fns.items() if k in only.split(",")}
    big = np.random.default_rng(0).standard_normal((1 << 14, 1 << 10)).astype(np.float32)
    xs = {n: ember.tensor(big).to(getattr(ember, n)) for n in ("float32", "bfloat16", "float16")}
    print("| op | mode | float32 | bfloat16 | float16 |\n|---|---|---|---|---|")
    for op, fe in fns.items():
        for mode, fn in (("compiled", ember.compile(fe)), ("eager", fe)):
            t = _median_times({n: (lambda fn=fn, x=x: fn(x)) for n, x in xs.items()}, rounds,
                              clock)
            f32 = t["float32"]
            print(f"| {op} | {mode} | {f32 * 1e3:.1f} ms | "
                  + " | ".join(f"{t[n] * 1e3:.1f} ms ({f32 / t[n]:.2f}x)"
                               for n in ("bfloat16", "float16")) + " |")


def products(rounds: int, clock) -> None:
    """Eager 1024^3 matmul and a 256x1024 -> 4096 linear with bias (forward, and forward +
    backward): float32, the half GEMM kernels (ops/_hgemm_c.py) and, for comparison, the
    widen + float32 BLAS path."""
    from ember.ops import _hgemm_c

    rng = np.random.default_rng(0)
    vals = (rng.standard_normal((1024, 1024)), rng.standard_normal((256, 1024)),
            rng.standard_normal((4096, 1024)) * 0.03, rng.standard_normal(4096))
    F = ember.nn.functional

    def case(name: str, op: str, kernels: bool = True):
        a, x, w, b = (ember.tensor(v.astype(np.float32)).to(getattr(ember, name)) for v in vals)

        g = ember.ones(256, 4096).to(x.dtype) * 0.01
        xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()

        def run():
            old = _hgemm_c.set_enabled(kernels)
            try:
                if op == "backward":   # the linear's three products: forward, dx, dw
                    xg.grad = wg.grad = None
                    return F.linear(xg, wg, b).backward(g)
                return a @ a if op == "matmul" else F.linear(x, w, b)
            finally:
                _hgemm_c.set_enabled(old)
        return run

    print(f"eager bfloat16 products on AMX tiles: {_hgemm_c.uses_amx()}")
    print("| eager | variant | time | float32 time / this |\n|---|---|---|---|")
    labels = {"matmul": "matmul 1024^3", "linear": "linear 256x1024->4096 +bias",
              "backward": "the linear, forward + backward"}
    for op in labels:
        fns = {"float32": case("float32", op)}
        for n in ("bfloat16", "float16"):
            fns[n], fns[f"{n} widen+BLAS"] = case(n, op), case(n, op, False)
        t = _median_times(fns, rounds, clock)
        for k, v in t.items():
            print(f"| {labels[op]} | {k} | {v * 1e3:.1f} ms | {t['float32'] / v:.2f}x |")


def minilm_eager(rounds: int, clock) -> None:
    """Eager MiniLM: float32, bfloat16 autocast with the half GEMM kernels (ops/_hgemm_c.py),
    and bfloat16 autocast with them off (the widen + float32 BLAS path), interleaved."""
    import bench_minilm as bm

    from ember.ops import _hgemm_c

    enc = bm.load_example().SentenceEncoder()
    batch = enc.tokenizer(bm.sentences(32))

    def run(autocast: bool, kernels: bool = True):
        old = _hgemm_c.set_enabled(kernels)
        try:
            with ember.no_grad(), ember.autocast("cpu", dtype=ember.bfloat16, enabled=autocast):
                return enc.model(**batch).float().numpy()
        finally:
            _hgemm_c.set_enabled(old)

    t = _median_times({"f32": lambda: run(False), "bf16": lambda: run(True),
                       "bf16 widen+BLAS": lambda: run(True, False)}, rounds, clock)
    print(f"eager bfloat16 products on AMX tiles: {_hgemm_c.uses_amx()}")
    print("| eager MiniLM 32x92 | time | float32 time / this |\n|---|---|---|")
    for k, v in t.items():
        print(f"| {k} | {v * 1e3:.0f} ms | {t['f32'] / v:.2f}x |")


def minilm(rounds: int, clock) -> None:
    import bench_minilm as bm

    mini = bm.load_example()
    enc = mini.SentenceEncoder()
    batch = enc.tokenizer(bm.sentences(32))
    model, comp = enc.model, ember.compile(enc.model)

    def run(m, autocast: bool):
        with ember.no_grad(), ember.autocast("cpu", dtype=ember.bfloat16, enabled=autocast):
            return m(**batch).float().numpy()

    t = _median_times({(mode, ac): (lambda m=m, ac=ac: run(m, ac))
                       for mode, m in (("compiled", comp), ("eager", model))
                       for ac in (False, True)}, rounds, clock)
    print("| MiniLM 32x92 | float32 | bf16 autocast | bf16 / f32 speed |\n|---|---|---|---|")
    for mode in ("compiled", "eager"):
        a, b = t[(mode, False)], t[(mode, True)]
        print(f"| {mode} | {a * 1e3:.0f} ms | {b * 1e3:.0f} ms | {a / b:.2f}x |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minilm", action="store_true")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ops", default="", help="comma list of add,gelu,softmax (default: all; "
                    "none: no ops)")
    ap.add_argument("--products", action="store_true",
                    help="eager matmul 1024^3 and linear: float32, half, half widen+BLAS")
    ap.add_argument("--no-amx", action="store_true",
                    help="eager half products built without AMX (bfloat16 widened in packing)")
    ap.add_argument("--minilm-eager", action="store_true",
                    help="eager MiniLM only: float32, bf16 autocast, bf16 widen+BLAS")
    a = ap.parse_args()
    ember.set_num_threads(a.threads)
    clock = time.process_time if a.threads == 1 else time.perf_counter
    print(f"threads {a.threads}, {'CPU time' if a.threads == 1 else 'wall clock'}, "
          f"load average {os.getloadavg()[0]:.1f}")
    if a.ops != "none":
        ops(a.rounds, clock, a.ops)
    if a.no_amx:   # the eager half kernels built without AMX (a CPU without it, emulated)
        from ember.ops import _hgemm_c, _native
        _hgemm_c._NATIVE = _native.Native(
            "hgemm-noamx", _hgemm_c.SOURCE, _hgemm_c._SYMBOLS,
            flags=_hgemm_c._NATIVE.flags + ("-mno-amx-tile", "-mno-amx-bf16", "-mno-amx-int8"))
    if a.products:
        products(a.rounds, clock)
    if a.minilm_eager:
        minilm_eager(max(3, a.rounds // 2), clock)
    if a.minilm:
        minilm(max(3, a.rounds // 2), clock)


if __name__ == "__main__":
    main()

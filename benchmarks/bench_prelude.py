"""The C prelude's math: max ulp error table and loop speed vs NumPy, or two preludes compared.

    python benchmarks/bench_prelude.py [--stride 127] [--n 22] [--target x86-64-v3]
    python benchmarks/bench_prelude.py --compare OLD_DIR [--targets native,x86-64-v3]

Accuracy: float32 functions on every ``stride``-th float32 bit pattern (plus specials) against
the float64 function rounded; float64 functions on a random sample against mpmath (120 bits).
Speed: ``for i: y[i] = ember_<f>f(x[i])`` on 2**n floats, median of 7, vs the NumPy call eager
ember uses, and vs the same loop calling libm (which gcc does not vectorize).

``--compare OLD_DIR`` (a directory holding another ``ember_prelude.h``, e.g. from
``git show REV:ember/compiler/csrc/ember_prelude.h``) builds the float loops and the gelu
chains with both preludes for each target (``native``: the backend's flags; ``x86-64-v3``:
AVX2 + FMA, what an AMD EPYC / znver3 machine gets) and times them in interleaved rounds in one
process (CPU time per element, median of ``--rounds``), so the ratio old / new holds even on a
loaded machine; the absolute figures do not.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

import numpy as np

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
else:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ember.compiler.c.codegen import prelude as cprelude  # noqa: E402
from ember.ops import _special  # noqa: E402
from ember.ops.pointwise_math import _sigmoid  # noqa: E402

FUNCS = ["exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "erfc", "erfinv"]
LIBM = {"exp": "expf", "expm1": "expm1f", "log": "logf", "log1p": "log1pf", "tanh": "tanhf",
        "erf": "erff", "erfc": "erfcf"}
P = ctypes.c_void_p


def build(target: tuple | None = None):
    src = ['#include "ember_prelude.h"']
    for f in FUNCS:
        for s, t in (("f", "float"), ("d", "double")):
            src.append(f"void m_{f}{s}(const {t}* restrict x, {t}* restrict y, long n) "
                       f"{{ for (long i = 0; i < n; i++) y[i] = ember_{f}{s}(x[i]); }}")
        if f in LIBM:
            src.append(f"void l_{f}(const float* restrict x, float* restrict y, long n) "
                       f"{{ for (long i = 0; i < n; i++) y[i] = {LIBM[f]}(x[i]); }}")
    return cprelude.build_test_lib("\n".join(src) + "\n", target=target)


def call(lib, name, x):
    y = np.empty_like(x)
    getattr(lib, name)(P(x.ctypes.data), P(y.ctypes.data), ctypes.c_long(x.size))
    return y


def ref64(f, x):
    import scipy.special as sp
    with np.errstate(all="ignore"):
        return {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
                "tanh": np.tanh, "sigmoid": sp.expit, "erf": sp.erf, "erfc": sp.erfc,
                "erfinv": _special.erfinv}[f](x)


def ulps32(y, r):
    with np.errstate(all="ignore"):
        rr = r.astype(np.float32)
        sp = np.spacing(np.maximum(np.abs(rr), np.float32(1e-45))).astype(np.float64)
        e = np.abs(y.astype(np.float64) - r) / sp
    ok = (np.isnan(y) & np.isnan(r)) | (y == rr)
    e = np.where(ok, 0.0, e)
    return np.where(np.isnan(e), np.inf, e)


def accuracy(lib, stride):
    print(f"float32 vs float64 reference, every {stride}th bit pattern:")
    for f in FUNCS:
        worst = 0.0
        for start in range(0, 2 ** 32, 2 ** 26):
            bits = np.arange(start, min(start + 2 ** 26, 2 ** 32), stride, dtype=np.uint64)
            x = bits.astype(np.uint32).view(np.float32)
            worst = max(worst, ulps32(call(lib, f"m_{f}f", x), ref64(f, x.astype(np.float64)))
                        .max())
        print(f"  {f:8s} {worst:.3f}")
    import mpmath
    mpmath.mp.prec = 120
    mp = {"exp": mpmath.exp, "expm1": mpmath.expm1, "log": mpmath.log, "log1p": mpmath.log1p,
          "tanh": mpmath.tanh, "sigmoid": lambda v: 1 / (1 + mpmath.exp(-v)), "erf": mpmath.erf,
          "erfc": mpmath.erfc, "erfinv": mpmath.erfinv}
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(500) * s for s in (1e-6, 0.3, 1, 3, 30, 300)])
    print("float64 vs mpmath (3000 values, |x| up to ~1000):")
    for f in FUNCS:
        xs = np.clip(x, -0.999999, 0.999999) if f == "erfinv" else (
            np.abs(x) if f == "log" else np.maximum(x, -0.99) if f == "log1p" else x)
        y = call(lib, f"m_{f}d", np.ascontiguousarray(xs))
        worst = 0.0
        for xi, yi in zip(xs, y):
            t = float(mp[f](mpmath.mpf(float(xi))))
            if t == yi or t == 0 or not np.isfinite(t):
                continue
            worst = max(worst, abs(yi - t) / np.spacing(abs(t)))
        print(f"  {f:8s} {worst:.3f}")


def timeit(fn, reps=7):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[reps // 2] * 1e3


def speed(lib, n):
    rng = np.random.default_rng(1)
    x = rng.uniform(-5, 5, 2 ** n).astype(np.float32)
    xp = np.abs(x) + np.float32(1e-3)
    xe = rng.uniform(-0.99, 0.99, 2 ** n).astype(np.float32)
    y = np.empty_like(x)
    numpy = {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
             "tanh": np.tanh, "sigmoid": _sigmoid, "erf": _special.erf, "erfc": _special.erfc,
             "erfinv": _special.erfinv}
    print(f"2**{n} float32, ms (median of 7): ember C loop | same loop via libm | NumPy/eager")
    for f in FUNCS:
        arg = xp if f in ("log", "log1p") else xe if f == "erfinv" else x

        def run(name: str, a: np.ndarray = arg) -> None:
            getattr(lib, name)(P(a.ctypes.data), P(y.ctypes.data), ctypes.c_long(a.size))

        fn = numpy[f]
        libm = f"{timeit(lambda n=f'l_{f}': run(n)):8.2f}" if f in LIBM else ""
        ours = timeit(lambda n=f"m_{f}f": run(n))
        theirs = timeit(lambda a=arg, fn=fn: fn(a))
        print(f"  {f:8s} {ours:8.2f} | {libm:>8s} | {theirs:8.2f}")


# the loops --compare times: float32 in, float32 out; ``v`` is x * 0.75 + 0.1 (a linear layer's
# output) where a chain starts from one
CHAINS = {
    **{f: f"ember_{f}f(x[i])" for f in ("exp", "expm1", "log1p", "tanh", "sigmoid", "erf")},
    "gelu chain (erf)": "v * ember_normal_cdff(v) * ember_sigmoidf(x[i])",
    "gelu (tanh)": "0.5f * v * (1.0f + ember_tanhf(0.7978846f * (v + 0.044715f * v * v * v)))",
    "silu": "v * ember_sigmoidf(v)",
    "elu (select)": "ember_select(v <= 0, ember_expm1f(v) * 1.5f, v)",
    "softplus": "ember_select(v > 20.0f, v, ember_log1pf(ember_expf(v)))",
    "clamp (hardtanh)": "ember_minimum(ember_maximum(v, -1.0f), 1.0f)",
    "float16 round trip": "ember_round_f16(v)",
    "bfloat16 round trip": "ember_round_bf16(v)",
}
TARGETS = {"native": None, "x86-64-v3": ("-march=x86-64-v3",),
           "skylake-avx512": ("-march=skylake-avx512", "-mprefer-vector-width=512")}


def build_chains(target: tuple | None, include: str | None = None):
    src = ['#include "ember_prelude.h"']
    for i, body in enumerate(CHAINS.values()):
        src.append(f"void c{i}(const float* restrict x, float* restrict y, long n) "
                   f"{{ for (long i = 0; i < n; i++) {{ float v = x[i] * 0.75f + 0.1f; "
                   f"(void)v; y[i] = {body}; }} }}")
    extra = ("-I", include) if include else ()
    return cprelude.build_test_lib("\n".join(src) + "\n", extra_flags=extra, target=target)


def compare(old_dir: str, targets: list[str], n: int, rounds: int) -> None:
    """Interleaved CPU-time rounds of every CHAINS loop, old prelude vs this one."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-5, 5, 2 ** n).astype(np.float32)
    y = np.empty_like(x)
    reps = max(1, 2 ** 22 // x.size)
    print(f"2**{n} float32 (x{reps} per sample), ns per element, CPU time, median of {rounds} "
          f"interleaved rounds")
    for tname in targets:
        libs = {"old": build_chains(TARGETS[tname], old_dir), "new": build_chains(TARGETS[tname])}
        times: dict = {(k, i): [] for k in libs for i in range(len(CHAINS))}
        for _ in range(rounds):
            for i in range(len(CHAINS)):
                for k, lib in libs.items():
                    fn = getattr(lib, f"c{i}")
                    t = time.process_time()
                    for _ in range(reps):
                        fn(P(x.ctypes.data), P(y.ctypes.data), ctypes.c_long(x.size))
                    times[k, i].append((time.process_time() - t) / (reps * x.size) * 1e9)
        print(f"  target {tname}\n    {'loop':18s} {'old':>7s} {'new':>7s} {'old/new':>8s}")
        for i, name in enumerate(CHAINS):
            o, w = (float(np.median(times[k, i])) for k in ("old", "new"))
            print(f"    {name:18s} {o:7.2f} {w:7.2f} {o / w:8.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stride", type=int, default=127)
    ap.add_argument("--n", type=int, default=22)
    ap.add_argument("--no-accuracy", action="store_true")
    ap.add_argument("--target", choices=sorted(TARGETS), default="native")
    ap.add_argument("--compare", metavar="OLD_DIR")
    ap.add_argument("--targets", default="native,x86-64-v3")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    if args.compare:
        compare(args.compare, args.targets.split(","), min(args.n, 16), args.rounds)
        return
    lib = build(TARGETS[args.target])
    speed(lib, args.n)
    if not args.no_accuracy:
        accuracy(lib, args.stride)


if __name__ == "__main__":
    main()

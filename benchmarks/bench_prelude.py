"""The C prelude's math: max ulp error table and loop speed vs NumPy.

    python benchmarks/bench_prelude.py [--stride 127] [--n 22]

Accuracy: float32 functions on every ``stride``-th float32 bit pattern (plus specials) against
the float64 function rounded; float64 functions on a random sample against mpmath (120 bits).
Speed: ``for i: y[i] = ember_<f>f(x[i])`` on 2**n floats, median of 7, vs the NumPy call eager
ember uses, and vs the same loop calling libm (which gcc does not vectorize).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ember.compiler.c.codegen import prelude as cprelude  # noqa: E402
from ember.ops import _special  # noqa: E402
from ember.ops.pointwise_math import _sigmoid  # noqa: E402

FUNCS = ["exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "erfc", "erfinv"]
LIBM = {"exp": "expf", "expm1": "expm1f", "log": "logf", "log1p": "log1pf", "tanh": "tanhf",
        "erf": "erff", "erfc": "erfcf"}
P = ctypes.c_void_p


def build():
    src = ['#include "ember_prelude.h"']
    for f in FUNCS:
        for s, t in (("f", "float"), ("d", "double")):
            src.append(f"void m_{f}{s}(const {t}* restrict x, {t}* restrict y, long n) "
                       f"{{ for (long i = 0; i < n; i++) y[i] = ember_{f}{s}(x[i]); }}")
        if f in LIBM:
            src.append(f"void l_{f}(const float* restrict x, float* restrict y, long n) "
                       f"{{ for (long i = 0; i < n; i++) y[i] = {LIBM[f]}(x[i]); }}")
    return cprelude.build_test_lib("\n".join(src) + "\n")


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stride", type=int, default=127)
    ap.add_argument("--n", type=int, default=22)
    ap.add_argument("--no-accuracy", action="store_true")
    args = ap.parse_args()
    lib = build()
    speed(lib, args.n)
    if not args.no_accuracy:
        accuracy(lib, args.stride)


if __name__ == "__main__":
    main()

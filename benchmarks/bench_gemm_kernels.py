"""Time the C backend's float32 GEMM kernel itself against NumPy (OpenBLAS) and torch (MKL).

    python benchmarks/bench_gemm_kernels.py [--rounds 11] [--threads 1]
                                            [--shapes gpt,aot,mlp,minilm] [--only NAME,...]
                                            [--impls blas,tmpl_8x48] [--march native]

Each product of ``bench_linalg.SHAPES`` is compiled once (``ember.compile`` of a ``linear`` for
``nt``, ``x @ w`` for ``nn``, ``x.t() @ w`` for ``tn``), and its ``GemmKernel`` is built again
into one library with each candidate impl (BLAS pieces and the template's tiles, as
``mode="max-autotune"`` builds its candidates), called through the entry ABI without the
compiled function's Python.  Every round calls each variant once, in turn (the first one
rotating), and reads the **CPU time of the process** (``time.process_time``: what a loaded
machine takes from a variant is not counted; every library runs on ``--threads`` threads);
the figure is the median over rounds in GFLOP/s (2 M N K / time), and the ratio columns are
the first template tile's time (the default one) over each peer's.  ``--march x86-64-v3``
builds the kernels for AVX2 (``-mno-avx512f``) with that level's tiles.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))
else:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from bench_linalg import SHAPES, _operands  # noqa: E402


def _kernel(ember, form: str, a, b):
    """The GemmKernel and Program of the compiled product."""
    from ember.compiler.c import backend as cbackend
    ember.compiler.reset()
    f = {"nt": lambda x, w: ember.nn.functional.linear(x, w),
         "nn": lambda x, w: x @ w,
         "tn": lambda x, w: x.t() @ w}[form]
    ember.compile(f, backend="c", fullgraph=True, dynamic=False)(a, b)
    prog = cbackend.last_compiled().program
    (k,) = [k for k in prog.kernels() if type(k).__name__ == "GemmKernel"]
    return k, prog


def _entries(k, prog, impls: list, flags: tuple) -> tuple:
    """One library with the kernel built once per impl: (entries, argument arrays)."""
    from ember.compiler.c.build import runtime, toolchain
    from ember.compiler.c.build.runtime import C_PRELUDE
    from ember.compiler.c.codegen.gemm import gemm_prelude
    from ember.compiler.c.codegen.unit import PRELUDE, _entry, _kernel
    from ember.compiler.c.ir.loop_ir import Program, Segment
    segs = [Segment(f"bench_{j}", [dataclasses.replace(k, name=f"bk{j}", impl=c)])
            for j, c in enumerate(impls)]
    fake = Program(segs, [], list(prog.int_names), prog.num_scalars)
    parts = [C_PRELUDE, PRELUDE, gemm_prelude(fake)]
    for seg in segs:
        parts += [_kernel(seg.kernels[0], fake), _entry(seg, {})]
    # with OpenMP, as the backend builds units: else --threads 2 ran the template on one
    lib = runtime.load(toolchain.compile_library("\n".join(parts), name="benchgemm",
                                                 extra_flags=flags, openmp=True))
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(int(np.prod(b.shape))).astype(np.float32)
              for b in segs[0].buffers()]
    ints, floats = [0] * len(prog.int_names), [0.0] * prog.num_scalars
    return ([(lambda e=lib.entry(s.entry): e(arrays, ints, floats)) for s in segs])


def _interleaved(fns: dict, rounds: int, reps: dict) -> dict:
    """Median CPU seconds per call of each function (``reps[name]`` calls per sample)."""
    for f in fns.values():
        f()
        f()
    names = list(fns)
    ts: dict = {n: [] for n in names}
    for r in range(rounds):
        for j in range(len(names)):
            n = names[(r + j) % len(names)]
            t = time.process_time()
            for _ in range(reps[n]):
                fns[n]()
            ts[n].append((time.process_time() - t) / reps[n])
    return {n: float(np.median(v)) for n, v in ts.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shapes", default="gpt,aot,mlp,minilm")
    ap.add_argument("--only", default="", help="comma-separated product names")
    ap.add_argument("--impls", default="", help="e.g. blas,tmpl_14x32 (default: all)")
    ap.add_argument("--march", default="native")
    args = ap.parse_args()
    import subprocess

    import torch

    import ember
    from ember.compiler.c.codegen import gemm as gemm_codegen
    tiles = gemm_codegen.templates_for(args.march)
    gemm_codegen.TEMPLATES = tiles
    flags = () if args.march == "native" else (f"-march={args.march}", "-mno-avx512f")
    impls = args.impls.split(",") if args.impls else ["blas", *tiles["float32"]]
    ember.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    cpu = subprocess.run(["sh", "-c", "lscpu | grep 'Model name'"], capture_output=True,
                         text=True).stdout.strip()
    print(f"{cpu}; torch {torch.__version__}; numpy {np.__version__}; {args.threads} "
          f"thread(s); march {args.march}; load average {os.getloadavg()[0]:.1f}")
    print(f"GFLOP/s (median CPU time of {args.rounds} rounds)")
    print(f"{'shape':14s} {'M':>5s} {'K':>5s} {'N':>5s} {'':2s} | "
          + " ".join(f"{x:>10s}" for x in [*impls, "numpy", "torch"])
          + f" | {'tmpl/numpy':>11s} {'tmpl/torch':>14s}")
    rng = np.random.default_rng(0)
    only = set(args.only.split(",")) if args.only else None
    for group, name, m, k, n, form in SHAPES:
        if group in args.shapes.split(",") and (not only or name in only):
            _one_shape(ember, torch, rng, args.rounds, (name, m, k, n, form), impls, flags)


def _one_shape(ember, torch, rng, rounds: int, shape: tuple, impls: list, flags: tuple) -> None:
    name, m, k, n, form = shape
    a, b = _operands(rng, m, k, n, form)
    kern, prog = _kernel(ember, form, ember.from_numpy(a), ember.from_numpy(b))
    fns = dict(zip(impls, _entries(kern, prog, impls, flags)))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    fns["numpy"] = {"nt": lambda: a @ b.T, "nn": lambda: a @ b, "tn": lambda: a.T @ b}[form]
    fns["torch"] = {"nt": lambda: torch.nn.functional.linear(ta, tb), "nn": lambda: ta @ tb,
                    "tn": lambda: ta.t() @ tb}[form]
    flops = 2.0 * m * n * k
    t = _interleaved(fns, rounds, {x: max(1, int(2e8 / flops)) for x in fns})
    gf = {x: flops / t[x] / 1e9 for x in t}
    first = next((x for x in impls if x.startswith("tmpl")), impls[0])
    print(f"{name:14s} {m:5d} {k:5d} {n:5d} {form:2s} | "
          + " ".join(f"{gf[x]:10.1f}" for x in fns)
          + f" | {t[first] / t['numpy']:11.2f} {t[first] / t['torch']:14.2f}", flush=True)


if __name__ == "__main__":
    main()

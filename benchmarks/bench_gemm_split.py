"""The float32 GEMM template's thread splits against each other and torch, in wall time.

    python benchmarks/bench_gemm_split.py [--threads 1,2] [--rounds 21] [--shapes aot,mlp]
                                          [--variants tmpl_14x32:0,tmpl_14x32:1,tmpl_8x48:1]

A variant is ``tile:split``: the tile (an impl of ``codegen.gemm.TEMPLATES``) and the value of
``EMBER_GEMM_COLSPLIT`` the kernel is built with (gemm_tmpl_body.c.in: 0 = units of row blocks
x column runs from one queue, as before the column split; 1 = the default rule, products of
few row blocks split by columns; 2 = the column split for any height).  Each product of
``bench_linalg.SHAPES`` is built once per variant into one OpenMP library and called through
the entry ABI; every round calls each variant and torch once, in turn (the first rotating);
figures are the median (min) wall ms per call and the median's ratio to torch's.  ``bits``
says whether every variant's output, at one thread and at ``--threads``, equals the first
variant's at one thread bit for bit.
Two-thread wall figures need both cores: on a shared machine run it under ``chrt -f 1``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))
else:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from bench_gemm_kernels import _kernel  # noqa: E402
from bench_linalg import SHAPES, _operands  # noqa: E402


def _entries(k, prog, variants: list) -> tuple:
    """One library, the kernel built once per (tile, split): (callables, argument arrays)."""
    from ember.compiler.c.build import runtime, toolchain
    from ember.compiler.c.build.runtime import C_PRELUDE
    from ember.compiler.c.codegen.gemm import gemm_prelude
    from ember.compiler.c.codegen.unit import PRELUDE, _entry
    from ember.compiler.c.codegen.unit import _kernel as c_kernel
    from ember.compiler.c.ir.loop_ir import Program, Segment
    segs = [Segment(f"bench_{j}", [dataclasses.replace(k, name=f"bk{j}", impl=tile)])
            for j, (tile, _) in enumerate(variants)]
    fake = Program(segs, [], list(prog.int_names), prog.num_scalars)
    parts = [C_PRELUDE, PRELUDE, gemm_prelude(fake)]
    for seg, (_, split) in zip(segs, variants):
        parts += [f"#undef EMBER_GEMM_COLSPLIT\n#define EMBER_GEMM_COLSPLIT {split}",
                  c_kernel(seg.kernels[0], fake), _entry(seg, {})]
    lib = runtime.load(toolchain.compile_library("\n".join(parts), name="benchsplit",
                                                 openmp=True))
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(int(np.prod(b.shape))).astype(np.float32)
              for b in segs[0].buffers()]
    ints, floats = [0] * len(prog.int_names), [0.0] * prog.num_scalars
    return [(lambda e=lib.entry(s.entry): e(arrays, ints, floats)) for s in segs], arrays


def _one_shape(ember, torch, rng, args, shape: tuple, variants: list, threads: int) -> None:
    name, m, k, n, form = shape
    a, b = _operands(rng, m, k, n, form)
    kern, prog = _kernel(ember, form, ember.from_numpy(a), ember.from_numpy(b))
    fns, arrays = _entries(kern, prog, variants)
    ember.set_num_threads(1)
    outs = []
    for f in fns:
        f()
        outs.append([x.copy() for x in arrays])
    ember.set_num_threads(threads)
    for f in fns:
        f()
        outs.append([x.copy() for x in arrays])
    same = all(np.array_equal(x, y) for o in outs for x, y in zip(o, outs[0]))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    calls = dict(zip([f"{t}:{s}" for t, s in variants], fns))
    calls["torch"] = {"nt": lambda: torch.nn.functional.linear(ta, tb), "nn": lambda: ta @ tb,
                      "tn": lambda: ta.t() @ tb}[form]
    names = list(calls)
    ts: dict = {x: [] for x in names}
    for f in calls.values():
        f()
        f()
    for r in range(args.rounds):
        for j in range(len(names)):
            x = names[(r + j) % len(names)]
            t = time.perf_counter()
            calls[x]()
            ts[x].append((time.perf_counter() - t) * 1e3)
    med = {x: float(np.median(v)) for x, v in ts.items()}
    print(f"{name:13s} {m}x{k}->{n} {form} bits {'same' if same else 'DIFFER'} | "
          + "  ".join(f"{x} {med[x]:.3f} ({min(ts[x]):.3f}) {med[x] / med['torch']:.2f}"
                      for x in names), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--shapes", default="aot,mlp")
    ap.add_argument("--variants", default="tmpl_14x32:0,tmpl_14x32:1,tmpl_8x48:1")
    args = ap.parse_args()
    import torch

    import ember
    variants = [(v.split(":")[0], int(v.split(":")[1])) for v in args.variants.split(",")]
    rng = np.random.default_rng(0)
    for threads in [int(x) for x in args.threads.split(",")]:
        torch.set_num_threads(threads)
        print(f"# {threads} thread(s), load {os.getloadavg()[0]:.1f}; {ember.__file__}; "
              f"wall ms per call: median (min) over {args.rounds} rounds, median / torch's")
        for group, name, m, k, n, form in SHAPES:
            if group in args.shapes.split(",") and m > 4 and n >= 96:
                _one_shape(ember, torch, rng, args, (name, m, k, n, form), variants, threads)


if __name__ == "__main__":
    main()

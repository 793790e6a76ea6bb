"""Time ember's bilinear ``F.interpolate`` (forward and backward, eager and compiled) against
PyTorch: same process, interleaved rounds after warm-up, medians and ember/torch ratios.

    python benchmarks/bench_interpolate.py [--threads N] [--no-compile]

Case: N=8, C=64, 64x64 -> 128x128 float32, align_corners=False (issue 13's target: eager at
most 1.2x slower than torch).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys

import numpy as np

# idle thread pools sleep instead of spinning on the cores the other library is timed on
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # torch's OpenMP pool
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")    # NumPy's OpenBLAS pool
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))
else:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks.common import fmt_time, time_per_call  # noqa: E402


def compare_both(cases: dict, rounds: int, warmup: int = 2) -> None:
    """``common.compare`` that prints the minimum per-call time next to the median: on a
    loaded machine the minimum is the steadier figure."""
    print("| case | ember median | torch median | ratio | ember min | torch min | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, (fe, ft, number) in cases.items():
        for _ in range(warmup):
            fe()
            ft()
        te, tt = [], []
        for _ in range(rounds):
            te.append(time_per_call(fe, number))
            tt.append(time_per_call(ft, number))
        me, mt = statistics.median(te), statistics.median(tt)
        ne, nt = min(te), min(tt)
        print(f"| {name} | {fmt_time(me)} | {fmt_time(mt)} | {me / mt:.2f} | {fmt_time(ne)} | "
              f"{fmt_time(nt)} | {ne / nt:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0, help="threads for both (0: default)")
    ap.add_argument("--no-compile", action="store_true", help="skip the compiled cases")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    import torch

    import ember
    if args.threads:
        torch.set_num_threads(args.threads)
        ember.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 64, 64, 64), dtype=np.float32)
    g = rng.standard_normal((8, 64, 128, 128), dtype=np.float32)
    ef, tf = ember.nn.functional, torch.nn.functional
    ex, tx = ember.from_numpy(x), torch.from_numpy(x)
    eg, tg = ember.from_numpy(g), torch.from_numpy(g)
    exg, txg = ember.from_numpy(x).requires_grad_(), torch.from_numpy(x).requires_grad_()

    def up(lib_f, t):  # noqa: ANN001, ANN202
        return lib_f.interpolate(t, size=(128, 128), mode="bilinear", align_corners=False)

    ye, yt = up(ef, exg), up(tf, txg)
    (ge,) = ember.autograd.grad(ye, exg, eg)
    (gt,) = torch.autograd.grad(yt, txg, tg)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-4, atol=1e-4)

    cases = {
        "bilinear fwd 8x64x64x64->128x128": (lambda: up(ef, ex), lambda: up(tf, tx), 3),
        "bilinear fwd+bwd": (lambda: ember.autograd.grad(up(ef, exg), exg, eg),
                             lambda: torch.autograd.grad(up(tf, txg), txg, tg), 2),
    }
    if not args.no_compile:
        cf = ember.compile(lambda t: up(ef, t))

        def cstep():  # noqa: ANN202
            return ember.autograd.grad(cf(exg), exg, eg)

        np.testing.assert_allclose(cf(ex).numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
        cases["bilinear fwd (ember compiled)"] = (lambda: cf(ex), lambda: up(tf, tx), 3)
        cases["bilinear fwd+bwd (ember compiled)"] = (
            cstep, lambda: torch.autograd.grad(up(tf, txg), txg, tg), 2)
    print(f"torch {torch.__version__}, threads torch={torch.get_num_threads()} "
          f"ember={ember.get_num_threads()}")
    compare_both(cases, args.rounds)


if __name__ == "__main__":
    main()

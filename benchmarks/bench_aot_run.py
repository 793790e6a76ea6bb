"""Run latency of the demo char GPT's AOT package (batch 1x64, one thread) against torch eager
running the same source with the same weights, interleaved in one process (``common.compare``:
medians).  Quick (no torch AOTI build, which benchmarks/bench_aot.py times): for comparing
ember versions — run it with each checkout on ``PYTHONPATH`` and compare the ratios.

    PYTHONPATH=. python benchmarks/bench_aot_run.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_aot  # noqa: E402  (sets a fresh EMBER_CACHE_DIR)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import compare  # noqa: E402

import ember  # noqa: E402
import ember.aot  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    em, tm, idx = bench_aot._models()
    ep = ember.export.export(em, (ember.tensor(idx),))
    pkg = os.path.join(bench_aot.WORK, "gpt.pt2")
    ember.aot.compile_and_package(ep, package_path=pkg)
    model = ember.aot.load_package(pkg)
    ex, tx = ember.tensor(idx), torch.from_numpy(idx)
    with torch.inference_mode():
        diff = float(np.abs(model(ex).numpy() - tm(tx).numpy()).max())
        (_, e, t, _), = compare({"run": (lambda: model(ex), lambda: tm(tx), 50)}, rounds=9)
    print(f"{ember.__file__}: package {e * 1e3:.3f} ms, torch eager {t * 1e3:.3f} ms, "
          f"package/torch {e / t:.2f}, max |diff| {diff:.1e}")


if __name__ == "__main__":
    main()

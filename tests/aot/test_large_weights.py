"""Weights are used in place from the package's memory map: loading a package with 48 MB of
weights adds no anonymous memory, and running it adds far less than the weights' size (their
pages are file-backed, shared with the page cache).  Measured in a fresh process."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import ember
import ember.nn as nn
from ember.export import export

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import sys, numpy as np, ember, ember.aot
def anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
x = ember.tensor(np.load(sys.argv[2]))
a0 = anon()
m = ember.aot.load_package(sys.argv[1])
a1 = anon()
y = m(x)
a2 = anon()
np.save(sys.argv[3], y.numpy())
print(a1 - a0, a2 - a1)
"""


def test_weights_are_not_copied_in_memory(tmp_path):
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                          nn.Linear(2048, 2048)).eval()
    x = ember.randn(2, 2048)
    ep = export(model, (x,))
    pkg = ember.aot.compile_and_package(ep, package_path=str(tmp_path / "big.pt2"))
    weights = sum(p.numel() * 4 for p in model.parameters())
    assert weights > 48e6 and os.path.getsize(pkg) > weights
    np.save(tmp_path / "x.npy", x.numpy())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD, pkg, str(tmp_path / "x.npy"),
                          str(tmp_path / "y.npy")], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    load_growth, run_growth = (int(v) for v in out.stdout.split())
    assert load_growth < 8e6, load_growth           # nothing read, nothing copied
    assert run_growth < weights / 4, run_growth      # weights read in place
    want = ep.module()(x).detach().numpy()
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-4, atol=1e-4)

"""The C runner: examples/aot_c/app.c compiled with gcc against ``python -m ember.aot``'s
include and lib dirs, run without Python, compared with ``ep.module()``."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.export import Dim, export

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "aot_c"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def _dirs():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = [subprocess.run([sys.executable, "-m", "ember.aot", flag], capture_output=True,
                          text=True, env=env, check=True).stdout.strip()
           for flag in ("--include-dir", "--lib-dir")]
    assert (Path(out[0]) / "ember" / "aot" / "runner.h").exists()
    assert (Path(out[1]) / "libember_aot.so").exists()
    return out


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    sys.path.insert(0, str(EXAMPLE))
    try:
        import build_package
    finally:
        sys.path.remove(str(EXAMPLE))
    d = tmp_path_factory.mktemp("aot_c")
    pkg = build_package.build(str(d / "mlp.pt2"))
    inc, lib = _dirs()
    exe = d / "app"
    subprocess.run(["gcc", "-Wall", "-Werror", str(EXAMPLE / "app.c"), f"-I{inc}", f"-L{lib}",
                    f"-Wl,-rpath,{lib}", "-lember_aot", "-ldl", "-o", str(exe)], check=True)
    return exe, pkg, build_package.make_model()


@pytest.mark.parametrize("batch", [1, 3, 40])
def test_c_app_matches_ep_module(app, batch, tmp_path):
    exe, pkg, model = app
    env = {"PATH": os.environ.get("PATH", ""), "TMPDIR": str(tmp_path)}
    out = subprocess.run([str(exe), pkg, str(batch)], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0] == f"shape {batch} 4"
    got = np.array([float(v) for v in lines[1:] if v], np.float32).reshape(batch, 4)
    x = ((np.arange(batch * 8) % 7) * 0.25 - 0.5).astype(np.float32).reshape(batch, 8)
    ep = export(model, (ember.randn(2, 8),), dynamic_shapes=({0: Dim("batch")},))
    want = ep.module()(ember.tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert "inputs 1 outputs 1" in out.stderr
    assert list(tmp_path.iterdir()) == []  # the library's temp folder is gone


def test_c_app_reports_a_missing_model(app):
    exe, pkg, _ = app
    out = subprocess.run([str(exe), pkg, "2", "nope"], capture_output=True, text=True)
    assert out.returncode == 1
    assert "has no model 'nope'" in out.stderr

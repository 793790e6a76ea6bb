"""The minifier on AOT packaging (docs/minifier.md, docs/aot.md): a package build that fails
with ``inductor_configs={"aot_inductor.dump_minifier": True}`` writes minifier_launcher.py
with the program's graph, weights and example inputs; running it writes repro.py, a few ops
that fail the same way.  The failure comes from the test-only codegen injection."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ember
import ember.nn as nn
from ember.compiler import minifier
from ember.config import config
from ember.errors import CompileError
from ember.export import export

ROOT = Path(__file__).resolve().parents[2]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = (self.fc(x) * 2).tanh()
        return (h.relu() + x).sigmoid().exp() - 1


def test_failed_build_writes_a_launcher_that_shrinks_to_the_culprit(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_MINIFIER_DIR", str(tmp_path))
    monkeypatch.setattr(config, "inject_bug_testing_only", "compile_error")
    ember.manual_seed(0)
    ep = export(Net(), (ember.randn(4, 8),))
    with pytest.raises(CompileError):
        ember.aot.compile_and_package(ep, package_path=str(tmp_path / "m.pt2"),
                                      inductor_configs={"aot_inductor.dump_minifier": True})
    launcher = tmp_path / "minifier_launcher.py"
    assert launcher.exists()
    assert "KIND = 'compile'" in launcher.read_text()
    env = dict(os.environ, PYTHONPATH=str(ROOT), EMBER_MINIFIER_DIR=str(tmp_path),
               EMBER_INJECT_BUG_TESTING_ONLY="compile_error")
    env.pop("EMBER_MINIFIER", None)
    out = subprocess.run([sys.executable, str(launcher)], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    ns: dict = {"__name__": "not_main", "__file__": str(tmp_path / "repro.py")}
    exec(compile((tmp_path / "repro.py").read_text(), "repro.py", "exec"), ns)
    small = ns["GRAPH"]
    assert 1 <= len(small) <= 5 and "relu" in small.ops(), small.ops()


def test_without_the_option_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_MINIFIER_DIR", str(tmp_path))
    monkeypatch.delenv("EMBER_MINIFIER", raising=False)
    monkeypatch.setattr(config, "inject_bug_testing_only", "compile_error")
    ep = export(Net(), (ember.randn(4, 8),))
    with pytest.raises(CompileError):
        ember.aot.compile_and_package(ep, package_path=str(tmp_path / "m.pt2"))
    assert not (tmp_path / "minifier_launcher.py").exists()


def test_a_broken_hook_only_warns(tmp_path, monkeypatch):
    def broken(*a, **kw):
        raise KeyError("oops")

    monkeypatch.setattr(minifier, "maybe_dump", broken)
    monkeypatch.setattr(config, "inject_bug_testing_only", "compile_error")
    ep = export(Net(), (ember.randn(4, 8),))
    with pytest.warns(RuntimeWarning, match="minifier hook failed"):
        with pytest.raises(CompileError):
            ember.aot.compile_and_package(ep, package_path=str(tmp_path / "m.pt2"),
                                          inductor_configs={"aot_inductor.dump_minifier": True})

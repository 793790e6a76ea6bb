"""The ``ember`` command."""

from __future__ import annotations

import subprocess
import sys


def test_ember_info_runs():
    out = subprocess.run([sys.executable, "-m", "ember", "info"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for field in ("ember", "python", "numpy", "ml_dtypes", "threads", "blas", "compiler"):
        assert any(line.startswith(field) for line in out.stdout.splitlines()), out.stdout


def test_ember_without_command_prints_help():
    out = subprocess.run([sys.executable, "-m", "ember"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "info" in out.stdout


def test_demo_learns_quickly():
    import io

    from ember.demo import run
    buf = io.StringIO()
    losses = run(steps=60, batch=8, block=32, out=buf, sample_chars=20)
    text = buf.getvalue()
    assert "tokens/s" in text and "sample:" in text
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert last < first - 0.8, (first, last)  # from ~4.5 (uniform over 92 chars) downwards

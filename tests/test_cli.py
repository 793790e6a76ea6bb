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

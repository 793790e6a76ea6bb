"""The thread pools' wait policy that ``import ember`` sets (ember/_memory.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_VARS = ("OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT", "EMBER_WAIT_POLICY")
_CHILD = ("import json, os, ember; print(json.dumps({k: os.environ.get(k) for k in "
          "('OMP_WAIT_POLICY', 'OPENBLAS_THREAD_TIMEOUT')}))")


def _child(**env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in _VARS}
    base["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", _CHILD], env={**base, **env},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("env, want", [
    ({}, {"OMP_WAIT_POLICY": None, "OPENBLAS_THREAD_TIMEOUT": "4"}),
    ({"OPENBLAS_THREAD_TIMEOUT": "20"}, {"OMP_WAIT_POLICY": None,
                                         "OPENBLAS_THREAD_TIMEOUT": "20"}),
    ({"EMBER_WAIT_POLICY": "keep"}, {"OMP_WAIT_POLICY": None,
                                     "OPENBLAS_THREAD_TIMEOUT": None}),
])
def test_wait_policy_defaults(env: dict, want: dict) -> None:
    assert _child(**env) == want


def test_set_before_numpy_loads_openblas() -> None:
    # ember/__init__.py sets the policy before its first NumPy import: the order is the point
    import ember
    src = open(ember.__file__).read()
    assert src.index("tune_wait_policy()") < src.index("import numpy")

"""Every kernel-language test runs in both modes: compiled to C and interpreted on NumPy."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from ember.config import config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kernels"


def load_example(name: str):
    """Import ``examples/kernels/<name>.py`` as a module."""
    mod = sys.modules.get(f"ember_kernel_example_{name}")
    if mod is None:
        spec = importlib.util.spec_from_file_location(f"ember_kernel_example_{name}",
                                                      EXAMPLES / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    return mod


@pytest.fixture(params=["c", "interpret"])
def mode(request):
    saved = config.kernel_interpret
    config.kernel_interpret = request.param == "interpret"
    yield request.param
    config.kernel_interpret = saved

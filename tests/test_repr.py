"""``repr`` matches PyTorch's (with ``ember.`` for ``torch.``)."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CASES = {
    "floats": lambda: np.array([1.5, -2.25, 3.0], np.float32),
    "ints_as_float": lambda: np.array([1.0, 2.0, 300.0], np.float32),
    "sci": lambda: np.array([1e-5, 1.0, 2e9], np.float32),
    "int64": lambda: np.arange(12).reshape(3, 4),
    "int32": lambda: np.arange(5, dtype=np.int32),
    "uint8": lambda: np.arange(4, dtype=np.uint8),
    "bool": lambda: np.array([True, False]),
    "float64": lambda: np.linspace(-1, 1, 7),
    "scalar": lambda: np.array(3.25, np.float32),
    "scalar_int": lambda: np.array(7),
    "empty": lambda: np.zeros((0,), np.float32),
    "empty2d": lambda: np.zeros((2, 0), np.float64),
    "nan_inf": lambda: np.array([np.nan, np.inf, -np.inf, 1.5], np.float32),
    "big3d": lambda: np.random.default_rng(0).standard_normal((4, 5, 6)).astype(np.float32),
    "summarized": lambda: np.arange(2000, dtype=np.float32).reshape(40, 50),
    "wide": lambda: np.random.default_rng(1).standard_normal(30).astype(np.float32) * 100,
    "float16": lambda: np.array([0.1, 2.5], np.float16),
    "zeros": lambda: np.zeros(3, np.float32),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_repr_matches_torch(name):
    arr = CASES[name]()
    e = ember.tensor(arr)
    t = torch.tensor(arr)
    assert repr(e) == repr(t).replace("torch.", "ember.")


def test_repr_bfloat16_and_grad():
    e = ember.tensor([1.0, 2.0], dtype=ember.bfloat16)
    t = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    assert repr(e) == repr(t).replace("torch.", "ember.")
    e = ember.tensor([1.0, 2.0], requires_grad=True)
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    assert repr(e) == repr(t)
    assert repr(e * 2) == repr(t * 2)

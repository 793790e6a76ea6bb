"""Structural comparison of ember results with torch results (collate outputs, batches)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ember.tensor import Tensor


def assert_same(ours: Any, theirs: Any, path: str = "batch") -> None:
    """``ours`` (ember) matches ``theirs`` (torch): same container types and keys, tensors with
    the same shape, dtype name and values, other leaves equal."""
    if isinstance(theirs, Tensor):   # ember against ember (e.g. workers against no workers)
        assert isinstance(ours, Tensor), f"{path}: expected a Tensor, got {type(ours)}"
        assert tuple(ours.shape) == tuple(theirs.shape), f"{path}: shape"
        assert ours.dtype is theirs.dtype, f"{path}: dtype {ours.dtype} vs {theirs.dtype}"
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=path)
        return
    torch = sys.modules.get("torch")  # a torch tensor can only come from an imported torch
    if torch is not None and isinstance(theirs, torch.Tensor):
        assert isinstance(ours, Tensor), f"{path}: expected a Tensor, got {type(ours)}"
        assert tuple(ours.shape) == tuple(theirs.shape), f"{path}: shape"
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], \
            f"{path}: dtype {ours.dtype} vs {theirs.dtype}"
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=path)
        return
    assert type(ours) is type(theirs), f"{path}: type {type(ours)} vs {type(theirs)}"
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs), f"{path}: keys"
        for k in theirs:
            assert_same(ours[k], theirs[k], f"{path}[{k!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), f"{path}: length"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(theirs, np.ndarray):
        np.testing.assert_array_equal(ours, theirs, err_msg=path)
    else:
        assert ours == theirs, f"{path}: {ours!r} vs {theirs!r}"

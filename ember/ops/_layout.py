"""Layout arithmetic of a tensor's NumPy array: PyTorch's strides, contiguity and the
storage a view lies in (behind ``Tensor.stride``, ``is_contiguous`` and ``storage_offset``)."""

from __future__ import annotations

import numpy as np


def canonical_strides(shape: tuple, strides: tuple) -> tuple:
    """Strides of size-1 (and empty) dims are free in NumPy; report PyTorch's values for
    them: the contiguous stride where the tensor is otherwise contiguous."""
    out = list(strides)
    expected = 1
    for i in range(len(shape) - 1, -1, -1):
        if shape[i] == 1 or 0 in shape:
            out[i] = expected
        expected *= max(shape[i], 1)
    return tuple(out)


def is_contiguous(shape: tuple, strides: tuple) -> bool:
    if 0 in shape:
        return True  # PyTorch: every empty tensor is contiguous
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def storage_root(arr: np.ndarray) -> np.ndarray:
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def storage_offset(arr: np.ndarray) -> int:
    root = storage_root(arr)
    start = root.__array_interface__["data"][0]
    if root.ndim and any(s < 0 for s in root.strides):
        start += sum((n - 1) * s for n, s in zip(root.shape, root.strides) if s < 0)
    return (arr.__array_interface__["data"][0] - start) // arr.itemsize

"""Public safetensors helpers (``save_file``, ``load_file``, ``save``, ``load``), matching the
``safetensors.torch`` API on ember tensors."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ember import dtypes as _dt
from ember.serialization import _safetensors as _st
from ember.serialization import _torch_writer as _tw
from ember.serialization._errors import SerializationError
from ember.tensor import Tensor, _wrap

__all__ = ["save_file", "load_file", "save", "load"]


def _arrays(tensors: dict[str, Tensor]) -> dict[str, np.ndarray]:
    if not isinstance(tensors, dict):
        raise SerializationError(
            f"[safetensors] expected a dict of str to Tensor, got {type(tensors).__name__}")
    out = {}
    for k, v in tensors.items():
        if not isinstance(k, str):
            raise SerializationError(f"[safetensors] key {k!r} is not a str")
        if not isinstance(v, Tensor):
            raise SerializationError(
                f"[safetensors] value of {k!r} is a {type(v).__name__}, expected a Tensor")
        out[k] = v._data
    return out


def _tensors(arrays: dict[str, np.ndarray]) -> dict[str, Tensor]:
    return {k: _wrap(a, _dt.from_numpy_dtype(a.dtype)) for k, a in arrays.items()}


def save(tensors: dict[str, Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """The bytes of a safetensors file holding ``tensors``."""
    return _st.serialize(_arrays(tensors), metadata)


def load(data: bytes) -> dict[str, Tensor]:
    """Tensors from the bytes of a safetensors file."""
    return _tensors(_st.deserialize(data)[0])


def save_file(tensors: dict[str, Tensor], filename: str | os.PathLike,
              metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` to ``filename`` in the safetensors format."""
    data = save(tensors, metadata)
    with _tw.atomic_open(filename) as fh:  # a failed write keeps the old file
        fh.write(data)


def load_file(filename: str | os.PathLike, device: Any = "cpu") -> dict[str, Tensor]:
    """Read a safetensors file into a dict of ember tensors (everything lives on the CPU)."""
    with open(filename, "rb") as fh:
        return load(fh.read())


def load_metadata(filename: str | os.PathLike) -> dict[str, str] | None:
    """The ``__metadata__`` of a safetensors file (None if it has none)."""
    with open(filename, "rb") as fh:
        return _st.deserialize(fh.read())[1]

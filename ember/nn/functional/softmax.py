"""``F.softmax``, ``F.log_softmax``, ``F.softmin``: the fused ops of ``ember.softmax`` with
PyTorch's functional signature (an omitted ``dim`` picks the legacy implicit dim, with a
warning, as in PyTorch)."""

from __future__ import annotations

import warnings
from typing import Any

from ember import dtypes as dt
from ember._frontend import scan as _scan
from ember.tensor import Tensor

__all__ = ["softmax", "log_softmax", "softmin"]


def _implicit_dim(name: str, ndim: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype: dt.dtype | None = None) -> Tensor:
    """Softmax along ``dim``: ``F.softmax(logits, dim=-1)``."""
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim)
    return _scan.softmax(input, dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
                dtype: dt.dtype | None = None) -> Tensor:
    """Log-softmax along ``dim``."""
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim)
    return _scan.log_softmax(input, dim, dtype=dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype: dt.dtype | None = None) -> Any:
    """Softmax of ``-input``."""
    if dim is None:
        dim = _implicit_dim("softmin", input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    return _scan.softmax(-input, dim)

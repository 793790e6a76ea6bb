"""Interop with other array libraries: DLPack import (export is ``Tensor.__dlpack__``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes as dt
from ember.errors import EmberTypeError
from ember.tensor import Tensor, _wrap

__all__ = ["from_dlpack"]


def from_dlpack(ext_tensor: Any) -> Tensor:
    """A tensor sharing memory with any object that implements ``__dlpack__`` (or a capsule).

    >>> import numpy as np, ember
    >>> ember.from_dlpack(np.arange(3.0))
    tensor([0., 1., 2.], dtype=ember.float64)
    """
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    if not hasattr(ext_tensor, "__dlpack__"):
        raise EmberTypeError(
            f"[from_dlpack] expected an object with __dlpack__ and __dlpack_device__, got "
            f"{type(ext_tensor).__name__}"
        )
    dev = ext_tensor.__dlpack_device__()
    if int(dev[0]) != 1:
        raise EmberTypeError(f"[from_dlpack] only CPU tensors (device type 1) can be imported; "
                             f"got device {tuple(dev)}")
    try:
        arr = np.from_dlpack(ext_tensor)
    except (BufferError, TypeError) as e:
        raise EmberTypeError(f"[from_dlpack] cannot import this tensor: {e}") from None
    return _wrap(arr, dt.from_numpy_dtype(arr.dtype, "from_dlpack"))

"""``repr`` of tensors in PyTorch's format."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes as dt


def tensor_repr(t: Any) -> str:
    a = t._data
    if t.dtype in (dt.float16, dt.bfloat16):
        a = a.astype(np.float32)
    body = np.array2string(a, separator=", ", prefix="tensor(")
    extras = []
    default_ok = t.dtype in (dt.get_default_dtype(), dt.int64, dt.bool)
    if not default_ok or a.size == 0 and t.dtype is not dt.get_default_dtype():
        extras.append(f"dtype={t.dtype!r}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"

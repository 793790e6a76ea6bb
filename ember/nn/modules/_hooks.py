"""Hook handles shared by ``Module`` and its containers."""

from __future__ import annotations

import weakref
from typing import Any


class RemovableHandle:
    """A handle whose ``remove()`` takes its hook out of the dicts it was registered in."""

    next_id: int = 0

    def __init__(self, hooks_dict: Any, *, extra_dict: Any = None) -> None:
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        if extra_dict is None:
            extra_dict = []
        elif isinstance(extra_dict, dict):
            extra_dict = [extra_dict]
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dict)

    def remove(self) -> None:
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *args: Any) -> None:
        self.remove()


_LEGACY_NAMES = {
    "float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
    "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor",
    "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor", "bool": "BoolTensor",
}


def typename(obj: Any) -> str:
    """PyTorch's ``torch.typename`` with ember's names."""
    from ember.tensor import Tensor
    if isinstance(obj, Tensor):
        return f"ember.{_LEGACY_NAMES.get(obj.dtype.name, 'Tensor')}"
    module = getattr(type(obj), "__module__", "") or ""
    qual = type(obj).__qualname__
    if module in ("", "builtins"):
        return qual
    return f"{module}.{qual}"


def addindent(s: str, num_spaces: int) -> str:
    """Indent every line after the first (blank lines stay empty), as nn.Module's repr does."""
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    rest = [(num_spaces * " ") + line if line.strip() else "" for line in lines]
    return first + "\n" + "\n".join(rest)

"""Why a captured graph missed the cache: readable "guard failure" lines.

A cache entry of a segment matches a capture when their structural keys are equal and every
number the entry specializes is equal (``api.Entry.matches``).  When none matches, these helpers
say, for each cached entry, what differs, in PyTorch's words where there is one
(``tensor 'x' size mismatch at index 0. expected 3, actual 4``).  Tensor inputs are named after
the compiled function's arguments (or ``self.<name>`` for a module's parameters and buffers)
when the input is one of them.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from ember.tensor import Tensor


def input_names(fn: Any, module: Any, args: tuple, kwargs: dict) -> dict:
    """``id(array) -> name`` for the tensors among a call's arguments (and a module's state)."""
    names: dict = {}
    target = module.forward if module is not None else fn
    try:
        bound = inspect.signature(target).bind_partial(*args, **kwargs)
        items = list(bound.arguments.items())
        params = inspect.signature(target).parameters
        for name, v in items:  # *args / **kwargs collect into a tuple / dict
            kind = params[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                items.extend(v.items())
    except (TypeError, ValueError):
        items = [(f"args[{i}]", a) for i, a in enumerate(args)] + list(kwargs.items())
    for name, v in items:
        _collect(name, v, names, 2)
    if module is not None:
        for name, t in list(module.named_parameters()) + list(module.named_buffers()):
            _collect(f"self.{name}", t, names, 0)
    return names


def _collect(name: str, v: Any, names: dict, depth: int) -> None:
    if isinstance(v, Tensor):
        arr = v._data
        if not isinstance(arr, np.ndarray):  # a lazy payload: the concrete array it came from
            arr = arr.value if arr.value is not None else arr.owner
        if isinstance(arr, np.ndarray):
            names.setdefault(id(arr), name)
    elif depth and isinstance(v, (list, tuple)):
        for i, y in enumerate(v):
            _collect(f"{name}[{i}]", y, names, depth - 1)
    elif depth and isinstance(v, dict):
        for k, y in v.items():
            _collect(f"{name}[{k!r}]", y, names, depth - 1)


def _tensor_name(cap: Any, k: int, names: dict) -> str:
    name = names.get(id(cap.arrays[k]))
    return f"tensor '{name}'" if name else f"graph input {k}"


def _slot_owner(cap: Any, slot: int) -> tuple | None:
    """(input index, dim) when ``slot`` is a size slot, else None."""
    for k, (shape, _) in enumerate(cap.inputs):
        if slot < len(shape):
            return k, slot
        slot -= len(shape)
    return None


def slot_diff(cap: Any, slot: int, expected: Any, names: dict) -> str:
    owner = _slot_owner(cap, slot)
    actual = cap.values[slot]
    if owner is not None:
        k, d = owner
        return (f"{_tensor_name(cap, k, names)} size mismatch at index {d}. expected "
                f"{expected}, actual {actual}")
    return (f"Python scalar ({cap.where[slot]}) mismatch. expected {expected!r}, "
            f"actual {actual!r}")


def entry_diff(entry: Any, key: tuple, cap: Any, names: dict) -> str:
    """What about ``cap`` fails ``entry`` (compiled for structural key ``key``)."""
    if key != cap.key:
        return structure_diff(key, cap.key, cap, names)
    diffs = []
    for k, (mine, theirs) in enumerate(zip(entry.values, cap.values)):
        if k in entry.generic:
            if cap.kinds[k] == "size" and theirs in (0, 1):
                owner = _slot_owner(cap, k)
                who = (f"{_tensor_name(cap, owner[0], names)} size at index {owner[1]}"
                       if owner else cap.where[k])
                diffs.append(f"{who} is {theirs} (sizes 0 and 1 are always specialized)")
        elif mine != theirs or type(mine) is not type(theirs):
            diffs.append(slot_diff(cap, k, mine, names))
    more = f" (and {len(diffs) - 4} more)" if len(diffs) > 4 else ""
    return "; ".join(diffs[:4]) + more


def structure_diff(old: tuple, new: tuple, cap: Any, names: dict) -> str:
    (oi, on, _), (ni, nn, _) = old, new
    if len(oi) != len(ni):
        return f"number of tensor inputs differs. expected {len(oi)}, actual {len(ni)}"
    for k, (a, b) in enumerate(zip(oi, ni)):
        for j, what in enumerate(("rank", "dtype", "contiguity")):
            if a[j] != b[j]:
                return (f"{_tensor_name(cap, k, names)} {what} mismatch. expected {a[j]}, "
                        f"actual {b[j]}")
    for i, (a, b) in enumerate(zip(on, nn)):
        if a[0] != b[0]:
            return f"op {i} differs. expected {a[0]}, actual {b[0]}"
        if a != b:
            return f"op {i} ({a[0]}) has different non-numeric arguments"
    if len(on) != len(nn):
        return f"number of ops differs. expected {len(on)}, actual {len(nn)}"
    return "the set of live outputs differs"


__all__ = ["entry_diff", "input_names", "slot_diff", "structure_diff"]

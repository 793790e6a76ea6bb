"""What the compiler tells the user: why a graph missed the cache, and where a graph broke.

A cache entry of a segment matches a capture when their structural keys are equal and every
number the entry specializes is equal (``api.Entry.matches``).  When none matches, these helpers
say, for each cached entry, what differs, in PyTorch's words where there is one
(``tensor 'x' size mismatch at index 0. expected 3, actual 4``).  Tensor inputs are named after
the compiled function's arguments (or ``self.<name>`` for a module's parameters and buffers)
when the input is one of them.

The rest formats graph breaks (``EMBER_LOGS=graph_breaks`` and ``GraphBreakError``) with the
user's stack cut to the compiled function's frames.
"""

from __future__ import annotations

import inspect
import os
import sys
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


def entry_diff(entry: Any, key: tuple, cap: Any, names: dict, backend: Any = None) -> str:
    """What about ``cap`` fails ``entry`` (compiled for structural key ``key``)."""
    if backend is not None and entry.backend is not backend:
        return (f"backend mismatch. expected {_backend_name(entry.backend)}, actual "
                f"{_backend_name(backend)}")
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


def _backend_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


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


def user_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the innermost frame outside ember."""
    f = sys._getframe(1)
    level = 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_EMBER_DIR):
        f = f.f_back
        level += 1
    return level


_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def trim_stack(stack: list, key: tuple) -> list:
    """The user stack from the compiled function's frame inwards (PyTorch reports the frames
    of the compiled code, not its callers)."""
    _, name, filename, _ = key
    for i, fs in enumerate(stack):
        if fs.filename == filename and fs.name == name:
            return stack[i:]
    return stack


def format_break_error(reason: str, stack: list) -> str:
    """The message of a ``GraphBreakError``: reason, user stack with source lines, a hint."""
    lines = [f"graph break: {reason}", "  from user code:"]
    for fs in stack:
        lines.append(f'    File "{fs.filename}", line {fs.lineno}, in {fs.name}')
        if fs.line:
            lines.append(f"      {fs.line.strip()}")
    lines.append("  Graph breaks are errors here (fullgraph=True or "
                 "ember.compiler.error_on_graph_break(True)). Hint: keep the computation in "
                 "tensor ops (e.g. ember.where instead of an `if` on a tensor), move this code "
                 "out of the compiled function, or allow breaks in this region with "
                 "error_on_graph_break(False) (not under fullgraph=True).")
    return "\n".join(lines)


def format_break(reason: str, stack: list) -> str:
    """One ``EMBER_LOGS=graph_breaks`` entry, in the shape of PyTorch's."""
    where = stack[-1] if stack else None
    lines = [f"Graph break in user code at {where.filename}:{where.lineno}" if where
             else "Graph break", f"Graph Break Reason: {reason}", "User code traceback:"]
    for fs in stack:
        lines.append(f'  File "{fs.filename}", line {fs.lineno}, in {fs.name}')
        if fs.line:
            lines.append(f"    {fs.line.strip()}")
    return "\n".join(lines)


def call_has_tensors(fn: Any, args: tuple, kwargs: dict) -> bool:
    """Whether a tensor or module is among a call's arguments or ``fn``'s closure."""
    fn = inspect.unwrap(fn)
    cells = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if _cell_ok(c)]
    return any(holds_tensor(v, 2) for v in (*args, *kwargs.values(), *cells))


def _cell_ok(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
    except ValueError:
        return False
    return True


def holds_tensor(v: Any, depth: int) -> bool:
    if isinstance(v, Tensor) or is_module(v):
        return True
    if depth and isinstance(v, (list, tuple)):
        return any(holds_tensor(y, depth - 1) for y in v)
    if depth and isinstance(v, dict):
        return any(holds_tensor(y, depth - 1) for y in v.values())
    return False


def is_module(obj: Any) -> bool:
    return any(c.__name__ == "Module" and c.__module__.startswith("ember.nn")
               for c in type(obj).__mro__)


__all__ = ["call_has_tensors", "entry_diff", "format_break", "format_break_error",
           "holds_tensor", "input_names", "is_module", "slot_diff", "structure_diff",
           "trim_stack", "user_stacklevel"]

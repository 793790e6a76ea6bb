"""Does a graph fail on a backend, and how: a compile error, a runtime error, or an accuracy
mismatch against the eager backend (the reference, ARCHITECTURE.md §3).

``failure_of(graph, arrays, scalars)`` compiles ``graph`` with a backend (the C backend by
default, reached through the backend registry), runs it and compares it with
``graph.run`` (eager); it returns a ``Failure`` or None.  A runtime error counts only when eager
runs the same graph fine (otherwise it is the input's fault, and eager raises the same error),
and so does a C entry that reported an error the C backend then hid by rerunning eagerly
(``CompiledGraph.entry_errors``).
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from ember.compiler.frontend.backends import lookup_backend
from ember.compiler.frontend.graph import Graph
from ember.dtypes import from_numpy_dtype
from ember.errors import EmberRuntimeError

KINDS = ("compile", "runtime", "accuracy")

# torch.testing.assert_close's defaults (rtol, atol) by dtype; exact for the others
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5),
               "complex128": (1e-7, 1e-7)}

_SUPPRESS = [0]  # > 0 while the minifier itself compiles (no launcher about a launcher)


class AccuracyError(EmberRuntimeError):
    """A compiled graph's result differs from the eager backend's beyond the dtype's
    tolerance (PyTorch's ``torch._dynamo.debug_utils.AccuracyError``)."""


@dataclass
class Failure:
    """How a graph failed: ``kind`` (one of ``KINDS``), the error's class name and the error."""

    kind: str
    error_type: str
    error: BaseException

    def matches(self, kind: str, error_type: str) -> bool:
        return self.kind == kind and self.error_type == error_type


@contextlib.contextmanager
def suppressed() -> Iterator[None]:
    """While active, the C backend compiles without the minifier's checks."""
    _SUPPRESS[0] += 1
    try:
        yield
    finally:
        _SUPPRESS[0] -= 1


def is_suppressed() -> bool:
    return _SUPPRESS[0] > 0


def tolerance(np_dtype: np.dtype) -> tuple[float, float]:
    """(rtol, atol) for comparing values of ``np_dtype`` (torch.testing's defaults)."""
    return _TOLERANCES.get(np.dtype(np_dtype).name, (0.0, 0.0))


def compare(outs: list, refs: list) -> str | None:
    """The first difference between compiled ``outs`` and eager ``refs`` (shape, dtype or
    values beyond ``tolerance``; NaNs must sit at the same places), or None."""
    if len(outs) != len(refs):
        return f"{len(outs)} outputs, eager gives {len(refs)}"
    for k, (o, r) in enumerate(zip(outs, refs)):
        o, r = np.asarray(o), np.asarray(r)
        if o.shape != r.shape:
            return f"output {k}: shape {o.shape}, eager gives {r.shape}"
        if o.dtype != r.dtype:
            return f"output {k}: dtype {o.dtype}, eager gives {r.dtype}"
        rtol, atol = tolerance(r.dtype)
        if r.dtype.kind in "fc" or r.dtype.name == "bfloat16" or r.dtype.name.startswith("float8"):
            wide = np.complex128 if r.dtype.kind == "c" else np.float64
            a, b = o.astype(wide), r.astype(wide)
            ok = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = o == r
        if not np.all(ok):
            bad = np.argwhere(~np.asarray(ok))
            at = tuple(int(i) for i in bad[0])
            got, want = o[at].item(), r[at].item()
            return (f"output {k}: {len(bad)} of {o.size} elements differ beyond rtol={rtol}, "
                    f"atol={atol}; first at {at}: compiled {got!r}, eager {want!r}")
    return None


def resolve_backend(backend: Any) -> Callable:
    """A backend: a registered name (``"c"``), a callable, or ``"module:function"``."""
    if isinstance(backend, str) and ":" in backend:
        mod, _, attr = backend.partition(":")
        return getattr(importlib.import_module(mod), attr)
    return lookup_backend(backend)


def _examples(arrays: list) -> list:
    from ember.tensor import _wrap
    return [_wrap(np.asarray(a), from_numpy_dtype(np.asarray(a).dtype)) for a in arrays]


def run_compiled(fn: Callable, arrays: list, scalars: list) -> list:
    """Call a backend's compiled function (either calling convention of the registry)."""
    if getattr(fn, "_ember_arrays", False):
        return list(fn(arrays, list(scalars)))
    from ember.tensor import Tensor
    outs = fn(*_examples(arrays), *scalars)
    if isinstance(outs, Tensor):
        outs = (outs,)
    return [o._data if isinstance(o, Tensor) else np.asarray(o) for o in outs]


def failure_of(graph: Graph, arrays: list, scalars: list, backend: Any = "c",
               level: int = 4) -> Failure | None:
    """Compile and run ``graph`` on ``backend`` and compare with eager (``level`` >= 4);
    the failure found, or None."""
    with suppressed():
        try:
            fn = resolve_backend(backend)(graph, _examples(arrays))
        except Exception as e:  # noqa: BLE001 - any error while compiling is a compile failure
            return Failure("compile", type(e).__name__, e)
        if level < 2:
            return None
        before = getattr(fn, "entry_errors", 0)
        try:
            outs = run_compiled(fn, arrays, scalars)
        except Exception as e:  # noqa: BLE001
            return runtime_failure(graph, arrays, scalars, e)
        if getattr(fn, "entry_errors", 0) > before:
            e = fn.last_entry_error
            return Failure("runtime", type(e).__name__, e)
        if level < 4:
            return None
        return accuracy_failure(graph, arrays, scalars, outs)


def runtime_failure(graph: Graph, arrays: list, scalars: list,
                    error: BaseException) -> Failure | None:
    """``error`` raised by a compiled call as a runtime failure, unless eager raises too."""
    try:
        graph.run(list(arrays), list(scalars))
    except Exception:  # noqa: BLE001 - the input's fault: eager raises as well
        return None
    return Failure("runtime", type(error).__name__, error)


def accuracy_failure(graph: Graph, arrays: list, scalars: list, outs: list) -> Failure | None:
    """A mismatch of compiled ``outs`` with eager's results, as a Failure (or None)."""
    refs = graph.run(list(arrays), list(scalars))
    diff = compare(outs, refs)
    if diff is None:
        return None
    e = AccuracyError(f"[minifier] compiled result differs from eager: {diff}")
    return Failure("accuracy", type(e).__name__, e)


__all__ = ["AccuracyError", "Failure", "KINDS", "compare", "failure_of", "resolve_backend",
           "run_compiled", "suppressed", "tolerance"]

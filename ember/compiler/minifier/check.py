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
from ember.compiler.frontend.graph import Graph, Node
from ember.dtypes import by_name, from_numpy_dtype
from ember.dtypes import dtype as DType
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


def _is_float(d: np.dtype) -> bool:
    return d.kind == "f" or d.name == "bfloat16" or d.name.startswith("float8")


def _rmse(a: np.ndarray, b: np.ndarray) -> float:
    finite = np.isfinite(a) & np.isfinite(b)
    return float(np.sqrt(np.mean((a[finite] - b[finite]) ** 2))) if finite.any() else 0.0


def compare(outs: list, refs: list, refs64: list | None = None) -> str | None:
    """The first difference between compiled ``outs`` and eager ``refs``, or None.

    Shapes and dtypes must agree, NaNs sit at the same places, and values agree within
    ``tolerance``.  With ``refs64`` (eager in float64), a float output outside the tolerance
    still passes when it is about as close to the float64 values as eager is (PyTorch's
    ``same(ref, res, fp64_ref)``: root-mean-square error at most 2x eager's, 3x for
    float16/bfloat16, plus atol/10), as where C sums in double and eager in float32."""
    if len(outs) != len(refs):
        return f"{len(outs)} outputs, eager gives {len(refs)}"
    for k, (o, r) in enumerate(zip(outs, refs)):
        o, r = np.asarray(o), np.asarray(r)
        if o.shape != r.shape:
            return f"output {k}: shape {o.shape}, eager gives {r.shape}"
        if o.dtype != r.dtype:
            return f"output {k}: dtype {o.dtype}, eager gives {r.dtype}"
        rtol, atol = tolerance(r.dtype)
        if _is_float(r.dtype) or r.dtype.kind == "c":
            wide = np.complex128 if r.dtype.kind == "c" else np.float64
            a, b = o.astype(wide), r.astype(wide)
            ok = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = o == r
        if np.all(ok):
            continue
        if refs64 is not None and _is_float(r.dtype) and np.all(np.isnan(a) == np.isnan(b)):
            ref64 = np.asarray(refs64[k], dtype=np.float64)
            mult = 3.0 if r.dtype.itemsize == 2 else 2.0
            if _rmse(ref64, a) <= mult * _rmse(ref64, b) + atol / 10:
                continue
        bad = np.argwhere(~np.asarray(ok))
        at = tuple(int(i) for i in bad[0])
        got, want = o[at].item(), r[at].item()
        return (f"output {k}: {len(bad)} of {o.size} elements differ beyond rtol={rtol}, "
                f"atol={atol}" + ("" if refs64 is None else
                                  " and further from float64 than eager") +
                f"; first at {at}: compiled {got!r}, eager {want!r}")
    return None


def float64_graph(graph: Graph) -> Graph:
    """``graph`` with every float dtype (inputs, dtype parameters, specs) made float64."""
    f64 = by_name("float64")

    def widen(x: Any) -> Any:
        if isinstance(x, DType):
            return f64 if x.is_floating_point and not x.is_complex else x
        if type(x) in (tuple, list):
            return type(x)(widen(y) for y in x)
        if type(x) is dict:
            return {k: widen(v) for k, v in x.items()}
        return x

    nodes = [Node(n.op, n.args, widen(n.params), widen(n.specs)) for n in graph.nodes]
    return Graph(widen(graph.inputs), nodes, graph.outputs, graph.num_scalars,
                 graph.scalar_kinds)


def eager_float64(graph: Graph, arrays: list, scalars: list) -> list | None:
    """Eager's results with float inputs and dtypes made float64, or None when eager cannot
    run the graph that way."""
    wide = [np.asarray(a).astype(np.float64) if _is_float(np.asarray(a).dtype) else a
            for a in arrays]
    try:
        return float64_graph(graph).run(wide, list(scalars))
    except Exception:  # noqa: BLE001 - an op without a float64 kernel: no such reference
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
    if compare(outs, refs) is None:
        return None
    diff = compare(outs, refs, eager_float64(graph, arrays, scalars))
    if diff is None:
        return None
    e = AccuracyError(f"[minifier] compiled result differs from eager: {diff}")
    return Failure("accuracy", type(e).__name__, e)


__all__ = ["AccuracyError", "Failure", "KINDS", "compare", "failure_of", "resolve_backend",
           "run_compiled", "suppressed", "tolerance"]

"""``draft_export``: export that reports every issue instead of failing (PyTorch 2.13's
``torch.export.draft_export``).

Two kinds of issue are found and worked around, as PyTorch does:

- **Constraint violations** of named ``Dim``s / ``Dim.DYNAMIC``: the export is redone with every
  such dim turned into ``Dim.AUTO`` (keeping its range); each violation becomes a
  ``GUARD_ADDED`` failure carrying the new ``dynamic_shapes``.
- **Data-dependent code** (``if x.sum() > 0``, ``.item()`` used as a Python number,
  ``.tolist()``): the trace runs the graph recorded so far on the example inputs to get the real
  value (PyTorch's "propagate real tensors"), specializes to it and reports a
  ``DATA_DEPENDENT_ERROR`` with the user's line, the expression and the value used.

Example::

    >>> ep = ember.export.draft_export(model, (x,))
    >>> print(ep._report)          # "WARNING: 1 issue(s) found during export ..."
    >>> ep._report.failures[0].failure_type
    <FailureType.DATA_DEPENDENT_ERROR: 2>
"""

from __future__ import annotations

import operator
from enum import IntEnum
from typing import Any

from ember import _lazy
from ember._dynamo.exc import UserError, UserErrorType
from ember.ops.registry import bind
from ember.sym import _sympy, _user_frame


class FailureType(IntEnum):
    MISSING_FAKE_KERNEL = 1
    DATA_DEPENDENT_ERROR = 2
    GUARD_ADDED = 3
    MISMATCHED_FAKE_KERNEL = 4

    def __str__(self) -> str:
        return self.name


class FailureReport:
    """One issue: ``failure_type``, ``data`` (a dict as PyTorch's), ``xfail``."""

    def __init__(self, failure_type: FailureType, data: dict, xfail: bool = False) -> None:
        self.failure_type = failure_type
        self.data = data
        self.xfail = xfail

    def __repr__(self) -> str:
        return (f"FailureReport(failure_type={self.failure_type}, xfail={self.xfail}, "
                f"data={self.data})")

    def print(self, str_to_filename: dict | None = None) -> str:
        d = self.data
        if self.failure_type == FailureType.GUARD_ADDED:
            return f"""Guard Added.
    A guard was added during tracing, which might've resulted in some incorrect
    tracing or constraint violation error.
    Specifically, this guard was added: {d["expr"]}
    This occurred at the following stacktrace: {d["user_stack"]}

    Because of this, we have modified the dynamic shapes structure to be the
    following. You can also use ember.export.Dim.AUTO instead to specify your
    dynamic shapes, and we will automatically infer the dynamism for you.
    ```
    dynamic_shapes = {d["new_dynamic_shapes"]}
    ```
"""
        return f"""Data dependent error.
    When exporting, we were unable to evaluate the value of `{d["expr"]}`.
    This was encountered {d["occurrences"]} times.
    This occurred at the following user stacktrace: {d["user_stack"]}

    As a result, it was specialized to a constant (e.g. `{d["result"]}` in the 1st occurrence).

    Please add `ember._check(...)` to the original code to assert this data-dependent assumption.
"""


class DraftExportReport:
    """``ep._report``: ``failures`` (``FailureReport``s); ``successful()``; ``str()`` prints
    them as PyTorch does."""

    def __init__(self, failures: list, str_to_filename: dict | None = None,
                 expressions_created: dict | None = None, op_profiles: dict | None = None):
        self.failures = failures
        self.str_to_filename = str_to_filename or {}
        self.expressions_created = expressions_created or {}
        self.op_profiles = op_profiles or {}

    def successful(self) -> bool:
        return all(f.xfail for f in self.failures)

    def __repr__(self) -> str:
        return f"DraftExportReport({self.failures})"

    def __str__(self) -> str:
        bar = "#" * 99
        if self.successful():
            return (f"\033[92m\n{bar}\nCongratulations: No issues are found during export, and "
                    f"it was able to soundly produce a graph.\nYou can now change back to "
                    f"ember.export.export()\n{bar}\n\033[0m")
        out = (f"\033[93m\n{bar}\nWARNING: {len(self.failures)} issue(s) found during export, "
               f"and it was not able to soundly produce a graph.\nPlease follow the instructions "
               f"to fix the errors.\n{bar}\n\n")
        for i, f in enumerate(self.failures):
            out += f"{i + 1}. {f.print(self.str_to_filename)}\n"
        return out + "\033[0m"

    def apply_suggested_fixes(self) -> None:
        raise NotImplementedError("Not implemented yet")


class RealValues:
    """The graph recorded so far run on the example inputs (``Tracer.draft``): gives a traced
    tensor's real value where the code needs it, and records the data-dependent issue."""

    def __init__(self, tracer: Any, inputs: dict, env: Any) -> None:
        from ember.export._runtime import Bindings
        self.tracer = tracer
        self.inputs = inputs          # placeholder name -> real tensor (user inputs)
        sp = _sympy()
        self.vals = Bindings({s: sp.Integer(v) for s, v in env.var_to_val.items()})
        self.env: dict = {}
        self.done = 0
        self.failures: dict = {}      # (expr, line) -> FailureReport
        self.asserted: set = set()    # nodes whose value has an assert node

    def value(self, node: Any, what: str) -> Any:
        """The NumPy value of ``node``; reports ``what`` needed it."""
        saved, _lazy.STATE.trace = _lazy.STATE.trace, None
        try:
            self._run_to(node)
        finally:
            _lazy.STATE.trace = saved
        arr = self.env[node.name]._data
        fn, line, func = _user_frame()
        key = (what, fn, line)
        f = self.failures.get(key)
        if f is None:
            self.failures[key] = FailureReport(FailureType.DATA_DEPENDENT_ERROR, {
                "expr": node.format_node().strip(), "needed_by": what, "occurrences": 1,
                "user_stack": f"{fn}:{line} in {func}",
                "result": arr.reshape(()).item() if arr.size == 1 else arr.tolist(),
                "frame_locals": None, "stack": []})
        else:
            f.data["occurrences"] += 1
        if node.name not in self.asserted:  # the program holds for this value only
            self.asserted.add(node.name)
            self._assert(node, arr)
        return arr

    def _assert(self, node: Any, arr: Any) -> None:
        from ember.export._functions import ASSERT_VALUE
        graph = self.tracer.graph
        shown = arr.reshape(()).item() if arr.size == 1 else "the example's values"
        a = graph.create_node("call_function", ASSERT_VALUE, (node, arr.copy(), ""), {})
        a.args = (node, arr.copy(), f"Runtime assertion failed: {node.name} differs from "
                  f"{shown}, the value draft_export specialized the program to (node "
                  f"'{a.name}')")
        a.meta["val"] = None

    def _run_to(self, target: Any) -> None:
        from ember.export._runtime import _bind_unbacked, concrete
        from ember.export.graph import Node
        nodes = self.tracer.graph.nodes
        lifted = dict(self._lifted())
        while target.name not in self.env:
            n = nodes[self.done]
            self.done += 1
            if n.op == "placeholder":
                v = self.inputs.get(n.name)
                self.env[n.name] = lifted[n.name] if v is None else v
                continue
            if n.op != "call_function":
                continue

            def get(x: Any) -> Any:
                if isinstance(x, Node):
                    return self.env[x.name]
                if isinstance(x, (list, tuple)) and any(isinstance(y, Node) for y in x):
                    return type(x)(get(y) for y in x)
                return concrete(x, self.vals)
            args = [get(a) for a in n.args]
            if n.target is operator.getitem:
                self.env[n.name] = args[0][args[1]]
            elif n.target.kind == "export_function":
                self.env[n.name] = n.target.run(n, args, self.vals)
                continue
            else:
                tags = getattr(n.target, "tags", ())
                if "strided_reshape" in tags and not args[0].is_contiguous():
                    args[0] = args[0].contiguous()
                self.env[n.name] = bind(n.target, *args, **concrete(n.kwargs, self.vals))
            _bind_unbacked(n, self.env[n.name], self.vals)

    def _lifted(self) -> list:
        from ember.dtypes import from_numpy_dtype
        from ember.tensor import _wrap
        out = [(name, _wrap(arr, from_numpy_dtype(arr.dtype)))
               for name, _kind, _target, arr in self.tracer.lifted.values()]
        out += list(self.tracer.constants)
        return out


def _to_auto(spec: Any) -> Any:
    from ember.export.dynamic_shapes import Dim, _DimHint
    if isinstance(spec, Dim):
        return Dim.AUTO(min=spec.min, max=None if spec.max >= 2**62 else spec.max)
    if isinstance(spec, _DimHint) and spec.type == "DYNAMIC":
        return Dim.AUTO(min=spec.min, max=spec.max)
    if isinstance(spec, dict):
        return {k: _to_auto(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(_to_auto(v) for v in spec)
    return spec


def draft_export(mod: Any, args: tuple, kwargs: dict | None = None, *,
                 dynamic_shapes: Any = None, preserve_module_call_signature: tuple = (),
                 strict: bool = False,
                 prefer_deferred_runtime_asserts_over_guards: bool = False) -> Any:
    """Export ``mod`` like ``export`` but report the issues found instead of failing: the
    returned program's ``_report`` (a ``DraftExportReport``) lists them.

    >>> ep = draft_export(model, (x,), dynamic_shapes={"x": {0: Dim("b")}})
    >>> ep._report.successful()
    False
    """
    from ember.export._export import _export
    from ember.export.dynamic_shapes import ShapesCollection
    failures: list = []
    if isinstance(dynamic_shapes, ShapesCollection):
        dynamic_shapes = dynamic_shapes.dynamic_shapes(mod, args, kwargs or {})
    try:
        ep, real = _export(mod, args, kwargs, dynamic_shapes=dynamic_shapes, draft=True,
                           preserve=preserve_module_call_signature)
    except UserError as e:
        if e.error_type != UserErrorType.CONSTRAINT_VIOLATION:
            raise
        new_shapes = _to_auto(dynamic_shapes)
        for name, msg, _fix, where in getattr(e, "violations", ()):
            failures.append(FailureReport(FailureType.GUARD_ADDED, {
                "expr": msg, "symbol": name,
                "user_stack": where.strip(" ()").removeprefix("guard from ") or "<unknown>",
                "new_dynamic_shapes": new_shapes, "frame_locals": None, "stack": []}))
        ep, real = _export(mod, args, kwargs, dynamic_shapes=new_shapes, draft=True,
                           preserve=preserve_module_call_signature)
    failures += list(real.failures.values())
    ep._report = DraftExportReport(failures)
    if not ep._report.successful():
        import logging
        logging.getLogger("ember.export").warning(
            "\n%s\nWARNING: %d issue(s) found during export, and it was not able to soundly "
            "produce a graph.\nYou can view the errors in python by inspecting "
            "`print(ep._report)`.\n", "#" * 99, len(failures))
    return ep


__all__ = ["DraftExportReport", "FailureReport", "FailureType", "draft_export"]

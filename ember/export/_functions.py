"""Graph targets that are not registry ops: ``item`` (a tensor's value as an unbacked SymInt,
``u0``) and ``_assert_scalar`` (a runtime assert that ``ember._check`` records on unbacked sizes),
as PyTorch's ``aten.item`` / ``aten._assert_scalar`` nodes."""

from __future__ import annotations

from typing import Any, Callable

from ember.sym import SymBool, _sympy, pyexpr


class ExportFunction:
    """A named graph target run by ``ep.module()`` with the symbol values: ``run(node, args,
    vals)`` gives the node's value."""

    kind = "export_function"

    def __init__(self, name: str, run: Callable) -> None:
        self.name = name
        self.run = run

    def __repr__(self) -> str:
        return f"ember.export.{self.name}"


def _item(node: Any, args: list, vals: dict) -> Any:
    v = args[0].item()
    u = node.meta["val"]
    if hasattr(u, "expr") and u.expr.is_Symbol and u.expr not in vals:
        vals[u.expr] = _sympy().Integer(int(v))
    return v


def _assert_scalar(node: Any, args: list, vals: dict) -> None:
    cond, msg = args  # run_graph evaluated the relation already (a bool)
    if isinstance(cond, SymBool):
        cond = vals.truth(cond.rel)
    if not cond:
        rel = node.args[0].rel if isinstance(node.args[0], SymBool) else node.args[0]
        raise RuntimeError(msg or f"Runtime assertion failed for expression {pyexpr(rel)} on "
                           f"node '{node.name}'")
    return None


def _cond(node: Any, args: list, vals: dict) -> tuple:
    from ember._frontend.cond import cond
    from ember.export._runtime import run_graph
    pred, true_graph, false_graph, operands = args

    def branch(sub: Any) -> Callable:
        def run(*ops: Any) -> tuple:
            values = {name: v for name, v in zip(sub.inputs, ops) if name is not None}
            return tuple(run_graph(sub.graph, values, vals))
        return run
    # through ember.cond: eagerly one branch; re-exporting ep.module() records a cond again
    return tuple(cond(pred, branch(true_graph), branch(false_graph), tuple(operands)))


def _assert_value(node: Any, args: list, vals: dict) -> None:
    """draft_export specialized the program to a value it read: check it still holds."""
    import numpy as np
    t, expected, msg = args
    if not np.array_equal(np.asarray(t.detach().numpy()), np.asarray(expected)):
        raise RuntimeError(msg)
    return None


ITEM = ExportFunction("item", _item)
ASSERT_VALUE = ExportFunction("_assert_tensor_value", _assert_value)
COND = ExportFunction("cond", _cond)
ASSERT_SCALAR = ExportFunction("_assert_scalar", _assert_scalar)
FUNCTIONS = {f.name: f for f in (ITEM, ASSERT_SCALAR, ASSERT_VALUE, COND)}

__all__ = ["ASSERT_SCALAR", "ASSERT_VALUE", "COND", "FUNCTIONS", "ITEM", "ExportFunction"]

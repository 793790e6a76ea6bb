"""A float tensor's ``.item()`` while exporting: an unbacked ``SymFloat`` (PyTorch's ``zuf0``).

Its value is only known when the program runs.  Arithmetic with numbers and other
``SymFloat``s records ``sym_*`` nodes (PyTorch records ``operator.mul`` ...), and a pointwise
binary op that takes it as its scalar (``x * t.item()``) records the op with the ``item`` node
as that argument; ``ep.module()`` computes the Python float when it runs.  Code that needs its
value while tracing (``float(v)``, ``if v > 0``) raises ``GuardOnDataDependentSymNode``.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from ember import _lazy
from ember.errors import GuardOnDataDependentSymNode
from ember.export._functions import FUNCTIONS, ExportFunction
from ember.sym import _user_frame


def _run_op(fn: Any) -> Any:
    def run(node: Any, args: list, vals: Any) -> float:
        return fn(*args)
    return run


_OPS = {name: ExportFunction(f"sym_{name}", _run_op(fn)) for name, fn in (
    ("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
    ("truediv", operator.truediv), ("pow", operator.pow), ("neg", operator.neg))}
FUNCTIONS.update({f.name: f for f in _OPS.values()})


class SymFloat:
    """A float only known at run time: ``node`` produces it; ``expr`` is its symbol
    (``zuf0``) for a value read with ``.item()``, else None."""

    ember_sym_scalar = True  # the frontend passes it to a binary op as its scalar argument

    def __init__(self, node: Any, expr: Any = None) -> None:
        self.node = node
        self.expr = expr
        node.meta["val"] = self

    def _op(self, name: str, *args: Any) -> SymFloat:
        tr = _lazy.STATE.trace
        ins = tuple(a.node if isinstance(a, SymFloat) else _number(a, name) for a in args)
        node = tr.graph.create_node("call_function", _OPS[name], ins, {})
        fn, line, func = _user_frame()
        node.meta["stack_trace"] = f'File "{fn}", line {line}, in {func}'
        return SymFloat(node)

    def __add__(self, o: Any) -> SymFloat: return self._op("add", self, o)
    def __radd__(self, o: Any) -> SymFloat: return self._op("add", o, self)
    def __sub__(self, o: Any) -> SymFloat: return self._op("sub", self, o)
    def __rsub__(self, o: Any) -> SymFloat: return self._op("sub", o, self)
    def __mul__(self, o: Any) -> SymFloat: return self._op("mul", self, o)
    def __rmul__(self, o: Any) -> SymFloat: return self._op("mul", o, self)
    def __truediv__(self, o: Any) -> SymFloat: return self._op("truediv", self, o)
    def __rtruediv__(self, o: Any) -> SymFloat: return self._op("truediv", o, self)
    def __pow__(self, o: Any) -> SymFloat: return self._op("pow", self, o)
    def __rpow__(self, o: Any) -> SymFloat: return self._op("pow", o, self)
    def __neg__(self) -> SymFloat: return self._op("neg", self)
    def __pos__(self) -> SymFloat: return self

    def _needs_value(self, what: str) -> Any:
        fn, line, func = _user_frame()
        raise GuardOnDataDependentSymNode(
            f"Could not guard on data-dependent expression {self} ({what}): a float read with "
            f".item() is only known when the program runs.\nCaused by: ({fn}:{line} in "
            f"{func})", None)

    def __bool__(self) -> bool: return self._needs_value("bool()")
    def __float__(self) -> float: return self._needs_value("float()")
    def __int__(self) -> int: return self._needs_value("int()")
    def __eq__(self, o: Any) -> Any: return self._needs_value("==")
    def __ne__(self, o: Any) -> Any: return self._needs_value("!=")
    def __lt__(self, o: Any) -> Any: return self._needs_value("<")
    def __le__(self, o: Any) -> Any: return self._needs_value("<=")
    def __gt__(self, o: Any) -> Any: return self._needs_value(">")
    def __ge__(self, o: Any) -> Any: return self._needs_value(">=")
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return str(self.expr) if self.expr is not None else f"SymFloat({self.node.name})"


def _number(a: Any, name: str) -> Any:
    if type(a).__name__ == "SymInt":  # a size times a float: specialize the size (as ember
        return float(a)                # specializes float arithmetic with sizes)
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        return a
    raise TypeError(f"unsupported operand type for {name}: SymFloat and {type(a).__name__}")


def float_item(tr: Any, node: Any) -> SymFloat:
    """``.item()`` of a float tensor: an ``item`` node whose value is an unbacked float
    symbol ``zuf<k>`` with range ``(-oo, oo)`` (listed in ``range_constraints``)."""
    from ember.sym import ValueRange, _sympy
    env = tr.env
    k = env._n_unbacked_float
    env._n_unbacked_float = k + 1
    sym = _sympy().Symbol(f"zuf{k}")
    env.var_to_range[sym] = ValueRange(-math.inf, math.inf, True)
    env.var_to_source[sym] = sym.name
    return SymFloat(node, sym)


__all__ = ["SymFloat", "float_item"]

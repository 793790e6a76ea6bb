"""Running an exported graph: input guards (PyTorch's ``AssertionError: Guard failed: ...``) and
an interpreter that binds each node's op on real tensors (eager, or recorded by
``ember.compile`` when the caller compiles ``ep.module()``)."""

from __future__ import annotations

import operator
from typing import Any

from ember.ops.registry import bind
from ember.sym import SymBool, SymInt, _sympy, pyexpr

INF = float("inf")


def _expr(x: Any) -> Any:
    sp = _sympy()
    return x.expr if isinstance(x, SymInt) else sp.Integer(int(x))


class InputGuards:
    """Checks real inputs against the exported shapes: static sizes, symbol ranges, relations
    (``y.size()[0] == x.size()[0]``) and the guards tracing recorded (``x.size()[0] % 4 == 0``).

    ``dims``: per user-input leaf ``(guard source, [sympy expr per dim])``; ``ranges``:
    ``{symbol: ValueRange}``; ``guards``: sympy relations over the range symbols."""

    def __init__(self, dims: list, ranges: dict, guards: list) -> None:
        self.dims = dims
        self.ranges = ranges
        self.guards = guards
        self.names: dict = {}       # symbol -> the first input size that is it
        self.expr_names: dict = {}  # derived expression -> the first input size that is it
        for src, exprs in dims:
            for d, e in enumerate(exprs):
                table = self.names if e.is_Symbol else self.expr_names
                if not e.is_Integer and e not in table:
                    table[e] = f"{src}.size()[{d}]"

    def _fail(self, text: str) -> None:
        raise AssertionError(f"Guard failed: {text}")

    def _bind_symbol(self, e: Any, size: int, where: str, vals: dict) -> bool:
        """Solve ``e == size`` for its one unknown symbol when ``e`` is linear in it."""
        free = [s for s in e.free_symbols if s not in vals]
        if len(free) != 1:
            return False
        (s,) = free
        a = e.coeff(s)
        rest = (e - a * s).xreplace(vals)
        if not (a.is_Integer and rest.is_Integer and int(a) > 0):
            return False
        a, rest = int(a), int(rest)
        if (size - rest) % a:
            self._fail(f"({where} - {rest}) % {a} == 0")
        q = (size - rest) // a
        vals[s] = q.expr if isinstance(q, SymInt) else _sympy().Integer(q)
        return True

    def check(self, tensors: list) -> Bindings:
        """The symbol values the inputs give; raises ``AssertionError`` on the first failure.
        Inputs with symbolic sizes (re-exporting ``ep.module()``) bind symbols to expressions
        of the outer trace, and the checks become guards there."""
        sp = _sympy()
        vals = Bindings()
        todo = []
        for (src, exprs), t in zip(self.dims, tensors):
            shape = tuple(t.shape)
            if len(shape) != len(exprs):
                self._fail(f"{src}.dim() == {len(exprs)}")
            for d, (e, n) in enumerate(zip(exprs, shape)):
                where = f"{src}.size()[{d}]"
                if isinstance(n, SymInt):
                    vals.env = n.env
                if e.is_Integer:
                    if int(e) != n:
                        self._fail(f"{where} == {int(e)}")
                elif e.is_Symbol and e not in vals:
                    vals[e] = n.expr if isinstance(n, SymInt) else sp.Integer(n)
                else:
                    todo.append((e, n, where))
        for e, n, where in todo:  # symbols seen only through derived dims (2*s0 + 1)
            if e.free_symbols - vals.keys():
                if not self._bind_symbol(e, n, where, vals):
                    raise AssertionError(f"[export] cannot solve {where} = {e} for its symbols")
        for e, n, where in todo:
            if vals.value(e) != n:
                self._fail(f"{where} == {pyexpr(e, self.names)}")
        for e, vr in self.ranges.items():  # derived sizes first (2*s0), as PyTorch checks
            if e.free_symbols - vals.keys():
                continue
            v = vals.value(e)
            name = self.expr_names.get(e) or pyexpr(e, self.names)
            if vr.lower != -INF and v < int(vr.lower):
                self._fail(f"{name} >= {int(vr.lower)}")
            if vr.upper != INF and v > int(vr.upper):
                self._fail(f"{name} <= {int(vr.upper)}")
        for g in self.guards:
            if g.free_symbols <= vals.keys() and not vals.truth(g):
                self._fail(pyexpr(g, self.names))
        return vals


class Bindings(dict):
    """``{symbol: value}``: sympy Integers, or expressions of an outer trace's ``env``."""

    env: Any = None

    def value(self, e: Any) -> Any:
        v = e.xreplace(self)
        return int(v) if v.is_Integer else SymInt(v, self.env)

    def truth(self, rel: Any) -> bool:
        sp = _sympy()
        r = rel.xreplace(self)
        if r in (sp.true, sp.false):
            return bool(r)
        return self.env.evaluate(r)


def concrete(x: Any, vals: dict) -> Any:
    """``x`` with every ``SymInt`` evaluated at the symbol values ``vals``."""
    if isinstance(x, SymInt):
        return vals.value(x.expr)
    if isinstance(x, SymBool):  # a cond predicate on sizes
        return vals.truth(x.rel)
    t = type(x)
    if t is tuple or t is list:
        return t(concrete(y, vals) for y in x)
    if t is dict:
        return {k: concrete(v, vals) for k, v in x.items()}
    return x


def _bind_unbacked(node: Any, value: Any, vals: dict) -> None:
    """Learn the data-dependent sizes (``u0``) a node's result has."""
    val = node.meta.get("val")
    for fake, res in zip(val if isinstance(val, tuple) else (val,),
                         value if isinstance(val, tuple) else (value,)):
        for d, n in zip(getattr(fake, "shape", ()), res.shape):
            if isinstance(d, SymInt) and d.expr.is_Symbol and d.expr not in vals:
                vals[d.expr] = n.expr if isinstance(n, SymInt) else _sympy().Integer(n)


def run_graph(graph: Any, values: dict, vals: dict, call_module: Any = None) -> list:
    """Run ``graph``; ``values`` maps placeholder names to tensors; returns the outputs.
    ``call_module(node, args, vals)`` runs the ``call_module`` nodes of an unflattened graph."""
    from ember.export.graph import Node
    env: dict = {}

    def get(x: Any) -> Any:
        if isinstance(x, Node):
            return env[x.name]
        if isinstance(x, (list, tuple)) and any(isinstance(y, Node) for y in x):
            return type(x)(get(y) for y in x)
        return concrete(x, vals)

    for n in graph.nodes:
        if n.op == "placeholder":
            env[n.name] = values[n.name]
        elif n.op == "call_module":
            env[n.name] = call_module(n, [get(a) for a in n.args], vals)
        elif n.op == "call_function":
            args = [get(a) for a in n.args]
            if n.target is operator.getitem:
                env[n.name] = args[0][args[1]]
            elif n.target.kind == "export_function":  # item, _assert_scalar
                env[n.name] = n.target.run(n, args, vals)
                continue
            elif "strided_reshape" in getattr(n.target, "tags", ()) and not args[0].is_contiguous():
                # tracing saw values, not layouts (a fake tensor is contiguous): a reshape that
                # traced as a view of a transposed value copies here, as eager reshape does
                args[0] = args[0].contiguous()
                env[n.name] = bind(n.target, *args, **concrete(n.kwargs, vals))
            else:
                env[n.name] = bind(n.target, *args, **concrete(n.kwargs, vals))
            _bind_unbacked(n, env[n.name], vals)
        else:
            return [get(a) for a in n.args[0]]
    raise AssertionError("[export] graph without an output node")

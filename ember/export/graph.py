"""The exported graph, walkable as a ``torch.fx.Graph`` is: ``graph.nodes`` in order, each with
``op`` (``placeholder``, ``call_function``, ``output``), ``name``, ``target`` (an ``OpDef``,
``operator.getitem``, or the placeholder's name), ``args``, ``kwargs`` (the op's parameters),
``users`` and ``meta["val"]`` (an ``ember.sym.FakeTensor`` whose dynamic sizes are ``SymInt``s).

Example::

    >>> for n in ep.graph.nodes:
    ...     print(n.op, n.name, n.target, [a.name for a in n.all_input_nodes])
    placeholder p_fc_weight p_fc_weight []
    placeholder p_fc_bias p_fc_bias []
    placeholder x x []
    call_function linear <OpDef linear (extern)> ['x', 'p_fc_weight', 'p_fc_bias']
    output output output ['linear']
"""

from __future__ import annotations

import operator
from typing import Any, Iterator

from ember.dtypes import dtype as DType
from ember.sym import FakeTensor

_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
          "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8",
          "bool": "b8"}


def short_dtype(d: DType) -> str:
    return _SHORT.get(d.name, d.name)


def fmt_val(v: Any) -> str:
    """``f32[s0, 8]`` for a fake tensor (a tuple of them for multi-output nodes)."""
    if isinstance(v, FakeTensor):
        return f"{short_dtype(v.dtype)}[{', '.join(str(s) for s in v.shape)}]"
    if isinstance(v, tuple):
        return "(" + ", ".join(fmt_val(x) for x in v) + ")"
    return repr(v)


class Node:
    """One node; see the module docstring."""

    def __init__(self, graph: Graph, op: str, name: str, target: Any, args: tuple,
                 kwargs: dict) -> None:
        self.graph = graph
        self.op = op
        self.name = name
        self.target = target
        self.args = args
        self.kwargs = kwargs
        self.meta: dict = {}
        self.users: dict[Node, None] = {}
        for a in self.all_input_nodes:
            a.users[self] = None

    @property
    def all_input_nodes(self) -> list[Node]:
        out: list[Node] = []
        _collect(self.args, out)
        _collect(tuple(self.kwargs.values()), out)
        return out

    def format_node(self) -> str:
        if self.op == "placeholder":
            return f"%{self.name} : [num_users={len(self.users)}] = placeholder[target={self.name}]"
        return (f"%{self.name} : [num_users={len(self.users)}] = {self.op}[target="
                f"{_target_str(self.target)}](args = {_fmt(self.args)}, kwargs = "
                f"{_fmt(self.kwargs)})")

    def __repr__(self) -> str:
        return self.name


def _collect(x: Any, out: list) -> None:
    if isinstance(x, Node):
        out.append(x)
    elif isinstance(x, (tuple, list)):
        for y in x:
            _collect(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _collect(y, out)


def _target_str(t: Any) -> str:
    if t is operator.getitem:
        return "operator.getitem"
    if getattr(t, "kind", None) == "export_function":
        return repr(t)
    return f"ember.ops.{t.name}" if hasattr(t, "kind") else str(t)


def _fmt(x: Any) -> str:
    if isinstance(x, Node):
        return x.name
    if isinstance(x, tuple):
        return "(" + "".join(_fmt(y) + ", " for y in x).rstrip(" ") + ")" if len(x) == 1 else \
            "(" + ", ".join(_fmt(y) for y in x) + ")"
    if isinstance(x, list):
        return "[" + ", ".join(_fmt(y) for y in x) + "]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {_fmt(v)}" for k, v in x.items()) + "}"
    if isinstance(x, DType):
        return f"ember.{x.name}"
    return repr(x)


class Graph:
    """An ordered list of nodes (placeholders first, one ``output`` last)."""

    def __init__(self) -> None:
        self._nodes: list[Node] = []
        self._names: dict[str, int] = {}
        self.on_create: Any = None

    @property
    def nodes(self) -> list[Node]:
        return list(self._nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def unique_name(self, base: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "v"
        k = self._names.get(base)
        if k is None:
            self._names[base] = 0
            return base
        while True:
            k += 1
            cand = f"{base}_{k}"
            if cand not in self._names:
                self._names[base] = k
                self._names[cand] = 0
                return cand

    def create_node(self, op: str, target: Any, args: tuple = (), kwargs: dict | None = None,
                    name: str | None = None) -> Node:
        if name is None:
            name = target.name if hasattr(target, "kind") else \
                "getitem" if target is operator.getitem else str(target)
        n = Node(self, op, self.unique_name(name), target, args, kwargs or {})
        if self.on_create is not None:  # export's tracer: the module stack of the node
            self.on_create(n)
        self._nodes.append(n)
        return n

    def placeholder(self, name: str) -> Node:
        return self.create_node("placeholder", name, name=name)

    def output(self, outs: tuple) -> Node:
        return self.create_node("output", "output", (outs,), name="output")

    def find_nodes(self, *, op: str, target: Any = None) -> list[Node]:
        return [n for n in self._nodes if n.op == op and (target is None or n.target is target
                                                          or n.target == target)]

    @property
    def output_node(self) -> Node:
        return self._nodes[-1]

    def python_code(self, *, annotate: bool = True) -> str:
        """``def forward(self, x: "f32[s0, 8]", ...)`` with one line per node."""
        ph = [n for n in self._nodes if n.op == "placeholder"]
        sig = ", ".join(f'{n.name}: "{fmt_val(n.meta.get("val"))}"' if annotate else n.name
                        for n in ph)
        lines = [f"def forward(self, {sig}):"]
        for n in self._nodes:
            if n.op == "call_function":
                ann = f': "{fmt_val(n.meta.get("val"))}"' if annotate else ""
                if n.target is operator.getitem:
                    rhs = f"{n.args[0].name}[{n.args[1]}]"
                else:
                    parts = [_fmt(a) for a in n.args] + \
                        [f"{k}={_fmt(v)}" for k, v in n.kwargs.items()]
                    rhs = f"{_target_str(n.target)}({', '.join(parts)})"
                lines.append(f"    {n.name}{ann} = {rhs}")
            elif n.op == "output":
                lines.append(f"    return {_fmt(tuple(n.args[0]))}")
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return "graph():\n" + "\n".join("    " + n.format_node() for n in self._nodes)

    def print_tabular(self) -> None:
        for n in self._nodes:
            print(n.op, n.name, _target_str(n.target), _fmt(n.args), _fmt(n.kwargs))

    def lint(self) -> None:
        """Every argument is an earlier node of this graph; one output node, last."""
        seen: set = set()
        for i, n in enumerate(self._nodes):
            for a in n.all_input_nodes:
                if id(a) not in seen:
                    raise AssertionError(f"[Graph.lint] node {n.name} uses {a.name}, which is "
                                         "not an earlier node of this graph")
            if n.op == "output" and i != len(self._nodes) - 1:
                raise AssertionError("[Graph.lint] the output node is not last")
            seen.add(id(n))
        if not self._nodes or self._nodes[-1].op != "output":
            raise AssertionError("[Graph.lint] the graph has no output node")


__all__ = ["Graph", "Node", "fmt_val", "short_dtype"]

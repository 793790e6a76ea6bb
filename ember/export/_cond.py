"""``ember.cond`` under export: each branch is traced into its own ``Graph`` (a ``SubGraph``),
and one ``cond`` node takes the predicate, both subgraphs and the operands (the given ones,
then the tensors the branches read from outside: parameters, other values), as PyTorch's
``torch.ops.higher_order.cond``."""

from __future__ import annotations

import operator
from typing import Any

from ember._dynamo.exc import UncapturedHigherOrderOpError
from ember.export.graph import Graph, Node
from ember.sym import _user_frame
from ember.tensor import Tensor


class SubGraph:
    """A branch: its ``graph`` and, per operand of the ``cond`` node, the placeholder name that
    receives it (None: the branch does not read it)."""

    def __init__(self, name: str, graph: Graph, inputs: list) -> None:
        self.name = name
        self.graph = graph
        self.inputs = inputs

    def __repr__(self) -> str:
        return self.name

    @property
    def code(self) -> str:
        return self.graph.python_code()


class _Frame:
    def __init__(self) -> None:
        self.map: dict[Node, Node] = {}
        self.extras: list[Node] = []


def _flat_outputs(out: Any, which: str) -> tuple[list, Any]:
    if isinstance(out, Tensor):
        return [out], "T"
    if isinstance(out, (tuple, list)) and all(isinstance(t, Tensor) for t in out):
        return list(out), type(out)
    raise UncapturedHigherOrderOpError(
        f"Expected {which} to return a tensor or a tuple/list of tensors, but got "
        f"{type(out).__name__}")


def _trace_branch(tr: Any, fn: Any, operands: tuple, which: str) -> tuple:
    sub, frame, saved = Graph(), _Frame(), tr.graph
    sub.on_create = saved.on_create
    tr.frames.append(frame)
    tr.graph = sub
    try:
        args = []
        for k, t in enumerate(operands):
            if isinstance(t, Tensor):
                ph = sub.placeholder(f"arg{k}_1")
                args.append(tr.wrap(ph, tuple(t.shape), t.dtype))
            else:
                args.append(t)
        outs, struct = _flat_outputs(fn(*args), which)
        sub.output(tuple(tr.node_of(o) for o in outs))
    finally:
        tr.graph = saved
        tr.frames.pop()
    return sub, frame, outs, struct


def _check_same(t_outs: list, f_outs: list) -> None:
    def meta(ts: list) -> list:
        return [(tuple(t.shape), t.dtype) for t in ts]
    same = len(t_outs) == len(f_outs) and all(
        a.dtype == b.dtype and a.ndim == b.ndim and all(x == y for x, y in zip(a.shape, b.shape))
        for a, b in zip(t_outs, f_outs))
    if not same:
        fn, line, func = _user_frame()
        raise UncapturedHigherOrderOpError(
            f"Expected true_fn_output and false_fn_output to have same metadata but found:\n"
            f"true branch returns {meta(t_outs)}\nfalse branch returns {meta(f_outs)}\n"
            f"Caused by: ({fn}:{line} in {func})")


def trace_cond(tr: Any, pred: Any, true_fn: Any, false_fn: Any, operands: tuple) -> Any:
    from ember.export._functions import COND
    from ember.export._trace import fake_val
    t_sub, t_frame, t_outs, struct = _trace_branch(tr, true_fn, operands, "true_fn")
    f_sub, f_frame, f_outs, _ = _trace_branch(tr, false_fn, operands, "false_fn")
    _check_same(t_outs, f_outs)
    extras = list(dict.fromkeys(t_frame.extras + f_frame.extras))
    subs = []
    for name, sub, frame in (("true_graph", t_sub, t_frame), ("false_graph", f_sub, f_frame)):
        phs = [n.name for n in sub.nodes if n.op == "placeholder"]
        names = [phs[k] if k < len(phs) and phs[k] == f"arg{k}_1" else None
                 for k in range(len(operands))]
        names += [frame.map[e].name if e in frame.map else None for e in extras]
        subs.append(SubGraph(f"{name}_{len(tr.graph.find_nodes(op='call_function', target=COND))}",
                             sub, names))
    ops = tuple(tr.node_of(t) if isinstance(t, Tensor) else t for t in operands)
    ops += tuple(e if e.graph is tr.graph else tr._local(e) for e in extras)
    p = tr.node_of(pred) if isinstance(pred, Tensor) else pred  # a tensor or a SymBool
    node = tr.graph.create_node("call_function", COND, (p, *subs, ops), {})
    fn, line, func = _user_frame()
    node.meta["stack_trace"] = f'File "{fn}", line {line}, in {func}'
    node.meta["val"] = tuple(fake_val(tuple(t.shape), t.dtype) for t in t_outs)
    res = []
    for j, t in enumerate(t_outs):
        g = tr.graph.create_node("call_function", operator.getitem, (node, j))
        res.append(tr.wrap(g, tuple(t.shape), t.dtype))
    return res[0] if struct == "T" else struct(res)


__all__ = ["SubGraph", "trace_cond"]

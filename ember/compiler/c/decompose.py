"""Decompositions: a graph pass that expands ops without a C rule into their primitives.

A composite op with no lowering rule of its own (``lower/registry.rule_for`` is None) and an
``OpDef.decomp`` is replaced, before lowering, by the nodes that running ``decomp`` records:
``decomp(*inputs, **params)`` is called on lazy tensors standing for the node's tensor inputs
(``("i", k)`` refs of a scratch ``Trace``) with gradients off, and the ops it binds become nodes
of the graph, their refs renumbered into it.  The losses (``mse_loss``, ``kl_div``, ...), ``glu``
and ``prelu`` reach C this way; their gradients still come from the op's own ``vjp`` (the
decomposition changes only how the forward is lowered).

Lifted numbers (``Sym``: a learning rate, a bias correction) in a node's params or args are
accepted when its op is tagged ``scalar_passthrough`` (its ``decomp`` hands each number to a
primitive as it is, ``ember/ops/optim_step.py``): ``decomp`` runs on a distinct NaN object in
place of each ``Sym``, and each of those objects found in the recorded nodes is put back as the
``Sym``; a NaN left over (a number computed from a lifted one) keeps the op.
Otherwise a node is kept as it is (an extern) when its params or args hold lifted numbers, its
input sizes are symbolic, or its decomposition cannot be recorded (a graph break, a concrete
constant tensor, an in-place write, a result whose shape or dtype differ from the node's), or
when ``decomp`` returns None (it has no decomposition for these params).

>>> g2 = decompose(graph)                                              # doctest: +SKIP
>>> [n.op.name for n in g2.nodes]                                      # doctest: +SKIP
['sub', 'mul', 'mean']
"""

from __future__ import annotations

from typing import Any

from ember.compiler.c.lower import registry
from ember.compiler.frontend.graph import Graph, Node, Sym, _has_sym
from ember.ops import OPS


def _is_ref(a: Any) -> bool:
    return type(a) is tuple and len(a) >= 2 and a[0] in ("i", "n")


def expandable(n: Node) -> bool:
    """True when ``n``'s op has a ``decomp`` and no C rule of its own."""
    return n.op.decomp is not None and registry.rule_for(n.op) is None


def decompose(graph: Graph) -> Graph:
    """``graph`` with every expandable node replaced by its decomposition (``graph`` itself when
    there is none)."""
    if not any(expandable(n) for n in graph.nodes):
        return graph
    specs = _arg_specs(graph)
    nodes: list[Node] = []
    remap: dict = {}
    for i, n in enumerate(graph.nodes):
        args = tuple(remap.get(a, a) if _is_ref(a) else a for a in n.args)
        sub = _record(n, [specs.get(a) for a in n.args]) if expandable(n) else None
        if sub is None:
            k = len(nodes)
            nodes.append(Node(n.op, args, n.params, n.specs))
            for j in range(len(n.specs)):
                remap[("n", i, j)] = ("n", k, j)
            continue
        sub_nodes, sub_outs = sub
        tensor_args = [a for a in args if _is_ref(a)]
        base = len(nodes)

        def move(r: Any, _t: list = tensor_args, _b: int = base) -> Any:
            if not _is_ref(r):
                return r
            return _t[r[1]] if r[0] == "i" else ("n", _b + r[1], r[2])

        for s in sub_nodes:
            nodes.append(Node(s.op, tuple(move(a) for a in s.args), s.params, s.specs))
        for j, o in enumerate(sub_outs):
            remap[("n", i, j)] = move(o)
    out = Graph(graph.inputs, nodes, [remap.get(o, o) for o in graph.outputs],
                graph.num_scalars, graph.scalar_kinds)
    if hasattr(graph, "lifted"):
        out.lifted = graph.lifted  # type: ignore[attr-defined]
    if graph.mutated:  # outputs that replace inputs (their memory may be donated: inplace.py)
        out.mutated = graph.mutated
    if graph.frozen:   # frozen weights (c/freeze.py); part of the run plan's key
        out.frozen = graph.frozen
    return out


def _arg_specs(graph: Graph) -> dict:
    specs: dict = {("i", k): (tuple(s), d) for k, (s, d) in enumerate(graph.inputs)}
    for i, n in enumerate(graph.nodes):
        for j, (s, d) in enumerate(n.specs):
            specs[("n", i, j)] = (tuple(s), d)
    return specs


def _record(n: Node, arg_specs: list) -> tuple | None:
    """(nodes, output refs) that ``n.op.decomp`` records on lazy stand-ins of ``n``'s tensor
    inputs (refs ``("i", k)``: the k-th tensor argument), or None when it cannot be used."""
    holes: dict = {}
    params, n_args = n.params, n.args
    if _has_sym(params) or any(type(a) is Sym for a in n_args):
        if "scalar_passthrough" not in n.op.tags:
            return None
        params, n_args = _punch(params, holes), tuple(_punch(a, holes) for a in n_args)
    if any(sp is not None and _has_sym(sp[0]) for sp in arg_specs):
        return None
    from ember import _lazy
    from ember.autograd.grad_mode import no_grad
    from ember.errors import GraphBreakError
    from ember.tensor import Tensor, _new

    tr = _lazy.Trace(None)
    ins: list = []
    k = 0
    for a, sp in zip(n_args, arg_specs):
        if not _is_ref(a):
            ins.append(a)
            continue
        t = _new(Tensor)
        t._dtype = sp[1]
        t._version_counter = vc = [0]
        t._data = tr.lazy(("i", k), sp[0], sp[1].np, None, None, vc, 0)
        k += 1
        ins.append(t)
    state = _lazy.STATE
    prev = state.trace
    state.trace = tr
    state.error_on_break.append(True)
    try:
        with no_grad():
            res = n.op.decomp(*ins, **params)
        if res is None:
            return None  # the decomposition declines these params: keep the op
        res = (res,) if isinstance(res, Tensor) else tuple(res)
        outs = [_fresh(tr, t) for t in res]
    except GraphBreakError:
        return None
    finally:
        state.error_on_break.pop()
        state.trace = prev
    if tr.inputs or tr.storages:
        return None  # a concrete constant tensor or an in-place write: keep the op
    got = tuple((tuple(t.shape), t._dtype) for t in res)
    assert got == tuple((tuple(s), d) for s, d in n.specs), (n.op.name, got, n.specs)
    if not holes:
        return tr.nodes, outs
    nodes = []
    for s in tr.nodes:
        args = tuple(a if _is_ref(a) else _fill(a, holes) for a in s.args)
        sub = Node(s.op, args, _fill(s.params, holes), s.specs)
        if _has_nan(sub.args) or _has_nan(sub.params):
            return None  # a number computed from a lifted one: keep the op
        nodes.append(sub)
    return nodes, outs


def _punch(x: Any, holes: dict) -> Any:
    """``x`` with each ``Sym`` replaced by a fresh NaN object (``holes``: its id -> the Sym)."""
    t = type(x)
    if t is Sym:
        h = float("nan")
        holes[id(h)] = (h, x)
        return h
    if t is tuple or t is list:
        return t(_punch(y, holes) for y in x)
    if t is dict:
        return {k: _punch(v, holes) for k, v in x.items()}
    return x


def _fill(x: Any, holes: dict) -> Any:
    """``x`` with the NaN objects of ``holes`` put back as their ``Sym``s."""
    t = type(x)
    if t is float:
        got = holes.get(id(x))
        return got[1] if got is not None and got[0] is x else x
    if t is tuple or t is list:
        return t(_fill(y, holes) for y in x)
    if t is dict:
        return {k: _fill(v, holes) for k, v in x.items()}
    return x


def _has_nan(x: Any) -> bool:
    t = type(x)
    if t is float:
        return x != x
    if t is tuple or t is list:
        return any(_has_nan(y) for y in x)
    if t is dict:
        return any(_has_nan(v) for v in x.values())
    return False


def _fresh(tr: Any, t: Any) -> tuple:
    """The ref of ``t``'s value, copied when it is an input or a view (the op's output was a new
    tensor, and graph outputs must not alias inputs that the op's did not)."""
    ref = tr.ref_of(t)
    if ref[0] == "i" or t._base is not None:
        ref = tr.add_node(OPS.clone, (ref,), {"contiguous": True},
                          ((tuple(t.shape), t._dtype),))[0]
    return ref


__all__ = ["decompose", "expandable"]

"""Graph rewrites that let more exported programs become Python-free model libraries.

``channel_norms``: ``layer_norm`` over dims that are not the trailing ones (what BatchNorm in
train mode records: statistics over ``(N, H, W)`` per channel) lowers to C only when its
weight's broadcast dims are literal 1s, which an exported program with dynamic dims does not
give (the view's sizes are lifted); so for packages it becomes
``permute`` (the normalized dims last) + a contiguous ``clone`` + ``layer_norm`` over the
trailing dims (the fused row kernel, no weight) + ``permute`` back, then ``* weight`` and
``+ bias`` broadcast with ``expand`` in the original layout (eager's order of operations), and
the statistics viewed back to their keepdim shape.  Symbolic sizes come from the exported
graph's node values (new expressions are lifted as runtime ints like the others)."""

from __future__ import annotations

import operator
from typing import Any

from ember.compiler.frontend.graph import Graph, Node, Sym
from ember.ops.nn_norm import LAYER_NORM
from ember.ops.registry import REGISTRY


def _is_ref(a: Any) -> bool:
    return type(a) is tuple and len(a) >= 2 and a[0] in ("i", "n")


def _trailing(dims: Any, nd: int) -> bool:
    return type(dims) is tuple and dims == tuple(range(nd - len(dims), nd))


class _Lifter:
    """Sizes as compiler-graph values: ints, or the ``Sym`` of a lifted expression."""

    def __init__(self, exprs: list) -> None:
        self.exprs = exprs  # appended to in place: the caller's lifted sizes

    def __call__(self, d: Any) -> Any:
        e = getattr(d, "expr", d)
        if isinstance(e, int) or e.is_Integer:
            return int(e)
        if e not in self.exprs:
            self.exprs.append(e)
        return Sym(self.exprs.index(e), "size")


def channel_norms(ep: Any, graph: Graph, exprs: list) -> Graph:
    """``graph`` with every non-trailing ``layer_norm`` rewritten (see the module docstring);
    ``exprs`` (the lifted sizes) grows when a new size expression is needed."""
    calls = [n for n in ep.graph.nodes
             if n.op == "call_function" and n.target is not operator.getitem]
    todo = {i for i, n in enumerate(graph.nodes) if n.op is LAYER_NORM
            and not _trailing(n.params.get("dims"), len(n.specs[0][0]))}
    if not todo or len(calls) != len(graph.nodes):
        return graph
    lift = _Lifter(exprs)
    nodes: list = []
    remap: dict = {}
    for i, n in enumerate(graph.nodes):
        args = tuple(remap.get(a, a) if _is_ref(a) else a for a in n.args)
        if i not in todo:
            for j in range(len(n.specs)):
                remap[("n", i, j)] = ("n", len(nodes), j)
            nodes.append(Node(n.op, args, n.params, n.specs))
            continue
        shape = tuple(lift(d) for d in calls[i].args[0].meta["val"].shape)
        outs = _rewrite(nodes, args, n, shape)
        for j, r in enumerate(outs):
            remap[("n", i, j)] = r
    out = Graph(graph.inputs, nodes, [remap.get(o, o) for o in graph.outputs], len(exprs),
                ("size",) * len(exprs))
    out.lifted = list(range(len(exprs)))  # type: ignore[attr-defined]
    return out


def _rewrite(nodes: list, args: tuple, n: Any, shape: tuple) -> list:
    """Append the nodes replacing layer_norm ``n``; its three outputs' refs."""
    x, w, b = (list(args) + [None, None])[:3]
    dims, eps = tuple(n.params["dims"]), n.params["eps"]
    (yshape, dt), (sshape, sdt), _ = n.specs
    nd = len(yshape)
    perm = tuple([d for d in range(nd) if d not in dims] + sorted(dims))
    inv = tuple(perm.index(d) for d in range(nd))
    pshape = tuple(yshape[d] for d in perm)
    keep = nd - len(dims)
    pstat = pshape[:keep] + (1,) * len(dims)

    def add(op: str, a: tuple, params: dict, specs: tuple) -> tuple:
        nodes.append(Node(REGISTRY[op], a, params, specs))
        return ("n", len(nodes) - 1, 0)

    xp = add("permute", (x,), {"dims": perm}, ((pshape, dt),))
    xc = add("clone", (xp,), {"contiguous": True}, ((pshape, dt),))
    ln = add("layer_norm", (xc, None, None), {"dims": tuple(range(keep, nd)), "eps": eps},
             ((pshape, dt), (pstat, sdt), (pstat, sdt)))
    y = add("permute", (ln,), {"dims": inv}, ((yshape, dt),))
    for p, op in ((w, "mul"), (b, "add")):
        if p is not None:
            e = add("expand", (p,), {"shape": shape}, ((yshape, dt),))
            y = add(op, (y, e), {}, ((yshape, dt),))
    stat = tuple(1 if d in dims else shape[d] for d in range(nd))
    mean = add("view", (("n", ln[1], 1),), {"shape": stat}, ((sshape, sdt),))
    rstd = add("view", (("n", ln[1], 2),), {"shape": stat}, ((sshape, sdt),))
    return [y, mean, rstd]



def inline_kernel_ops(ep: Any) -> Any:
    """``ep`` with its kernel ops (``ember.library.triton_op`` / ``kernel_op``) replaced by
    their bodies: ember ops and ``kernel_launch`` nodes, whose kernels the C backend places in
    the graph's translation unit, so they need no Python.  Every other op stays as it is
    (``ep`` itself when there is no kernel op)."""
    from ember.export._decomp import decompose
    from ember.library._triton import TRITON_OPS
    ops = {n.target: TRITON_OPS[n.target.name] for n in ep.graph.nodes
           if n.op == "call_function" and getattr(n.target, "name", None) in TRITON_OPS}
    if not ops:
        return ep
    table: dict = {op: None for op in REGISTRY.values() if op.decomp is not None}
    for target, op in ops.items():
        if op._mutated:
            from ember.aot._codegen import ModelSourceError
            raise ModelSourceError(f"[aoti_compile_and_package] kernel op {op._qualname} "
                                   f"mutates {list(op._mutated)}; AOT packages inline kernel "
                                   f"ops without mutated arguments")
        table[target] = op._decomp
    return decompose(ep, table)


__all__ = ["channel_norms", "inline_kernel_ops"]

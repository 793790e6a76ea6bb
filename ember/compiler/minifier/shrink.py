"""Shrinking a failing graph (delta debugging, Zeller's ddmin).

A candidate keeps a subset of the graph's nodes.  A kept node's argument that a dropped node
produced becomes a new graph input holding that value as eager computed it, so a dropped node
is "replaced by an input"; the candidate's outputs are its kept values nobody kept reads (and
the original outputs among them), so nothing kept is dead.  ``shrink`` first cuts the graph
after the earliest node at which it still fails (a binary search over prefixes), then runs
ddmin over the nodes left, keeping a candidate only when it fails the same way (same kind,
same error class).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember.compiler.frontend.graph import Graph, Node, Sym, _resolve


def _is_ref(a: Any) -> bool:
    return type(a) is tuple and len(a) >= 2 and a[0] in ("i", "n")


def all_values(graph: Graph, arrays: list, scalars: list) -> dict:
    """Every value of ``graph`` (inputs and node outputs) by ref, as eager computes them;
    a node eager cannot run (and what follows) gets zeros of its spec."""
    refs = [("n", i, j) for i, n in enumerate(graph.nodes) for j in range(len(n.specs))]
    vals: dict = {("i", k): np.asarray(a) for k, a in enumerate(arrays)}
    try:
        full = Graph(graph.inputs, graph.nodes, refs, graph.num_scalars, graph.scalar_kinds)
        vals.update(zip(refs, full.run(list(arrays), list(scalars))))
    except Exception:  # noqa: BLE001 - e.g. a graph eager rejects: zeros keep the shapes
        for i, n in enumerate(graph.nodes):
            for j, (shape, d) in enumerate(n.specs):
                shape = tuple(int(_resolve(s, list(scalars))) if type(s) is Sym else s
                              for s in shape)
                vals[("n", i, j)] = np.zeros(shape, d.np)
    return vals


def subgraph(graph: Graph, keep: list, values: dict) -> tuple[Graph, list] | None:
    """The candidate keeping nodes ``keep`` (indices, any order) and its input arrays; None
    when it has no output."""
    keep = sorted(set(keep))
    kept = set(keep)
    used: set = set()
    for i in keep:
        used.update(a for a in graph.nodes[i].args if _is_ref(a))
    wanted = set(graph.outputs)
    in_map: dict = {}
    inputs, arrays = [], []
    node_map: dict = {}
    nodes = []
    for i in keep:
        n = graph.nodes[i]
        args = []
        for a in n.args:
            if _is_ref(a) and not (a[0] == "n" and a[1] in kept):
                if a not in in_map:  # a graph input, or a value of a dropped node
                    in_map[a] = ("i", len(inputs))
                    # a node's spec has the sizes of the trace that built the graph: a
                    # dynamic graph's value may have others (its input is static here)
                    inputs.append(graph.inputs[a[1]] if a[0] == "i" else
                                  (tuple(values[a].shape), graph.nodes[a[1]].specs[a[2]][1]))
                    arrays.append(values[a])
                args.append(in_map[a])
            elif _is_ref(a):
                args.append(("n", node_map[a[1]], a[2]))
            else:
                args.append(a)
        node_map[i] = len(nodes)
        nodes.append(Node(n.op, tuple(args), n.params, n.specs))
    outputs = [("n", node_map[i], j) for i in keep for j in range(len(graph.nodes[i].specs))
               if ("n", i, j) not in used or ("n", i, j) in wanted]
    if not outputs:
        return None
    return Graph(inputs, nodes, outputs, graph.num_scalars, graph.scalar_kinds), arrays


def _split(items: list, n: int) -> list:
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for k in range(n):
        end = start + size + (k < extra)
        out.append(items[start:end])
        start = end
    return [c for c in out if c]


def ddmin(items: list, fails: Callable[[list], bool]) -> list:
    """A 1-minimal sublist of ``items`` for which ``fails`` holds (``fails(items)`` is
    assumed): no single item of it can be removed."""
    c, n = list(items), 2
    while len(c) >= 2:
        chunks = _split(c, n)
        found = next((ch for ch in chunks if fails(ch)), None)
        if found is not None:
            c, n = found, 2
            continue
        if len(chunks) > 2:  # with two chunks each complement is the other chunk
            rests = ([x for x in c if x not in ch] for ch in chunks)
            comp = next((rest for rest in rests if fails(rest)), None)
            if comp is not None:
                c, n = comp, max(n - 1, 2)
                continue
        if n >= len(c):
            break
        n = min(2 * n, len(c))
    return c


def shrink(graph: Graph, arrays: list, scalars: list, fails: Callable[[Graph, list], bool],
           log: Callable[[str], None] = lambda s: None) -> tuple[Graph, list]:
    """A small graph (and its inputs) for which ``fails(graph, arrays)`` still holds."""
    values = all_values(graph, arrays, scalars)
    memo: dict = {}

    def test(keep: list) -> bool:
        key = frozenset(keep)
        if key not in memo:
            cand = subgraph(graph, keep, values)
            memo[key] = cand is not None and fails(*cand)
            log(f"{len(key)} nodes: {'fails' if memo[key] else 'passes'}")
        return memo[key]

    # the shortest failing prefix (failures are assumed to persist once a node is in)
    lo, hi = 1, len(graph.nodes)
    while lo < hi:
        mid = (lo + hi) // 2
        if test(list(range(mid))):
            hi = mid
        else:
            lo = mid + 1
    keep = list(range(hi))
    if hi < len(graph.nodes) and not test(keep):  # not monotone after all: keep everything
        keep = list(range(len(graph.nodes)))
    keep = ddmin(keep, test)
    if not test(keep):  # even the whole graph as a candidate passes: nothing to cut
        return graph, list(arrays)
    return subgraph(graph, keep, values)  # type: ignore[return-value]


__all__ = ["all_values", "ddmin", "shrink", "subgraph"]

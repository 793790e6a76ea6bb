"""Following a known trace through numbers that the compiled graph takes at run time.

A call of a compiled function follows the trace of the call before it (``_lazy.Known``,
docs/performance.md "Cheap compiled calls") while it records the same ops with the same
numbers.  A training step's optimizer passes numbers that change every step (Adam's bias
corrections ``1 - beta**step``, a scheduled learning rate): the compiler lifted them to runtime
arguments of the entry after their first change, so the graph and its entry stay the same, but
an exact comparison would send every later op of the call down the full recording path
(``meta``, capture, hashing, lookup).  ``Loosen`` tells the trace when a node differs from the
known one only in such numbers: the trace keeps following, and the realizer passes the new
numbers to the same entry.

Only Python ``float``s of pointwise ops and of ops tagged ``scalar_passthrough`` (a multi-tensor
optimizer step) are loosened (such a float never decides the op's output shape or dtype, so the
cached node's specs stay right), and only in slots the entry lifted
(or in nodes the graph does not contain at all: dead code).  Every other difference diverges as
before.
"""

from __future__ import annotations

from typing import Any

from ember._lazy import same
from ember.compiler.frontend.graph import Captured, _skel, static_keys


class Loosen:
    """``loose(i, op, args, params)`` for one ``Known`` (see the module docstring): the changed
    numbers of trace node ``i`` as ``[(slot, position among the entry's scalars, value)]``, or
    None when the node differs in anything else."""

    __slots__ = ("nodes", "start", "pos", "memo")

    def __init__(self, nodes: list, start: list, pos: dict) -> None:
        self.nodes = nodes    # the trace's nodes (``Known.nodes``)
        self.start = start    # per trace node: its first number slot in the capture, -1: dead
        self.pos = pos        # lifted float slot -> its position among the runtime scalars
        self.memo: dict = {}  # node index -> the known node's side (``_known_side``)

    def _known_side(self, i: int) -> tuple:
        """(args' structures, params' structure, numbers, static keys) of known node ``i``,
        computed once (the node is immutable)."""
        got = self.memo.get(i)
        if got is None:
            nd = self.nodes[i]
            old: list = []
            static = static_keys(nd.op)
            skels = tuple(None if type(b) is tuple else _skel(b, old) for b in nd.args)
            pskel = _skel(nd.params, old, static) if nd.params else None
            got = self.memo[i] = (skels, pskel, old, static)
        return got

    def __call__(self, i: int, op: Any, args: tuple, params: dict) -> list | None:
        nd = self.nodes[i]
        if nd.op is not op or len(args) != len(nd.args) or (
                op.kind != "pointwise" and "scalar_passthrough" not in op.tags):
            return None
        skels, pskel, old, static = self._known_side(i)
        new: list = []
        for a, b, sk in zip(args, nd.args, skels):
            if sk is None:     # a ref or a tuple constant: structure (``capture``)
                if a is not b and not same(a, b):
                    return None
            elif _skel(a, new) != sk:
                return None
        if params or nd.params:
            if _skel(params, new, static) != pskel or not all(
                    same(params[k], nd.params[k]) for k in params if k in static):
                return None
        start = self.start[i]
        out = []
        for j, (x, y) in enumerate(zip(new, old)):
            if x == y and type(x) is type(y):
                continue
            if type(x) is not float:
                return None
            if start < 0:      # a dead node: its numbers are not in the graph
                continue
            p = self.pos.get(start + j)
            if p is None:
                return None
            out.append((start + j, p, x))
        return out


def make_loose(cap: Captured, lifted: list, tnodes: list) -> Loosen | None:
    """The ``Known.loose`` of a trace whose live part is ``cap`` and whose entry lifted the
    capture slots ``lifted`` (``Graph.lifted``, in runtime-argument order); None when no float
    is lifted."""
    kinds, values = cap.kinds, cap.values
    pos = {k: p for p, k in enumerate(lifted)
           if kinds[k] == "scalar" and type(values[k]) is float}
    if not pos:
        return None
    node_of = cap.node_of
    bounds = cap._bounds
    start = []
    for i in range(len(tnodes)):
        j = i if node_of is None else node_of.get(i)
        start.append(-1 if j is None else bounds[j][0])
    return Loosen(tuple(tnodes), start, pos)


def with_values(values: list, changed: list) -> list:
    """``values`` (a capture's numbers) with the ``(slot, position, value)`` changes made."""
    out = list(values)
    for k, _, v in changed:
        out[k] = v
    return out


def with_scalars(scalars: list, changed: list) -> list:
    """An entry's runtime scalars with the ``(slot, position, value)`` changes made."""
    out = list(scalars)
    for _, p, v in changed:
        out[p] = v
    return out

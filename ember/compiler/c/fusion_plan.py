"""The fusion plan: decisions over the whole graph, made BEFORE lowering (``plan(graph)``).

Lowering (``lower/context.py``) builds kernels greedily in the order it is given nodes: a
pointwise group closes when the iteration shape changes, a reduction absorbs the open group
as its prologue, reductions over one input share a loop nest while it is open.  ``plan``
looks at the whole graph first and decides, for lowering to follow:

* **order** (``FusionPlan.order``): a topological order of the nodes.  Graph order is kept,
  except that (1) where the next node is a pointwise op of another iteration shape (greedy
  lowering would close the open group there), the ready pointwise nodes of the open group's
  shape further on are lowered first, so they join the open group instead of opening a
  kernel of their own later (six pointwise ops alternating between two shapes: six kernels
  greedily, two planned).  A node is pulled only with every pointwise consumer of its shape
  (else its value would be stored and loaded again, which pulling would not pay for), never
  when a reduction, row or scan op would take it as its prologue, and never when it reads a
  GEMM's product (it stays to become that GEMM's epilogue, ``schedule.fuse_epilogues``);
  (2) after a reduction, the other reductions over the same input and dims
  (``horizontal``) are lowered right away, so they share its loop nest (one pass over the
  input) before an epilogue seals it.  Nodes with side effects or ordered state (tags
  ``inplace`` and ``random``, kind ``random``) are barriers: no node moves across one, so
  their relative order, and everything's order relative to them, is graph order.
* **recompute or store** (``FusionPlan.recompute``): a pointwise value that a reduction (or a
  row or scan op: ``layer_norm``, ``softmax``, ``cumsum``) takes as its prologue and that
  later pointwise consumers also need is either recomputed by those consumers (they re-read
  the chain's inputs, up to values already planned to be stored) or stored once by its own
  kernel (the reduction and the consumers read it).  With ``in`` the bytes of the chain's
  inputs, ``v`` the value's bytes and ``n`` the kernels of other consumers (1: they fuse into
  one group), bytes moved are ``(1 + n) * in`` to recompute and ``in + (2 + n) * v`` to store
  (write once, read by the reduction and each consumer); recompute wins ties (one kernel
  less) unless the chain has more than ``MAX_RECOMPUTE_OPS`` ops.  (A value that leaves a
  plain pointwise group is always stored: lowering recomputes only reduction prologues.)
  Before the row ops were planned too, a residual stream ``x = x + f(layer_norm(x))`` was
  recomputed by every later norm, its kernel loading two more branch outputs a layer (a
  6-layer GPT's last norm read 15).

Every decision is logged under ``EMBER_LOGS=fusion`` (or ``EMBER_DEBUG>=3``) as
``[ember.compiler fusion] plan: ...``.  ``FusionPlan.verify(graph)`` checks that the order is a
permutation of the nodes, topological, and keeps each node between the same barriers.

>>> fp = plan(graph)                                    # doctest: +SKIP
>>> fp.order[:5], fp.moved, fp.recompute              # doctest: +SKIP
([0, 1, 4, 2, 3], 1, {('n', 7, 0): True})
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ember.compiler.c.lower import gemm, pointwise, reduce, registry
from ember.compiler.c.lower.context import is_ref, log
from ember.compiler.frontend.graph import Graph
from ember.errors import EmberRuntimeError

MAX_RECOMPUTE_OPS = 16
"""A chain of more pointwise ops than this is stored rather than recomputed by its consumers."""
WINDOW = 256
"""How many nodes ahead of the current one the order looks for nodes to pull forward."""
_BARRIER_TAGS = frozenset({"inplace", "random"})
_PROLOGUE_KINDS = frozenset({"reduction", "composite", "scan"})  # take a producer group


@dataclass
class FusionPlan:
    """What ``plan`` decided for one graph (see the module docstring)."""

    order: list[int]
    barriers: list[int] = field(default_factory=list)    # side-effect nodes, graph order
    recompute: dict = field(default_factory=dict)        # value ref -> True (recompute) / False
    horizontal: list = field(default_factory=list)       # [node, ...] sharing one loop nest
    moved: int = 0                                       # nodes lowered earlier than in graph

    def should_recompute(self, ref: tuple) -> bool:
        """Whether consumers of ``ref`` (a reduction's prologue value) recompute it (True, and
        for a value the plan has no decision on) or it is stored once (False)."""
        return self.recompute.get(ref, True)

    def verify(self, graph: Graph) -> None:
        """Raise ``EmberRuntimeError`` unless ``order`` is a topological order of ``graph``'s
        nodes that keeps every node between the same side-effect nodes as graph order."""
        n = len(graph.nodes)
        if sorted(self.order) != list(range(n)):
            raise EmberRuntimeError(f"[FusionPlan.verify] order is not a permutation of the "
                                    f"{n} nodes: {self.order}")
        pos = {i: k for k, i in enumerate(self.order)}
        for i, node in enumerate(graph.nodes):
            for p in _preds(node):
                if pos[p] >= pos[i]:
                    raise EmberRuntimeError(f"[FusionPlan.verify] node {i} ({node.op.name}) "
                                            f"is lowered before its input node {p}")
        barrier = set(self.barriers)
        seen_graph = seen_plan = 0
        before_graph, before_plan = [0] * n, [0] * n
        for i in range(n):
            before_graph[i] = seen_graph
            seen_graph += i in barrier
        for i in self.order:
            before_plan[i] = seen_plan
            seen_plan += i in barrier
        for i in range(n):
            if before_graph[i] != before_plan[i]:
                raise EmberRuntimeError(f"[FusionPlan.verify] node {i} "
                                        f"({graph.nodes[i].op.name}) moved across a "
                                        f"side-effect node")


def plan(graph: Graph, helpers: frozenset | None = None) -> FusionPlan:
    """The fusion plan of ``graph`` (``helpers``: the C helpers the prelude defines; None
    assumes every helper a pointwise template names exists).

    >>> fp = plan(decompose(graph), backend._HELPERS)             # doctest: +SKIP
    >>> program = lower(graph, backend._HELPERS, fp)               # doctest: +SKIP
    """
    info = _Info(graph, helpers)
    fp = FusionPlan(order=[], barriers=[i for i in range(len(graph.nodes)) if info.barrier[i]])
    _order(info, fp)
    _recompute(info, fp)
    return fp


# -- what the plan knows of each node ----------------------------------------------------------
def _refs(args: Any) -> list:
    out = []
    for a in args:
        if is_ref(a):
            out.append(a)
        elif type(a) in (list, tuple):
            out.extend(_refs(a))
    return out


def _takes_epilogue(op: Any) -> bool:
    """True for an op the GEMM rule lowers (its product can take a pointwise epilogue)."""
    rule = registry.rule_for(op)
    return getattr(rule, "func", rule) is gemm.lower_gemm


def _preds(node: Any) -> set:
    return {r[1] for r in _refs(node.args) if r[0] == "n"}


class _Info:
    """Per node: predecessors, consumers, iteration shape when fusable pointwise, barrier."""

    def __init__(self, graph: Graph, helpers: frozenset | None) -> None:
        self.graph = graph
        self.any_helper = helpers is None  # no prelude given: every helper counts as there
        self.helpers = helpers if helpers is not None else frozenset()
        nodes = graph.nodes
        self.preds = [_preds(n) for n in nodes]
        self.users: list = [[] for _ in nodes]
        self.ref_users: dict = {}
        for i, n in enumerate(nodes):
            for r in _refs(n.args):
                self.ref_users.setdefault(r, []).append(i)
            for p in self.preds[i]:
                self.users[p].append(i)
        self.outputs = set(graph.outputs)
        self.barrier = [bool(n.op.tags & _BARRIER_TAGS) or n.op.kind == "random"
                        for n in nodes]
        self.shape = [self._fusable_shape(n) if not self.barrier[i] else None
                      for i, n in enumerate(nodes)]
        self.gemm = [_takes_epilogue(n.op) for n in nodes]

    def reads_gemm(self, i: int) -> bool:
        """True when node ``i`` reads a GEMM's product (directly or through views): its group
        can become that GEMM's epilogue (``schedule.fuse_epilogues``), so it stays put."""
        nodes = self.graph.nodes
        for r in _refs(nodes[i].args):
            while r[0] == "n" and nodes[r[1]].op.kind == "view" and is_ref(nodes[r[1]].args[0]):
                r = nodes[r[1]].args[0]
            if r[0] == "n" and self.gemm[r[1]]:
                return True
        return False

    def spec(self, r: tuple) -> tuple:
        if r[0] == "i":
            return self.graph.inputs[r[1]]
        return self.graph.nodes[r[1]].specs[r[2]]

    def dtype_of(self, r: tuple) -> Any:  # the interface pointwise's checks ask of a context
        return self.spec(r)[1]

    def _fusable_shape(self, n: Any) -> tuple | None:
        """The iteration shape of a pointwise node the C backend fuses into a group, else None."""
        if n.op.kind != "pointwise" or len(n.specs) != 1:
            return None
        try:
            reason = pointwise._pointwise_reason(self, n)
        except Exception:  # noqa: BLE001 - a node the check cannot judge is left in place
            return None
        if reason is not None and not (reason.startswith("C helper") and self.any_helper):
            return None
        return tuple(n.specs[0][0])


# -- (a) the order -----------------------------------------------------------------------------
def _order(info: _Info, fp: FusionPlan) -> None:
    nodes = info.graph.nodes
    done = [False] * len(nodes)
    shape: tuple | None = None   # iteration shape of the group lowering would have open
    out = fp.order

    def emit(i: int) -> None:
        nonlocal shape
        done[i] = True
        out.append(i)
        if info.shape[i] is not None:
            shape = info.shape[i]
        elif nodes[i].op.kind != "view":
            shape = None

    pos = 0
    while pos < len(nodes):
        if done[pos]:
            pos += 1
            continue
        here = info.shape[pos]
        if shape is not None and here is not None and here != shape:
            pulled = _pullable(info, done, pos, shape)
            if pulled:
                log("fusion", f"plan: nodes {pulled} ({', '.join(nodes[i].op.name for i in pulled)}"
                    f") lowered before node {pos} ({nodes[pos].op.name}): they join the open "
                    f"group over {list(shape)}", 3)
                for i in pulled:
                    emit(i)
        emit(pos)
        siblings = _siblings(info, done, pos)
        if siblings:
            fp.horizontal.append([pos] + siblings)
            log("fusion", f"plan: reductions {[pos] + siblings} "
                f"({', '.join(nodes[i].op.name for i in [pos] + siblings)}) share one loop "
                f"nest over {nodes[pos].args[0]}", 3)
            for s in siblings:
                emit(s)
        pos += 1
    low = len(nodes)
    for i in reversed(out):  # a node lowered before a node of lower index was moved
        fp.moved += i > low
        low = min(low, i)


def _window(info: _Info, done: list, pos: int) -> range:
    """Positions after ``pos`` up to the next barrier (a barrier at ``pos`` itself: none)."""
    if info.barrier[pos]:
        return range(0)
    end = min(len(info.graph.nodes), pos + 1 + WINDOW)
    for j in range(pos + 1, end):
        if info.barrier[j]:
            return range(pos + 1, j)
    return range(pos + 1, end)


def _pullable(info: _Info, done: list, pos: int, shape: tuple) -> list:
    """Not-yet-lowered fusable pointwise nodes of ``shape`` after ``pos`` whose inputs are
    all lowered (or pulled too), each with all its consumers either pulled too or needing
    the value in memory anyway (so pulling adds no store)."""
    cand = []
    chosen: set = set()
    for j in _window(info, done, pos):
        if done[j] or info.shape[j] != shape or info.reads_gemm(j):
            continue
        if all(done[p] or p in chosen for p in info.preds[j]):
            cand.append(j)
            chosen.add(j)
    changed = True
    while changed and chosen:
        changed = False
        for j in list(cand):
            if j not in chosen:
                continue
            ok = all(done[p] or p in chosen for p in info.preds[j]) and all(
                u in chosen or _needs_memory(info, u, shape) for u in info.users[j])
            if not ok:
                chosen.discard(j)
                changed = True
    return [j for j in cand if j in chosen]


def _needs_memory(info: _Info, u: int, shape: tuple) -> bool:
    """True when consumer ``u`` reads its operand from memory whatever the order: it neither
    fuses pointwise work of ``shape`` in registers nor takes it as a prologue."""
    n = info.graph.nodes[u]
    if info.shape[u] is not None:
        return info.shape[u] != shape
    return n.op.kind not in _PROLOGUE_KINDS and n.op.kind not in ("pointwise", "random")


def _siblings(info: _Info, done: list, pos: int) -> list:
    """Not-yet-lowered reductions over the same input and dims as reduction ``pos`` (in the
    window), each lowered right after it: one loop nest computes them all."""
    n = info.graph.nodes[pos]
    if n.op not in reduce.REDUCTIONS or not n.args or not is_ref(n.args[0]):
        return []
    key = _reduce_key(n)
    out = []
    for j in _window(info, done, pos):
        m = info.graph.nodes[j]
        if done[j] or m.op not in reduce.REDUCTIONS or not m.args or m.args[0] != n.args[0]:
            continue
        if _reduce_key(m) == key and info.preds[j] <= info.preds[pos]:
            out.append(j)
    return out


def _reduce_key(n: Any) -> Any:
    if n.op in reduce.ARG_OPS:
        d = n.params.get("dim")
        return ("dim", d if type(d) is not int else (d,))
    return ("dims", n.params.get("dims"))


# -- (b) recompute or store --------------------------------------------------------------------
def _nbytes(info: _Info, r: tuple) -> int:
    """Bytes of value ``r`` in memory (a view's: its base's, e.g. a broadcast bias)."""
    while r[0] == "n" and info.graph.nodes[r[1]].op.kind == "view" and \
            is_ref(info.graph.nodes[r[1]].args[0]):
        r = info.graph.nodes[r[1]].args[0]
    shape, dt = info.spec(r)
    if any(type(m) is not int for m in shape):
        return 0
    return math.prod(shape) * dt.np.itemsize


def _chain(info: _Info, x: int, shape: tuple, stored: dict) -> tuple[list, set]:
    """The pointwise nodes of ``shape`` that compute node ``x`` (its producer group) and the
    refs the chain loads (a value already planned to be stored is loaded, not walked)."""
    chain, leaves, stack, seen = [], set(), [x], {x}
    while stack:
        i = stack.pop()
        chain.append(i)
        for r in _refs(info.graph.nodes[i].args):
            if r[0] == "n" and info.shape[r[1]] == shape and r[1] not in seen and \
                    stored.get(r) is not False:
                seen.add(r[1])
                stack.append(r[1])
            elif not (r[0] == "n" and r[1] in seen):
                leaves.add(r)
    return chain, leaves


def _recompute(info: _Info, fp: FusionPlan) -> None:
    nodes = info.graph.nodes
    decided: set = set()
    for i, n in enumerate(nodes):
        # reductions and the row/scan ops whose lowering takes the open group as its prologue
        # (layer_norm's statistics passes, softmax's, cumsum's): a residual stream
        # ``x = x + f(norm(x))`` left to be recomputed would grow by one chain link a layer
        if not (n.op in reduce.REDUCTIONS or n.op.kind in _PROLOGUE_KINDS) or not n.args or \
                not is_ref(n.args[0]):
            continue
        x = n.args[0]
        if x[0] != "n" or x in decided or info.shape[x[1]] is None:
            continue
        decided.add(x)
        shape = info.shape[x[1]]
        chain, leaves = _chain(info, x[1], shape, fp.recompute)
        members = set(chain)
        others = {u for c in chain for u in info.users[c]
                  if u not in members and info.shape[u] == shape}
        if not others:
            continue  # nothing outside the reduction recomputes the chain
        k = 1  # the other consumers fuse into one group
        v = _nbytes(info, x)
        ins = sum(_nbytes(info, r) for r in leaves)
        again, store = (1 + k) * ins, ins + (2 + k) * v
        yes = again <= store and len(chain) <= MAX_RECOMPUTE_OPS
        fp.recompute[x] = yes
        log("fusion", f"plan: {x} ({nodes[x[1]].op.name}, a {len(chain)}-op chain into "
            f"{n.op.name} node {i}, also used by nodes {sorted(others)}): "
            f"{'recompute' if yes else 'store'} ({again} bytes moved to recompute, {store} "
            f"to store{'' if len(chain) <= MAX_RECOMPUTE_OPS else '; over the op cap'})", 3)


__all__ = ["MAX_RECOMPUTE_OPS", "WINDOW", "FusionPlan", "plan"]

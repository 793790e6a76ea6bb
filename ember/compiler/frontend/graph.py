"""The graph IR: what a realized trace becomes (ARCHITECTURE.md §4).

A ``Graph`` has tensor inputs, lifted scalar inputs, a list of ``Node``s and a list of outputs.
There is one node kind: a call of a registry ``OpDef`` on earlier values with parameters.  Values
are refs: ``("i", k)`` tensor input ``k``, ``("n", i, j)`` output ``j`` of node ``i``.  A number
that a graph lifts to a runtime argument (a size that changed between calls, a learning rate, a
random offset) appears as a ``Sym`` in the node's args, params or an input's shape.

``str(graph)`` is Python source that runs the graph with ember (``Graph.python()``), ``verify()``
checks its invariants, and ``run`` executes it with the eager kernels (the reference backend).
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from ember.dtypes import dtype as DType
from ember.errors import EmberRuntimeError
from ember.ops.registry import REGISTRY, OpDef
from ember.sym import FakeTensor


class Sym:
    """A lifted number: runtime scalar input ``index`` of the graph (printed ``s<index>``)."""

    __slots__ = ("index", "kind")

    def __init__(self, index: int, kind: str) -> None:
        self.index = index
        self.kind = kind  # "size" or "scalar"

    def __repr__(self) -> str:
        return f"s{self.index}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sym) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("Sym", self.index))


class Node:
    """``op(*args, **params)`` with its output specs ``((shape, dtype), ...)``."""

    __slots__ = ("op", "args", "params", "specs")

    def __init__(self, op: OpDef, args: tuple, params: dict, specs: tuple) -> None:
        self.op = op
        self.args = args
        self.params = params
        self.specs = specs

    def __repr__(self) -> str:
        return f"Node({self.op.name}, {self.args}, {self.params})"


def _is_num(x: Any) -> bool:
    t = type(x)
    return t is int or t is float


# Params naming axes (``dim``, ``dims``: a reduction's, a scan's, softmax's, permute's, cat's)
# and a norm's ``ord`` are structure, never lifted numbers, as in PyTorch (dynamo specializes
# dims even under dynamic=True, and floats by default): a kernel's loop nest or formula depends
# on them.  Another dim is another graph.
# An op adds its own (``OpDef.static_params``: a convolution's window, a pad's widths).
STRUCTURAL_PARAMS = frozenset({"dim", "dims", "ord"})


def static_keys(op: Any) -> frozenset:
    """The params of ``op`` that are structure (never lifted numbers)."""
    extra = getattr(op, "static_params", None)
    return STRUCTURAL_PARAMS | extra if extra else STRUCTURAL_PARAMS


def _skel(x: Any, values: list, static: frozenset = STRUCTURAL_PARAMS) -> Any:
    """The structure of a param with its numbers replaced by their type; numbers go to
    ``values`` in walk order (the values of ``STRUCTURAL_PARAMS`` stay in the structure)."""
    t = type(x)
    if t is int or t is float:
        values.append(x)
        return t
    if t is tuple or t is list:
        return (t, tuple(_skel(y, values) for y in x))
    if t is dict:
        return (dict, tuple((k, ("static", v) if k in static else _skel(v, values))
                            for k, v in x.items()))
    if isinstance(x, np.ndarray):
        return ("ndarray", x.shape, str(x.dtype), x.tobytes())
    if isinstance(x, (np.integer, np.floating)):
        return ("npscalar", str(x.dtype), x.item())
    return x


def _subst(x: Any, it: Iterator, static: frozenset = STRUCTURAL_PARAMS) -> Any:
    t = type(x)
    if t is int or t is float:
        return next(it)
    if t is tuple:
        return tuple(_subst(y, it) for y in x)
    if t is list:
        return [_subst(y, it) for y in x]
    if t is dict:
        return {k: v if k in static else _subst(v, it) for k, v in x.items()}
    return x


def _resolve(x: Any, scalars: list) -> Any:
    t = type(x)
    if t is Sym:
        return scalars[x.index]
    if t is tuple:
        return tuple(_resolve(y, scalars) for y in x)
    if t is list:
        return [_resolve(y, scalars) for y in x]
    if t is dict:
        return {k: _resolve(v, scalars) for k, v in x.items()}
    return x


def _has_sym(x: Any) -> bool:
    t = type(x)
    if t is Sym:
        return True
    if t is tuple or t is list:
        return any(_has_sym(y) for y in x)
    if t is dict:
        return any(_has_sym(v) for v in x.values())
    return False


class Graph:
    """Inputs, nodes, outputs; see the module docstring.

    ``mutated``: ``((output index, input index), ...)``, the outputs that are the new values of
    inputs written in place by the traced code (functionalized mutations, ``_lazy.Trace.write``):
    the caller stores each such output into that input's memory after the call, so a backend
    may compute it there directly and return the input array itself (the C backend does,
    ``docs/compiler.md``, "In-place writes").  Empty for a pure graph."""

    mutated: tuple = ()
    # the inputs that are frozen weights (``ember._inductor.config.freezing``): a backend may
    # keep data derived from them between calls while they are unchanged (the C backend packs
    # product operands once, docs/compiler.md "Frozen weights packed once"); empty by default
    frozen: tuple = ()

    def __init__(self, inputs: list, nodes: list[Node], outputs: list, num_scalars: int = 0,
                 scalar_kinds: tuple = ()) -> None:
        self.inputs = inputs            # [(shape, dtype)] per tensor input; shape may hold Syms
        self.nodes = nodes
        self.outputs = outputs          # refs
        self.num_scalars = num_scalars
        self.scalar_kinds = scalar_kinds

    # -- inspection ----------------------------------------------------------------------------
    def ops(self) -> list[str]:
        return [n.op.name for n in self.nodes]

    def __len__(self) -> int:
        return len(self.nodes)

    def python(self, name: str = "graph") -> str:
        """Runnable Python source: ``def graph(x0, ..., s0, ...)`` calling registry ops."""
        params = [f"x{k}" for k in range(len(self.inputs))] + \
            [f"s{k}" for k in range(self.num_scalars)]
        lines = ["from ember.ops.registry import REGISTRY, bind", "",
                 f"def {name}({', '.join(params)}):"]
        for k, (shape, dt) in enumerate(self.inputs):
            lines.append(f"    # x{k}: {dt.name}{list(shape)}")
        if self.mutated:
            lines.append("    # written in place: " + ", ".join(
                f"output {o} -> x{k}" for o, k in self.mutated))
        if self.frozen:
            lines.append("    # frozen: " + ", ".join(f"x{k}" for k in self.frozen))
        for i, n in enumerate(self.nodes):
            args = ", ".join(_fmt_arg(a) for a in n.args)
            kw = ", ".join(f"{k}={_fmt(v)}" for k, v in n.params.items())
            call = f"bind(REGISTRY[{n.op.name!r}]" + (f", {args}" if args else "") + \
                (f", {kw}" if kw else "") + ")"
            outs = ", ".join(f"v{i}_{j}" for j in range(len(n.specs)))
            if len(n.specs) > 1:
                outs += ","
            spec = "; ".join(f"{d.name}{list(s)}" for s, d in n.specs)
            lines.append(f"    {outs} = {call}  # {spec}")
        lines.append(f"    return ({''.join(_fmt_arg(o) + ', ' for o in self.outputs)})")
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.python()

    __repr__ = __str__

    def verify(self) -> None:
        """Check that every ref points backwards and specs agree with each op's meta."""
        from ember.tensor import Tensor

        def check_ref(r: Any, i: int) -> None:
            if r[0] == "i":
                if not 0 <= r[1] < len(self.inputs):
                    raise EmberRuntimeError(f"[Graph.verify] node {i}: input {r[1]} missing")
            elif not (0 <= r[1] < i and 0 <= r[2] < len(self.nodes[r[1]].specs)):
                raise EmberRuntimeError(f"[Graph.verify] node {i}: bad ref {r}")

        for i, n in enumerate(self.nodes):
            if REGISTRY.get(n.op.name) is not n.op:
                raise EmberRuntimeError(f"[Graph.verify] node {i}: {n.op.name} not registered")
            for a in n.args:
                if type(a) is tuple and a and a[0] in ("i", "n"):
                    check_ref(a, i)
        for o in self.outputs:
            check_ref(o, len(self.nodes))
        # the recorded specs follow from the op's meta rule (concrete shapes only)
        if any(_has_sym(s) for s, _ in self.inputs):
            return
        vals: dict = {}
        for k, (shape, dt) in enumerate(self.inputs):
            vals[("i", k)] = FakeTensor(shape, dt)
        for i, n in enumerate(self.nodes):
            if _has_sym(n.params) or any(type(a) is Sym for a in n.args):
                return
            args = [vals[a] if type(a) is tuple and a and a[0] in ("i", "n") else a
                    for a in n.args]
            spec = n.op.meta(*args, **n.params)
            specs = (spec,) if n.op.num_outputs == 1 else tuple(spec)
            if tuple((tuple(s), d) for s, d in specs) != tuple((tuple(s), d) for s, d in n.specs):
                raise EmberRuntimeError(f"[Graph.verify] node {i} ({n.op.name}): specs "
                                        f"{n.specs} differ from meta {specs}")
            for j, (s, d) in enumerate(specs):
                vals[("n", i, j)] = FakeTensor(s, d)
        del Tensor

    # -- execution -----------------------------------------------------------------------------
    def run(self, arrays: list, scalars: list = ()) -> list:
        """Execute with the eager NumPy kernels: arrays in, arrays out."""
        plan = self.__dict__.get("_plan")
        if plan is None:
            plan = self._plan = self._make_plan()
        steps, n_in, out_slots = plan
        vals = list(arrays)
        vals.extend([None] * n_in)
        sc = scalars
        for kernel, arg_slots, consts, params, has_sym, single, np_dt, first in steps:
            if arg_slots is not None:
                args = [vals[k] if k >= 0 else (sc[c.index] if type(c) is Sym else c)
                        for k, c in zip(arg_slots, consts)]
            else:
                args = [vals[k] for k in consts]
            out = kernel(*args, **(_resolve(params, sc) if has_sym else params))
            if single:
                if type(out) is not np.ndarray:  # kernels may return NumPy scalars
                    out = np.asarray(out, dtype=np_dt)
                vals[first] = out
            else:
                for j, o in enumerate(out):
                    if type(o) is not np.ndarray:
                        o = np.asarray(o, dtype=np_dt[j])
                    vals[first + j] = o
        return [vals[k] for k in out_slots]

    def _make_plan(self) -> tuple:
        """Refs resolved to slots of one flat value list, once per graph."""
        slot: dict = {("i", k): k for k in range(len(self.inputs))}
        nxt = len(self.inputs)
        steps = []
        for i, n in enumerate(self.nodes):
            refs = [type(a) is tuple and bool(a) and a[0] in ("i", "n") for a in n.args]
            if all(refs):
                arg_slots, consts = None, [slot[a] for a in n.args]
            else:
                arg_slots = [slot[a] if r else -1 for a, r in zip(n.args, refs)]
                consts = [None if r else a for a, r in zip(n.args, refs)]
            single = len(n.specs) == 1 and n.op.num_outputs == 1
            np_dt = n.specs[0][1].np if single else [d.np for _, d in n.specs]
            for j in range(len(n.specs)):
                slot[("n", i, j)] = nxt + j
            steps.append((n.op.eager, arg_slots, consts, n.params,
                          _has_sym(n.params), single, np_dt, nxt))
            nxt += len(n.specs)
        return steps, nxt - len(self.inputs), [slot[o] for o in self.outputs]

    def forward(self, *args: Any) -> tuple:
        """Run on ember tensors (then scalars): ``graph.forward(*tensors, *scalars)``."""
        from ember.tensor import Tensor, _wrap
        n = len(self.inputs)
        arrays = [a._data if isinstance(a, Tensor) else np.asarray(a) for a in args[:n]]
        outs = self.run(arrays, list(args[n:]))
        res = []
        for o, r in zip(outs, self.outputs):
            d = self._dtype_of(r)
            res.append(_wrap(np.asarray(o, dtype=d.np), d))
        return tuple(res)

    __call__ = forward

    def _dtype_of(self, r: tuple) -> DType:
        if r[0] == "i":
            return self.inputs[r[1]][1]
        return self.nodes[r[1]].specs[r[2]][1]


def _fmt_arg(a: Any) -> str:
    if type(a) is tuple and a and a[0] == "i":
        return f"x{a[1]}"
    if type(a) is tuple and a and a[0] == "n":
        return f"v{a[1]}_{a[2]}"
    return _fmt(a)


def _fmt(v: Any) -> str:
    if isinstance(v, DType):
        return f"ember.{v.name}"
    if isinstance(v, float) and not np.isfinite(v):
        return f"float({str(v)!r})"
    if isinstance(v, np.ndarray):
        return f"np.array({v.tolist()!r}, dtype={str(v.dtype)!r})"
    return repr(v)


# ------------------------------------------------------------------------------ from a trace
class Captured:
    """A trace cut down to what its outputs need, with its lifted-number slots.

    ``key`` is the structure with every number abstracted (ops, arg structure, param structure,
    input ranks/dtypes/layout, outputs); ``values`` are the numbers in walk order (input sizes
    first); ``kinds`` says for each whether it is a size or a scalar; ``where`` describes it.
    """

    __slots__ = ("nodes", "inputs", "outputs", "key", "values", "kinds", "arrays", "in_orig",
                 "_bounds", "hit", "mutated", "mut_raw", "node_of", "frozen", "frozen_raw")

    def rebind(self, arrays: list, hit: Any) -> Captured:
        """This capture over another call's input arrays (a trace that followed it exactly:
        ``_lazy.Known``), with ``hit`` the entry that ran it last time."""
        c = Captured()
        c.nodes, c.inputs, c.outputs, c.key, c.values, c.kinds = \
            self.nodes, self.inputs, self.outputs, self.key, self.values, self.kinds
        c.in_orig, c._bounds = self.in_orig, self._bounds
        c.mutated, c.mut_raw = self.mutated, self.mut_raw
        c.frozen, c.frozen_raw = self.frozen, self.frozen_raw
        c.node_of = self.node_of
        c.arrays = [arrays[k] for k in self.in_orig]
        c.hit = hit
        return c

    @property
    def where(self) -> list:
        """A description of each slot (for recompile reasons)."""
        out = []
        for k, shape in enumerate(s for s, _ in self.inputs):
            out.extend(f"tensor 'x{k}' size at index {d}" for d in range(len(shape)))
        for i, ((start, mid), n) in enumerate(zip(self._bounds, self.nodes)):
            end = self._bounds[i + 1][0] if i + 1 < len(self._bounds) else len(self.values)
            out.extend(f"node {i} ({n.op.name}) " + ("argument" if k < mid else "parameter")
                       for k in range(start, end))
        return out

    def specialize(self, generic: frozenset) -> Graph:
        """The Graph with slots in ``generic`` lifted to scalar inputs, the rest constant."""
        syms: list = []
        kinds = []
        repl = []
        for k, v in enumerate(self.values):
            if k in generic:
                s = Sym(len(syms), self.kinds[k])
                syms.append(k)
                kinds.append(self.kinds[k])
                repl.append(s)
            else:
                repl.append(v)
        it = iter(repl)
        inputs = [(tuple(next(it) for _ in shape), dt) for shape, dt in self.inputs]
        nodes = []
        for n in self.nodes:
            args = tuple(a if type(a) is tuple and a and a[0] in ("i", "n") else _subst(a, it)
                         for a in n.args)
            params = _subst(n.params, it, static_keys(n.op))
            specs = n.specs
            nodes.append(Node(n.op, args, params, specs))
        g = Graph(inputs, nodes, list(self.outputs), len(syms), tuple(kinds))
        if self.mutated:
            g.mutated = self.mutated
        if self.frozen:
            g.frozen = self.frozen
        g.lifted = syms  # type: ignore[attr-defined]
        return g


def capture(tnodes: list, arrays: list, out_refs: list, dtype_of: Any,
            mutated: tuple = (), frozen: tuple = ()) -> Captured:
    """Dead-code-eliminate ``tnodes`` to ``out_refs`` and renumber; compute key and slots.
    ``mutated``: ``((output index, index into arrays), ...)``, outputs written back into those
    inputs (``Graph.mutated``; such inputs stay graph inputs even when no node reads them).
    ``frozen``: indices into arrays of frozen weights (``Graph.frozen``, part of the key)."""
    n_nodes = len(tnodes)
    live = [False] * n_nodes
    used = [False] * len(arrays)
    for _, k in mutated:
        used[k] = True
    for r in out_refs:
        if r[0] == "i":
            used[r[1]] = True
        else:
            live[r[1]] = True
    for i in range(n_nodes - 1, -1, -1):  # refs only point backwards: one reverse sweep
        if live[i]:
            for a in tnodes[i].args:
                if type(a) is tuple:
                    if a[0] == "n":
                        live[a[1]] = True
                    elif a[0] == "i":
                        used[a[1]] = True
    in_orig = [k for k, u in enumerate(used) if u]
    in_arrays = [arrays[k] for k in in_orig]
    inputs = [(arr.shape, dtype_of(arr)) for arr in in_arrays]
    if len(in_orig) == len(arrays) and all(live):
        nodes = tnodes           # nothing to renumber
        outputs = list(out_refs)
        node_of = None
    else:
        in_map = {k: j for j, k in enumerate(in_orig)}
        node_map: dict = {}
        nodes = []
        for i, n in enumerate(tnodes):
            if live[i]:
                node_map[i] = len(nodes)
                nodes.append(TNodeLike(n.op, tuple(_remap(a, in_map, node_map) for a in n.args),
                                       n.params, n.specs))
        outputs = [_remap(r, in_map, node_map) for r in out_refs]
        node_of = node_map
    values: list = []
    in_key = []
    for arr in in_arrays:
        values.extend(arr.shape)
        in_key.append((arr.ndim, arr.dtype, arr.flags.c_contiguous))
    n_sizes = len(values)
    node_key = []
    bounds = []
    for n in nodes:
        start = len(values)
        ak = tuple(a if type(a) is tuple else _skel(a, values) for a in n.args)
        mid = len(values)
        params = n.params
        pk = _skel(params, values, static_keys(n.op)) if params else ()
        bounds.append((start, mid))
        node_key.append((n.op.name, ak, pk))
    c = Captured()
    c.nodes, c.inputs, c.outputs, c.arrays = nodes, inputs, outputs, in_arrays
    c.in_orig = in_orig
    c.node_of = node_of      # trace node index -> captured node index (None: the same)
    c.mut_raw = mutated
    out_key = tuple(outputs)
    if mutated:
        pos = {k: j for j, k in enumerate(in_orig)}
        c.mutated = tuple((o, pos[k]) for o, k in mutated)
        out_key += (("mutated", c.mutated),)
    else:
        c.mutated = ()
    c.frozen_raw = frozen
    c.frozen = ()
    if frozen:
        pos = {k: j for j, k in enumerate(in_orig)}
        c.frozen = tuple(pos[k] for k in frozen if k in pos)
        if c.frozen:
            out_key += (("frozen", c.frozen),)
    c.key = GraphKey((tuple(in_key), tuple(node_key), out_key))
    c.hit = None
    c.values = values
    c.kinds = ["size"] * n_sizes + ["scalar"] * (len(values) - n_sizes)
    c._bounds = bounds
    return c


TNodeLike = Node


class GraphKey(tuple):
    """A capture's structural key: a tuple that hashes once (the caches look it up several times
    per call, and a reused capture's key is the very object the caches hold)."""

    def __hash__(self) -> int:
        h = self.__dict__.get("_h")
        if h is None:
            h = self.__dict__["_h"] = tuple.__hash__(self)
        return h


def _remap(a: Any, in_map: dict, node_map: dict) -> Any:
    if type(a) is tuple and a:
        if a[0] == "i":
            return ("i", in_map[a[1]])
        if a[0] == "n":
            return ("n", node_map[a[1]], a[2])
    return a


__all__ = ["Captured", "Graph", "Node", "Sym", "capture"]

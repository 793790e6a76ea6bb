"""The lowering context: Graph -> loop IR, one node at a time (ARCHITECTURE.md §5).

``LoweringContext`` walks the graph in the order of its ``FusionPlan`` (``c/fusion_plan.py``;
graph order without one) and gives each node to the rule registered for its
OpDef (``registry.py``; the rule modules are one per op family: ``pointwise``, ``view``,
``reduce``, ``rows``, ``scan``, ``gemm``, ``copy``, ``index``, ``attention``, ``random``).  A rule
returns None when it lowered the node, else the reason the node stays an extern.  The context
holds what the rules share, through public methods and typed state:

* the open fusion group (``group``): pointwise values computed as typed locals
  (``PointwiseValue``), stored to a buffer only when something outside the group needs them;
  ``join_group`` opens or reuses it, ``close_group`` turns it into a kernel (or offers it to a
  registered ``group_sink``, e.g. as a reduction's epilogue);
* the open segment (``open_segment``/``add_kernel``): the kernels one C entry function runs;
* values in memory (``MemoryValue``: a buffer seen through a ``Geometry``), ``buffer`` for new
  ones, ``bind`` to make one a node's output, ``materialize`` for values a view or an extern
  needs in memory;
* externs (``extern``): the node's eager NumPy kernel runs from Python between two C entry
  functions.  Every extern is a fallback: it is counted in ``LowerStats`` and logged (each one
  with ``EMBER_LOGS=fallbacks`` or ``EMBER_DEBUG>=3``; a count per op with ``EMBER_DEBUG>=1``),
  never silent.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ember.compiler.c.ir.loop_ir import (
    Buffer,
    Extern,
    FlatIndex,
    Geometry,
    Index,
    Kernel,
    Let,
    Load,
    Local,
    Op,
    PointCheck,
    Program,
    Segment,
    Store,
    contiguous_strides,
)
from ember.compiler.c.lower import registry
from ember.compiler.frontend.graph import Graph, Sym
from ember.config import config


@dataclass
class LowerStats:
    """What lowering did: counts for tests and ``EMBER_DEBUG``; ``copies`` counts run-time
    copies of non-contiguous inputs (the driver adds to it)."""

    kernels: int = 0
    segments: int = 0
    fused_ops: int = 0
    view_ops: int = 0
    externs: int = 0
    fallbacks: list = field(default_factory=list)   # "op: reason"
    copies: int = 0
    epilogues: int = 0   # pointwise kernels fused into a GEMM's epilogue (schedule.py)

    @property
    def fallback_count(self) -> int:
        return len(self.fallbacks)


def log(kind: str, message: str, level: int = 1) -> None:
    """Print ``message`` under ``EMBER_LOGS=kind`` or from ``EMBER_DEBUG>=level``."""
    if kind in config.logs or config.debug >= level:
        print(f"[ember.compiler {kind}] {message}", file=sys.stderr)


class PointwiseValue:
    """A value computed by a group: a local; ``buf`` once it is stored."""

    __slots__ = ("group", "local", "shape", "dtype", "buf", "strides")

    def __init__(self, group: Group, local: str, shape: tuple, dtype: Any,
                 strides: tuple) -> None:
        self.group, self.local, self.shape, self.dtype, self.buf = group, local, shape, dtype, None
        self.strides = strides  # the layout eager gives this value (where it is stored)


class MemoryValue:
    """A value in memory: ``buf`` seen through ``geom``."""

    __slots__ = ("buf", "geom", "dtype")

    def __init__(self, buf: Buffer, geom: Geometry, dtype: Any) -> None:
        self.buf, self.geom, self.dtype = buf, geom, dtype


class Group:
    """An open fusion group of pointwise work over one shape."""

    def __init__(self, shape: tuple) -> None:
        self.shape = shape
        self.body: list = []          # Let / Store / PendingLoad / ("store", value)
        self.members: dict = {}       # ref -> PointwiseValue
        self.loads: dict = {}         # (buffer id, geometry) -> local
        self.writes: set = set()      # ids of buffers this group stores
        self.ops: list = []
        self.n_locals = 0
        self.flat_indices: list[FlatIndex] = []   # of its random ops (random.py)
        self.recomputed: dict = {}    # id(other group) -> {its local: local here}

    def local(self) -> str:
        self.n_locals += 1
        return f"t{self.n_locals - 1}"

    def has_random(self) -> bool:
        """True when a random op reads the kernel's flat index, or a ``PointCheck`` reports
        invalid input (integer division by zero), so the group stays a plain kernel: no
        reduction, row kernel or GEMM epilogue absorbs it."""
        return bool(self.flat_indices) or any(isinstance(x, PointCheck) for x in self.body)

    def bind_flat_indices(self, flat: bool) -> None:
        for ix in self.flat_indices:
            ix.bind(flat)


class PendingLoad:
    """A load of a group, placed once the group's loop variables are known."""

    __slots__ = ("name", "buf", "geom")

    def __init__(self, name: str, buf: Buffer, geom: Geometry) -> None:
        self.name, self.buf, self.geom = name, buf, geom


Value = PointwiseValue | MemoryValue


class LoweringContext:
    """Lower one Graph: ``run()`` gives the ``Program`` (with ``.stats`` and ``.sources``:
    how the driver gets each value's NumPy array, ``("in", k)``, ``("buf", Buffer)`` or
    ``("view", node index, j)``)."""

    def __init__(self, graph: Graph, helpers: frozenset, plan: Any = None) -> None:
        self.graph = graph
        self.helpers = helpers        # the ember_* C helpers the prelude defines
        self.plan = plan              # the FusionPlan it follows (``c/fusion_plan.py``), or None
        self.stats = LowerStats()
        self.int_names = [f"s{k}" for k in range(graph.num_scalars)]
        self.dynamic = any(type(n) is Sym for s, _ in graph.inputs for n in s)
        self.steps: list = []
        self.segment: Segment | None = None
        self.group: Group | None = None
        self.vals: dict[tuple, Value] = {}
        self.sources: dict = {}
        self.n_bufs = 0
        self.uses: dict = {}
        for i, n in enumerate(graph.nodes):
            for a in n.args:
                if is_ref(a):
                    self.uses.setdefault(a, []).append(i)
        self.outputs = set(graph.outputs)
        self.inputs: list[Buffer] = []
        # reduce.py's open kernels: by (input, dims), for horizontal fusion; all, for epilogues
        self.reduce_nests: dict = {}
        self.reduce_all: list = []
        # casts of float32 tensors to a half dtype read only by half products, which pack
        # from the float32 tensor and round as they pack (lower/gemm.py): ref -> source ref
        self.cast_sources: dict = {}
        for k, (shape, dt) in enumerate(graph.inputs):
            shape = tuple(size_of(n) for n in shape)
            b = Buffer(f"in{k}", dt, shape, "input")
            self.inputs.append(b)
            self.vals[("i", k)] = MemoryValue(b, Geometry.contiguous(shape), dt)
            self.sources[("i", k)] = ("in", k)

    def run(self) -> Program:
        nodes = self.graph.nodes
        order = self.plan.order if self.plan is not None else range(len(nodes))
        for i in order:  # the plan's order: a topological order that clusters fusable nodes
            self.lower_node(i, nodes[i])
        self.close_segment()
        program = Program(self.steps, self.inputs, self.int_names, self.graph.num_scalars)
        program.sources = self.sources  # type: ignore[attr-defined]
        program.stats = self.stats  # type: ignore[attr-defined]
        return program

    # -- dispatch --------------------------------------------------------------------------
    def lower_node(self, i: int, n: Any) -> None:
        rule = registry.rule_for(n.op)
        if rule is None:
            reason = f"{n.op.kind} op (no C lowering yet)"
        else:
            reason = rule(self, i, n)
            if reason is None:
                return
        self.extern(i, n, reason)

    # -- values ------------------------------------------------------------------------------
    def shape_of(self, r: tuple) -> tuple:
        v = self.vals[r]
        return v.shape if isinstance(v, PointwiseValue) else v.geom.shape

    def dtype_of(self, r: tuple) -> Any:
        return self.vals[r].dtype

    def buffer(self, dt: Any, shape: tuple, role: str) -> Buffer:
        """A new buffer (``role``: "temp", "extern", ...)."""
        self.n_bufs += 1
        return Buffer(f"buf{self.n_bufs - 1}", dt, shape, role)

    def bind(self, i: int, j: int, buf: Buffer, geom: Geometry, dt: Any) -> None:
        """Output ``j`` of node ``i`` is ``buf`` (seen through ``geom``), stored by a kernel."""
        ref = ("n", i, j)
        self.vals[ref] = MemoryValue(buf, geom, dt)
        self.sources[ref] = ("buf", buf)

    def store_buffer(self, ref: tuple, v: PointwiseValue) -> Buffer:
        """The buffer group value ``v`` is stored to when its group closes (made now)."""
        if v.buf is None:
            v.buf = self.buffer(v.dtype, v.shape, "temp")
            if v.strides != contiguous_strides(v.shape):
                v.buf.strides = v.strides
            v.group.writes.add(id(v.buf))
            self.sources[ref] = ("buf", v.buf)
        return v.buf

    def in_memory(self, r: tuple) -> MemoryValue | None:
        """The operand as a ``MemoryValue`` (a value of the open group is stored first); None
        for a value that lives only in a closed group's registers."""
        v = self.vals[r]
        if isinstance(v, PointwiseValue):
            if v.group is not self.group:
                return None
            buf = self.store_buffer(r, v)
            return MemoryValue(buf, Geometry(v.shape, v.strides, 0), v.dtype)
        return v

    def materialize(self, refs: list) -> None:
        """Store the values among ``refs`` that live only in a reduction's prologue (a view or
        an extern needs them in memory): one pointwise kernel recomputes and stores each."""
        for r in refs:
            v = self.vals.get(r)
            if not isinstance(v, PointwiseValue) or v.group is self.group:
                continue
            self.close_group()
            g = self.group = Group(v.shape)
            local = recompute(g, v)
            self.vals[r] = w = PointwiseValue(g, local, v.shape, v.dtype, v.strides)
            g.members[r] = w
            g.ops.append("recompute")
            self.close_group()

    # -- the open group ----------------------------------------------------------------------
    def join_group(self, shape: tuple, refs: list) -> Group:
        """The open group, when it iterates ``shape`` and stores none of ``refs``; else a new
        one (the open one is closed first)."""
        g = self.group
        if g is not None and (g.shape != shape or any(
                isinstance(self.vals[r], MemoryValue) and id(self.vals[r].buf) in g.writes
                for r in refs)):
            self.close_group()
            g = None
        if g is None:
            g = self.group = Group(shape)
        return g

    def operand(self, g: Group, r: tuple) -> Local:
        """Value ``r`` as a local of group ``g`` (loaded, or recomputed from its group)."""
        v = self.vals[r]
        if isinstance(v, PointwiseValue):
            if v.group is not g:  # fused into a reduction's prologue: recomputed here
                return Local(recompute(g, v))
            return Local(v.local)
        key = (id(v.buf), v.geom)
        name = g.loads.get(key)
        if name is None:
            name = g.loads[key] = g.local()
            g.body.append(PendingLoad(name, v.buf, v.geom))
        return Local(name)

    def add_value(self, g: Group, i: int, local: str, shape: tuple, dt: Any,
                  strides: tuple, op_name: str, j: int = 0) -> None:
        """Output ``j`` of node ``i`` is ``local`` of group ``g``."""
        ref = ("n", i, j)
        v = PointwiseValue(g, local, shape, dt, strides)
        g.members[ref] = v
        g.ops.append(op_name)
        self.vals[ref] = v
        self.stats.fused_ops += 1

    def close_group(self) -> None:
        """Turn the open group into a kernel (storing what leaves it), unless a registered
        group sink absorbs it."""
        g = self.group
        if g is None:
            return
        self.group = None
        for ref, v in g.members.items():
            outside = ref in self.outputs or any(
                ("n", c, 0) not in g.members for c in self.uses.get(ref, ()))
            if outside or v.buf is not None:
                self.store_buffer(ref, v)
                g.body.append(("store", v))
            self.vals[ref] = MemoryValue(v.buf, Geometry(v.shape, v.strides, 0), v.dtype) \
                if v.buf is not None else v
        stores = [x for x in g.body if type(x) is tuple]
        if not stores:
            return  # nothing leaves the group: dead code
        if not g.has_random() and any(sink(self, g) for sink in registry.group_sinks()):
            return
        loads = [x for x in g.body if isinstance(x, PendingLoad)]
        flat = all(p.geom.is_contiguous() for p in loads) and all(
            x[1].strides == contiguous_strides(g.shape) for x in stores)
        g.bind_flat_indices(flat)
        ranges = g.shape
        loop_vars = ["i"] if flat else [f"i{d}" for d in range(len(ranges))]
        body = []
        for x in g.body:
            if isinstance(x, PendingLoad):
                body.append(Let(x.name, x.buf.compute_ctype,
                                Load(x.buf, loop_index(x.geom, loop_vars, flat))))
            elif type(x) is tuple:
                v = x[1]
                body.append(Store(v.buf, loop_index(Geometry(v.shape, v.strides, 0), loop_vars,
                                                    flat), Local(v.local)))
            else:
                body.append(x)
        order: tuple = ()
        lay = stores[0][1].strides
        if not flat and all(type(x) is int for x in lay) and list(lay) != sorted(lay)[::-1]:
            order = tuple(sorted(range(len(lay)), key=lambda d: -lay[d]))
        self.open_segment()
        k = self.add_kernel(Kernel(self.kernel_name(), ranges, body, flat, list(g.ops), order))
        log("fusion", f"{k.name}: {len(g.ops)} ops fused over {list(ranges)}"
            f"{' (flat)' if flat else ''}: {' '.join(g.ops)}", 3)

    # -- segments ------------------------------------------------------------------------------
    def open_segment(self) -> Segment:
        """The segment kernels are appended to, opened (``ember_entry``, ``ember_entry_1``, ...)
        when none is."""
        if self.segment is None:
            k = len([s for s in self.steps if isinstance(s, Segment)])
            self.segment = Segment("ember_entry" if not k else f"ember_entry_{k}")
        return self.segment

    def kernel_name(self) -> str:
        """The next kernel's name, ``kernel<N>`` with N counting the kernels of all segments."""
        return f"kernel{sum(len(s.kernels) for s in self.segments())}"

    def add_kernel(self, k: Any) -> Any:
        """Append kernel ``k`` to the open segment (opened if none is); returns ``k``."""
        self.open_segment().kernels.append(k)
        self.stats.kernels += 1
        return k

    def segments(self) -> list:
        segs = [s for s in self.steps if isinstance(s, Segment)]
        return segs + ([self.segment] if self.segment is not None else [])

    def close_segment(self) -> None:
        self.close_group()
        if self.segment is not None and self.segment.kernels:
            self.steps.append(self.segment)
            self.stats.segments += 1
        self.segment = None

    # -- externs --------------------------------------------------------------------------------
    def extern(self, i: int, n: Any, reason: str) -> None:
        """Node ``i`` runs its eager kernel between two C entry functions."""
        self.materialize([a for a in n.args if is_ref(a)])
        self.close_segment()
        outs = []
        # a runtime scalar in a non-pointwise op's parameters may decide its output's sizes
        # (narrow's length, diagonal's offset): the recorded specs are one call's, so the
        # extern's real sizes go to C at run time, as in a dynamic graph
        runtime = self.dynamic or (n.op.kind != "pointwise" and has_sym(n.params))
        for j, (shape, dt) in enumerate(n.specs):
            if runtime:
                names = [f"e{i}_{j}_{d}" for d in range(len(shape))]
                self.int_names.extend(names)
                shape = tuple(names)
            b = self.buffer(dt, tuple(shape), "extern")
            outs.append(b)
            self.bind(i, j, b, Geometry.contiguous(tuple(shape)), dt)
        self.steps.append(Extern(i, n, outs, reason))
        self.stats.externs += 1
        self.stats.fallbacks.append(f"{n.op.name}: {reason}")
        log("fallbacks", f"node {i} ({n.op.name}) runs its eager kernel: {reason}", 3)


# -- helpers shared by the rules ------------------------------------------------------------------
def is_ref(a: Any) -> bool:
    """True for a graph value reference (``("i", k)`` or ``("n", node, j)``)."""
    return type(a) is tuple and len(a) >= 2 and a[0] in ("i", "n")


def size_of(n: Any) -> Any:
    """A size as loop IR holds it: an int, or the runtime integer ``s<k>`` of a ``Sym``."""
    return f"s{n.index}" if type(n) is Sym else int(n)


def c_scalar(v: Any, ct: str) -> str:
    """C text of a number (or lifted scalar) converted to C type ``ct``."""
    if type(v) is Sym:
        src = f"floats[{v.index}]" if ct in ("float", "double") else f"ints[{v.index}]"
        return f"(({ct}){src})"
    if isinstance(v, (bool, np.bool_)):
        return f"(({ct}){int(v)})"
    if isinstance(v, (int, np.integer)):
        return f"(({ct}){int(v)}LL)"
    v = float(v)
    if ct not in ("float", "double", "bool") and math.isfinite(v):
        # a float to a narrower integer through int64, as NumPy's cast (C leaves an out-of-range
        # direct conversion undefined: (uint8_t)-1.0)
        return f"(({ct})(int64_t){v!r})"
    if math.isnan(v):
        return f"(({ct})NAN)"
    if math.isinf(v):
        return f"(({ct}){'-' if v < 0 else ''}INFINITY)"
    return f"(({ct}){v!r})"


def loop_index(geom: Geometry, loop_vars: list, flat: bool) -> Index:
    """The index of ``geom``'s element at the loop variables (``i`` alone when ``flat``)."""
    if flat:
        return Index(0, (("i", 1),))
    terms = tuple((v, s) for v, s, n in zip(loop_vars, geom.strides, geom.shape)
                  if s != 0 and n != 1)
    return Index(geom.offset, terms)


def c_ordered(strides: tuple, shape: tuple) -> bool:
    """True when the non-broadcast dims of a geometry run in C order (slowest first)."""
    last = None
    for s, m in zip(strides, shape):
        if s == 0 or m == 1:
            continue
        if type(s) is not int:
            return True
        if last is not None and s > last:
            return False
        last = s
    return True


def has_sym(x: Any) -> bool:
    """True when ``x`` (a parameter, possibly nested) holds a runtime ``Sym``."""
    t = type(x)
    if t is Sym:
        return True
    if t in (tuple, list):
        return any(has_sym(y) for y in x)
    if t is dict:
        return any(has_sym(y) for y in x.values())
    return False


def rename(e: Any, m: dict) -> Any:
    """Expression ``e`` with its locals renamed by ``m``."""
    if isinstance(e, Local):
        return Local(m.get(e.name, e.name))
    if isinstance(e, Op):
        return Op(e.name, e.template, tuple(rename(a, m) for a in e.args), e.params)
    return e


def recompute(g: Group, v: PointwiseValue) -> str:
    """Re-emit the (absorbed) group that computed ``v`` into group ``g``; ``v``'s local in ``g``.
    A producer chain fused into a reduction is recomputed by its other consumers rather than
    stored (it reads the same inputs, which are in cache for a row kernel)."""
    m = g.recomputed.get(id(v.group))
    if m is None:
        m = g.recomputed[id(v.group)] = {}
        for x in v.group.body:
            if isinstance(x, PendingLoad):
                key = (id(x.buf), x.geom)
                name = g.loads.get(key)
                if name is None:
                    name = g.loads[key] = g.local()
                    g.body.append(PendingLoad(name, x.buf, x.geom))
                m[x.name] = name
            elif isinstance(x, Let):
                m[x.name] = g.local()
                g.body.append(Let(m[x.name], x.ctype, rename(x.expr, m)))
    return m[v.local]


__all__ = ["Group", "LowerStats", "LoweringContext", "MemoryValue", "PendingLoad",
           "PointwiseValue", "c_ordered", "c_scalar", "has_sym", "is_ref", "log", "loop_index",
           "recompute", "rename", "size_of"]

"""Scheduling: the fusion plan over the whole graph before lowering, then passes over the whole
lowered ``Program`` before codegen (ARCHITECTURE.md §5).

* ``plan(graph)`` (``fusion_plan.py``, re-exported here) runs BEFORE lowering: the order nodes
  are lowered in (pointwise nodes of one iteration shape clustered, reductions over one input
  next to each other, side-effect nodes never crossed), and for each reduction prologue that
  other consumers need, whether they recompute it or it is stored, by bytes moved.  The
  ``LoweringContext`` follows it; ``FusionPlan.verify`` checks it;
* ``fuse_epilogues`` merges each pointwise kernel that directly follows a GEMM in its segment
  and reads the product element by element into the GEMM's epilogue; when nothing else needs
  the raw product, the GEMM writes straight into the epilogue's output buffer and the epilogue
  runs in place (no intermediate buffer);
* ``memory_plan`` lets temporaries with disjoint lifetimes share memory.

``schedule(program, graph)`` runs the passes over the lowered program.  The driver
(``backend.lower_and_schedule``) verifies the plan and the program after lowering (under
``config.verify_ir``, EMBER_VERIFY_IR=1, set by the tests) and the program after scheduling,
before codegen (always).  Every decision is logged under ``EMBER_LOGS=fusion``.

>>> fp = plan(graph)                                         # doctest: +SKIP
>>> schedule(lower(graph, helpers, fp), graph)               # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from ember.compiler.c.fusion_plan import FusionPlan, plan
from ember.compiler.c.ir.kernels import (
    GemmKernel,
    UserKernel,
)
from ember.compiler.c.ir.loop_ir import (
    Buffer,
    Extern,
    Geometry,
    Index,
    Kernel,
    Let,
    Load,
    Local,
    Op,
    Program,
    Store,
    reads_flat_index,
)
from ember.compiler.c.ir.qlinear import QLinearKernel
from ember.compiler.c.lower.context import log, loop_index
from ember.compiler.frontend.graph import Graph


def schedule(program: Program, graph: Graph) -> Program:
    """Run the scheduling passes over ``program`` (in place); returns it."""
    fuse_epilogues(program, graph)
    from ember.compiler.c.kernel_fusion import fuse_user_kernels
    if any(isinstance(k, UserKernel) for s in program.segments() for k in s.kernels):
        fuse_user_kernels(program, graph, python_visible(program, graph))
    return program


def fuse_epilogues(program: Program, graph: Any) -> int:
    """Merge each pointwise kernel that reads a GEMM's product element by element (same index
    space) into that GEMM's epilogue, when no kernel between the two writes what it reads;
    returns how many merged."""
    merged = 0
    outside = python_visible(program, graph)
    for seg in program.segments():
        j = 0
        while j < len(seg.kernels):
            k = seg.kernels[j]
            g = _producer(seg.kernels, j) if type(k) is Kernel else None
            if g is None:
                j += 1
                continue
            _merge(g, k, merged)
            del seg.kernels[j]
            merged += 1
            _in_place(g, program, outside)
            log("fusion", f"{g.name}: epilogue {' '.join(k.ops)} fused into the GEMM", 3)
    program.stats.kernels -= merged  # type: ignore[attr-defined]
    program.stats.epilogues += merged  # type: ignore[attr-defined]
    return merged


def _producer(kernels: list, j: int) -> GemmKernel | None:
    """The GEMM before ``kernels[j]`` whose epilogue it can join: the nearest one whose product
    it reads, with nothing in between writing a buffer it loads, or reading or writing a
    buffer it stores (the zero fill before ``basic_index_backward``'s copy must stay first)."""
    k = kernels[j]
    k_in, k_out = k.buffers()
    reads = set(id(b) for b in k_in)
    writes = set(id(b) for b in k_out)
    for p in range(j - 1, -1, -1):
        g = kernels[p]
        if isinstance(g, (GemmKernel, QLinearKernel)) and id(g.out) in reads:
            return g if _fusable(g, k) else None
        g_in, g_out = g.buffers()
        if any(id(b) in reads or id(b) in writes for b in g_out):
            return None
        if any(id(b) in writes for b in g_in):
            return None
    return None


def _fusable(g: GemmKernel, k: Any) -> bool:
    if type(k) is not Kernel or k.order or tuple(k.ranges) != tuple(g.out.shape):
        return False
    if reads_flat_index(k.body):
        return False  # a random op's flat index is the plain kernel's loop variables
    if k.has_checks():
        return False  # only a plain kernel returns its checks' error word (integer division)
    here = _here(g.out.shape, k.flat)
    reads = False
    for st in k.body:
        for idx in _loads_of(st.expr, g.out):
            if idx != here:
                return False
            reads = True
    return reads


def _here(shape: tuple, flat: bool) -> Index:
    evars = ["i"] if flat else [f"i{d}" for d in range(len(shape))]
    return loop_index(Geometry.contiguous(tuple(shape)), evars, flat)


def _merge(g: GemmKernel, k: Kernel, tag: int) -> None:
    shape = tuple(g.out.shape)
    flat = k.flat and (not g.epilogue or g.epi_flat)
    epi = g.epilogue if (flat or not g.epi_flat) else _unflatten(g.epilogue, shape)
    body = k.body if (flat or not k.flat) else _unflatten(k.body, shape)
    here = _here(shape, flat)
    stored = next((st.expr for st in epi if isinstance(st, Store) and st.buf is g.out), None)
    names = {st.name: f"e{tag}_{st.name}" for st in body if isinstance(st, Let)}
    subst = (lambda e: stored) if stored is not None else None

    def fix(e: Any) -> Any:
        if isinstance(e, Local):
            return Local(names.get(e.name, e.name))
        if isinstance(e, Load):
            if e.buf is g.out and subst is not None:
                return subst(e)
            return e
        if isinstance(e, Op):
            return Op(e.name, e.template, tuple(fix(a) for a in e.args), e.params)
        return e

    out = list(epi)
    for st in body:
        if isinstance(st, Let):
            out.append(Let(names[st.name], st.ctype, fix(st.expr)))
        else:
            out.append(Store(st.buf, st.index, fix(st.expr)))
    g.epilogue, g.epi_flat = out, flat
    g.ops = g.ops + list(k.ops)
    assert all(_loads_of(st.expr, g.out) in ([], [here]) for st in out), g


def _unflatten(stmts: list, shape: tuple) -> list:
    here = _here(shape, False)

    def fix(e: Any) -> Any:
        if isinstance(e, Load):
            return Load(e.buf, here)
        if isinstance(e, Op):
            return Op(e.name, e.template, tuple(fix(a) for a in e.args), e.params)
        return e
    return [Let(st.name, st.ctype, fix(st.expr)) if isinstance(st, Let) else
            Store(st.buf, here, fix(st.expr)) for st in stmts]


def _in_place(g: GemmKernel, program: Program, outside: set) -> None:
    """When nothing but the epilogue needs the raw product, drop its store and let the GEMM
    write into one of the epilogue's own output buffers (same dtype, shape, C order)."""
    x = g.out
    if id(x) in outside:
        return
    for seg in program.segments():
        for k in seg.kernels:
            if k is not g and x in k.buffers()[0]:
                return
    body = [st for st in g.epilogue if not (isinstance(st, Store) and st.buf is x)]
    here = _here(tuple(x.shape), g.epi_flat)
    target = None
    for st in body:
        if (isinstance(st, Store) and st.buf.role == "temp" and st.buf.strides is None
                and st.buf.dtype == x.dtype and tuple(st.buf.shape) == tuple(x.shape)
                and st.index == here and all(st.buf is not b for b in _operands(g))):
            target = st.buf
            break
    if target is None:
        return

    def fix(e: Any) -> Any:
        if isinstance(e, Load) and e.buf is x:
            return Load(target, e.index)
        if isinstance(e, Op):
            return Op(e.name, e.template, tuple(fix(a) for a in e.args), e.params)
        return e
    g.epilogue = [Let(st.name, st.ctype, fix(st.expr)) if isinstance(st, Let) else
                  Store(st.buf, st.index, fix(st.expr)) for st in body]
    g.out = target


def _operands(g: Any) -> list:
    """The buffers a kernel with an epilogue reads for its product."""
    return g.operand_buffers() if isinstance(g, QLinearKernel) else [g.a.buf, g.b.buf]


def _loads_of(e: Any, buf: Buffer) -> list:
    if isinstance(e, Load):
        return [e.index] if e.buf is buf else []
    if isinstance(e, Op):
        return [x for a in e.args for x in _loads_of(a, buf)]
    return []


def python_visible(program: Program, graph: Any) -> set:
    """Ids of buffers the driver reads from Python: graph outputs and extern operands (through
    views, to their base buffer)."""
    srcs = program.sources  # type: ignore[attr-defined]
    seen: set = set()

    def base(r: Any) -> None:
        s = srcs.get(r)
        if s is None:
            return
        if s[0] == "buf":
            seen.add(id(s[1]))
        elif s[0] == "view":
            base(graph.nodes[s[1]].args[0])
    for r in graph.outputs:
        base(r)
    for step in program.externs():
        for a in itertools.chain(step.node.args, *(
                x if isinstance(x, (list, tuple)) else () for x in step.node.args)):
            if type(a) is tuple:
                base(a)
    return seen


def memory_plan(program: Program, graph: Graph) -> tuple[dict, list]:
    """Temporaries that share memory: ``({id(buffer): slot}, [bytes of each slot]``).

    A candidate is a C-contiguous temporary of static size that only C kernels touch (no
    extern reads it, it is no graph output or base of one, directly or through a view:
    ``python_visible``).  Its
    lifetime runs from the first to the last kernel that uses it, counting kernels across all
    segments in order (externs count as one step).  Candidates go, in order of first use, to
    the slot whose last user ran before their first and whose size fits best (else the
    largest free one, grown); a call allocates each slot once and views each buffer at the
    slot's start.  Buffers whose lifetimes overlap never share a slot, and no kernel is given
    two buffers of one slot, since a kernel is inside both lifetimes of what it uses."""
    visible = python_visible(program, graph)
    first: dict = {}
    last: dict = {}
    bufs: dict = {}
    t = 0
    for step in program.steps:
        if isinstance(step, Extern):
            t += 1
            continue
        for k in step.kernels:
            loads, stores = k.buffers()
            for b in loads + stores:
                first.setdefault(id(b), t)
                last[id(b)] = t
                bufs[id(b)] = b
            t += 1
    cands = []
    for key, b in bufs.items():
        if (b.role != "temp" or key in visible or b.strides is not None
                or any(type(n) is not int for n in b.shape)):
            continue
        nbytes = b.dtype.np.itemsize * math.prod(b.shape)
        if nbytes:
            cands.append((first[key], last[key], nbytes, key))
    cands.sort()
    ends: list = []   # per slot: the time of its last user so far
    sizes: list = []
    slots: dict = {}
    for start, end, nbytes, key in cands:
        free = [j for j in range(len(ends)) if ends[j] < start]
        fits = [j for j in free if sizes[j] >= nbytes]
        if fits:
            j = min(fits, key=lambda j: sizes[j])
        elif free:
            j = max(free, key=lambda j: sizes[j])
            sizes[j] = nbytes
        else:
            j = len(ends)
            ends.append(end)
            sizes.append(nbytes)
        ends[j] = end
        slots[key] = j
    return slots, sizes


__all__ = ["FusionPlan", "fuse_epilogues", "memory_plan", "plan", "python_visible", "schedule"]

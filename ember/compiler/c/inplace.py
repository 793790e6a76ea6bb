"""In-place writes: graph outputs computed directly in the memory of the inputs they replace.

A graph records the in-place writes of the traced code functionally: the new value of a written
input is an output, and ``Graph.mutated`` says which input it replaces (``(output, input)``
pairs).  The caller stores such an output into the input's memory after the call; when the
output *is* the input array, nothing is copied (``_lazy.Trace.realize``, the replay of
``mode="reduce-overhead"``).  ``donations`` decides, over the scheduled program, which of these
outputs the kernels may write straight into the input's buffer: the runtime then passes the
input array as the output buffer (``backend.CompiledGraph``) and returns it as the output.

An output ``O`` (the value of input ``I``) is donated when all of these hold:

- ``O`` is a C-contiguous temporary of ``I``'s dtype and shape, stored by exactly one kernel
  ``K``, no extern's output, and no other graph output is ``O`` or a view of it;
- no kernel after ``K`` loads ``I`` and no extern after ``K`` reads input ``I`` (the old value
  is dead once ``K`` has run; reads after the write in the traced code read ``O``);
- ``K`` itself reads ``I`` safely: not at all; or, in a pointwise kernel or a GEMM's epilogue,
  only at the element it stores and only into the value stored (each element is read before
  it is overwritten, in the same iteration), or likewise in a reduction's per-output
  epilogue whose reduced loops do not read ``I``; or ``K`` is an ``index_put`` over all of
  ``I`` (its copy of ``I`` is skipped when the output is ``I``: a KV-cache write touches only the
  written rows).  A GEMM whose epilogue overwrites the product in ``O`` (``schedule._in_place``)
  gets a temporary of its own for the product again, so the product never lands in ``I``.

Inputs whose memory another input of the graph shares (a view and its base) are never in
``Graph.mutated`` (``frontend/api._mutations``).  The runtime falls back to a fresh output
(and the caller's copy) when an input array is not C-contiguous of the buffer's dtype.

``EMBER_C_INPLACE=0`` (read at import) turns donation off: every new value is a fresh output
that the caller copies (for measuring what the in-place writes save).
"""

from __future__ import annotations

import os
from typing import Any

from ember.compiler.c.ir.kernels import AdvIndexKernel, GemmKernel
from ember.compiler.c.ir.loop_ir import (
    Accum,
    Buffer,
    Extern,
    Kernel,
    Let,
    Load,
    Op,
    Program,
    ReduceKernel,
    Store,
    loaded_buffers,
    loads_of,
    locals_read,
)

ENABLED = os.environ.get("EMBER_C_INPLACE", "1") != "0"


def donations(program: Program, graph: Any, mutated: tuple) -> list:
    """``[(output buffer, input index), ...]``: the outputs of ``mutated`` (``Graph.mutated``
    of ``graph``, the graph ``program`` was lowered from) that the kernels write into the
    input's memory (see the module docstring)."""
    if not mutated or not ENABLED:
        return []
    srcs = program.sources  # type: ignore[attr-defined]
    steps = _timeline(program)
    out_uses: dict = {}
    for r in graph.outputs:
        b = _base(r, srcs, graph)
        if b is not None:
            out_uses[b] = out_uses.get(b, 0) + 1
    done: list = []
    taken: set = set()
    for o, k in mutated:
        src = srcs.get(graph.outputs[o])
        if src is None or src[0] != "buf" or k in taken or k >= len(program.inputs):
            continue
        out, inp = src[1], program.inputs[k]
        if not _same_layout(out, inp) or out_uses.get(("buf", id(out))) != 1:
            continue
        kern = _safe(steps, out, inp, k, srcs, graph)
        if kern is not None:
            if isinstance(kern, GemmKernel) and kern.out is out:
                _split_product(kern, out)
            done.append((out, k))
            taken.add(k)
    return done


def _split_product(g: GemmKernel, out: Buffer) -> None:
    """``g`` writes its raw product into ``out`` and its epilogue overwrites it
    (``schedule._in_place``); ``out`` is to be the input its epilogue reads: the product goes
    to a temporary of its own again (the memory plan gives it a shared slot)."""
    raw = Buffer(f"{out.name}_p", out.dtype, out.shape, "temp")

    def fix(e: Any) -> Any:
        if isinstance(e, Load) and e.buf is out:
            return Load(raw, e.index)
        if isinstance(e, Op):
            return Op(e.name, e.template, tuple(fix(a) for a in e.args), e.params)
        return e
    g.epilogue = [Let(st.name, st.ctype, fix(st.expr)) if isinstance(st, Let) else
                  Store(st.buf, st.index, fix(st.expr)) for st in g.epilogue]
    g.out = raw


def _timeline(program: Program) -> list:
    """Every kernel and extern in run order."""
    out: list = []
    for step in program.steps:
        if isinstance(step, Extern):
            out.append(step)
        else:
            out.extend(step.kernels)
    return out


def _base(r: Any, srcs: dict, graph: Any) -> tuple | None:
    """Where value ``r`` lives: ``("buf", id(buffer))`` or ``("in", k)``, through views."""
    while True:
        s = srcs.get(r)
        if s is None:
            return None
        if s[0] == "buf":
            return ("buf", id(s[1]))
        if s[0] == "in":
            return ("in", s[1])
        r = graph.nodes[s[1]].args[0]


def _same_layout(out: Buffer, inp: Buffer) -> bool:
    return (out.role == "temp" and out.strides is None and inp.strides is None
            and out.dtype == inp.dtype and tuple(out.shape) == tuple(inp.shape))


def _safe(steps: list, out: Buffer, inp: Buffer, k: int, srcs: dict, graph: Any) -> Any:
    """The kernel that stores ``out`` when ``out`` may be computed in ``inp``, else None."""
    writers = [t for t, s in enumerate(steps)
               if (out in s.outs if isinstance(s, Extern) else out in s.buffers()[1])]
    if len(writers) != 1 or isinstance(steps[writers[0]], Extern):
        return None
    t = writers[0]
    for s in steps:
        if isinstance(s, Extern) and _extern_reads(s, ("buf", id(out)), srcs, graph):
            return None   # an extern reads the new value from Python: keep it a plain output
    for s in steps[t + 1:]:
        if isinstance(s, Extern):
            if _extern_reads(s, ("in", k), srcs, graph):
                return None
        elif inp in s.buffers()[0]:
            return None
    return steps[t] if _kernel_ok(steps[t], out, inp) else None


def _extern_reads(step: Extern, where: tuple, srcs: dict, graph: Any) -> bool:
    args = []
    for a in step.node.args:
        args.extend(a if isinstance(a, (list, tuple)) and not _is_ref(a) else (a,))
    return any(_is_ref(a) and _base(a, srcs, graph) == where for a in args)


def _is_ref(a: Any) -> bool:
    return type(a) is tuple and len(a) >= 2 and a[0] in ("i", "n")


def _kernel_ok(kern: Any, out: Buffer, inp: Buffer) -> bool:
    """Whether ``kern`` may store ``out`` into ``inp``'s memory while it reads ``inp``."""
    if isinstance(kern, AdvIndexKernel):
        if inp not in kern.buffers()[0]:
            return True
        return (kern.put is not None and kern.x is inp and kern.out is out
                and kern.idx is not inp and kern.values is not inp
                and kern.x_geom.is_contiguous() and tuple(kern.x_geom.shape) == tuple(inp.shape))
    if isinstance(kern, GemmKernel):
        if inp in (kern.a.buf, kern.b.buf):
            return False
        if out is kern.out and not any(isinstance(st, Store) and st.buf is out
                                       for st in kern.epilogue):
            return inp not in kern.buffers()[0]   # the product itself is the new value
        # (an epilogue that overwrites the product in ``out``: ``_split_product``)
        return _pointwise_ok(kern.epilogue, out, inp)
    if isinstance(kern, Kernel):
        return _pointwise_ok(kern.body, out, inp)
    if isinstance(kern, ReduceKernel) and inp in kern.buffers()[0]:
        return _reduce_ok(kern, out, inp)
    return inp not in kern.buffers()[0]


def _reduce_ok(kern: ReduceKernel, out: Buffer, inp: Buffer) -> bool:
    """A reduction whose per-output epilogue (an optimizer step fused after a bias gradient's
    sum) reads ``inp`` only where it stores ``out``; the reduced loops do not read it."""
    if kern.pre is not None:
        return False
    inner = [st for p in kern.passes for st in p.body + p.accums]
    for st in inner:
        if inp in loaded_buffers(st.value if isinstance(st, Accum) else st.expr) or \
                getattr(st, "buf", None) is out:
            return False
    tail = [st for p in kern.passes for st in p.finals] + list(kern.stores)
    if any(not isinstance(st, (Let, Store)) for st in tail):
        return False
    return _pointwise_ok(tail, out, inp)


def _pointwise_ok(body: list, out: Buffer, inp: Buffer) -> bool:
    """``out`` stored once; every load of ``inp`` is at that store's index and feeds the stored
    value (so it happens before the store, in the same iteration, whatever the compiler
    reorders)."""
    at = [j for j, st in enumerate(body) if isinstance(st, Store) and st.buf is out]
    if len(at) != 1:
        return False
    js = at[0]
    index = body[js].index
    need = set(locals_read(body[js].expr))
    for j in range(js - 1, -1, -1):
        st = body[j]
        if isinstance(st, Let) and st.name in need:
            need.update(locals_read(st.expr))
    for j, st in enumerate(body):
        got = loads_of(st.expr, inp)
        if not got:
            continue
        if any(ix != index for ix in got):
            return False
        if j != js and not (j < js and isinstance(st, Let) and st.name in need):
            return False
    return True


__all__ = ["donations"]

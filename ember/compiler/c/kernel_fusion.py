"""Pointwise fusion into ``ember.kernel`` launches (``UserKernel``): a scheduling pass.

After lowering, a pointwise kernel that only computes a kernel op's input is moved into the
kernel's ``load`` of that pointer (the *prologue*), and a pointwise kernel that only consumes
a kernel op's output is moved into its ``store`` (the *epilogue*), so neither value is
materialized: ``softmax_kernel(x * 2) + 1`` is one kernel, as the backend's own softmax is.
The kernel's C is regenerated (``ember/kernel/_front.py``) with a hook per fused pointer: a
load at element offset ``o`` becomes the producer's expression at ``o`` (a GNU statement
expression), a store of ``v`` at ``o`` becomes the consumer's statements with ``v`` in place
of its load.

Where it is legal (anything else: no fusion, the kernels stay as they are).  Both sides:

* the pointwise kernel is a plain ``Kernel`` of the same segment (no random op, no input
  check), and the fused buffer is a temporary that nothing else reads: not a graph output,
  not read by an extern or a view seen from Python, read or written by no other kernel;
* the buffer is C-contiguous, of static shape, not float16/bfloat16 (those round on store:
  the fused value would skip the rounding), and the pointwise kernel stores / loads it at
  its own loop position (same shape, same element order), so the kernel's element offset
  ``o`` into the tensor is the pointwise kernel's flat position ``o``; every other load of the
  pointwise kernel is re-indexed from ``o`` (a broadcast operand through ``o / inner % n``);
* its loads read no buffer that a kernel between the two writes, nor one the kernel op
  stores; no runtime scalars (``ints``/``floats`` of the entry) in its code.

Prologue (producer -> kernel input ``p``): the kernel loads through ``p`` and never stores
through it, gets the buffer from its first element, and no other argument of the launch is
that buffer.  The producer's store of the buffer is dropped (the producer kernel too, when it
stores nothing else).  The producer runs once per load, so a kernel that loads an element
twice computes it twice (pointwise work is cheap next to the memory round trip it saves).

Epilogue (kernel output ``q`` -> consumer): the kernel stores through ``q`` and never loads
through it; ``q``'s buffer was uninitialized (``empty``/``empty_like`` in the op's body: no
copy-in); the consumer comes later in the same segment with nothing in between writing what
it reads or touching what it stores, reads no other output of the kernel, and every value it
stores depends on ``q``.  The consumer's stores move into the kernel (its outputs become the
kernel's) and the consumer kernel is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ember.compiler.c.ir.kernels import UserKernel
from ember.compiler.c.ir.loop_ir import (
    Buffer,
    Const,
    Index,
    Kernel,
    Let,
    Load,
    Local,
    Op,
    PointCheck,
    Store,
    contiguous_strides,
    is_lowp,
    loaded_buffers,
    locals_read,
    reads_flat_index,
    store_expr,
)
from ember.compiler.c.lower.context import log, loop_index


@dataclass
class Hook:
    """What the kernel compiler calls for one fused pointer (see ``Gen.fusion``)."""

    kind: str          # "load" | "store"
    param: str
    params: list       # (C param name, dtype name) that replace the tensor parameter
    bufs: list         # the Buffers passed for them, in order
    stmts: list        # the pointwise kernel's statements to inline (Let / Store)
    here: dict         # loop variable -> its C expression of the offset ``o_``
    value: Any = None  # load: the Store whose value is read; store: the Load replaced
    ctype: str = ""

    def _expr(self, e: Any) -> str:
        if isinstance(e, Load):
            j = self.bufs.index(e.buf)
            terms = tuple((self.here[v], s) for v, s in e.index.terms)
            b = Buffer(f"a_{self.params[j][0]}", e.buf.dtype, e.buf.shape, e.buf.role)
            return b.load(Index(e.index.offset, terms))
        if isinstance(e, Local):
            return f"ekf_{e.name}"
        if isinstance(e, Op):
            return e.template.format(*(self._expr(a) for a in e.args), **dict(e.params))
        return str(e)

    def _lets(self) -> list:
        return [f"const {x.ctype} ekf_{x.name} = ({x.ctype})({self._expr(x.expr)});"
                for x in self.stmts if isinstance(x, Let)]

    def load(self, off: str) -> str:
        """C expression of the producer's value at element ``off`` (the kernel's load)."""
        body = " ".join(self._lets())
        return (f"({{ const int64_t o_ = {off}; (void)o_; {body} "
                f"({self.ctype})({self._expr(self.value.expr)}); }})")

    def store(self, off: str, value: str) -> str:
        """C statement running the consumer at element ``off`` on the stored ``value``."""
        parts = [f"const int64_t o_ = {off};",
                 f"const {self.ctype} ekf_v_ = ({self.ctype})({value});"]
        parts += self._lets()
        for st in self.stmts:
            if isinstance(st, Store):
                j = self.bufs.index(st.buf)
                parts.append(f"a_{self.params[j][0]}[o_] = "
                             f"{store_expr(st.buf.dtype, self._expr(st.expr))};")
        return "{ " + " ".join(parts) + " }"


def fuse_user_kernels(program: Any, graph: Any, visible: set) -> int:
    """Fuse pointwise producers and consumers into each ``UserKernel`` of ``program`` (in
    place); returns how many values no longer go through memory.  ``visible``: ids of
    buffers Python reads (``schedule.python_visible``)."""
    fused = 0
    for seg in program.segments():
        before = len(seg.kernels)
        for u in [k for k in seg.kernels if isinstance(k, UserKernel) and k.launch]:
            hooks: dict = {}
            while _prologue(program, seg, u, hooks, visible) or \
                    _epilogue(program, seg, u, hooks, visible):
                fused += 1
        program.stats.kernels -= before - len(seg.kernels)  # type: ignore[attr-defined]
    return fused


# -- legality ---------------------------------------------------------------------------------
def _readers(program: Any, buf: Buffer) -> list:
    return [k for seg in program.segments() for k in seg.kernels if buf in k.buffers()[0]]


def _writers(program: Any, buf: Buffer) -> list:
    return [k for seg in program.segments() for k in seg.kernels if buf in k.buffers()[1]]


def _plain_temp(buf: Buffer, visible: set) -> bool:
    return (buf.role == "temp" and id(buf) not in visible and buf.strides is None
            and not is_lowp(buf.dtype) and all(type(n) is int for n in buf.shape))


def _here(k: Kernel) -> Index:
    shape = tuple(k.ranges)
    return loop_index(_contig(shape), k.loop_vars(), k.flat)


def _contig(shape: tuple) -> Any:
    from ember.compiler.c.ir.loop_ir import Geometry
    return Geometry(shape, contiguous_strides(shape), 0)


def _offset_map(k: Kernel) -> dict | None:
    """Loop variable -> C expression of it at flat position ``o_`` (None: symbolic sizes)."""
    if k.flat:
        return {"i": "o_"}
    shape = tuple(k.ranges)
    if any(type(n) is not int for n in shape):
        return None
    out = {}
    for d, (v, inner) in enumerate(zip(k.loop_vars(), contiguous_strides(shape))):
        e = "o_" if inner == 1 else f"(o_ / {inner})"
        out[v] = e if d == 0 else f"({e} % {shape[d]})"
    return out


def _plain_kernel(k: Any) -> bool:
    return (type(k) is Kernel and not k.has_checks() and not reads_flat_index(k.body)
            and not any(isinstance(st, PointCheck) for st in k.body))


def _closure(k: Kernel, exprs: list) -> list | None:
    """The Lets of ``k`` that ``exprs`` need, in order; None when one reads runtime scalars."""
    need = set(n for e in exprs for n in locals_read(e))
    out: list = []
    for st in reversed(k.body):
        if isinstance(st, Let) and st.name in need:
            out.append(st)
            need.update(locals_read(st.expr))
    for st in out + [Let("", "", e) for e in exprs]:
        if _scalar_args(st.expr):
            return None
    return out[::-1]


def _scalar_args(e: Any) -> bool:
    if isinstance(e, Const):
        return "ints[" in e.text or "floats[" in e.text
    if isinstance(e, Op):
        return any("ints[" in t or "floats[" in t for _, t in e.params) or \
            any(_scalar_args(a) for a in e.args)
    return False


def _between_ok(seg: Any, a: int, b: int, reads: set, writes: set) -> bool:
    """No kernel strictly between positions ``a`` and ``b`` writes ``reads`` or touches
    ``writes`` (buffer ids)."""
    for k in seg.kernels[a + 1:b]:
        ins, outs = k.buffers()
        if any(id(x) in reads or id(x) in writes for x in outs) or \
                any(id(x) in writes for x in ins):
            return False
    return True


def _arg_positions(u: UserKernel, buf: Buffer) -> list:
    return [j for j, a in enumerate(u.args) if a[0] == "buf" and a[1] is buf]


# -- prologue ---------------------------------------------------------------------------------
def _prologue(program: Any, seg: Any, u: UserKernel, hooks: dict, visible: set) -> bool:
    from ember.kernel._front import access
    loaded, stored = access(*u.launch[:2])
    for name, a in zip(u.names, u.args):
        if a[0] != "buf" or name in hooks or name not in loaded or name in stored:
            continue
        buf = a[1]
        if a[2] != 0 or len(_arg_positions(u, buf)) != 1 or \
                any(c[1] is buf for c in u.copies) or not _plain_temp(buf, visible):
            continue
        got = _producer_hook(program, seg, u, buf, name)
        if got is None:
            continue
        p, hooks[name] = got
        _regenerate(u, hooks)
        p.body = [s for s in p.body if s is not hooks[name].value]
        if not any(isinstance(s, Store) for s in p.body):
            seg.kernels.remove(p)
        u.ops[:0] = list(p.ops)
        log("fusion", f"{u.name}: {' '.join(p.ops)} fused into the load of {name}", 3)
        return True
    return False


def _producer_hook(program: Any, seg: Any, u: UserKernel, buf: Buffer,
                   name: str) -> tuple | None:
    """(the kernel that stores ``buf``, the load hook computing it), when legal."""
    writers = _writers(program, buf)
    if len(writers) != 1 or _readers(program, buf) != [u]:
        return None
    p = writers[0]
    if p not in seg.kernels or seg.kernels.index(p) > seg.kernels.index(u) or \
            not _plain_kernel(p) or tuple(p.ranges) != tuple(buf.shape):
        return None
    st = [s for s in p.body if isinstance(s, Store) and s.buf is buf]
    omap = _offset_map(p)
    if len(st) != 1 or st[0].index != _here(p) or omap is None:
        return None
    lets = _closure(p, [st[0].expr])
    if lets is None:
        return None
    bufs = _distinct([b for x in lets + [st[0]] for b in loaded_buffers(x.expr)])
    if any(b in u.outs for b in bufs) or not _between_ok(
            seg, seg.kernels.index(p), seg.kernels.index(u), {id(b) for b in bufs}, set()):
        return None
    params = [(f"{name}__f{t}", b.dtype.np.name) for t, b in enumerate(bufs)]
    return p, Hook("load", name, params, bufs, lets, omap, st[0], buf.compute_ctype)


# -- epilogue ---------------------------------------------------------------------------------
def _epilogue(program: Any, seg: Any, u: UserKernel, hooks: dict, visible: set) -> bool:
    from ember.kernel._front import access
    loaded, stored = access(*u.launch[:2])
    for name, a in zip(u.names, u.args):
        if a[0] != "buf" or name in hooks or name not in stored or name in loaded:
            continue
        buf = a[1]
        if buf not in u.outs or any(c[0] is buf for c in u.copies) or \
                not _plain_temp(buf, visible):
            continue
        readers = _readers(program, buf)
        if len(readers) != 1 or _writers(program, buf) != [u]:
            continue
        c = readers[0]
        if c not in seg.kernels or seg.kernels.index(c) < seg.kernels.index(u) or \
                not _plain_kernel(c) or tuple(c.ranges) != tuple(buf.shape):
            continue
        hook = _consumer_hook(c, u, buf, name)
        if hook is None:
            continue
        reads = {id(b) for b in hook.bufs if b not in c.buffers()[1]}
        if not _between_ok(seg, seg.kernels.index(u), seg.kernels.index(c), reads,
                           {id(b) for b in c.buffers()[1]}):
            continue
        hooks[name] = hook
        u.outs = [b for b in u.outs if b is not buf] + list(c.buffers()[1])
        _regenerate(u, hooks)
        seg.kernels.remove(c)
        u.ops.extend(c.ops)
        log("fusion", f"{u.name}: {' '.join(c.ops)} fused into the store of {name}", 3)
        return True
    return False


def _consumer_hook(c: Kernel, u: UserKernel, buf: Buffer, name: str) -> Hook | None:
    here, omap = _here(c), _offset_map(c)
    if omap is None:
        return None
    stores = [s for s in c.body if isinstance(s, Store)]
    if not stores or any(s.index != here for s in stores):
        return None
    # the load of ``buf`` becomes the kernel's value: every load of it must sit at ``here``
    stmts: list = []
    taken: set = set()
    for st in c.body:
        if isinstance(st, Let) and isinstance(st.expr, Load) and st.expr.buf is buf:
            if st.expr.index != here:
                return None
            stmts.append(Let(st.name, st.ctype, Local("v_")))
            taken.add(st.name)
        elif isinstance(st, (Let, Store)):
            if buf in loaded_buffers(st.expr):
                return None  # a load of it inside an expression (not at its own Let)
            stmts.append(st)
    if not taken or any(_scalar_args(st.expr) for st in stmts):
        return None
    dep = set(taken)
    for st in stmts:
        if isinstance(st, Let) and set(locals_read(st.expr)) & dep:
            dep.add(st.name)
    if any(not (set(locals_read(s.expr)) & dep) for s in stores):
        return None  # a value that does not depend on the kernel's output
    ins = _distinct([b for st in stmts for b in loaded_buffers(st.expr)])
    outs = _distinct([s.buf for s in stores])
    if any(b in u.outs for b in ins) or any(b in u.buffers()[0] for b in outs):
        return None
    bufs = ins + outs
    params = [(f"{name}__f{t}", b.dtype.np.name) for t, b in enumerate(bufs)]
    return Hook("store", name, params, bufs, stmts, omap, None, buf.compute_ctype)


def _regenerate(u: UserKernel, hooks: dict) -> None:
    """Rebuild ``u``'s C and arguments with ``hooks``."""
    from ember.kernel._front import kernel_c
    jf, bound, ints = u.launch
    source, grid_fn, params, _ = kernel_c(jf, bound, hooks, ints)
    by_name = dict(zip(u.names, u.args))
    for h in hooks.values():
        for (pname, _), b in zip(h.params, h.bufs):
            by_name[pname] = ("buf", b, 0)
    u.names = [n for n, _, _ in params]
    u.args = [by_name[n] for n in u.names]
    u.source, u.grid_fn = source, grid_fn


def _distinct(xs: list) -> list:
    out: list = []
    for x in xs:
        if not any(x is y for y in out):
            out.append(x)
    return out


__all__ = ["Hook", "fuse_user_kernels"]

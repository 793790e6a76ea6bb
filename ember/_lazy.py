"""Lazy payloads: recording tensor ops into a trace instead of running them (ARCHITECTURE.md §4).

While a compiled function runs, ``ember.tensor.bind`` hands every op to the active ``Trace``.
The trace checks the op with its ``meta`` rule and gives each output a ``LazyArray`` payload: an
object that answers the metadata questions a NumPy array answers (shape, dtype, ndim, size,
strides) without holding any data.  The graph is *realized* when the compiled call returns and at
every graph break: each ``LazyArray`` that is still alive becomes a graph output, the compiler
(installed with ``install_realizer``) runs the graph, and the results replace the payloads.

Anything that needs a lazy tensor's values (``bool``, ``item``, NumPy access, printing, an op whose
output shape depends on data) is a graph break: ``graph_break`` realizes the trace and recording
continues in a new graph.  Reading a ``LazyArray`` through any attribute this class does not
answer also breaks, so code that was written for eager tensors stays correct under a trace.

In-place writes are functionalized per *storage* (the tensors that share a version counter share
memory): the new value of the whole storage is recorded, tensors that alias it are re-read from it
when next used, and storages that belong to concrete tensors (inputs, parameters, buffers) are
written back when the graph is realized.

This module is part of the tensor layer: it knows nothing about graphs beyond the recorded node
list; the compiler (``ember/compiler``) turns a trace into a ``Graph`` and runs it.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
import weakref
from typing import Any, Callable

import numpy as np

from ember import _frozen
from ember._known import _HELD_REFS, _WREF, Known, TNode, _collect, _in_meta, _resweep, same
from ember._lazy_array import LazyArray, _contig_strides, _dense, _ptr, _shadow_for, _Storage  # noqa: F401
from ember.config import config as _config
from ember.errors import GraphBreakError

_IREFS = tuple(("i", k) for k in range(64))   # input refs, one object each (cheap to compare)
_new = object.__new__


# ------------------------------------------------------------------------------------ state
class _State(threading.local):
    """Which trace records (None: eager) and the graph-break policy stack: one per thread, so
    threads trace (and call compiled functions) independently.  ``realizer`` and
    ``backward_owner`` are installed once for the process (class attributes, shared)."""

    realizer: Callable | None = None  # installed by ember.compiler
    # owner of a trace that records a backward over compiled-forward nodes (compiled
    # autograd): ``fn(forward_owner) -> owner``, installed by ember.compiler
    backward_owner: Callable | None = None

    def __init__(self) -> None:  # runs once in each thread that uses STATE
        self.trace: Trace | None = None
        self.error_on_break: list[bool] = []   # innermost last (error_on_graph_break)
        self.fullgraph = 0                     # active compiled frames with fullgraph=True
        # a ``mode="reduce-overhead"`` call being recorded (frontend/replay.py): notified of
        # what a replay could not redo by itself (autograd nodes run, leaves given a ``.grad``,
        # step-dependent Python numbers and how to recompute them); None otherwise
        self.recorder: Any = None


STATE = _State()


def install_realizer(fn: Callable[[Trace, list, list], list]) -> None:
    """``fn(trace, nodes_needed, outputs) -> arrays`` runs a trace's graph (the compiler)."""
    _State.realizer = staticmethod(fn)  # type: ignore[assignment]


def install_backward_owner(fn: Callable[[Any], Any]) -> None:
    """``fn(forward_owner) -> owner``: the trace owner (cache) under which ``backward()`` over
    autograd nodes recorded by a compiled call runs (compiled autograd)."""
    _State.backward_owner = staticmethod(fn)  # type: ignore[assignment]


_EMBER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stack(limit: int = 8) -> list:
    """The innermost frames outside the ember package (the user's code), outermost first."""
    frames = []
    f = sys._getframe(1)
    while f is not None and len(frames) < limit:
        fn = f.f_code.co_filename
        if not os.path.abspath(fn).startswith(_EMBER_DIR) and not fn.startswith("<frozen"):
            frames.append(traceback.FrameSummary(fn, f.f_lineno, f.f_code.co_name,
                                                 lookup_line=False))
        f = f.f_back
    frames.reverse()
    return frames


# ------------------------------------------------------------------------------------ trace
class Trace:
    """The ops recorded since the last realization, and what realizing them needs."""

    # this thread's (grad_enabled, inference) as the binder's follow path last read it, and
    # ``grad_mode.GENERATION`` then: read again when that moved
    gm_generation = -1
    gm = (True, False)

    def __init__(self, owner: Any) -> None:
        self.owner = owner                  # the compiled function's state (compiler-defined)
        # ``owner.known_trace(segment)``: the trace a graph of this code last ran (``Known``)
        self._known_of = getattr(owner, "known_trace", None) if owner is not None else None
        self.reset()
        self.breaks: list = []              # (reason, user_stack) per graph break this call
        self.segment = 0                    # graphs realized so far in this call

    def reset(self) -> None:
        hook = self._known_of
        # the cached trace this graph follows while it records the same ops (None: diverged)
        self.known: Known | None = hook(self.__dict__.get("segment", 0)) if hook else None
        self.nodes: list[TNode] = []
        self.loosened: list | None = None   # numbers of the known trace this call changed
        self.inputs: list[np.ndarray] = []
        self.input_ids: dict[int, int] = {}
        # in creation order: weakrefs of LazyArrays, and the tensors the binder's follow path
        # made (``hold``), held strongly until ``live_tensors`` sweeps them: one object per
        # recorded op instead of two weak references (issue 21)
        self.lazies: list = []
        self.tensors: list = []             # weakrefs of tensors with lazy payloads
        self.live: list | None = None       # ``live_tensors()``, once swept
        self.holding = False                # ``lazies`` holds tensors (``hold``) too
        self.outs: list = []                # the live payloads, once swept (``_sweep``)
        self.storages: dict[int, _Storage] = {}
        self.keep: list = []                # version counters of storages (keeps ids unique)
        self.marks: dict = {}               # input index -> {dim: "dynamic"|"static"}
        self.params: set = set()            # input indices of nn.Parameters
        # under ``config.freezing``: parameters' input indices, and whether a parameter that
        # requires grad was read (the graph then may record autograd: not frozen)
        self.frozen: set = set()
        self.grad_inputs = False

    # -- values -----------------------------------------------------------------------------
    def input_ref(self, arr: np.ndarray) -> tuple:
        k = self.input_ids.get(id(arr))
        if k is None:
            k = self.input_ids[id(arr)] = len(self.inputs)
            self.inputs.append(arr)
            kn = self.known
            if kn is not None and (k >= len(kn.inputs) or kn.inputs[k] != _in_meta(arr)):
                self.known = None
        return _IREFS[k] if k < 64 else ("i", k)

    def ref_of(self, t: Any) -> tuple:
        """The ref of tensor ``t``'s current value (re-read from its storage if it was written
        in place since ``t``'s payload was made)."""
        p = t._data
        st = self.storages.get(id(t._version_counter)) if self.storages else None
        if p.__class__ is LazyArray:
            if p.value is not None:  # realized by an earlier graph of this call
                t._data = p.value
                return self.ref_of(t)
            if st is not None and st.version != p.sver:
                return self._reread(t, st).ref
            return p.ref
        if st is not None:
            return self._reread(t, st).ref
        r = self.input_ref(p)
        m = t.__dict__.get("_dyn_marks")
        if m:
            self.marks[r[1]] = m
        elif getattr(t, "_is_param", False):
            self.params.add(r[1])
            if _config.freezing:
                self.note_frozen(t, p, r[1])
        return r

    def note_frozen(self, t: Any, p: np.ndarray, k: int) -> None:
        """Under ``config.freezing``: parameter ``t`` (array ``p``) is input ``k``."""
        if t._requires_grad:
            self.grad_inputs = True
        self.frozen.add(k)
        _frozen.note(p, t._version_counter)

    def frame(self, t: Any) -> tuple:
        """(geometry array, owner) of ``t``: where ``t`` lives in its storage's frame."""
        p = t._data
        if p.__class__ is LazyArray:
            if p.owner is None:
                return p.geometry(), p
            return p.geometry(), p.owner
        root = p
        while isinstance(root.base, np.ndarray):
            root = root.base
        return p, root

    def _geometry(self, t: Any) -> tuple | None:
        """(shape, element strides, offset) of ``t`` in its storage; None when ``t`` covers the
        whole storage in C order."""
        own, owner = self.frame(t)
        root = owner.geometry() if owner.__class__ is LazyArray else owner
        if own is root and own.flags.c_contiguous:   # the storage itself (a written state)
            return None
        item = own.itemsize
        if own.shape == root.shape and _ptr(own) == _ptr(root) and own.strides == \
                _contig_strides(own.shape, item):
            return None
        return (tuple(own.shape), tuple(s // item for s in own.strides),
                (_ptr(own) - _ptr(root)) // item)

    def _reread(self, t: Any, st: _Storage) -> LazyArray:
        own, owner = self.frame(t)
        geom = self._geometry(t)
        if geom is None:
            ref = st.value
        else:
            from ember.ops.storage import STORAGE_READ
            ref = self.add_node(STORAGE_READ, (st.value,), {"geom": geom},
                                ((geom[0], t._dtype),))[0]
        if owner.__class__ is LazyArray and geom is None:
            owner, own = None, None   # the whole storage: a fresh value of its own
        la = self.lazy(ref, tuple(own.shape) if own is not None else st.root_shape, st.np_dtype,
                       own, owner, t._version_counter, st.version)
        self._set_payload(t, la)
        return la

    def lazy(self, ref: tuple, shape: tuple, np_dtype: Any, shadow: Any, owner: Any, vc: list,
             sver: int) -> LazyArray:
        la = LazyArray(self, ref, shape, np_dtype, shadow, owner, vc, sver)
        self.lazies.append(weakref.ref(la))
        return la

    def _set_payload(self, t: Any, la: LazyArray) -> None:
        if t._data.__class__ is not LazyArray:
            self.tensors.append(weakref.ref(t))
        t._data = la

    def register_tensor(self, t: Any) -> None:
        self.tensors.append(weakref.ref(t))

    def hold(self, t: Any) -> None:
        """Record ``t``, a new tensor whose payload is a new ``LazyArray`` only it references
        (the binder inlines this): both are realized while ``t`` is alive, as ``lazy`` and
        ``register_tensor`` would have it, without their two weak references."""
        self.lazies.append(t)
        self.holding = True

    def live_tensors(self) -> list:
        """The tensors with lazy payloads still alive (in no set order); see ``_sweep``."""
        if self.live is None:
            self._sweep()
        return self.live

    def _sweep(self) -> None:
        """Set ``live`` (the live tensors) and ``outs`` (the live unrealized payloads in the
        order they were made: the graph's outputs).

        The held tensors (``hold``) are swept newest first: one that only this trace
        references is dropped (and so freed, with what it alone kept alive: an autograd node
        that saved an older tensor), and its payload stays in its place while something else
        holds it (a ``.grad``, a detached tensor sharing it); a drop older than a survivor
        sweeps the survivors again (``_resweep``).  Alive is what ``sys.getrefcount`` says, as
        weak references would: what only garbage (a reference cycle) holds is alive for both.
        """
        lst = self.lazies
        if not self.holding:   # weak references only (the slow path, ops with grad)
            self.live = [t for w in self.tensors if (t := w()) is not None]
            self.outs = [la for w in lst if (la := w()) is not None and la.value is None]
            return
        rc = sys.getrefcount
        one = _HELD_REFS   # the count of an object only ``lst`` holds, read as below
        kept: list = []
        redo = weak = False
        k = len(lst)
        e = la = None
        while k:
            k -= 1
            e = lst[k]
            if rc(e) > one:
                if e.__class__ is _WREF:
                    weak = True
                else:
                    kept.append(k)
                continue
            if e.__class__ is _WREF:
                weak = True
                continue
            if kept:
                redo = True
            la = e._data   # a dead tensor: its own payload, if another holds it, in its place
            if rc(la) > one and la.__class__ is LazyArray and not la.sver and \
                    la.vc is e._version_counter:
                lst[k] = la
                kept.append(k)
            else:
                lst[k] = None
        e = la = None
        if redo:   # usually one survivor or a few: see whether any dropped first
            for k in kept:
                e = lst[k]
                if rc(e) <= one:
                    e = None
                    kept = _resweep(lst, kept, LazyArray)
                    break
            e = None
        live: list = []
        outs: list = []
        if weak:
            _collect(lst, live, outs, LazyArray)
        else:   # only held tensors (and their kept payloads): visit the survivors alone
            for k in reversed(kept):
                e = lst[k]
                if e.__class__ is LazyArray:
                    la = e
                else:
                    live.append(e)
                    la = e._data
                    if la.__class__ is not LazyArray or la.sver or \
                            la.vc is not e._version_counter:
                        continue
                if la.value is None:
                    outs.append(la)
        if self.tensors:   # and a payload only a registered tensor still holds (rare)
            seen = set(map(id, outs))
            for w in self.tensors:
                t = w()
                if t is not None:
                    live.append(t)
                    la = t._data
                    if la.__class__ is LazyArray and la.value is None and id(la) not in seen:
                        seen.add(id(la))
                        outs.append(la)
        self.live = live
        self.outs = outs

    def add_node(self, op: Any, args: tuple, params: dict, specs: tuple) -> list:
        i = len(self.nodes)
        kn = self.known
        if kn is not None:
            if i < kn.n:
                nd = kn.nodes[i]
                if nd.op is op and same(nd.args, args) and same(nd.params, params) and \
                        nd.specs == specs:
                    self.nodes.append(nd)
                    return kn.refs[i]
            self.known = None
        self.nodes.append(TNode(op, args, params, specs))
        return [("n", i, j) for j in range(len(specs))]

    def match(self, op: Any, args: tuple, params: dict) -> tuple | None:
        """When the known trace's next node is ``op(*args, **params)``: record it (the cached
        node itself) and return (its output refs, its specs); else forget the known trace and
        return None (the caller records the op in full)."""
        i = len(self.nodes)
        kn = self.known
        if kn is not None and i < kn.n:
            nd = kn.nodes[i]
            if nd.op is op and same(nd.args, args) and same(nd.params, params):
                self.nodes.append(nd)
                return kn.refs[i], nd.specs
            got = kn.loose(i, op, args, params) if kn.loose is not None else None
            if got is not None:  # only runtime numbers differ: the same graph and entry
                self.nodes.append(TNode(op, args, params, nd.specs))
                self.loosened = got if self.loosened is None else self.loosened + got
                return kn.refs[i], nd.specs
        self.known = None
        return None

    def followed(self, out_refs: list) -> Known | None:
        """The known trace when this graph is exactly it (same nodes, inputs and outputs)."""
        kn = self.known
        if kn is not None and len(self.nodes) == kn.n and len(self.inputs) == \
                len(kn.inputs) and out_refs == kn.out_refs:
            return kn
        return None

    # -- in-place writes ----------------------------------------------------------------------
    def write(self, t: Any, new: Any) -> bool:
        """Functionalize ``t[...] = new`` (``new``: a tensor of ``t``'s shape and dtype).  The
        caller bumps the version counter afterwards.  False when the write cannot be recorded
        (the trace was realized instead and the caller writes eagerly)."""
        vc = t._version_counter
        st = self.storages.get(id(vc))
        if st is None:
            p = t._data
            if p.__class__ is np.ndarray and p.base is None and new._base is None:
                flags = p.flags
                if flags.c_contiguous and flags.writeable and \
                        new._data.__class__ is LazyArray:
                    return self._write_whole(t, p, new, vc)
            own, owner = self.frame(t)
            if owner.__class__ is LazyArray:
                st = _Storage(None, owner.shape, owner.dtype, owner.ref, owner.sver)
            else:
                owner = _dense(owner)
                if owner is None or owner.dtype != own.dtype or not owner.flags.writeable:
                    self.graph_break("an in-place write into a tensor whose storage is not a "
                                     "plain C-contiguous array")
                    return False
                st = _Storage(owner, tuple(owner.shape), owner.dtype, self.input_ref(owner), -1)
            self.storages[id(vc)] = st
            self.keep.append(vc)
        new_ref = self.ref_of(new)
        geom = self._geometry(t)
        if geom is None and st.root is None and (new._base is not None
                                                 or new._data.__class__ is not LazyArray):
            # the whole storage of an intermediate takes the new value: when that value is a
            # view (``t.copy_(x)`` with x broadcast: an expand of x) or a concrete tensor, its
            # graph output is that memory, and the written tensor would alias x after the call
            from ember.ops.shape import CLONE
            new_ref = self.add_node(CLONE, (new_ref,), {"contiguous": True},
                                    ((tuple(new.shape), new._dtype),))[0]
        if geom is None:
            st.value = new_ref
        else:
            from ember.ops.storage import STORAGE_WRITE
            st.value = self.add_node(STORAGE_WRITE, (st.value, new_ref), {"geom": geom},
                                     ((st.root_shape, t._dtype),))[0]
        st.version = vc[0] + 1
        if geom is None:  # the written tensor reads the new value directly
            p = t._data
            if p.__class__ is LazyArray:
                la = self.lazy(new_ref, p.shape, st.np_dtype, p.shadow, p.owner, vc, st.version)
            else:
                la = self.lazy(new_ref, p.shape, st.np_dtype, p, self.frame(t)[1], vc,
                               st.version)
            self._set_payload(t, la)
        return True

    def _write_whole(self, t: Any, p: np.ndarray, new: Any, vc: list) -> bool:
        """``write`` of a lazy value into the whole of a concrete C-contiguous array that owns
        its memory and was not written in this graph yet (an optimizer's state, a parameter):
        what the general path does for it, without its frame and geometry lookups."""
        st = _Storage(p, p.shape, p.dtype, self.input_ref(p), -1)
        self.storages[id(vc)] = st
        self.keep.append(vc)
        st.value = new_ref = self.ref_of(new)
        st.version = vc[0] + 1
        self._set_payload(t, self.lazy(new_ref, p.shape, st.np_dtype, p, p, vc, st.version))
        return True

    def write_all(self, items: list) -> list:
        """``write`` of each ``(t, new, n)`` of ``items`` in turn, the last of ``n`` in-place
        writes into ``t`` (its version counter advances by ``n``): an optimizer's state writes
        in one call.  The first write into a concrete C-contiguous writeable array that owns
        its memory, of a lazy value of this trace, is ``_write_whole``'s record inlined; the
        others take ``write``.  Returns ``items`` from the first write that could not be
        recorded (the trace was realized instead: the caller writes that one eagerly and bumps
        its version once, then writes the rest)."""
        storages, keep, lazies, tensors = self.storages, self.keep, self.lazies, self.tensors
        undone: list = []
        for k, (t, new, n) in enumerate(items):
            vc = t._version_counter
            vc[0] += n - 1
            p = t._data
            q = new._data
            if p.__class__ is np.ndarray and p.base is None and new._base is None and \
                    q.__class__ is LazyArray and q.value is None and q.trace is self and \
                    id(vc) not in storages and id(new._version_counter) not in storages:
                flags = p.flags
                if flags.c_contiguous and flags.writeable:
                    ref = q.ref   # ref_of(new): a lazy value no write reached
                    j = self.input_ids.get(id(p))   # input_ref(p): usually seen already
                    st = _new(_Storage)   # _Storage(p, shape, dtype, input ref, -1), inlined
                    st.root = p
                    st.root_shape = shape = p.shape
                    st.np_dtype = npd = p.dtype
                    st.value = ref
                    st.version = ver = vc[0] + 1
                    if j is None or j >= 64:
                        self.input_ref(p)   # a new input of the graph (its ref is not used)
                    storages[id(vc)] = st
                    keep.append(vc)
                    la = _new(LazyArray)   # LazyArray(self, ref, shape, npd, p, p, vc, ver)
                    la.trace = self
                    la.ref = ref
                    la.shape = shape
                    la.dtype = npd
                    la.shadow = la.owner = p
                    la.vc = vc
                    la.sver = ver
                    la.value = None
                    lazies.append(weakref.ref(la))
                    tensors.append(weakref.ref(t))
                    t._data = la
                    vc[0] = ver
                    continue
            if not self.write(t, new):
                undone = items[k:]
                break
            vc[0] += 1
        return undone

    # -- graph breaks -------------------------------------------------------------------------
    def graph_break(self, reason: str) -> None:
        """Python needs values here: realize the graph so far (or raise, per policy)."""
        stack = user_stack()
        if STATE.fullgraph or (STATE.error_on_break and STATE.error_on_break[-1]):
            where = stack[-1] if stack else None
            loc = f'\n  from user code:\n    File "{where.filename}", line {where.lineno}, in ' \
                  f'{where.name}' if where else ""
            raise GraphBreakError(f"graph break: {reason}{loc}", reason, stack)
        self.breaks.append((reason, stack))
        self.realize(reason)

    def realize(self, why: str = "end of the compiled call") -> None:
        """Run the recorded graph and give every live lazy tensor its values."""
        if self.live is None:
            self._sweep()
        tensors = self.live
        storages = self.storages
        # tensors written through an alias are re-read first, so they are outputs too
        if storages:
            reread = False
            for t in tensors:
                p = t._data
                if p.__class__ is LazyArray and p.value is None:
                    st = storages.get(id(t._version_counter))
                    if st is not None and st.version != p.sver:
                        self._reread(t, st)
                        reread = True
            if reread:   # the new payloads are outputs too
                self._sweep()
                tensors = self.live
        lazies = self.outs
        if not lazies and not storages:
            self.reset()
            return
        if not storages and all(la.owner is None for la in lazies):
            self._realize_fresh(tensors, lazies)
            return
        direct: list = []
        seen: set = set()
        derived_np, derived_lazy, derived_st = [], [], []
        st_out: dict = {}       # id(storage) -> index among the storage outputs
        st_list: list = []
        for la in lazies:
            o = la.owner
            st = storages.get(id(la.vc)) if storages else None
            if st is not None and st.version != la.sver:
                continue  # a stale value: every tensor that still reads it was re-read above
            if isinstance(o, np.ndarray):
                if la.shadow is not None:
                    derived_np.append(la)
                    continue
            elif st is not None and st.root is None and la.dtype == st.np_dtype and \
                    (o is not None or la.shape == st.root_shape):
                # a tensor of a written intermediate storage: a view of its realized value, so
                # bases and views keep sharing memory after the call
                derived_st.append((la, st))
                if id(st) not in st_out:
                    st_out[id(st)] = len(st_list)
                    st_list.append(st)
                continue
            elif o is not None and o.sver == la.sver and o.vc is la.vc \
                    and o.dtype == la.dtype:
                derived_lazy.append(la)
                if id(o) not in seen and o.value is None:
                    seen.add(id(o))
                    direct.append(o)
                continue
            if id(la) not in seen:
                seen.add(id(la))
                direct.append(la)
        written = [st for st in storages.values() if st.root is not None]
        out_refs = [la.ref for la in direct] + [st.value for st in written] + \
            [st.value for st in st_list]
        results: list = []
        # where the written-back storages' values are among the outputs (read by replay.py)
        self.out_split = (len(direct), len(written))
        if out_refs:
            assert STATE.realizer is not None, "ember.compiler is not imported"
            prev = STATE.trace
            STATE.trace = None  # the backend runs eagerly
            try:
                results = STATE.realizer(self, self.nodes, self.inputs, out_refs)
            finally:
                STATE.trace = prev
        owners = {id(la.owner) for la in derived_lazy}
        for k, la in enumerate(direct):
            v = results[k]
            if v.__class__ is not np.ndarray or v.dtype is not la.dtype:
                v = _as_array(v, la.dtype)
            # owners of views are C-contiguous (views are strided into them); other values keep
            # the layout the kernel gave them, as in eager
            la.value = _contig(v) if id(la) in owners else v
        for k, st in enumerate(written, len(direct)):
            val = results[k]
            if val is not st.root:
                val = _as_array(val, st.np_dtype)
                st.root.reshape(-1)[...] = val.reshape(-1)
        base = len(direct) + len(written)
        st_vals = [_contig(_as_array(results[base + k], st.np_dtype)).reshape(-1)
                   for k, st in enumerate(st_list)]
        for la in derived_np:
            la.value = la.shadow
        for la in derived_lazy:
            o = la.owner
            la.value = _strided(o.value.reshape(-1), la, o.geometry())
        for la, st in derived_st:
            flat = st_vals[st_out[id(st)]]
            if la.owner is None:
                la.value = flat.reshape(la.shape)
            else:
                la.value = _strided(flat, la, la.owner.geometry())
        for t in tensors:
            p = t._data
            if p.__class__ is LazyArray and p.value is not None:
                t._data = p.value
        self.segment += 1
        self.reset()


    def _realize_fresh(self, tensors: list, lazies: list) -> None:
        """``realize`` when nothing was written in place and every live value is its own
        (no views): each is a graph output (the common case, made cheap)."""
        self.out_split = (len(lazies), 0)
        assert STATE.realizer is not None, "ember.compiler is not imported"
        prev = STATE.trace
        STATE.trace = None  # the backend runs eagerly
        try:
            results = STATE.realizer(self, self.nodes, self.inputs, [la.ref for la in lazies])
        finally:
            STATE.trace = prev
        for la, v in zip(lazies, results):
            if v.__class__ is not np.ndarray or v.dtype != la.dtype:
                v = _as_array(v, la.dtype)
            la.value = v
        for t in tensors:
            p = t._data
            if p.__class__ is LazyArray and p.value is not None:
                t._data = p.value
        self.segment += 1
        self.reset()


def _strided(flat: np.ndarray, la: LazyArray, owner_geom: np.ndarray) -> np.ndarray:
    """``la``'s value as a view of ``flat``, the C-ordered elements of its owner's value (an
    ndarray whose ``.base`` chain reaches the storage, as eager views have)."""
    g = la.geometry()
    item = la.dtype.itemsize
    off = _ptr(g) - _ptr(owner_geom)
    try:
        v = np.ndarray(la.shape, la.dtype, buffer=flat, offset=off, strides=g.strides)
    except (TypeError, ValueError):
        v = np.lib.stride_tricks.as_strided(flat[off // item:] if flat.size else flat,
                                            shape=la.shape, strides=g.strides)
    if not g.flags.writeable:
        v.flags.writeable = False
    return v


def _contig(v: np.ndarray) -> np.ndarray:
    return v if v.flags.c_contiguous else np.ascontiguousarray(v).reshape(v.shape)


def _as_array(x: Any, np_dtype: Any) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
    if x.dtype != np_dtype:
        x = x.astype(np_dtype)
    return x


# ------------------------------------------------------------------------------------ helpers
def storage_offset(t: Any) -> int:
    """``t.storage_offset()`` of a lazy tensor, from its geometry."""
    tr = t._data.trace
    own, owner = tr.frame(t)
    root = owner.geometry() if owner.__class__ is LazyArray else owner
    return (_ptr(own) - _ptr(root)) // own.itemsize


def static_sizes(t: Any) -> Any:
    """Mark every dim of ``t`` static (as ``mark_static``): a constant a frontend function
    builds from structural numbers (``avg_pool``'s ones kernel) keeps its sizes under
    ``dynamic=True``.  Returns ``t``."""
    t._dyn_marks = dict.fromkeys(range(t.ndim), "static")
    return t


def tracing() -> bool:
    return STATE.trace is not None


def need_values(t: Any, reason: str) -> None:
    """Called before Python reads ``t``'s values: a graph break when ``t`` is lazy."""
    p = t._data
    if p.__class__ is LazyArray and p.value is None:
        p.trace.graph_break(reason)
    if t._data.__class__ is LazyArray:
        t._data = t._data.value


__all__ = ["GraphBreakError", "Known", "LazyArray", "STATE", "Trace", "install_backward_owner",
           "static_sizes",
           "install_realizer", "need_values", "tracing", "user_stack"]

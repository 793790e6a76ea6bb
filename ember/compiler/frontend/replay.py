"""``mode="reduce-overhead"``: replay a break-free graph without running the function's Python.

A ``ReplayFunction`` is a ``CompiledFunction`` that remembers what a call did.  A *recording*
call runs normally (Python on lazy tensors, one graph realized at the end) and notes:

- the guard set: per tensor argument its type, shape, strides, dtype and requires_grad; Python
  scalar arguments by type and value; the training flag of every submodule of the modules the
  function uses; the identity of their parameter, buffer and child objects and of the arrays the
  parameters and buffers hold (``p._data``); modules, tensors and user functions the function
  reads by a global or closure name (followed into those functions and a user-written
  ``forward``), by identity; grad mode, inference mode and the default dtype;
- where each graph input comes from: an argument's array (or its storage root), or an array the
  call read from elsewhere (a parameter, a buffer, a global tensor), held by identity;
- which graph outputs the returned tensors are (or views of), the return structure, and which
  outputs are written back into inputs, parameters and buffers (functionalized in-place ops).

Training steps (forward, ``backward()``, optimizer step, ``zero_grad``) replay too: optimizers
reached as arguments, globals, closure variables or attributes of a bound method's object are
guarded (groups' hyperparameters by value, state tensors by identity); the ``.grad`` of every
*holder* (tensor arguments, parameters, guarded tensors and optimizer parameters) is guarded at
the start (None or a tensor of the recorded layout, read at replay time) and set after the graph
runs as the recording left it; numbers an optimizer derives from its step counter (Adam's bias
corrections) are recomputed before each replay from the functions the optimizer registered
(``_lazy.STATE.recorder``, which also hears which autograd nodes ran and which leaves got a grad).

A later call whose guards pass skips Python: it runs the cached graph on the new argument arrays
(through the backend's call prepared once with the held arrays fixed, when it offers one:
``CompiledGraph.bind``, ``ember/compiler/c/bound.py``), applies the write-backs, sets the
holders' grads and wraps the outputs in fresh tensors (without autograd history).  Guards
that fail run the normal compiled path and record again.  A function that breaks its graph
falls back to normal compiled calls for good.  Replay is refused (the call
runs the normal path) when a tensor that outlives the call carries an autograd graph no backward
of the call consumed, when a tensor made during the call outlives it without being returned or a
``.grad``, when backward gives a grad to a tensor the guards do not hold or runs a hook, when an
unguarded optimizer or an lr scheduler steps, when the call makes optimizer state, when the graph
draws random numbers (the generator must advance), when a returned tensor is neither a graph
output nor a view of one, and when the graph writes into a tensor made during the call.

The contract (``docs/compiler.md``): the function is pure apart from its tensor work.  Python side
effects (printing, counters, appending to lists, setting attributes) happen on recording calls
only, and Python state the guards do not cover (non-tensor module attributes, globals that are
not modules, tensors or functions, tensors reached through other objects) is read at recording
time only.

This module holds the entries (guards, replay plans) and ``ReplayFunction``; recording a call
and the checks made from a recording are in ``record.py``.
"""

from __future__ import annotations

import threading
import types
from typing import Any, Callable

import numpy as np

from ember import _lazy
from ember import dtypes as _dt
from ember.autograd import grad_mode as _gm
from ember.compiler.frontend.api import (
    _CACHES,
    _EVENTS,
    _STANCE,
    FUNCTION_CLASSES,
    CompiledFunction,
    _Frame,
    _is_module,
)
from ember.compiler.frontend.record import (
    _CONST_TYPES,
    _alias_pattern,
    _as_array,
    _check_escapes,
    _grad_results,
    _NotReplayableError,
    _out_dtypes,
    _outputs,
    _recipes,
    _RecordFrame,
    _root,
    _scan,
    _shape_of,
    _track,
    _walk,
)
from ember.optim.optimizer import Optimizer
from ember.tensor import Tensor, _init, _new, _wrap

_LZ = _lazy.STATE
_GM = _gm.STATE
_MAX_ENTRIES = 64          # recorded entries kept per function (oldest dropped first)
_MAX_RETRIES = 8           # recordings redone because the compiled entry had not lifted a number
_MISSING = object()


# ------------------------------------------------------------------------------ an entry
class _Entry:
    """Guards of one recorded call and, when replayable, how to replay it."""

    def __init__(self) -> None:
        self.grad = _GM.grad_enabled
        self.inference = _GM.inference
        self.default_dtype = _dt._default_dtype
        self.flags: list = []        # (module, training, pre-hook dict, hook dict, hook count)
        self.members: list = []      # (dict, name, object, array or None, requires_grad)
        self.names: list = []        # (dict-like, name, object): globals, closure cells
        self.alias: tuple = ()
        self.const_roots: frozenset = frozenset()   # storages the graph reads besides args
        self.const_alias: tuple = ()                # per argument: shares one of those?
        self.root_checks: list = []  # (leaf, root shape, root dtype, offset): written views
        self.keep: list = []         # modules named in the key by id: kept alive
        self.values: list = []       # (dict, name, value): plain numbers/strings read via self
        self.opts: list = []         # (optimizer, snapshot): see _opt_snapshot
        self.holders: list = []      # ("a", argument index) or ("o", tensor): .grad owners
        self.grad_start: list = []   # per holder: None or (shape, strides, dtype) of its grad
        self.replay: _Replay | None = None
        self.retry = False           # not replayable this time, but a new recording may be
        self.reason = ""

    def check(self, leaves: list) -> list | None:
        """The guards; on success the tensors the replay reads: the arguments' tensors, then
        the ``.grad`` tensors of the holders that have one."""
        if _GM.grad_enabled is not self.grad or _GM.inference is not self.inference \
                or _dt._default_dtype is not self.default_dtype:
            return None
        for m, flag, pre, post, nhooks in self.flags:
            if m.training is not flag or len(pre) + len(post) != nhooks:
                return None
        for d, name, obj, arr, rg in self.members:
            if d.get(name) is not obj:
                return None
            if arr is not None and (obj._data is not arr or obj._requires_grad is not rg):
                return None
        for d, name, obj in self.names:
            if d.get(name) is not obj:
                return None
        for d, name, v in self.values:
            w = d.get(name, _MISSING)
            if w is not v and (type(w) is not type(v) or w != v):
                return None
        for opt, snap in self.opts:
            if snap is not None and not _opt_ok(opt, snap):
                return None
        if self.holders:
            leaves = list(leaves)
            for (kind, h), st in zip(self.holders, self.grad_start):
                g = (leaves[h] if kind == "a" else h).grad
                if st is None:
                    if g is not None:
                        return None
                    continue
                if g is None or g._requires_grad or g.grad_fn is not None:
                    return None
                a = g._data
                if a.__class__ is not np.ndarray or a.shape != st[0] or a.strides != st[1] \
                        or a.dtype != st[2]:
                    return None
                leaves.append(g)
        if len(leaves) > 1 or self.const_roots:
            ids = [id(_root(t._data)) for t in leaves]
            if len(leaves) > 1:
                first: dict = {}
                if tuple(first.setdefault(r, i) for i, r in enumerate(ids)) != self.alias:
                    return None
            if self.const_roots and \
                    tuple(map(self.const_roots.__contains__, ids)) != self.const_alias:
                return None
        for i, shape, dtype, off in self.root_checks:
            a = leaves[i]._data
            r = _root(a)
            if r.shape != shape or r.dtype != dtype or _lazy._ptr(a) - _lazy._ptr(r) != off:
                return None
        return leaves


def _opt_snapshot(opt: Any) -> tuple | None:
    """What a recording relies on in an optimizer: its param groups (the dicts, their
    hyperparameters by value, their parameters by identity), its per-parameter state (the
    dicts, their tensors by identity with the arrays they hold, other entries by value) and
    its ``step``/``param_groups``/``state`` attributes by identity.  None when a
    hyperparameter is a tensor (read as a number at recording time)."""
    d = opt.__dict__
    groups = d.get("param_groups")
    state = d.get("state")
    gs = []
    ss = []
    for g in groups:
        hp = tuple((k, v) for k, v in g.items() if k != "params")
        if any(isinstance(v, Tensor) for _, v in hp):
            return None
        ps = tuple(g["params"])
        gs.append((g, hp, ps))
        for p in ps:
            sd = dict.get(state, p)
            ss.append((p, sd, None if sd is None else tuple(
                (k, v, v._data if isinstance(v, Tensor) else None) for k, v in sd.items())))
    return (groups, tuple(gs), state, tuple(ss), d.get("step"))


def _opt_ok(opt: Any, snap: tuple) -> bool:
    groups, gs, state, ss, step = snap
    d = opt.__dict__
    if d.get("param_groups") is not groups or d.get("state") is not state or \
            d.get("step") is not step or len(groups) != len(gs):
        return False
    for g, (g0, hp, ps) in zip(groups, gs):
        if g is not g0 or len(g) != len(hp) + 1:
            return False
        for k, v in hp:
            w = g.get(k, _MISSING)
            if w is not v and (type(w) is not type(v) or w != v):
                return False
        cur = g["params"]
        if len(cur) != len(ps) or any(a is not b for a, b in zip(cur, ps)):
            return False
    for p, sd, items in ss:
        cur = dict.get(state, p)
        if cur is not sd:
            return False
        if sd is None:
            continue
        if len(sd) != len(items):
            return False
        for k, v, arr in items:
            w = sd.get(k, _MISSING)
            if arr is not None:
                if w is not v or w._data is not arr:
                    return False
            elif w is not v and (type(w) is not type(v) or w != v):
                return False
    return True


class _Replay:
    """How to run a recorded call again from new arguments."""

    def __init__(self, fn: Callable, scalars: list, sources: list, out_np: list, writes: list,
                 shape: Any, direct: list, views: list, nleaves: int, recipes: list = (),
                 grads: list = ()) -> None:
        self.fn = fn
        self.recipes = recipes       # (fn, ((value index, (scalar slot, ...)), ...))
        self.grads = grads           # (holder kind, holder, output k (-1: None), dtype, shape)
        self.arrays_mode = bool(getattr(fn, "_ember_arrays", False))
        self.scalars = scalars
        self.sources = sources       # per graph input: (0, leaf) data, (1, leaf) root, (2, arr)
        self.out_np = out_np         # numpy dtype per graph output
        self.writes = writes         # (output k, root source, vc source, delta)
        self.shape = shape           # the return structure over returned-leaf indices
        self.direct = direct         # (leaf index, output k, ember dtype)
        self.views = views           # (leaf, k, shape, strides, offset, dtype, base leaf, bdtype)
        self.nleaves = nleaves
        self.owners = sorted({v[1] for v in views})  # outputs that views are rebuilt over
        self.bound: Any = None       # the C call prepared with the fixed inputs (first run)
        self.var_sources: tuple = ()  # the sources of the bound call's variable inputs

    def _bind(self) -> Any:
        """``fn.bind`` (``ember/compiler/c/bound.py``) with the inputs held by identity (kind
        2: parameters, buffers, globals; the guards check they still hold those arrays)
        fixed; False when the backend has no such call."""
        bind = getattr(self.fn, "bind", None) if self.arrays_mode else None
        bound = bind({k: a for k, (kind, a) in enumerate(self.sources) if kind == 2}) \
            if bind is not None else None
        if bound is None:
            return False
        self.var_sources = tuple(self.sources[k] for k in bound.var_inputs)
        return bound

    def run(self, leaves: list, nargs: int) -> Any:
        """Replay on ``leaves`` (the argument tensors, the first ``nargs``, then the holders'
        ``.grad`` tensors, as ``_Entry.check`` returned them)."""
        scalars = self.scalars
        if self.recipes:
            scalars = list(scalars)
            for fn, slots in self.recipes:
                vals = fn()
                for j, where in slots:
                    for pos in where:
                        scalars[pos] = vals[j]
        bound = self.bound
        if bound is None and self.out_np:
            bound = self.bound = self._bind()
        res = bound([leaves[i]._data if kind == 0 else _root(leaves[i]._data)
                     for kind, i in self.var_sources], scalars) if bound else None
        if res is not None or not self.out_np:
            res = res or []
        else:
            arrays = [leaves[i]._data if kind == 0 else
                      (_root(leaves[i]._data) if kind == 1 else i) for kind, i in self.sources]
            res = self.fn(arrays, scalars) if self.arrays_mode else \
                _call_tensors(self.fn, arrays, scalars)
        res = [r if r.__class__ is np.ndarray and r.dtype == dt else _as_array(r, dt)
               for r, dt in zip(res, self.out_np)]
        for k in self.owners:  # as Trace.realize makes them
            if not res[k].flags.c_contiguous:
                res[k] = res[k].copy(order="C")
        for k, (kind, i), vsrc, delta in self.writes:
            root = i if kind == 2 else (leaves[i]._data if kind == 0 else _root(leaves[i]._data))
            v = res[k]
            if v is not root:
                root.reshape(-1)[...] = v.reshape(-1)
            vc = vsrc if kind == 2 else leaves[i]._version_counter
            vc[0] += delta
        out = [None] * self.nleaves
        made: dict = {}
        for j, k, dt in self.direct:
            out[j] = made[k] = _wrap(res[k], dt)
        if self.views:
            self._make_views(res, out)
        for kind, h, k, dt, shape in self.grads:
            t = leaves[h] if kind == "a" else h
            if k < 0:
                t.grad = None
            elif shape is not None:
                t.grad = _wrap(res[k].reshape(shape), dt)
            else:
                g = made.get(k)
                if g is None:
                    g = made[k] = _wrap(res[k], dt)
                t.grad = g
        return _build(self.shape, out, leaves)

    def _make_views(self, res: list, out: list) -> None:
        hidden: dict = {}
        for j, k, shape, strides, off, dt, bj, bdt in self.views:
            if bj >= 0:
                base = out[bj]
            else:
                base = hidden.get(k)
                if base is None:
                    base = hidden[k] = _wrap(res[k], bdt)
            flat = base._data.reshape(-1)
            try:   # a quarter of ``as_strided``'s cost (its Python wrapper)
                arr = np.ndarray(shape, flat.dtype, flat, off * flat.itemsize, strides)
            except (TypeError, ValueError):
                arr = np.lib.stride_tricks.as_strided(flat[off:] if flat.size else flat,
                                                      shape=shape, strides=strides)
            t = _new(Tensor)
            _init(t, arr, dt)
            t._version_counter = vc = base._version_counter
            t._base = base
            t._view_version = vc[0]
            out[j] = t


def _call_tensors(fn: Callable, arrays: list, scalars: list) -> list:
    args = [_wrap(a, _dt.from_numpy_dtype(a.dtype)) for a in arrays]
    with _gm.no_grad():
        outs = fn(*args, *scalars)
    if isinstance(outs, Tensor):
        outs = (outs,)
    return [o._data if isinstance(o, Tensor) else np.asarray(o) for o in outs]


def _build(shape: Any, out: list, leaves: list) -> Any:
    tag = shape[0]
    if tag == "t":
        return out[shape[1]]
    if tag == "c":
        return shape[1]
    if tag == "a":
        return leaves[shape[1]]
    if tag == "d":
        return {k: _build(s, out, leaves) for k, s in zip(shape[1], shape[2])}
    items = [_build(s, out, leaves) for s in shape[2]]
    return items if shape[1] is list else tuple(items)


# ------------------------------------------------------------------------------ the function
class ReplayFunction(CompiledFunction):
    """``ember.compile(fn, mode="reduce-overhead")``: a compiled function that replays its graph
    without running ``fn``'s Python when the guards on its inputs pass.

    >>> f = ember.compile(lambda x: (x * 2).relu(), mode="reduce-overhead")
    >>> with ember.no_grad():
    ...     y = f(ember.ones(3))   # records (runs the Python)
    ...     y = f(ember.ones(3))   # replays the graph
    """

    def __init__(self, fn: Callable, **kw: Any) -> None:
        super().__init__(fn, **kw)
        self._entries: dict = {}      # argument key -> [_Entry]
        self._cache: Any = None       # the code cache the entries' graphs live in
        self._broken = False          # the function broke its graph: never replay
        self._frame: _RecordFrame | None = None
        self._recording = False
        self.replay_count = 0         # calls that skipped Python
        self.record_count = 0         # calls that ran Python and were recorded
        self.why_not = ""             # why the last recording cannot be replayed
        self._retries = 0
        # recording and replaying use per-function state (and a replay reuses its buffers):
        # calls from several threads take turns (docs/reliability.md)
        self._lock = threading.RLock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        if self._broken or _LZ.trace is not None or _STANCE.stance != "default" or _EVENTS:
            return CompiledFunction.__call__(self, *args, **kwargs)
        key: list = []
        leaves: list = []
        mods: list = []
        if not (_walk(args, key, leaves, mods) and (not kwargs or _walk(kwargs, key, leaves,
                                                                           mods))):
            return CompiledFunction.__call__(self, *args, **kwargs)
        tkey = tuple(key)
        if _CACHES.get(self._key[0]) is not self._cache:  # ember.compiler.reset() since
            self._entries.clear()
            self._cache = None
        lst = self._entries.get(tkey, ())
        for e in lst:
            full = e.check(leaves)
            if full is not None:
                if e.replay is None:
                    if e.retry and self._retries < _MAX_RETRIES:
                        self._retries += 1
                        lst.remove(e)
                        return self._record(args, kwargs, tkey, leaves, mods)
                    return CompiledFunction.__call__(self, *args, **kwargs)
                self.replay_count += 1
                return e.replay.run(full, len(leaves))
        return self._record(args, kwargs, tkey, leaves, mods)

    # -- recording ------------------------------------------------------------------------
    def _record(self, args: tuple, kwargs: dict, key: tuple, leaves: list, argmods: list) -> Any:
        e = _Entry()
        e.keep = argmods
        modules = self._guard_state(e, argmods)
        start_refusal = self._guard_grads(e, leaves)
        nargs = len(leaves)
        full = leaves + [(leaves[h] if kind == "a" else h).grad
                         for (kind, h), st in zip(e.holders, e.grad_start) if st is not None]
        data_ids = {}
        root_ids = {}
        for i, t in enumerate(full):
            data_ids.setdefault(id(t._data), i)
            root_ids.setdefault(id(_root(t._data)), i)
        versions = {id(t._version_counter): t._version_counter[0] for t in full}
        for _, _, obj, arr, _ in e.members:
            if arr is not None:
                versions.setdefault(id(obj._version_counter), obj._version_counter[0])
        e.alias = _alias_pattern(full)
        self._recording = True
        self._frame = None
        prev_rec = _LZ.recorder
        try:
            out = CompiledFunction.__call__(self, *args, **kwargs)
        finally:
            self._recording = False
            _LZ.recorder = prev_rec
            frame, self._frame = self._frame, None
        self.record_count += 1
        self._cache = _CACHES.get(self._key[0])
        if frame is None:
            return out
        if frame.trace.breaks or frame.graphs > 1:
            self._broken = True
            self._entries.clear()
            self.why_not = "the function breaks its graph"
            return out
        try:
            if start_refusal:
                raise _NotReplayableError(start_refusal)
            for opt, snap in e.opts:
                if not _opt_ok(opt, snap):
                    raise _NotReplayableError(
                        "the call made or replaced optimizer state or changed its param groups "
                        "(a first optimizer step records again on the next call)")
            if any(i not in {id(o) for o, _ in e.opts} for i in frame.optimizers):
                raise _NotReplayableError("an optimizer the guards do not hold ran (reach it "
                                          "as an argument, a global, a closure variable or an "
                                          "attribute of the bound method's object)")
            e.replay = self._replay_of(frame, out, full, nargs, data_ids, root_ids, versions,
                                       e, modules)
        except _NotReplayableError as err:
            e.reason = self.why_not = str(err)
        else:
            self.why_not = ""
        lst = self._entries.setdefault(key, [])
        lst.insert(0, e)
        if sum(len(v) for v in self._entries.values()) > _MAX_ENTRIES:
            self._entries.pop(next(iter(self._entries)))
        return out

    def _make_frame(self, observe_only: bool) -> _Frame:
        if not self._recording:
            return super()._make_frame(observe_only)
        self._frame = _RecordFrame(self, observe_only)
        _LZ.recorder = self._frame
        return self._frame

    def _guard_state(self, e: _Entry, argmods: list) -> list:
        """Fill ``e``'s module, optimizer, global, closure and ``self`` guards; returns every
        guarded module."""
        found = list(argmods)
        fn = self._orig
        owner = getattr(fn, "__self__", None)
        if owner is not None and (_is_module(owner) or isinstance(owner, Optimizer)):
            found.append(owner)
        elif owner is not None and not isinstance(owner, (type, types.ModuleType)) and \
                isinstance(getattr(owner, "__dict__", None), dict):
            # a bound method of a plain object: what it holds, by identity (numbers and
            # strings by value); modules, optimizers and tensors are guarded in depth
            d = owner.__dict__
            for name, v in d.items():
                if type(v) in _CONST_TYPES:
                    e.values.append((d, name, v))
                    continue
                e.names.append((d, name, v))
                if isinstance(v, (Tensor, Optimizer)) or _is_module(v):
                    _track(v, found, e)
        seen_fns: set = set()
        _scan(getattr(fn, "__func__", fn), found, e, seen_fns, 3)
        opts = []
        mods = []
        for m in found:
            (opts if isinstance(m, Optimizer) else mods).append(m)
        found = mods
        for m in list(found):  # user-written forwards read globals too
            fwd = getattr(type(m), "forward", None)
            if not (getattr(fwd, "__module__", "ember") or "").startswith("ember"):
                _scan(fwd, found, e, seen_fns, 2)
        seen: set = set()
        modules = []
        for m in found:
            for sub in m.modules():
                if id(sub) in seen:
                    continue
                seen.add(id(sub))
                modules.append(sub)
                pre, post = sub._forward_pre_hooks, sub._forward_hooks
                e.flags.append((sub, sub.training, pre, post, len(pre) + len(post)))
                for d, in ((sub._parameters,), (sub._buffers,)):
                    for name, t in d.items():
                        e.members.append((d, name, t, None if t is None else t._data,
                                          None if t is None else t._requires_grad))
                for name, c in sub._modules.items():
                    e.members.append((sub._modules, name, c, None, None))
        seen_opts: set = set()
        for opt in opts:
            if id(opt) in seen_opts:
                continue
            seen_opts.add(id(opt))
            snap = _opt_snapshot(opt)
            if snap is None:
                e.reason = "an optimizer hyperparameter is a tensor"
            e.opts.append((opt, snap))
            e.keep.append(opt)
            for _, _, ps in (snap[1] if snap else ()):
                for p in ps:
                    e.members.append(({"t": p}, "t", p, p._data, p._requires_grad))
            for _, _, items in (snap[3] if snap else ()):
                for _, v, arr in items or ():
                    if arr is not None:
                        e.members.append(({"t": v}, "t", v, arr, v._requires_grad))
        return modules

    def _guard_grads(self, e: _Entry, leaves: list) -> str:
        """The tensors whose ``.grad`` the call may read or set (tensor arguments, parameters,
        guarded tensors, optimizer parameters that require grad or have a grad) and the state
        of their grads; returns why the start state cannot be replayed ("" when it can)."""
        seen: dict = {}
        for i, t in enumerate(leaves):
            if id(t) not in seen and (t._requires_grad or t.grad is not None):
                seen[id(t)] = ("a", i)
        for _, _, t, arr, _ in e.members:
            if arr is not None and id(t) not in seen and (t._requires_grad or
                                                          t.grad is not None):
                seen[id(t)] = ("o", t)
        why = ""
        for kind, h in seen.values():
            g = (leaves[h] if kind == "a" else h).grad
            e.holders.append((kind, h))
            if g is None:
                e.grad_start.append(None)
                continue
            a = g._data
            if g._requires_grad or g.grad_fn is not None or a.__class__ is not np.ndarray:
                why = "a .grad at the start of the call requires grad or is not concrete"
                e.grad_start.append(None)
                continue
            e.grad_start.append((a.shape, a.strides, a.dtype))
        if e.opts and any(snap is None for _, snap in e.opts):
            why = why or "an optimizer hyperparameter is a tensor (read as a number)"
        return why

    def _replay_of(self, frame: _RecordFrame, out: Any, leaves: list, nargs: int,
                   data_ids: dict, root_ids: dict, versions: dict, e: _Entry,
                   modules: list) -> _Replay:
        cap, res = frame.cap, frame.results
        if frame.graphs and frame.entry is None:
            raise _NotReplayableError("the graph ran without a cache entry (stance or "
                                      "recompile limit)")
        if cap is not None and any(n.op.kind == "random" or "random" in n.op.tags
                                   for n in cap.nodes):
            raise _NotReplayableError("the graph draws random numbers (the generator must "
                                      "advance)")
        if frame.refusals:
            raise _NotReplayableError(frame.refusals[0])
        holder_ids = {id(leaves[h] if kind == "a" else h) for kind, h in e.holders}
        if any(i not in holder_ids for i in frame.grad_leaves):
            raise _NotReplayableError("backward gave a .grad to a tensor the guards do not hold "
                                      "(not an argument, parameter, optimizer parameter or "
                                      "guarded tensor)")
        known_arrays = [a for _, _, _, a, _ in e.members if a is not None]
        known = {id(a) for a in known_arrays} | {id(_root(a)) for a in known_arrays}

        def source(a: np.ndarray) -> tuple:
            if id(a) in data_ids:
                return (0, data_ids[id(a)])
            if id(a) in root_ids:
                return (1, root_ids[id(a)])
            return (2, a)

        sources = [source(a) for a in (cap.arrays if cap is not None else ())]
        consts = [s[1] for s in sources if s[0] == 2]
        writes = []
        for k, (root, vc) in enumerate(frame.written, frame.written_at):
            src = source(root)
            if src[0] == 2:
                if id(root) not in known:
                    raise _NotReplayableError(
                        "the graph writes into a tensor that is neither an argument nor a "
                        "guarded parameter, buffer or global (made during the call?)")
                consts.append(root)
            delta = vc[0] - versions[id(vc)] if vc is not None and id(vc) in versions else 1
            writes.append((k, src, vc, delta))
        e.const_roots = frozenset(id(_root(a)) for a in consts + known_arrays)
        e.const_alias = tuple(id(_root(t._data)) in e.const_roots for t in leaves)
        for i in sorted({i for kind, i in sources if kind == 1} |
                        {src[1] for _, src, _, _ in writes if src[0] == 1}):
            a = leaves[i]._data
            r = _root(a)
            e.root_checks.append((i, r.shape, r.dtype, _lazy._ptr(a) - _lazy._ptr(r)))
        rl: list = []       # returned tensors, in walk order
        held = {id(t): t for _, _, t, a, _ in e.members if a is not None}
        shape = _shape_of(out, rl, leaves[:nargs], held)
        for t in rl:
            if t.grad_fn is not None and id(t.grad_fn) not in frame.spent:
                raise _NotReplayableError("a returned tensor carries an autograd graph that "
                                          "later code could backward through")
        direct, views = _outputs(rl, res, frame.spent)
        grads = _grad_results(e, leaves, nargs, res)
        _check_escapes(frame, e, leaves, rl)
        recipes = _recipes(frame, cap) if frame.recipes else []
        if recipes is None:
            e.retry = True
            raise _NotReplayableError("the compiled graph holds a step-dependent number as a "
                                      "constant (recorded again on the next call)")
        if not e.opts and not frame.spent and not frame.grad_leaves and not grads and \
                all(i < nargs for kind, i in sources if kind != 2) and \
                all(src[1] < nargs for _, src, _, _ in writes if src[0] != 2):
            # no backward, no optimizer, no .grad read or changed: grads are not guarded
            # (an inference call replays whether or not the parameters have grads)
            e.holders, e.grad_start = [], []
            e.alias, e.const_alias = e.alias[:nargs], e.const_alias[:nargs]
        return _Replay(frame.entry.fn if frame.entry is not None else None,
                       [cap.values[k] for k in frame.entry.graph.lifted] if cap else [],
                       sources, _out_dtypes(cap) if cap is not None else [], writes, shape,
                       direct, views, len(rl), recipes, grads)




FUNCTION_CLASSES["reduce-overhead"] = ReplayFunction

__all__ = ["ReplayFunction"]

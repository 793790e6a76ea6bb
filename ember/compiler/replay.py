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

A later call whose guards pass skips Python: it runs the cached graph on the new argument arrays,
applies the write-backs, and wraps the outputs in fresh tensors.  Guards that fail run the normal
compiled path and record again.  A function that breaks its graph falls back to normal compiled
calls for good.  Replay is refused (the call runs the normal path) when autograd would have to
record (an op read a tensor that requires grad while grad mode was on), when the graph draws
random numbers (the generator must advance), when a returned tensor is neither a graph output
nor a view of one, and when the graph writes into a tensor made during the call.

The contract (``docs/compiler.md``): the function is pure apart from its tensor work.  Python side
effects (printing, counters, appending to lists, setting attributes) happen on recording calls
only, and Python state the guards do not cover (non-tensor module attributes, globals that are
not modules, tensors or functions, tensors reached through other objects) is read at recording
time only.
"""

from __future__ import annotations

import types
from typing import Any, Callable

import numpy as np

from ember import _lazy
from ember import dtypes as _dt
from ember.autograd import grad_mode as _gm
from ember.compiler.api import _CACHES, _EVENTS, _STANCE, CompiledFunction, _Frame, _is_module
from ember.compiler.graph import Captured
from ember.device import device as _device
from ember.tensor import Tensor, _init, _new, _wrap

_LZ = _lazy.STATE
_GM = _gm.STATE
_MAX_ENTRIES = 64          # recorded entries kept per function (oldest dropped first)
_CONST_TYPES = frozenset({int, float, bool, complex, str, bytes, type(None), type(Ellipsis)})


class _NotReplayableError(Exception):
    """This call's recording cannot be replayed; the message says why."""


# ------------------------------------------------------------------------------ argument keys
def _walk(x: Any, key: list, leaves: list, mods: list) -> bool:
    """Append ``x``'s guard key to ``key``, its tensors to ``leaves`` and its modules to
    ``mods`` (walk order); False when ``x`` holds something the guards cannot describe."""
    t = type(x)
    if t in _CONST_TYPES or t is _dt.dtype or t is _device or isinstance(x, np.generic):
        key.append((t, x))
    elif isinstance(x, Tensor):
        d = x._data
        key.append((t, d.shape, d.strides, x._dtype, x._requires_grad))
        leaves.append(x)
    elif isinstance(x, (tuple, list)):   # subclasses too (Size, named tuples): only read
        key.append((t, len(x)))
        for y in x:
            if not _walk(y, key, leaves, mods):
                return False
    elif t is dict:
        key.append((dict, tuple(x)))
        for y in x.values():
            if not _walk(y, key, leaves, mods):
                return False
    elif _is_module(x):
        key.append(("module", id(x)))
        mods.append(x)
    else:
        return False
    return True


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _alias_pattern(leaves: list) -> tuple:
    """For each tensor argument, the index of the first argument sharing its storage."""
    first: dict = {}
    return tuple(first.setdefault(id(_root(t._data)), i) for i, t in enumerate(leaves))


# ------------------------------------------------------------------------------ recording
class _RecordFrame(_Frame):
    """A call's frame that keeps what realizing its graph did."""

    def __init__(self, cf: CompiledFunction, observe_only: bool) -> None:
        self.grad_seen = False       # a tensor the graph read requires grad (grad mode on)
        super().__init__(cf, observe_only)
        self.graphs = 0
        self.cap: Captured | None = None
        self.results: list = []
        self.written: list = []      # (root array, version counter) per written-back storage
        self.entry: Any = None

    @property
    def trace(self) -> Any:
        return self._trace

    @trace.setter
    def trace(self, tr: Any) -> None:
        self._trace = tr
        if tr is None:
            return
        # every tensor an op reads passes through ref_of, every in-place target through write:
        # a tensor that requires grad there while grad mode is on means autograd recorded
        ref_of, write = tr.ref_of, tr.write
        gm = _GM

        def noting_ref_of(t: Any) -> tuple:
            if t._requires_grad and gm.grad_enabled:
                self.grad_seen = True
            return ref_of(t)

        def noting_write(t: Any, new: Any) -> bool:
            if t._requires_grad and gm.grad_enabled:
                self.grad_seen = True
            return write(t, new)
        tr.ref_of, tr.write = noting_ref_of, noting_write

    def realize(self, cap: Captured, segment: int) -> list:
        res = super().realize(cap, segment)
        self.graphs += 1
        # normalized here so Trace.realize keeps these very objects (outputs are then found by
        # identity), and replay normalizes the same way
        res = [_as_array(r, dt) for r, dt in zip(res, _out_dtypes(cap))]
        self.cap, self.results = cap, res
        tr = self.trace
        vcs = {id(vc): vc for vc in tr.keep}
        self.written = [(st.root, vcs.get(k)) for k, st in tr.storages.items()
                        if st.root is not None]
        seg = self.code.segments.get(segment)
        for e in (seg.entries.get(cap.key, ()) if seg is not None else ()):
            if e.matches(cap.values):
                self.entry = e
                break
        return res


def _out_dtypes(cap: Captured) -> list:
    out = []
    for r in cap.outputs:
        dt = cap.inputs[r[1]][1] if r[0] == "i" else cap.nodes[r[1]].specs[r[2]][1]
        out.append(dt.np)
    return out


def _as_array(x: Any, np_dtype: Any) -> np.ndarray:
    if x.__class__ is not np.ndarray:
        x = np.asarray(x)
    if x.dtype != np_dtype:
        x = x.astype(np_dtype)
    return x


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
        self.replay: _Replay | None = None
        self.reason = ""

    def check(self, leaves: list) -> bool:
        if _GM.grad_enabled is not self.grad or _GM.inference is not self.inference \
                or _dt._default_dtype is not self.default_dtype:
            return False
        for m, flag, pre, post, nhooks in self.flags:
            if m.training is not flag or len(pre) + len(post) != nhooks:
                return False
        for d, name, obj, arr, rg in self.members:
            if d.get(name) is not obj:
                return False
            if arr is not None and (obj._data is not arr or obj._requires_grad is not rg):
                return False
        for d, name, obj in self.names:
            if d.get(name) is not obj:
                return False
        if len(leaves) > 1 and _alias_pattern(leaves) != self.alias:
            return False
        if self.const_roots:
            roots = self.const_roots
            if tuple(id(_root(t._data)) in roots for t in leaves) != self.const_alias:
                return False
        for i, shape, dtype, off in self.root_checks:
            a = leaves[i]._data
            r = _root(a)
            if r.shape != shape or r.dtype != dtype or _lazy._ptr(a) - _lazy._ptr(r) != off:
                return False
        return True


class _Cells:
    """A closure's cells read like a dict (``get(name)``) for the name guards."""

    def __init__(self, fn: Any) -> None:
        code = fn.__code__
        self.cells = dict(zip(code.co_freevars, fn.__closure__ or ()))

    def get(self, name: str) -> Any:
        try:
            return self.cells[name].cell_contents
        except (KeyError, ValueError):
            return None


class _Replay:
    """How to run a recorded call again from new arguments."""

    def __init__(self, fn: Callable, scalars: list, sources: list, out_np: list, writes: list,
                 shape: Any, direct: list, views: list, nleaves: int) -> None:
        self.fn = fn
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

    def run(self, leaves: list) -> Any:
        arrays = [leaves[i]._data if kind == 0 else (_root(leaves[i]._data) if kind == 1 else i)
                  for kind, i in self.sources]
        if not self.out_np:
            res: list = []
        elif self.arrays_mode:
            res = self.fn(arrays, self.scalars)
        else:
            res = _call_tensors(self.fn, arrays, self.scalars)
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
        for j, k, dt in self.direct:
            out[j] = _wrap(res[k], dt)
        if self.views:
            self._make_views(res, out)
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

    def _make_frame(self, observe_only: bool) -> _Frame:
        if not self._recording:
            return super()._make_frame(observe_only)
        self._frame = _RecordFrame(self, observe_only)
        return self._frame

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
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
        for e in self._entries.get(tkey, ()):
            if e.check(leaves):
                if e.replay is None:
                    return CompiledFunction.__call__(self, *args, **kwargs)
                self.replay_count += 1
                return e.replay.run(leaves)
        return self._record(args, kwargs, tkey, leaves, mods)

    # -- recording ------------------------------------------------------------------------
    def _record(self, args: tuple, kwargs: dict, key: tuple, leaves: list, argmods: list) -> Any:
        e = _Entry()
        e.keep = argmods
        modules = self._guard_state(e, argmods)
        data_ids = {}
        root_ids = {}
        for i, t in enumerate(leaves):
            data_ids.setdefault(id(t._data), i)
            root_ids.setdefault(id(_root(t._data)), i)
        versions = {id(t._version_counter): t._version_counter[0] for t in leaves}
        for _, _, obj, arr, _ in e.members:
            if arr is not None:
                versions.setdefault(id(obj._version_counter), obj._version_counter[0])
        e.alias = _alias_pattern(leaves)
        self._recording = True
        self._frame = None
        try:
            out = CompiledFunction.__call__(self, *args, **kwargs)
        finally:
            self._recording = False
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
            e.replay = self._replay_of(frame, out, leaves, data_ids, root_ids, versions, e,
                                       modules)
        except _NotReplayableError as err:
            e.reason = self.why_not = str(err)
        lst = self._entries.setdefault(key, [])
        lst.insert(0, e)
        if sum(len(v) for v in self._entries.values()) > _MAX_ENTRIES:
            self._entries.pop(next(iter(self._entries)))
        return out

    def _guard_state(self, e: _Entry, argmods: list) -> list:
        """Fill ``e``'s module, global and closure guards; returns every guarded module."""
        found = list(argmods)
        fn = self._orig
        owner = getattr(fn, "__self__", None)
        if owner is not None and _is_module(owner):
            found.append(owner)
        seen_fns: set = set()
        _scan(getattr(fn, "__func__", fn), found, e, seen_fns, 3)
        for m in list(found):  # user-written forwards read globals too
            fwd = getattr(type(m), "forward", None)
            if not getattr(fwd, "__module__", "ember").startswith("ember"):
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
                for d in (sub._parameters, sub._buffers):
                    for name, t in d.items():
                        e.members.append((d, name, t, None if t is None else t._data,
                                          None if t is None else t._requires_grad))
                for name, c in sub._modules.items():
                    e.members.append((sub._modules, name, c, None, None))
        return modules

    def _replay_of(self, frame: _RecordFrame, out: Any, leaves: list, data_ids: dict,
                   root_ids: dict, versions: dict, e: _Entry, modules: list) -> _Replay:
        cap, res = frame.cap, frame.results
        if frame.graphs and frame.entry is None:
            raise _NotReplayableError("the graph ran without a cache entry (stance or "
                                      "recompile limit)")
        if cap is not None and any(n.op.kind == "random" or "random" in n.op.tags
                                   for n in cap.nodes):
            raise _NotReplayableError("the graph draws random numbers (the generator must "
                                      "advance)")
        if frame.grad_seen:
            raise _NotReplayableError("grad mode is on and the graph reads a tensor that "
                                      "requires grad (autograd must record)")
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
        for k, (root, vc) in enumerate(frame.written, len(res) - len(frame.written)):
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
        shape = _shape_of(out, rl, leaves, held)
        direct, views = _outputs(rl, res)
        return _Replay(frame.entry.fn if frame.entry is not None else None,
                       [cap.values[k] for k in frame.entry.graph.lifted] if cap else [],
                       sources, _out_dtypes(cap) if cap is not None else [], writes, shape,
                       direct, views, len(rl))


def _names(code: types.CodeType) -> list:
    """Global names ``code`` and the code objects nested in it read."""
    out = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out += _names(c)
    return out


def _scan(f: Any, found: list, e: _Entry, seen: set, depth: int) -> None:
    """Guard the modules, tensors and user functions that ``f`` reads from its globals and
    closure cells by name (and, ``depth`` levels down, those of the user functions found)."""
    code = getattr(f, "__code__", None)
    if code is None or id(f) in seen or depth <= 0:
        return
    seen.add(id(f))
    spaces = [(getattr(f, "__globals__", {}), _names(code))]
    if getattr(f, "__closure__", None):
        spaces.append((_Cells(f), code.co_freevars))
    for space, names in spaces:
        for name in names:
            v = space.get(name)
            if isinstance(v, Tensor) or _is_module(v):
                e.names.append((space, name, v))
                _track(v, found, e)
            elif isinstance(v, types.FunctionType) and \
                    not getattr(v, "__module__", "").startswith("ember"):
                e.names.append((space, name, v))
                _scan(v, found, e, seen, depth - 1)


def _track(v: Any, found: list, e: _Entry) -> None:
    if _is_module(v):
        found.append(v)
    else:
        e.members.append(({"t": v}, "t", v, v._data, v._requires_grad))


def _shape_of(x: Any, rl: list, leaves: list, held: dict) -> tuple:
    """The return structure: ("t", returned tensor i), ("a", argument leaf i), ("c", constant or
    a guarded parameter/buffer/global tensor), ("s", tuple|list, items), ("d", keys, items)."""
    t = type(x)
    if isinstance(x, Tensor):
        for i, a in enumerate(leaves):
            if a is x:
                return ("a", i)
        if id(x) in held:   # the guards keep it the same object
            return ("c", x)
        for i, a in enumerate(rl):
            if a is x:
                return ("t", i)
        rl.append(x)
        return ("t", len(rl) - 1)
    if t in _CONST_TYPES or t is _dt.dtype or t is _device or isinstance(x, np.generic) or (
            isinstance(x, tuple) and all(type(y) in _CONST_TYPES for y in x)):
        return ("c", x)   # immutable: returned as it was (a Size, a tuple of ints)
    if t is tuple or t is list:
        return ("s", t, tuple(_shape_of(y, rl, leaves, held) for y in x))
    if t is dict:
        return ("d", tuple(x), tuple(_shape_of(y, rl, leaves, held) for y in x.values()))
    raise _NotReplayableError(f"the function returns a {t.__name__}, which replay cannot "
                              "rebuild")


def _outputs(rl: list, res: list) -> tuple:
    """Which graph output (or view of one) each returned tensor is."""
    direct, views = [], []
    for j, t in enumerate(rl):
        if t._requires_grad:
            raise _NotReplayableError("a returned tensor requires grad")
        a = t._data
        k = _find(res, a)
        if k is not None and t._base is None:
            direct.append((j, k, t._dtype))
            continue
        b = t._base
        k = _find(res, b._data) if b is not None else None
        if k is None or not np.shares_memory(a, b._data) or a.dtype != b._data.dtype:
            raise _NotReplayableError("a returned tensor is not a graph output or a view of "
                                      "one (a view of an input?)")
        off = (_lazy._ptr(a) - _lazy._ptr(b._data)) // a.itemsize
        bj = next((i for i, r in enumerate(rl) if r is b), -1)
        views.append((j, k, a.shape, a.strides, off, t._dtype, bj, b._dtype))
    return direct, views


def _find(res: list, a: Any) -> int | None:
    for k, r in enumerate(res):
        if r is a:
            return k
    return None


__all__ = ["ReplayFunction"]

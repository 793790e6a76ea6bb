"""Recording for ``mode="reduce-overhead"`` (``replay.py``): the guard keys of a call's
arguments (``_walk``), the frame that keeps what realizing the call's graph did
(``_RecordFrame``), and the checks and tables made from a finished recording: where each returned
tensor and ``.grad`` comes from among the graph outputs, what escapes the call, which names the
function reads (``_scan``) and the step-dependent numbers to recompute (``_recipes``).  A check
that fails raises ``_NotReplayableError`` and the call stays a normal compiled call.

>>> from ember.compiler.frontend.record import _alias_pattern
>>> import ember
>>> x = ember.ones(3)
>>> _alias_pattern([x, x[1:], ember.ones(2)])
(0, 0, 2)
"""

from __future__ import annotations

import gc
import types
import weakref
from typing import Any, Callable

import numpy as np

from ember import _lazy
from ember import dtypes as _dt
from ember.compiler.frontend.api import CompiledFunction, _Frame, _is_module
from ember.compiler.frontend.graph import Captured
from ember.device import device as _device
from ember.optim.optimizer import Optimizer
from ember.tensor import Tensor

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
            if isinstance(y, Tensor):  # inline: a replay walks its arguments at every call
                d = y._data
                key.append((type(y), d.shape, d.strides, y._dtype, y._requires_grad))
                leaves.append(y)
            elif not _walk(y, key, leaves, mods):
                return False
    elif t is dict:
        key.append((dict, tuple(x)))
        for y in x.values():
            if not _walk(y, key, leaves, mods):
                return False
    elif _is_module(x) or isinstance(x, Optimizer):
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
        super().__init__(cf, observe_only)
        self.graphs = 0
        self.cap: Captured | None = None
        self.results: list = []
        self.written: list = []      # (root array, version counter) per written-back storage
        self.written_at = 0          # the output index of the first of them
        self.entry: Any = None
        # told by autograd and the optimizers while the call runs (``_lazy.STATE.recorder``)
        self.refusals: list = []     # why a replay could not redo this call
        self.spent: dict = {}        # id -> autograd node run by a backward that freed it
        self.grad_leaves: dict = {}  # id -> tensor given a .grad by backward
        self.recipes: list = []      # (python numbers, fn recomputing them)
        self.optimizers: dict = {}   # id -> optimizer whose step or zero_grad ran
        self.alive: list = []        # tensors made during the call still alive at its end

    # -- the recorder interface (see ember/_lazy.py) ----------------------------------------
    def refuse(self, reason: str) -> None:
        self.refusals.append(reason)

    def ran(self, node: Any, retained: bool) -> None:
        if node._tensor_pre_hooks or node._pre_hooks or node._hooks or \
                getattr(node, "_post_acc_hooks", None):
            self.refuse("an autograd hook ran during the call (hooks run on recording calls "
                        "only)")
        if not retained:
            self.spent[id(node)] = node

    def grad_set(self, var: Any, node: Any) -> None:
        self.grad_leaves[id(var)] = var

    def recompute(self, values: tuple, fn: Callable) -> None:
        self.recipes.append((values, fn))

    def optimizer_used(self, opt: Any) -> None:
        self.optimizers[id(opt)] = opt

    def realize(self, cap: Captured, segment: int) -> list:
        res = super().realize(cap, segment)
        self.graphs += 1
        # the tensors with lazy payloads still alive now (at the end of the call: the ones
        # that outlive it) are checked by _replay_of
        self.alive = [weakref.ref(t) for t in self.trace.live_tensors()]
        # normalized here so Trace.realize keeps these very objects (outputs are then found by
        # identity), and replay normalizes the same way
        res = [_as_array(r, dt) for r, dt in zip(res, _out_dtypes(cap))]
        self.cap, self.results = cap, res
        tr = self.trace
        vcs = {id(vc): vc for vc in tr.keep}
        self.written = [(st.root, vcs.get(k)) for k, st in tr.storages.items()
                        if st.root is not None]
        self.written_at, n = tr.out_split
        assert n == len(self.written)
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


# -------------------------------------------------------------------------- after recording
def _grad_results(e: Any, leaves: list, nargs: int, res: list) -> list:
    """What the replay does to each holder's ``.grad``: (kind, holder, output k, dtype), k -1
    for None; holders whose grad is the same tensor as at the start are left alone."""
    out = []
    starts = iter(leaves[nargs:])
    for (kind, h), st in zip(e.holders, e.grad_start):
        t = leaves[h] if kind == "a" else h
        g0 = next(starts) if st is not None else None
        g = t.grad
        if g is g0:
            continue
        if g is None:
            out.append((kind, h, -1, None, None))
            continue
        if g._requires_grad or g.grad_fn is not None or g._base is not None:
            raise _NotReplayableError("a .grad after the call requires grad or is a view")
        a = g._data
        k = _find(res, a)
        if k is None:
            # the value of a storage written during the call (``zero_()`` on a fresh grad):
            # realize gives it as a C-ordered view of that output
            r = _root(a)
            k = next((j for j, v in enumerate(res) if _root(v) is r and v.size == a.size
                      and v.flags.c_contiguous), None)
            if k is None or not a.flags.c_contiguous or _lazy._ptr(a) != _lazy._ptr(res[k]):
                raise _NotReplayableError("a .grad after the call is not a graph output")
            out.append((kind, h, k, g._dtype, a.shape))
            continue
        out.append((kind, h, k, g._dtype, None))
    return out


def _check_escapes(frame: _RecordFrame, e: Any, leaves: list, rl: list) -> None:
    """Every tensor made during the call that outlives it must be one the replay rebuilds
    (returned, a .grad) or one the guards hold (written in place); anything else (stored on
    an object, kept by an autograd graph) would be stale after a replay."""
    ok = {id(t) for t in leaves} | {id(t) for t in rl}
    for t in rl:   # a returned view keeps its base alive (a replay rebuilds it)
        while t._base is not None:
            t = t._base
            ok.add(id(t))
    ok |= {id(t) for _, _, t, a, _ in e.members if a is not None}
    for kind, h in e.holders:
        t = leaves[h] if kind == "a" else h
        ok.add(id(t))
        ok.add(id(t.grad))
    alive = [t for t in (w() for w in frame.alive) if t is not None]
    if all(id(t) in ok for t in alive):
        return
    del alive
    gc.collect()   # reference cycles among dead tensors
    for t in (w() for w in frame.alive):
        if t is not None and id(t) not in ok:
            raise _NotReplayableError(
                "a tensor made during the call outlives it without being returned or a .grad "
                f"(shape {tuple(t.shape)}: stored on an object, or kept by an autograd graph?)")


def _recipes(frame: _RecordFrame, cap: Any) -> list | None:
    """The recorded step-dependent numbers as (fn, ((value index, scalar slots), ...)); None
    when one is a constant of the compiled graph; raises when one cannot be found."""
    lifted = frame.entry.graph.lifted
    pos = {k: j for j, k in enumerate(lifted)}
    out = []
    for values, fn in frame.recipes:
        slots = []
        for j, v in enumerate(values):
            where = [k for k, x in enumerate(cap.values) if x is v]
            if not where:
                raise _NotReplayableError("a step-dependent number did not reach the graph as "
                                          "it was made")
            if any(k not in pos for k in where):
                return None
            slots.append((j, tuple(pos[k] for k in where)))
        out.append((fn, tuple(slots)))
    return out


def _names(code: types.CodeType) -> list:
    """Global names ``code`` and the code objects nested in it read."""
    out = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out += _names(c)
    return out


def _scan(f: Any, found: list, e: Any, seen: set, depth: int) -> None:
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
            if isinstance(v, (Tensor, Optimizer)) or _is_module(v):
                e.names.append((space, name, v))
                _track(v, found, e)
            elif isinstance(v, types.FunctionType) and \
                    not (getattr(v, "__module__", "") or "").startswith("ember"):
                e.names.append((space, name, v))
                _scan(v, found, e, seen, depth - 1)


def _track(v: Any, found: list, e: Any) -> None:
    if _is_module(v) or isinstance(v, Optimizer):
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


def _outputs(rl: list, res: list, spent: dict) -> tuple:
    """Which graph output (or view of one) each returned tensor is."""
    direct, views = [], []
    for j, t in enumerate(rl):
        if t._requires_grad and (t.grad_fn is None or id(t.grad_fn) not in spent):
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

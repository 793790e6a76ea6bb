"""``ember.compile`` and the policies around it: caching, recompiles, stances, graph breaks.

A compiled function runs its Python on every call with a ``Trace`` active (``ember/_lazy.py``):
tensor ops are recorded, and the trace is realized at graph breaks and when the call returns.
Realizing captures the live part of the trace (``graph.capture``) and looks it up in the cache
of the function's code object for that graph's position in the call (its *segment*: graph 0
before the first break, graph 1 after it, ...).  Entries are keyed by structure with every
number abstracted; a number an entry specializes must match, a number it has lifted (a size
or a Python scalar that changed between calls) is passed at run time.  A miss compiles; a miss
where the segment already has entries is a *recompile* and is subject to the stance and the
recompile limit.  The caches are in ``cache.py``; the settings, errors, stances and
``error_on_graph_break`` in ``stance.py`` (their names are importable from here too).
"""

from __future__ import annotations

import functools
import inspect
import sys
import time
import warnings
from typing import Any, Callable

import numpy as np

from ember import _lazy
from ember import dtypes as _dt
from ember.autograd import grad_mode as _gm
from ember.compiler.frontend import _reasons
from ember.compiler.frontend.backends import _BACKENDS, lookup_backend
from ember.compiler.frontend.cache import (  # noqa: F401 (names re-exported from api)
    _CACHES,
    CodeCache,
    Entry,
    SegmentCache,
    _code_key,
    reset,
)
from ember.compiler.frontend.graph import Captured, _skel, capture, static_keys
from ember.compiler.frontend.loosen import make_loose, with_scalars, with_values
from ember.compiler.frontend.marks import (  # noqa: F401 (names re-exported from api)
    mark_dynamic,
    mark_static,
    maybe_mark_dynamic,
)
from ember.compiler.frontend.stance import (  # noqa: F401 (names re-exported from api)
    _EVENTS,
    _STANCE,
    _STANCES,
    FallbackWarning,
    RecompileError,
    RecompileLimitWarning,
    _apply_stance,
    _check_stance,
    _Config,
    _Events,
    _log,
    _Stance,
    compiler_config,
    error_on_graph_break,
    set_stance,
)
from ember.config import config
from ember.errors import EmberRuntimeError, EmberTypeError, GraphBreakError
from ember.tensor import Tensor, _wrap

_LZ = _lazy.STATE


# ------------------------------------------------------------------------------ compile
class CompiledFunction:
    """What ``ember.compile(fn)`` returns: call it like ``fn``."""

    def __init__(self, fn: Callable, *, fullgraph: bool = False, dynamic: bool | None = None,
                 backend: Any = "inductor", mode: str | None = None,
                 options: dict | None = None) -> None:
        self._orig = fn
        self.fullgraph = bool(fullgraph)
        self.dynamic = dynamic
        self.backend = backend
        self.mode = mode
        self.options = dict(options or {})
        self._key = _code_key(fn)
        self._module: Any = None  # the nn.Module when compiling a module's call
        functools.update_wrapper(self, fn, updated=())

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    @property
    def _orig_mod(self) -> Callable:
        return self._orig

    def _code_cache(self) -> CodeCache:
        key = self._key
        cc = _CACHES.get(key[0])
        if cc is None:  # setdefault: threads that race here share one CodeCache
            cc = _CACHES.setdefault(key[0], CodeCache(key[1], key[2], key[3]))
        return cc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        stance = _check_stance()
        if stance == "force_eager":
            return self._orig(*args, **kwargs)
        code = self._code_cache()
        code.calls += 1
        if stance == "eager_then_compile" and code.calls == 1:
            return self._run(args, kwargs, observe_only=True)
        flags = _grad_flags(args, kwargs)
        if flags not in code.grad_flags:
            if stance == "fail_on_recompile" and code.grad_flags:
                self._fail_on_grad_flags(code, flags, args, kwargs)
            code.grad_flags.append(flags)
        return self._run(args, kwargs)

    def _fail_on_grad_flags(self, code: CodeCache, flags: tuple, args: tuple,
                            kwargs: dict) -> None:
        """PyTorch guards on each tensor argument's requires_grad: a change is a recompile."""
        seen = code.grad_flags[0]
        if len(seen) != len(flags):
            return  # a different argument structure: the graph guards report it
        tensors = [a for a in args if isinstance(a, Tensor)]
        tensors += [v for v in kwargs.values() if isinstance(v, Tensor)]
        try:
            fn = self._orig if self._module is None else self._module.forward
            bound = inspect.signature(fn).bind(*args, **kwargs).arguments
            by_id = {id(v): k for k, v in bound.items()}
        except (TypeError, ValueError):
            by_id = {}
        diffs = []
        for i, (t, old, new) in enumerate(zip(tensors, seen, flags)):
            if old != new:
                rg = old[1] if isinstance(old, tuple) else old
                diffs.append(f"tensor '{by_id.get(id(t), f'arg {i}')}' requires_grad mismatch. "
                             f"expected requires_grad={int(rg)}")
        if not diffs:
            return  # the same flags under other keyword names: the graph guards decide
        raise RecompileError(
            f"Detected recompile when ember.compile stance is 'fail_on_recompile'. "
            f"filename: '{code.filename}', function name: '{code.name}', line number: "
            f"{code.lineno}\n    triggered by the following guard failure(s):\n" +
            "\n".join(f"    - {d}" for d in diffs))

    def _make_frame(self, observe_only: bool) -> _Frame:
        # a seam for mode="reduce-overhead" (replay.py), which records what realizing did
        return _Frame(self, observe_only)

    def _run(self, args: tuple, kwargs: dict, observe_only: bool = False) -> Any:
        outer = _LZ.trace
        if self.fullgraph:
            _LZ.fullgraph += 1
        try:
            if outer is not None:  # nested compiled call: inline into the caller's trace
                return self._orig(*args, **kwargs)
            frame = self._make_frame(observe_only)
            frame.args, frame.kwargs = args, kwargs
            tr = _lazy.Trace(frame)
            frame.trace = tr
            _LZ.trace = tr
            try:
                out = self._orig(*args, **kwargs)
                tr.realize()
            except BaseException as exc:
                _LZ.trace = None
                if isinstance(exc, GraphBreakError) and exc.reason:
                    exc.user_stack = _reasons.trim_stack(exc.user_stack, self._key)
                    exc.args = (_reasons.format_break_error(exc.reason, exc.user_stack),)
                if isinstance(exc, (GraphBreakError, RecompileError)):
                    _abort(tr)  # PyTorch raises these before the graph runs: nothing is written
                    raise
                try:  # the user's exception: what ran before it keeps its effects, as in eager
                    tr.realize("exception")
                except Exception:  # noqa: BLE001 (the user's exception matters more)
                    pass
                raise
            finally:
                _LZ.trace = outer
                if tr.breaks:  # also when the call raised: the breaks before it happened
                    self._report_breaks(tr.breaks)
            return out
        finally:
            if self.fullgraph:
                _LZ.fullgraph -= 1


    def _report_breaks(self, raw: list) -> None:
        breaks = [(r, _reasons.trim_stack(st, self._key)) for r, st in raw]
        for ev in _EVENTS:
            ev.breaks.extend(breaks)
        if "graph_breaks" in config.logs:
            for reason, stack in breaks:
                _log("graph_breaks", _reasons.format_break(reason, stack))


def _grad_flags(args: tuple, kwargs: dict) -> tuple:
    """The requires_grad of each tensor argument, positional then by keyword."""
    flags = tuple([a._requires_grad for a in args if isinstance(a, Tensor)])
    if kwargs:
        flags += tuple((k, v._requires_grad) for k, v in kwargs.items() if isinstance(v, Tensor))
    return flags


def _abort(tr: _lazy.Trace) -> None:
    """Drop a trace without running it: tensors that existed before the call (inputs,
    parameters, their views) get their unchanged arrays back."""
    for t in tr.live_tensors():
        p = t._data
        if p.__class__ is _lazy.LazyArray and p.value is None and \
                isinstance(p.owner, np.ndarray) and isinstance(p.shadow, np.ndarray):
            t._data = p.shadow
    tr.reset()


class _Frame:
    """One call of a compiled function: what realizing its graphs needs."""

    def __init__(self, cf: CompiledFunction | None, observe_only: bool = False,
                 code: CodeCache | None = None, backend: Any = "inductor",
                 dynamic: bool | None = None) -> None:
        self.cf = cf
        self.observe_only = observe_only
        self.code = code if code is not None else cf._code_cache()  # type: ignore[union-attr]
        self.backend = cf.backend if cf is not None else backend
        self.dynamic = cf.dynamic if cf is not None else dynamic
        self.trace: Any = None
        self.last_entry: Entry | None = None   # the compiled graph the last realize ran
        # grad mode off when the compiled function was called (PyTorch freezes those graphs)
        self.grad_off = config.freezing and cf is not None and not _gm.STATE.grad_enabled
        self.args: tuple = ()
        self.kwargs: dict = {}
        # force_backend (set_stance) replaces the function's backend; it cannot change during
        # a call (set_stance raises inside compiled code)
        name = _STANCE.backend if _STANCE.backend is not None else self.backend
        memo = cf.__dict__.get("_backend_memo") if cf is not None else None
        if memo is not None and memo[0] is name and \
                (type(name) is not str or _BACKENDS.get(name) is memo[1]):
            self.compiler_fn = memo[1]   # looked up on an earlier call, still registered
        else:
            self.compiler_fn = lookup_backend(name)
            if cf is not None:
                cf._backend_memo = (name, self.compiler_fn)

    def realize(self, cap: Captured, segment: int) -> list:
        if _EVENTS:
            g = cap.specialize(frozenset())
            for ev in _EVENTS:
                ev.graphs.append(g)
        seg = self.code.segment(segment)
        e = cap.hit
        if e is not None and e.backend is self.compiler_fn:  # the trace followed a known one
            seg.last_values[cap.key] = cap.values
            self.last_entry = e
            return _call(e, cap)
        e = self._lookup(seg, cap)
        if e is not None:
            self.last_entry = e
            return _call(e, cap)
        if self.observe_only:
            seg.last_values[cap.key] = cap.values
            return _run_eagerly(cap)
        with self.code.key_lock(segment, cap.key):  # one compile per key; others wait here
            e = self._lookup(seg, cap)  # another thread may have compiled it meanwhile
            if e is not None:
                return _call(e, cap)
            if seg.count > 0:
                got = self._recompile_policy(seg, cap, segment)
                if got is not None:
                    return got
            e = self._compile(cap, self._generic(seg, cap) | _rng_slots(cap))
            seg.entries.setdefault(cap.key, []).append(e)
            seg.order.append((cap.key, e))
            seg.last_values[cap.key] = cap.values
        self.last_entry = e
        return _call(e, cap)

    def known_trace(self, segment: int) -> _lazy.Known | None:
        """The trace that graph ``segment`` of this code last ran compiled (``_lazy.Known``)."""
        seg = self.code.segments.get(segment)
        return seg.known if seg is not None else None

    def _lookup(self, seg: SegmentCache, cap: Captured) -> Entry | None:
        """The cached entry that matches the capture (None on a miss)."""
        for e in seg.entries.get(cap.key, ()):
            if e.backend is self.compiler_fn and e.matches(cap.values):
                seg.last_values[cap.key] = cap.values
                return e
        return None

    def _recompile_policy(self, seg: SegmentCache, cap: Captured, segment: int) -> list | None:
        """A miss in a segment that has entries: apply the stance and the recompile limit.
        Returns the outputs when the graph runs without compiling, None to compile it."""
        stance = _STANCE.stance
        code = self.code
        limit = compiler_config.recompile_limit
        # the reasons (a diff against every cached entry) cost ~0.1-0.5 s on a large graph:
        # computed only when something reports them
        if not (_EVENTS or stance == "fail_on_recompile" or seg.count >= limit
                or "recompiles" in config.logs):
            return None if stance != "eager_on_recompile" else _run_eagerly(cap)
        reasons = self._reasons(seg, cap, segment)
        for ev in _EVENTS:
            ev.recompile_reasons.extend(reasons)
        failures = "\n    triggered by the following guard failure(s):\n" + \
            "\n".join(f"    - {r}" for r in reasons)
        if stance == "fail_on_recompile":
            if not self._has_tensors():  # PyTorch skips frames without tensors: eager
                return _run_eagerly(cap)
            raise RecompileError(
                f"Detected recompile when ember.compile stance is 'fail_on_recompile'. "
                f"filename: '{code.filename}', function name: '{code.name}', line number: "
                f"{code.lineno}" + failures)
        if stance == "eager_on_recompile":
            return _run_eagerly(cap)
        if seg.count >= limit:
            last = reasons[0] if reasons else "unknown"
            if self.cf is not None and self.cf.fullgraph:  # PyTorch 2.13: a hard failure
                raise RecompileError(
                    f"ember.compile hit config.recompile_limit ({limit}) with fullgraph=True "
                    f"(a new graph cannot run eagerly)\n   function: '{code.name}' "
                    f"({code.where()})\n   last reason: {last}")
            if not code.warned:
                code.warned = True
                warnings.warn(
                    f"ember.compile hit config.recompile_limit ({limit})\n"
                    f"   function: '{code.name}' ({code.where()})\n"
                    f"   last reason: {last}\n"
                    f"To log all recompilation reasons, use EMBER_LOGS=\"recompiles\".",
                    RecompileLimitWarning, stacklevel=_reasons.user_stacklevel())
            return _run_eagerly(cap)
        _log("recompiles", f"Recompiling function {code.name} in {code.where()}" + failures)
        return None

    def _has_tensors(self) -> bool:
        """Whether tensors (or a module) come into the compiled call: its arguments and the
        function's closure, as PyTorch's check of a frame's locals."""
        cf = self.cf
        if cf is None or cf._module is not None:
            return True
        return _reasons.call_has_tensors(cf._orig, self.args, self.kwargs)

    def _reasons(self, seg: SegmentCache, cap: Captured, segment: int) -> list:
        """One line per cached entry of the segment, newest first: what differs from it."""
        cf = self.cf
        names = _reasons.input_names(cf._orig, cf._module, self.args, self.kwargs) \
            if cf is not None else {}
        out = []
        for n in range(len(seg.order) - 1, -1, -1):
            key, e = seg.order[n]
            out.append(f"{segment}/{n}: " + _reasons.entry_diff(e, key, cap, names,
                                                                 self.compiler_fn))
        return out

    def _generic(self, seg: SegmentCache, cap: Captured) -> frozenset:
        """Which numbers the new entry lifts to runtime arguments.  Marks win over
        ``dynamic=`` (as in PyTorch): mark_dynamic dims are generic even with dynamic=False,
        mark_static dims specialized even with dynamic=True."""
        values = cap.values
        dyn, static = _marked_slots(self.trace, cap)
        if self.dynamic is False:
            return frozenset(dyn - static)
        pin = _pinned01(cap)
        if self.dynamic is True:  # sizes (and view shapes' ints) of 0 and 1 specialize, as in
            # PyTorch
            return frozenset(k for k, v in enumerate(values)
                             if not (k in pin and v in (0, 1))) - static
        gen: set = set(dyn)
        if compiler_config.automatic_dynamic_shapes:
            prev = seg.last_values.get(cap.key)
            olds = [e.values for e in seg.entries.get(cap.key, [])]
            if prev is not None:
                olds.append(prev)
            for old in olds:
                for k, (a, b) in enumerate(zip(old, values)):
                    if a != b or type(a) is not type(b):
                        if k in pin and b in (0, 1):
                            continue
                        gen.add(k)
            for e in seg.entries.get(cap.key, []):
                gen |= {k for k in e.generic if not (k in pin and values[k] in (0, 1))}
        return frozenset(gen - static)

    def _compile(self, cap: Captured, generic: frozenset) -> Entry:
        t0 = time.perf_counter()
        graph = cap.specialize(generic)
        if config.debug >= 1:
            graph.verify()
        backend = _STANCE.backend if _STANCE.backend is not None else self.backend
        compiler_fn = self.compiler_fn
        examples = [_wrap(a, _dt.from_numpy_dtype(a.dtype)) for a in cap.arrays]
        if "graphs" in config.logs or config.debug >= 2:
            print(f"[ember.compiler graphs] {self.code.name} graph ({len(graph)} ops):\n"
                  f"{graph.python()}", file=sys.stderr)
        if getattr(compiler_fn, "takes_mode", False):  # the C backend: max-autotune
            fn = compiler_fn(graph, examples, mode=self.cf.mode if self.cf is not None else None)
        else:
            fn = compiler_fn(graph, examples)
        if not callable(fn):
            raise EmberTypeError(f"[ember.compile] backend {backend!r} returned {fn!r}; expected "
                                 f"a callable")
        dt = time.perf_counter() - t0
        if config.debug >= 1:
            name = backend if isinstance(backend, str) else getattr(
                backend, "__name__", type(backend).__name__)
            print(f"[ember.compiler compile] {self.code.name} ({self.code.where()}): graph of "
                  f"{len(graph)} ops, {len(generic)} lifted numbers, backend {name!r}, "
                  f"{dt:.3f} s",
                  file=sys.stderr)
        for ev in _EVENTS:
            ev.compile_times.append(dt)
        return Entry(graph, fn, generic, tuple(cap.values), tuple(cap.kinds), dt, compiler_fn,
                     _pinned01(cap))


def _marked_slots(trace: Any, cap: Captured) -> tuple:
    """Slots of dims marked with mark_dynamic / mark_static on the graph's tensor inputs (an
    unmarked nn.Parameter's dims count as static: ``force_parameter_static_shapes``)."""
    dyn: set = set()
    static: set = set()
    marks = getattr(trace, "marks", None)
    params = getattr(trace, "params", None) if compiler_config.force_parameter_static_shapes \
        else None
    if not marks and not params:
        return dyn, static
    slot = 0
    for k, (shape, _) in enumerate(cap.inputs):
        m = marks.get(cap.in_orig[k])
        if not m and params and cap.in_orig[k] in params:
            m = dict.fromkeys(range(len(shape)), "static")
        if m:
            for d, how in m.items():
                if d < len(shape) and (how == "static" or shape[d] not in (0, 1)):
                    (dyn if how == "dynamic" else static).add(slot + d)
        slot += len(shape)
    return dyn, static


def _run_eagerly(cap: Captured) -> list:
    """Run a graph that is not compiled (a recompile the stance or the limit refused) with the
    eager kernels: what running the function's Python eagerly would have computed."""
    return cap.specialize(frozenset()).run(cap.arrays)


def _call(e: Entry, cap: Captured) -> list:
    scalars = [cap.values[k] for k in e.graph.lifted]  # type: ignore[attr-defined]
    fn = e.fn
    if getattr(fn, "_ember_arrays", False):
        return fn(cap.arrays, scalars)
    args = [_wrap(a, _dt.from_numpy_dtype(a.dtype)) for a in cap.arrays]
    with _gm.no_grad():
        outs = fn(*args, *scalars)
    if isinstance(outs, Tensor):
        outs = (outs,)
    return [o._data if isinstance(o, Tensor) else np.asarray(o) for o in outs]


def _mutations(trace: _lazy.Trace) -> tuple:
    """``((output index, input index), ...)``: the outputs of the graph being realized that are
    written back into input arrays (``Graph.mutated``), leaving out an input whose memory
    another input of the graph may share (a view and its base both read: a kernel computing the
    new value in place could change what another kernel reads)."""
    nd, nw = getattr(trace, "out_split", (0, 0))
    if not nw:
        return ()
    ids = trace.input_ids
    owners: dict | None = None
    if any(a.base is not None for a in trace.inputs):  # else each input owns its memory
        owners = {}
        for a in trace.inputs:
            o = id(_memory_owner(a))
            owners[o] = owners.get(o, 0) + 1
    out = []
    j = nd
    for st in trace.storages.values():
        if st.root is None:
            continue
        k = ids.get(id(st.root))
        if k is not None and (owners is None or owners[id(_memory_owner(st.root))] == 1):
            out.append((j, k))
        j += 1
    return tuple(out)


def _memory_owner(a: np.ndarray) -> Any:
    """The object that owns ``a``'s memory (the end of its ``.base`` chain)."""
    while True:
        b = a.base
        if b is None:
            return a
        if b.__class__ is not np.ndarray:
            return b
        a = b


def _realizer(trace: _lazy.Trace, nodes: list, arrays: list, out_refs: list) -> list:
    kn = trace.followed(out_refs)
    frame = trace.owner
    mut = _mutations(trace) if trace.storages else ()
    if kn is not None and kn.cap.mut_raw != mut:
        kn = None  # the same graph, but other inputs may share memory: other compiled code
    frozen = _frozen_inputs(trace, frame) if config.freezing else ()
    if kn is not None and kn.cap.frozen_raw != frozen:
        kn = None  # the same graph with other weights frozen (another grad mode)
    if kn is not None and _lazy.STATE.recorder is not None:
        # a ``reduce-overhead`` recording finds its step-dependent numbers in the capture by
        # identity (``record._recipes``): a known capture holds an earlier call's numbers
        kn = None
    if kn is not None:  # the same graph as a call before: its capture and entry
        kn.used = True
        run = kn.run
        changed = trace.loosened   # runtime numbers of the entry this call changed
        if run is not None and kn.entry.backend is frame.compiler_fn and not _EVENTS and \
                type(frame).realize is _Frame.realize:
            fn, in_orig, scalars, seg = run
            if changed:
                scalars = with_scalars(scalars, changed)
                seg.last_values[kn.cap.key] = with_values(kn.cap.values, changed)
            else:
                seg.last_values[kn.cap.key] = kn.cap.values
            frame.last_entry = kn.entry
            return fn([arrays[k] for k in in_orig], scalars)
        cap = kn.cap.rebind(arrays, kn.entry)
        if changed:
            cap.values = with_values(cap.values, changed)
        return frame.realize(cap, trace.segment)
    cap = capture(nodes, arrays, out_refs, lambda a: _dt.from_numpy_dtype(a.dtype), mut,
                  frozen)
    frame.last_entry = None
    res = frame.realize(cap, trace.segment)
    e = frame.last_entry
    seg = frame.code.segments.get(trace.segment) if e is not None else None
    if seg is not None and _worth_following(seg):  # later calls follow this trace
        # the capture without this call's arrays (the Known must not keep them alive)
        kn = _lazy.Known(nodes, arrays, out_refs, cap.rebind(arrays, None), e)
        kn.cap.arrays = None
        if getattr(e.fn, "_ember_arrays", False):  # what ``_call`` does, prepared
            kn.run = (_prepared(e.fn), cap.in_orig, [cap.values[k] for k in e.graph.lifted],
                      seg)
        kn.loose = make_loose(cap, e.graph.lifted, nodes)  # type: ignore[attr-defined]
        seg.known = kn
    return res


def _frozen_inputs(trace: _lazy.Trace, frame: Any) -> tuple:
    """Under ``config.freezing``: the trace inputs that are frozen weights of this graph (the
    nn.Parameters it reads and does not write), when the graph records no autograd for them
    (a compiled function called with grad mode off, PyTorch's condition, or reading no
    parameter that requires grad); () for backward graphs and training graphs."""
    if not trace.frozen or getattr(frame, "cf", None) is None or \
            not (getattr(frame, "grad_off", False) or not trace.grad_inputs):
        return ()
    out = sorted(trace.frozen)
    if trace.storages:   # a weight written in place here (or sharing memory with one) is not
        owners = {id(_memory_owner(st.root)) for st in trace.storages.values()
                  if st.root is not None}
        out = [k for k in out if id(_memory_owner(trace.inputs[k])) not in owners]
    return tuple(out)


def _prepared(fn: Any) -> Any:
    """How a followed call runs compiled code ``fn`` (``fn(arrays, scalars)``): through its
    prepared call when the backend offers one (the C backend's ``bind({})``: the argument list
    laid out once, the memory plan's temporaries kept between calls, ``bound.py``), falling back
    to ``fn`` when the prepared call declines (an input of another layout, a busy call).  Only
    a ``bind`` of ``fn``'s own class counts: a wrapper that forwards attributes (the minifier's
    checked call) must keep seeing every call."""
    bound = fn.bind({}) if getattr(type(fn), "bind", None) is not None else None
    if bound is None:
        return fn

    def call(arrays: list, scalars: list) -> list:
        got = bound(arrays, scalars)
        return got if got is not None else fn(arrays, scalars)
    return call


def _worth_following(seg: SegmentCache) -> bool:
    """Whether to keep this call's trace for the next calls to follow.  A graph whose calls
    never repeat exactly (a random op's offset moves every step, sizes alternate) would pay
    for a new ``Known`` on every call: after 8 in a row that nobody followed to the end, the
    segment makes one only every 64th call (``Known.used``: followed to the end at least
    once; a followed one resets the count)."""
    old = seg.known
    if old is None or old.used:
        seg.unfollowed = 0
        return True
    seg.unfollowed += 1
    return seg.unfollowed <= 8 or seg.unfollowed % 64 == 0   # retried now and then


_lazy.install_realizer(_realizer)


_RNG_PARAMS = ("seed", "offset")


def _pinned01(cap: Captured) -> frozenset:
    """The slots whose 0 and 1 always specialize: the sizes, and the ints of a view op's shape
    (``w.view(C, 1, 1)``: in PyTorch those are constants of the code or sizes, both
    specialized at 0 and 1), so a lifted one is never a broadcast 1.  Other ints (a kernel's
    grid, a loop counter) are lifted whatever their value."""
    kinds, values = cap.kinds, cap.values
    got = {k for k, kd in enumerate(kinds) if kd == "size"}
    bounds = getattr(cap, "_bounds", None) or ()
    for i, ((_, mid), n) in enumerate(zip(bounds, cap.nodes)):
        if n.op.kind == "view":
            end = bounds[i + 1][0] if i + 1 < len(bounds) else len(values)
            got.update(k for k in range(mid, end) if type(values[k]) is int)
    return frozenset(got)


def _rng_slots(cap: Captured) -> frozenset:
    """The slots of random ops' ``seed``/``offset`` parameters: always runtime arguments (the
    generator state is an input of the graph, as in PyTorch), so a training step with dropout
    does not recompile when the offsets move on, even under ``dynamic=False``."""
    out: set = set()
    bounds = getattr(cap, "_bounds", None)
    if bounds is None:
        return frozenset()
    for (_, mid), n in zip(bounds, cap.nodes):
        params = n.params
        if not params or not any(k in params for k in _RNG_PARAMS):
            continue
        k = mid
        for name, v in params.items():
            count = 0 if name in static_keys(n.op) else len(_skel_numbers(v))
            if name in _RNG_PARAMS and count == 1 and cap.kinds[k] == "scalar":
                out.add(k)
            k += count
    return frozenset(out)


def _skel_numbers(v: Any) -> list:
    nums: list = []
    _skel(v, nums)
    return nums


def _backward_owner(fwd: Any) -> _Frame:
    """Compiled autograd: the frame a backward over nodes recorded by ``fwd`` (a forward's
    ``_Frame``) runs under; its graphs are cached per forward function, apart from the
    forward's own graphs, with the forward's backend."""
    code = getattr(fwd, "code", None)
    if code is None:
        return _Frame(None, code=CodeCache("backward", "<unknown>", 0))
    key = ("backward", id(code))
    entry = _CACHES.get(key)
    if entry is None or entry[0] is not code:
        entry = _CACHES[key] = (code, CodeCache(f"{code.name} (backward)", code.filename,
                                                code.lineno))
    return _Frame(None, code=entry[1], backend=fwd.backend, dynamic=fwd.dynamic)


_lazy.install_backward_owner(_backward_owner)


def compile(model: Callable | None = None, *, fullgraph: bool = False,  # noqa: A001
            dynamic: bool | None = None, backend: Any = None, mode: str | None = None,
            options: dict | None = None, disable: bool = False) -> Any:
    """Compile ``model`` (a function or ``nn.Module``): each call records its tensor ops lazily
    and runs them as cached graphs (ARCHITECTURE.md §4).  Usable as ``ember.compile(fn)`` and as
    a decorator with or without arguments.  ``backend=None`` takes the process default,
    ``ember.compiler.config.default_backend`` (``"inductor"``, the C backend, unless
    EMBER_COMPILE_BACKEND names another), read when ``compile`` is called."""
    if backend is None:
        backend = compiler_config.default_backend
    if mode is not None and options is not None:
        raise EmberRuntimeError("Either mode or options can be specified, but both can't be "
                                "specified at the same time.")
    if mode not in (None, "default", "reduce-overhead", "max-autotune",
                    "max-autotune-no-cudagraphs"):
        raise EmberRuntimeError(f"[ember.compile] unknown mode {mode!r}; expected one of "
                                "'default', 'reduce-overhead', 'max-autotune', "
                                "'max-autotune-no-cudagraphs'")
    lookup_backend(backend)  # unknown backends fail now, not at the first call

    def wrap(fn: Callable) -> Any:
        if disable:
            return fn
        if not callable(fn):
            raise EmberTypeError(f"[ember.compile] expected a callable, got {type(fn).__name__}")
        if _reasons.is_module(fn):
            return _compile_module(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                   mode=mode, options=options)
        cls = FUNCTION_CLASSES.get(mode, CompiledFunction)
        return cls(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                   options=options)

    if model is None:
        return wrap
    return wrap(model)


_is_module = _reasons.is_module

# the wrapper class of a mode other than the default's CompiledFunction: replay.py registers
# ReplayFunction for "reduce-overhead"
FUNCTION_CLASSES: dict[str | None, type] = {}


class OptimizedModule:
    """``ember.compile(module)``: calls go through a compiled ``module.__call__``; attributes
    are the module's (``_orig_mod`` is the module)."""

    def __init__(self, mod: Any, compiled: Callable) -> None:
        object.__setattr__(self, "_orig_mod", mod)
        object.__setattr__(self, "_compiled", compiled)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._orig_mod, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._orig_mod, name, value)

    def __repr__(self) -> str:
        return f"OptimizedModule({self._orig_mod!r})"


def _compile_module(mod: Any, **kw: Any) -> OptimizedModule:
    traced = _compile_callable(mod._call_impl, mod, **kw)
    # a module that knows its own graph (``ep.module()`` of an exported program) compiles it
    # directly: ``__ember_compile__(traced, backend=, mode=)`` returns a callable (which may
    # call ``traced``, the ordinary path, when it cannot serve a call) or None
    hook = getattr(type(mod), "__ember_compile__", None)
    if hook is not None:
        direct = hook(mod, traced, backend=kw.get("backend"), mode=kw.get("mode"))
        if direct is not None:
            return OptimizedModule(mod, direct)
    return OptimizedModule(mod, traced)


def _compile_callable(bound: Callable, mod: Any, **kw: Any) -> Callable:
    cf: Any = FUNCTION_CLASSES.get(kw.get("mode"), CompiledFunction)(bound, **kw)
    cf._key = _code_key(type(mod).forward)
    cf._module = mod
    return cf


def module_compile(mod: Any, *args: Any, **kwargs: Any) -> None:
    """``nn.Module.compile(...)``: compile the module's ``__call__`` in place."""
    if args:
        raise EmberTypeError("[Module.compile] takes keyword arguments only (those of "
                             "ember.compile)")
    if kwargs.get("disable"):
        return
    kwargs.pop("disable", None)
    mod._compiled_call_impl = _compile_callable(mod._call_impl, mod, **kwargs)


# ------------------------------------------------------------------------------ disable etc.
def disable(fn: Callable | None = None, recursive: bool = True, *, reason: str | None = None
            ) -> Any:
    """Run ``fn`` eagerly even when called from compiled code (one graph break per call)."""
    def deco(f: Callable) -> Callable:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            tr = _LZ.trace
            if tr is None:
                return f(*args, **kwargs)
            name = getattr(f, "__qualname__", repr(f))
            why = f"call to ember.compiler.disable'd function {name}" + \
                (f" ({reason})" if reason else "")
            tr.graph_break(why)
            _LZ.trace = None
            try:
                return f(*args, **kwargs)
            finally:
                _LZ.trace = tr
        wrapper._ember_disabled = True  # type: ignore[attr-defined]
        return wrapper
    if fn is None:
        return deco
    return deco(fn)


def graph_break(msg: str = "") -> None:
    """Force a graph break here (``ember._dynamo.graph_break()``); a no-op outside compiled
    code."""
    tr = _LZ.trace
    if tr is not None:
        tr.graph_break("ember.compiler.graph_break()" + (f": {msg}" if msg else ""))


def is_compiling() -> bool:
    """True while a compiled function's Python is being recorded."""
    return _LZ.trace is not None


__all__ = ["CompiledFunction", "FallbackWarning", "OptimizedModule", "RecompileError",
           "RecompileLimitWarning", "compile", "compiler_config", "disable",
           "error_on_graph_break", "graph_break", "is_compiling", "mark_dynamic",
           "mark_static", "maybe_mark_dynamic", "module_compile", "reset", "set_stance"]


def _install_module_hook() -> None:
    from ember.nn.modules.module import Module
    Module._compile_hook = module_compile


_install_module_hook()

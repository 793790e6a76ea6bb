"""The C backend: ``ember.compile``'s default (``backend="inductor"``, also ``"c"``).

``c_backend(graph, example_inputs)`` plans the fusion over the whole graph (``schedule.plan``),
lowers the graph to the loop IR following the plan (``lower/``), schedules it
(``schedule.py``: epilogue fusion, memory plan), generates one C translation unit
(``codegen/unit.py``), builds it once with ``build/toolchain.compile_unit``
(cached on disk, possibly prebuilt in a bundle; a run plan on disk skips lowering next time)
and returns a ``CompiledGraph``: called with the graph's input arrays and lifted scalars, it
runs each C segment with one ``runtime`` entry call and each extern step with the node's eager
kernel.  Sizes and scalars travel as ``ints``/``floats``, so changed values reuse
the same library.  Inputs that are not C-contiguous are copied (counted in ``stats.copies``).

``codegen(fn, *args)`` returns the C source ``fn``'s graphs compile to.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
import warnings
import weakref
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ember.compiler.c import inplace
from ember.compiler.c.bound import BoundCall
from ember.compiler.c.build import autotune, runtime, toolchain
from ember.compiler.c.codegen import awake
from ember.compiler.c.codegen import flex as flex_codegen
from ember.compiler.c.codegen.unit import PRELUDE, generate
from ember.compiler.c.decompose import decompose
from ember.compiler.c.freeze import Frozen, assign_slots
from ember.compiler.c.inplace import donations
from ember.compiler.c.ir.loop_ir import Buffer, Extern, Program, Segment, eval_size
from ember.compiler.c.lower import LowerStats, helpers_in, lower
from ember.compiler.c.lower.context import log as lower_log
from ember.compiler.c.profile import _PROFILED, format_profile, profile, reset_profile
from ember.compiler.c.schedule import memory_plan, schedule
from ember.compiler.c.schedule import plan as plan_fusion
from ember.compiler.frontend import api
from ember.compiler.frontend.graph import Graph, _resolve
from ember.config import config
from ember.dtypes import by_name
from ember.errors import EmberRuntimeError

# integer overflow wraps, as in NumPy; libm need not set errno (lets gcc inline sqrt and CSE
# pure calls; results are unchanged)
EXTRA_FLAGS = ("-fwrapv", "-fno-math-errno")
_HELPERS = helpers_in(PRELUDE)

_RECENT: list = []  # the last few CompiledGraphs (for tests and debugging)
_WARNED: set = set()  # ops a FallbackWarning was given for in this process (warn_fallbacks)
BUILDS = [0]        # CompiledGraphs made in this process
KERNEL_BUILDS = [0]  # those with at least one C kernel


class CompiledGraph:
    """A graph built to C: ``cg(arrays, scalars) -> outputs`` (``_ember_arrays`` protocol).

    A warm start skips lowering and code generation: the run plan (segments' entry names and
    buffers, externs, where each value lives) is kept on disk next to the library, keyed by the
    graph's text and a digest of the compiler's own source files (``_plan_key``).  ``program``
    and ``source`` are then computed only when asked for."""

    _ember_arrays = True
    _frozen: Frozen | None = None   # frozen weights packed once (freeze.py), when any

    def __init__(self, graph: Graph, mode: str | None = None) -> None:
        self.source_graph = graph
        self.graph = decompose(graph)  # what the program's node indices and refs refer to
        graph = self.graph
        self.mode = mode
        self._program: Program | None = None
        self._source: str | None = None
        self.path = None
        self.prefix = ""
        self.entries: dict = {}
        self.entry_errors = 0  # calls whose C entry returned an error (then run eagerly)
        self.last_entry_error: EmberRuntimeError | None = None
        # EMBER_DEBUG>=3 prints the loop IR and fusion decisions: lower even when warm
        # (max-autotune chooses GEMM variants while lowering: never from a run plan)
        key = _plan_key(graph) if config.debug < 3 and mode not in autotune.MODES else None
        plan = _load_plan(key) if key is not None else None
        if plan is not None:
            self._from_plan(plan)
            _log(5, f"plan cache hit {key[:16]} ({len(self._plan)} steps, {self.path})")
        else:
            self._build()
            if key is not None:
                _save_plan(key, self)
        if config.debug >= 1:
            self._summary(plan is not None)
        warn_fallbacks(self.externs)
        self._n_ints = len(self._int_names)
        BUILDS[0] += 1
        KERNEL_BUILDS[0] += bool(self.stats.kernels)
        _RECENT.append(self)
        del _RECENT[:-8]
        if config.c_profile and self.path is not None:
            _PROFILED.append(weakref.ref(self))

    def _build(self) -> None:
        program = self._program = lower_and_schedule(self.graph)
        if self.mode in autotune.MODES:  # how each GEMM runs: timed once per shape, cached
            autotune.tune_program(program, EXTRA_FLAGS)
        else:  # config.c_gemm: a measured rule per shape, or one way for all
            autotune.default_program(program)
        fz = self.source_graph.frozen
        frozen = assign_slots(program, fz) if fz else ()
        if config.verify_ir:  # what codegen receives, checked again after the choice
            program.verify()
        self.stats = program.stats  # type: ignore[attr-defined]
        self._source = generate(program, openmp=config.c_openmp,
                                profile=config.c_profile)
        if config.debug >= 3:
            print(f"[ember.compiler loop_ir]\n{program}", file=sys.stderr)
        if program.segments():
            unit = toolchain.compile_unit(self._source, **build_options())
            self.path, self.prefix = unit.path, unit.prefix
        if config.debug >= 4:  # the generated part; the whole unit is the cached .c file
            where = f" (whole unit with the preludes: {Path(self.path).with_suffix('.c')})" \
                if self.path is not None else ""
            body = generate(program, prelude=False, openmp=config.c_openmp,
                            profile=config.c_profile)
            print(f"[ember.compiler c_source]{where}\n{body}", file=sys.stderr)
        if program.segments():
            lib = runtime.load(self.path)
            # a graph prebuilt in a bundle has its entries renamed with the bundle's prefix
            self.entries = {s.entry: lib.entry(self.prefix + s.entry)
                            for s in program.segments()}
            if frozen:
                self._frozen = Frozen(frozen, lib.dll, self.prefix)
        self._plan = [(s, s.buffers()) if isinstance(s, Segment) else (s, None)
                      for s in program.steps]
        self._inputs = program.inputs
        self._int_names = list(program.int_names)
        self._sources = program.sources  # type: ignore[attr-defined]
        self._slots, self._slot_bytes = memory_plan(program, self.graph)
        self._donated = {id(b): k for b, k in program.donated}  # type: ignore[attr-defined]

    def _from_plan(self, plan: dict) -> None:
        bufs = [Buffer(name, by_name(dt), tuple(shape), role,
                       None if strides is None else tuple(strides))
                for name, dt, shape, role, strides in plan["buffers"]]
        self._plan = []
        for st in plan["steps"]:
            if st[0] == "seg":
                self._plan.append((Segment(st[1]), [bufs[j] for j in st[2]]))
            else:
                node = self.graph.nodes[st[1]]
                self._plan.append((Extern(st[1], node, [bufs[j] for j in st[2]], st[3]), None))
                # the same fallback log as lowering gives (EMBER_LOGS=fallbacks, EMBER_DEBUG)
                lower_log("fallbacks", f"node {st[1]} ({node.op.name}) runs its eager kernel: "
                                       f"{st[3]}", 3)
        self._inputs = [bufs[j] for j in plan["inputs"]]
        self._int_names = list(plan["int_names"])
        self._sources = {tuple(ref): (kind, bufs[v] if kind == "buf" else v) if kind != "view"
                         else ("view", *v) for ref, kind, v in plan["sources"]}
        self._slots = {id(bufs[j]): slot for j, slot in plan["slots"]}
        self._slot_bytes = list(plan["slot_bytes"])
        self._donated = {id(bufs[j]): k for j, k in plan["donated"]}
        self.stats = LowerStats(**plan["stats"])
        if plan["path"] is not None:
            self.path = Path(plan["path"])
            lib = runtime.load(self.path)
            self.prefix = plan.get("prefix", "")
            self.entries = {s.entry: lib.entry(self.prefix + s.entry)
                            for s, b in self._plan if b is not None}
            if plan.get("frozen"):
                self._frozen = Frozen(tuple((k, tuple(sl)) for k, sl in plan["frozen"]),
                                      lib.dll, self.prefix)

    def _summary(self, warm: bool) -> None:
        """EMBER_DEBUG>=1: one line per built graph, with its fallbacks counted per op."""
        st = self.stats
        counts: dict = {}
        for f in st.fallbacks:
            op = f.split(":", 1)[0]
            counts[op] = counts.get(op, 0) + 1
        falls = ", ".join(f"{op} x{n}" for op, n in sorted(counts.items(), key=lambda x: -x[1]))
        lib = "no C code" if self.path is None else \
            f"{Path(self.path).name}{' (run plan from the cache)' if warm else ''}"
        print(f"[ember.compiler c] graph of {len(self.graph.nodes)} ops: {st.kernels} kernels "
              f"in {st.segments} C segments, {st.externs} externs (eager fallbacks"
              f"{': ' + falls if falls else ''}); {lib}", file=sys.stderr)

    @property
    def extern_count(self) -> int:
        """How many graph nodes run as eager externs between the C entries."""
        return self.stats.externs

    @property
    def externs(self) -> list[tuple[str, str]]:
        """``(op name, reason)`` of each extern, in graph order.

        >>> ember.compiler.c.backend.last_compiled().externs      # doctest: +SKIP
        [('index_put', 'index op (no C lowering yet)')]
        """
        return split_fallbacks(self.stats.fallbacks)

    def memory(self) -> dict:
        """What the memory plan (``memory_plan``) does for one call: how many temporaries share
        slots, how many slots, and their bytes without and with the sharing."""
        sizes = {id(b): b.dtype.np.itemsize * math.prod(b.shape)
                 for _, bl in self._plan if bl is not None for b in bl if id(b) in self._slots}
        return {"buffers": len(sizes), "slots": len(self._slot_bytes),
                "bytes_unshared": sum(sizes.values()), "bytes": sum(self._slot_bytes)}

    @property
    def program(self) -> Program:
        """The loop IR (lowered again on first access after a warm start)."""
        if self._program is None:
            self._program = lower_and_schedule(self.graph)
        return self._program

    @property
    def source(self) -> str:
        """The C translation unit."""
        if self._source is None:
            self._source = generate(self.program, openmp=config.c_openmp,
                                    profile=config.c_profile)
        return self._source

    def __call__(self, arrays: list, scalars: list = ()) -> list:
        if self._frozen is not None:   # drop the packed copies of weights that changed
            self._frozen.check(arrays)
        fast = self.__dict__.get("_fast")
        if fast is None:
            fast = self._fast = _fast_plan(self)
        if fast is not False:
            got = _run_fast(self, fast, arrays, scalars)
            if got is not None:
                return got
        return self._call_general(arrays, scalars)

    def bind(self, const: dict) -> BoundCall | None:
        """The call prepared with the inputs ``const`` ({input index: array}) fixed
        (``bound.py``), or None when the graph is not one C entry with static buffers."""
        fast = self.__dict__.get("_fast")
        if fast is None:
            fast = self._fast = _fast_plan(self)
        try:
            return BoundCall(self, fast, const, (_allocate, _empty, _rerun)) if fast else None
        except ValueError:  # a fixed input does not fit the prepared call
            return None

    def _call_general(self, arrays: list, scalars: list) -> list:
        ints = [0] * self._n_ints
        for k, v in enumerate(scalars):
            ints[k] = int(v) if not (isinstance(v, float) and not math.isfinite(v)) else 0
        floats = tuple(float(v) for v in scalars)
        py: dict = {}    # buffer id -> array as produced (Python-side uses)
        donated = False  # an input was written in place (inplace.py)
        cv: dict = {}    # buffer id -> C-contiguous array of the buffer's dtype (C uses)
        arenas: list = [None] * len(self._slot_bytes)  # the memory plan's slots, this call's
        for b, a in zip(self._inputs, arrays):
            py[id(b)] = a
        env = None
        for step, bufs in self._plan:
            if bufs is not None:
                call = []
                for b in bufs:
                    a = cv.get(id(b))
                    if a is None:
                        src = py.get(id(b))
                        if src is None:  # a buffer this segment writes first
                            slot = self._slots.get(id(b))
                            a = _donated(self, b, arrays) if self._donated else None
                            if a is not None:  # written into the input it replaces
                                donated = True
                            elif slot is not None:  # shares memory with temps of other times
                                arena = arenas[slot]
                                if arena is None:
                                    arena = arenas[slot] = _empty((self._slot_bytes[slot],),
                                                                  np.uint8)
                                a = arena[:b.dtype.np.itemsize * math.prod(b.shape)].view(
                                    b.dtype.np).reshape(b.shape)
                            else:
                                if env is None:
                                    env = dict(zip(self._int_names, ints))
                                a = _allocate(b, env)
                            py[id(b)] = a
                        elif src.flags.c_contiguous and src.dtype == b.dtype.np:
                            a = src
                        else:
                            a = np.ascontiguousarray(src, dtype=b.dtype.np)
                            self.stats.copies += 1
                        cv[id(b)] = a
                    call.append(a)
                try:
                    self.entries[step.entry](tuple(call), tuple(ints), floats)
                except EmberRuntimeError as e:
                    # a kernel found invalid input (a class index out of range): eager's
                    # kernels raise the exact error eager would (the graph as traced, so
                    # that a decomposed op's own error is raised); counted, so that the
                    # minifier can tell a spurious C error (eager ran fine) from a user's
                    self.entry_errors += 1
                    self.last_entry_error = e
                    return _rerun(self, arrays, scalars, e, donated)
            else:
                outs = self._extern(step, py, arrays, scalars)
                for b, o in zip(step.outs, outs):
                    py[id(b)] = o
                    for d, name in enumerate(b.shape):
                        if type(name) is str:  # a dynamic graph: the extern's sizes go to C
                            ints[self._int_names.index(name)] = o.shape[d]
                            env = None
        memo: dict = {}
        return [self._value(r, py, arrays, scalars, memo) for r in self.graph.outputs]

    def _extern(self, step: Any, py: dict, arrays: list, scalars: list) -> list:
        n = step.node
        memo: dict = {}
        args = [self._value(a, py, arrays, scalars, memo) if _is_ref(a) else
                (scalars[a.index] if type(a).__name__ == "Sym" else a) for a in n.args]
        params = _resolve(n.params, list(scalars)) if scalars else n.params
        out = n.op.eager(*args, **params)
        outs = (out,) if n.op.num_outputs == 1 and len(n.specs) == 1 else tuple(out)
        return [o if type(o) is np.ndarray else np.asarray(o, dtype=s[1].np)
                for o, s in zip(outs, n.specs)]

    def _value(self, r: tuple, py: dict, arrays: list, scalars: list, memo: dict) -> Any:
        got = memo.get(r)
        if got is not None:
            return got
        src = self._sources[r]
        if src[0] == "in":
            v = arrays[src[1]]
        elif src[0] == "buf":
            v = py[id(src[1])]
        else:
            n = self.graph.nodes[src[1]]
            base = self._value(n.args[0], py, arrays, scalars, memo)
            params = _resolve(n.params, list(scalars)) if scalars else n.params
            out = n.op.eager(base, *n.args[1:], **params)
            v = out if isinstance(out, np.ndarray) else out[src[2]]
        memo[r] = v
        return v


def _donated(cg: CompiledGraph, b: Buffer, arrays: list) -> np.ndarray | None:
    """The input array output buffer ``b`` is computed in (``inplace.py``), when ``b`` is a
    donated output and that array is C-contiguous, writeable, of ``b``'s dtype; else None
    (a fresh buffer: the caller copies it into the input)."""
    k = cg._donated.get(id(b))
    if k is None:
        return None
    a = arrays[k]
    if a.__class__ is not np.ndarray or a.dtype != b.dtype.np or not a.flags.c_contiguous \
            or not a.flags.writeable:
        return None
    return a


def _rerun(cg: CompiledGraph, arrays: list, scalars: list, err: EmberRuntimeError,
           donated: bool) -> list:
    """A C entry found invalid input: run the graph with eager's kernels, which raise eager's
    error.  When kernels had already written inputs in place, the inputs are not what the
    graph started from: the C error is raised if eager's kernels find nothing wrong."""
    out = cg.source_graph.run(arrays, list(scalars))
    if donated:
        raise err
    return out


# ------------------------------------------------------------------------------ fast calls
def _fast_plan(cg: CompiledGraph) -> tuple | bool:
    """How a call of a graph that is one C entry with static buffer shapes runs, prepared once:
    (entry, per C argument (kind, index, dtype, shape), per output (from input?, index)), or
    False when the graph needs the general path (externs, several entries, sizes known only
    at run time, outputs that are views)."""
    if len(cg._plan) != 1 or cg._plan[0][1] is None:
        return False
    step, bufs = cg._plan[0]
    in_pos = {id(b): k for k, b in enumerate(cg._inputs)}
    where = {}
    args = []
    for j, b in enumerate(bufs):
        npd = b.dtype.np
        if id(b) in where:   # the same buffer again: the same array
            args.append((3, where[id(b)], npd, None))
            continue
        if id(b) in cg._donated:    # computed in the input it replaces (inplace.py)
            args.append((5, cg._donated[id(b)], npd, None))
        elif id(b) in in_pos:
            args.append((0, in_pos[id(b)], npd, None))
        elif any(type(n) is not int for n in b.shape):
            return False
        elif id(b) in cg._slots:
            args.append((1, cg._slots[id(b)], npd, b.shape))
        elif b.strides is None and math.prod(b.shape) * npd.itemsize < _PAGE_ALIGN_FROM:
            args.append((4, j, npd, b.shape))   # small: a plain np.empty (see _empty)
        else:
            args.append((2, j, npd, b))
        where[id(b)] = j
    outs = []
    for r in cg.graph.outputs:
        src = cg._sources[r]
        if src[0] == "in":
            outs.append((True, src[1]))
        elif src[0] == "buf" and id(src[1]) in where and id(src[1]) not in in_pos:
            outs.append((False, where[id(src[1])]))
        else:
            return False
    return cg.entries[step.entry], tuple(args), tuple(outs)


def _run_fast(cg: CompiledGraph, fast: tuple, arrays: list, scalars: list) -> list | None:
    """One call by the prepared plan; None when an input is not C-contiguous of its buffer's
    dtype (the general path copies it)."""
    entry, args, outs = fast
    call = []
    arenas = None
    donated = False
    for kind, k, npd, x in args:
        if kind == 0:
            a = arrays[k]
            if a.dtype != npd or not a.flags.c_contiguous:
                return None
        elif kind == 5:
            a = arrays[k]
            if a.dtype != npd or not a.flags.c_contiguous or not a.flags.writeable:
                return None   # the general path computes a fresh output
            donated = True
        elif kind == 4:
            a = np.empty(x, npd)
        elif kind == 2:
            a = _allocate(x, None)
        elif kind == 3:
            a = call[k]
        else:
            if arenas is None:
                arenas = [None] * len(cg._slot_bytes)
            arena = arenas[k]
            if arena is None:
                arena = arenas[k] = _empty((cg._slot_bytes[k],), np.uint8)
            a = np.ndarray(x, npd, arena)   # the slot's buffer at the arena's start
        call.append(a)
    if scalars:
        ints = [0] * cg._n_ints
        for k, v in enumerate(scalars):
            ints[k] = int(v) if not (isinstance(v, float) and not math.isfinite(v)) else 0
        ints_t, floats = tuple(ints), tuple(float(v) for v in scalars)
    else:
        ints_t = floats = ()
    try:
        entry(tuple(call), ints_t, floats)
    except EmberRuntimeError as e:  # as the general path: eager raises eager's error; counted
        cg.entry_errors += 1
        cg.last_entry_error = e
        return _rerun(cg, arrays, scalars, e, donated)
    return [arrays[k] if inp else call[k] for inp, k in outs]


# ------------------------------------------------------------------------------ fallbacks
def split_fallbacks(fallbacks: list) -> list[tuple[str, str]]:
    """``LowerStats.fallbacks`` (``"op: reason"``) as ``(op, reason)`` pairs."""
    return [tuple(f.split(": ", 1)) for f in fallbacks]  # type: ignore[misc]


def warn_fallbacks(externs: list[tuple[str, str]]) -> None:
    """A ``FallbackWarning`` for each op of ``externs`` not warned about yet in this process
    (while ``config.warn_fallbacks``); ``reset_fallback_warnings`` forgets them."""
    if not config.warn_fallbacks:
        return
    for op, reason in externs:
        if op in _WARNED:
            continue
        _WARNED.add(op)
        warnings.warn(f"[compile] {op} runs as an eager extern inside compiled graphs "
                      f"({reason}); set ember.compiler.config.warn_fallbacks = False "
                      f"(EMBER_WARN_FALLBACKS=0) to silence", api.FallbackWarning, stacklevel=3)


def reset_fallback_warnings() -> None:
    """Forget which ops were warned about (each warns again on its next fallback)."""
    _WARNED.clear()


def graph_fallbacks(graph: Graph) -> list[tuple[str, str]]:
    """``(op, reason)`` of each node of ``graph`` the C backend would run as an extern
    (lowering only: no C compiler runs)."""
    return split_fallbacks(lower_and_schedule(graph).stats.fallbacks)


def _log(level: int, message: str) -> None:
    if config.debug >= level:
        print(f"[ember.compiler cache] {message}", file=sys.stderr)


# ------------------------------------------------------------------------------ run plans
PLAN_VERSION = 3
_DIGEST: dict = {}   # config.cc -> digest (memo per process)


def _code_digest() -> str:
    """What decides the generated code besides the graph: the sources of the compiler and of
    the ops (templates, eager layouts), by path, size and modification time (stat calls only),
    ember's version, the compiler, the CPU and this module's settings."""
    dkey = (config.cc, config.c_openmp, config.c_profile, EXTRA_FLAGS, config.c_march,
            config.inject_bug_testing_only, flex_codegen.variant(), inplace.ENABLED,
            awake.settings())
    got = _DIGEST.get(dkey)
    if got is None:
        h = hashlib.sha256(f"plan-v{PLAN_VERSION} {config.c_openmp} {config.c_profile} "
                           f"{config.inject_bug_testing_only!r} "
                           f"{EXTRA_FLAGS} {config.c_march!r} {flex_codegen.variant()} "
                           f"inplace={inplace.ENABLED} {awake.settings()} "
                           f"{PRELUDE is not None}".encode())
        root = Path(__file__).resolve().parents[2]
        # (C templates too; ember.kernel's compiler writes the C of kernel_launch nodes)
        for pattern in ("compiler/**/*.py", "compiler/**/csrc/*", "ops/*.py", "kernel/*.py"):
            for f in sorted(root.glob(pattern)):
                st = f.stat()
                h.update(f"{f.relative_to(root)} {st.st_size} {st.st_mtime_ns}\n".encode())
        cc = toolchain.CACHE.compiler()
        h.update(f"{cc.version} {cc.command} {toolchain.CACHE.cpu()} "
                 f"{toolchain.ember_version()}".encode())
        got = _DIGEST[dkey] = h.hexdigest()
    return got


def _plan_key(graph: Graph) -> str | None:
    try:
        text = graph.python()
        digest = _code_digest()
    except Exception:  # noqa: BLE001 - no text form, or no compiler (a graph without C
        return None    # segments still runs): simply not cached
    return hashlib.sha256((digest + "\0" + config.c_gemm + "\0" + text).encode()).hexdigest()


def _plan_path(key: str) -> Path:
    return Path(config.cache_dir) / "plans" / key[:2] / f"{key}.json"


def _load_plan(key: str) -> dict | None:
    try:
        plan = json.loads(_plan_path(key).read_bytes())
        if plan.get("version") != PLAN_VERSION:
            return None
        if plan["path"] is not None:
            so = Path(plan["path"])
            if not toolchain._valid(so, so.with_suffix(".json")):
                return None
        return plan
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _save_plan(key: str, cg: CompiledGraph) -> None:
    """Write ``cg``'s run plan (skipped for step kinds this format does not describe)."""
    index: dict = {}
    bufs: list = []

    def ref(b: Buffer) -> int:
        j = index.get(id(b))
        if j is None:
            j = index[id(b)] = len(bufs)
            bufs.append([b.name, b.dtype.name, list(b.shape), b.role,
                         None if b.strides is None else list(b.strides)])
        return j

    steps = []
    for st, bl in cg._plan:
        if type(st) is Segment:
            steps.append(["seg", st.entry, [ref(b) for b in bl]])
        elif type(st) is Extern:
            steps.append(["ext", st.index, [ref(b) for b in st.outs], st.reason])
        else:
            return
    sources = []
    for r, src in cg._sources.items():
        if src[0] == "buf":
            sources.append([list(r), "buf", ref(src[1])])
        elif src[0] == "view":
            sources.append([list(r), "view", list(src[1:])])
        else:
            sources.append([list(r), src[0], src[1]])
    plan = {"version": PLAN_VERSION, "path": None if cg.path is None else str(cg.path),
            "prefix": cg.prefix,
            "steps": steps, "inputs": [ref(b) for b in cg._inputs],
            "int_names": cg._int_names, "sources": sources, "buffers": bufs,
            "slots": [[index[b], slot] for b, slot in cg._slots.items()],
            "slot_bytes": cg._slot_bytes,
            "donated": [[index[b], k] for b, k in cg._donated.items()],
            "frozen": None if cg._frozen is None else [[k, list(sl)]
                                                       for k, sl in cg._frozen.inputs],
            "stats": dataclasses.asdict(cg.stats)}
    try:
        toolchain._atomic_write(_plan_path(key), json.dumps(plan).encode())
    except (OSError, TypeError, ValueError):
        pass  # a plan that cannot be written only costs the next process a lowering


_PAGE = 4096
_PAGE_ALIGN_FROM = 1 << 16
"""Buffers of at least this many bytes start on a 4 KiB page boundary (``_empty``)."""


def lower_and_schedule(graph: Graph) -> Program:
    """``graph`` planned (``schedule.plan``), lowered to the loop IR following the plan and
    scheduled: what codegen receives.  Its ``verify()`` runs before codegen, and with
    ``config.verify_ir`` (tests) after each pass (the plan's ``FusionPlan.verify`` too).
    Ops with a ``decomp`` and no C rule are expanded first (``decompose.py``): the program's
    node indices refer to ``decompose(graph)``, which is ``graph`` when nothing expands."""
    mutated = graph.mutated
    graph = decompose(graph)
    fusion = plan_fusion(graph, _HELPERS)  # before lowering: order, recompute or store
    if config.verify_ir:
        fusion.verify(graph)
    program = lower(graph, _HELPERS, fusion)
    if config.verify_ir:
        program.verify()
    schedule(program, graph)
    program.verify()
    # outputs the kernels write straight into the inputs they replace (inplace.py)
    program.donated = donations(program, graph, mutated)  # type: ignore[attr-defined]
    return program


def _empty(shape: tuple, dtype: Any) -> np.ndarray:
    """``np.empty(shape, dtype)``, page-aligned from ``_PAGE_ALIGN_FROM`` bytes on.

    NumPy's large arrays start 16 bytes into a page (the allocator's header), so an output
    allocated after its inputs usually starts 16..256 bytes after them modulo 4 KiB.  A loop's
    loads of the next iterations then match the page offset of the current iteration's pending
    store, and the CPU holds them until the store's data is known (4K aliasing): the iterations
    of a long-latency loop stop overlapping (the gelu chain at 2^24 ran 1.6x slower).  A
    page-aligned output starts before inputs at NumPy's offsets, at the same offset as ember's
    own buffers, and 64-byte aligned (no vector store splits a cache line)."""
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    if nbytes < _PAGE_ALIGN_FROM:
        return np.empty(shape, dt)
    raw = np.empty(nbytes + _PAGE, np.uint8)
    off = -raw.ctypes.data % _PAGE
    return raw[off:off + nbytes].view(dt).reshape(shape)


def _allocate(b: Any, env: dict | None) -> np.ndarray:
    shape = b.shape if env is None else tuple(eval_size(n, env) for n in b.shape)
    if b.strides is None:
        return _empty(shape, b.dtype.np)
    # eager's memory order: allocate the permuted shape C-contiguous, then transpose back
    order = sorted(range(len(shape)), key=lambda d: -b.strides[d])
    a = _empty(tuple(shape[d] for d in order), b.dtype.np)
    return a.transpose(np.argsort(order))


def _is_ref(a: Any) -> bool:
    return type(a) is tuple and len(a) >= 2 and a[0] in ("i", "n")


def _eager_runner(graph: Graph) -> Callable:
    def run(arrays: list, scalars: list) -> list:
        return graph.run(arrays, scalars)
    run._ember_arrays = True  # type: ignore[attr-defined]
    return run


def c_source(graph: Graph) -> str | None:
    """The C translation unit the ``"c"`` backend builds for ``graph`` (the same text
    ``CompiledGraph`` generates), or None when the graph has no C segment (all externs)."""
    program = lower_and_schedule(graph)
    if not program.segments():
        return None
    return generate(program, openmp=config.c_openmp, profile=config.c_profile)


def build_options() -> dict:
    """The keyword arguments the ``"c"`` backend passes to ``toolchain.compile_unit`` (a prebuild
    with ``toolchain.compile_bundle`` must use the same ones to hit the cache)."""
    return {"name": "graph", "extra_flags": EXTRA_FLAGS, "openmp": config.c_openmp}


BUNDLE_PRELUDE = runtime.C_PRELUDE + "\n" + PRELUDE + "\n"
"""The text every unit ``generate`` makes starts with (shared once per bundle)."""


def prebuild(sources: list, **kwargs: Any) -> list:
    """Build many graphs' C sources (``c_source``) in bundles (``toolchain.compile_bundle``), so
    that the ``"c"`` backend later finds each of them in the cache without running the compiler;
    returns their ``toolchain.Unit``s.  ``kwargs`` go to ``compile_bundle`` (``bundle_bytes``,
    ``max_workers``)."""
    opts = build_options()
    specs = [(s, opts["name"]) for s in sources]
    return toolchain.compile_bundle(specs, prelude=BUNDLE_PRELUDE,
                                    extra_flags=opts["extra_flags"], openmp=opts["openmp"],
                                    **kwargs)


def c_backend(graph: Graph, example_inputs: list, mode: str | None = None) -> CompiledGraph:
    """The ``"c"`` backend: build ``graph`` to C (see the module docstring); ``mode`` is
    ``ember.compile``'s (``"max-autotune"`` times GEMM candidates, autotune.py)."""
    return CompiledGraph(graph, mode)


def last_compiled() -> CompiledGraph | None:
    """The most recently built graph (for tests and inspection)."""
    return _RECENT[-1] if _RECENT else None


def codegen(fn: Callable, *args: Any, **kwargs: Any) -> str:
    """The C source that ``fn(*args, **kwargs)``'s graphs compile to with the C backend
    (several graphs, e.g. around graph breaks, are concatenated)."""
    sources: list = []

    def capture(graph: Graph, example_inputs: list) -> Callable:
        sources.append(generate(lower_and_schedule(graph), openmp=config.c_openmp,
                                profile=config.c_profile))
        return _eager_runner(graph)

    # compiled graphs are cached per code object: look at fresh ones, keep the caller's
    key = api._code_key(fn)[0]
    saved = api._CACHES.pop(key, None)
    try:
        api.compile(fn, backend=capture)(*args, **kwargs)
    finally:
        api._CACHES.pop(key, None)
        if saved is not None:
            api._CACHES[key] = saved
    return "\n".join(sources)


__all__ = ["BUNDLE_PRELUDE", "CompiledGraph", "build_options", "c_backend", "c_source", "codegen",
           "format_profile", "graph_fallbacks", "last_compiled", "prebuild", "profile",
           "reset_fallback_warnings", "reset_profile", "split_fallbacks", "warn_fallbacks"]

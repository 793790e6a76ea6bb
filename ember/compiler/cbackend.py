"""The C backend (``ember.compile(fn, backend="c")``; issue 5, first slice).

``c_backend(graph, example_inputs)`` lowers the graph to the loop IR (``lower.py``), generates
one C translation unit (``codegen_c.py``), builds it once with ``toolchain.compile_library``
(cached on disk) and returns a ``CompiledGraph``: called with the graph's input arrays and lifted
scalars, it runs each C segment with one ``runtime`` entry call and each extern step with the
node's eager kernel.  Sizes and scalars travel as ``ints``/``floats``, so changed values reuse
the same library.  Inputs that are not C-contiguous are copied (counted in ``stats.copies``).

``codegen(fn, *args)`` returns the C source ``fn``'s graphs compile to.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable

import numpy as np

from ember.compiler import runtime, toolchain
from ember.compiler.codegen_c import PRELUDE, generate
from ember.compiler.graph import Graph, _resolve
from ember.compiler.loop_ir import Program, Segment, eval_size
from ember.compiler.lower import helpers_in, lower
from ember.config import config

# integer overflow wraps, as in NumPy; libm need not set errno (lets gcc inline sqrt and CSE
# pure calls; results are unchanged)
EXTRA_FLAGS = ("-fwrapv", "-fno-math-errno")
_HELPERS = helpers_in(PRELUDE)

_RECENT: list = []  # the last few CompiledGraphs (for tests and debugging)
BUILDS = [0]        # CompiledGraphs made in this process


class CompiledGraph:
    """A graph built to C: ``cg(arrays, scalars) -> outputs`` (``_ember_arrays`` protocol)."""

    _ember_arrays = True

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.program: Program = lower(graph, _HELPERS)
        self.program.verify()
        self.stats = self.program.stats  # type: ignore[attr-defined]
        openmp = config.c_openmp  # EMBER_C_OPENMP=0 builds serial code
        self.source = generate(self.program, openmp=openmp)
        self.path = None
        self.entries: dict = {}
        if config.debug >= 2:
            print(f"[ember.compiler loop_ir]\n{self.program}", file=sys.stderr)
        if config.debug >= 4:
            print(f"[ember.compiler c_source]\n{self.source}", file=sys.stderr)
        if self.program.segments():
            self.path = toolchain.compile_library(self.source, name="graph",
                                                  extra_flags=EXTRA_FLAGS, openmp=openmp)
            lib = runtime.load(self.path)
            self.entries = {s.entry: lib.entry(s.entry) for s in self.program.segments()}
        self._plan = [(s, s.buffers()) if isinstance(s, Segment) else (s, None)
                      for s in self.program.steps]
        self._n_ints = len(self.program.int_names)
        BUILDS[0] += 1
        _RECENT.append(self)
        del _RECENT[:-8]

    def __call__(self, arrays: list, scalars: list = ()) -> list:
        prog = self.program
        ints = [0] * self._n_ints
        for k, v in enumerate(scalars):
            ints[k] = int(v) if not (isinstance(v, float) and not math.isfinite(v)) else 0
        floats = tuple(float(v) for v in scalars)
        py: dict = {}    # buffer id -> array as produced (Python-side uses)
        cv: dict = {}    # buffer id -> C-contiguous array of the buffer's dtype (C uses)
        for b, a in zip(prog.inputs, arrays):
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
                            if env is None:
                                env = dict(zip(prog.int_names, ints))
                            a = _allocate(b, env)
                            py[id(b)] = a
                        elif src.flags.c_contiguous and src.dtype == b.dtype.np:
                            a = src
                        else:
                            a = np.ascontiguousarray(src, dtype=b.dtype.np)
                            self.stats.copies += 1
                        cv[id(b)] = a
                    call.append(a)
                self.entries[step.entry](tuple(call), tuple(ints), floats)
            else:
                outs = self._extern(step, py, arrays, scalars)
                for b, o in zip(step.outs, outs):
                    py[id(b)] = o
                    for d, name in enumerate(b.shape):
                        if type(name) is str:  # a dynamic graph: the extern's sizes go to C
                            ints[prog.int_names.index(name)] = o.shape[d]
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
        src = self.program.sources[r]  # type: ignore[attr-defined]
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


def _allocate(b: Any, env: dict) -> np.ndarray:
    shape = tuple(eval_size(n, env) for n in b.shape)
    if b.strides is None:
        return np.empty(shape, b.dtype.np)
    # eager's memory order: allocate the permuted shape C-contiguous, then transpose back
    order = sorted(range(len(shape)), key=lambda d: -b.strides[d])
    a = np.empty(tuple(shape[d] for d in order), b.dtype.np)
    return a.transpose(np.argsort(order))


def _is_ref(a: Any) -> bool:
    return type(a) is tuple and len(a) >= 2 and a[0] in ("i", "n")


def c_backend(graph: Graph, example_inputs: list) -> CompiledGraph:
    """The ``"c"`` backend: build ``graph`` to C (see the module docstring)."""
    return CompiledGraph(graph)


def last_compiled() -> CompiledGraph | None:
    """The most recently built graph (for tests and inspection)."""
    return _RECENT[-1] if _RECENT else None


def codegen(fn: Callable, *args: Any, **kwargs: Any) -> str:
    """The C source that ``fn(*args, **kwargs)``'s graphs compile to with the C backend
    (several graphs, e.g. around graph breaks, are concatenated)."""
    from ember.compiler import api
    sources: list = []

    def capture(graph: Graph, example_inputs: list) -> Callable:
        sources.append(generate(lower(graph, _HELPERS), openmp=config.c_openmp))

        def run(arrays: list, scalars: list) -> list:
            return graph.run(arrays, scalars)
        run._ember_arrays = True  # type: ignore[attr-defined]
        return run

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


__all__ = ["CompiledGraph", "c_backend", "codegen", "last_compiled"]

"""Compiling an exported program without retracing (issue 15, "compiler integration").

``compile_program(ep)`` maps the exported graph onto the compiler's ``Graph``
(``ember/compiler/frontend/graph.py``) and hands it to a backend once: every distinct symbolic
size (``s0``, ``5*s0``, ``5*s0 - 1``) becomes one lifted runtime int (a ``Sym``), so the C backend
builds ONE size-generic entry that serves every input size the program's guards admit.  A call
checks the input guards with generated Python (the full ``InputGuards`` check runs only to word
the error when one fails), evaluates the lifted sizes and runs the compiled graph.

``ember.compile(ep.module())`` takes this path (``ExportedModule.__ember_compile__``); a call
that autograd records runs a compiled forward and backward pair (``ember/export/_joint.py``),
and it falls back to tracing the module when the graph has values only known at run time
(``nonzero``'s ``u0``, ``.item()``).

Example::

    >>> cp = ember.export.compile_program(ep)        # one C build
    >>> cp(ember.randn(3, 8)); cp(ember.randn(17, 8))  # same entry, no recompile
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from ember.compiler.frontend.backends import lookup_backend
from ember.compiler.frontend.graph import Graph as CGraph
from ember.compiler.frontend.graph import Node as CNode
from ember.compiler.frontend.graph import Sym
from ember.errors import EmberNotImplementedError as ExportError
from ember.export.graph import Node
from ember.export.graph_signature import InputKind, OutputKind
from ember.ops.registry import REGISTRY
from ember.sym import SymInt, pyexpr
from ember.tensor import Tensor, _wrap

_VIEW, _RESHAPE_COPY = REGISTRY["view"], REGISTRY["reshape_copy"]


class _Lift:
    """The symbolic sizes of a graph, each lifted once to a runtime scalar ``Sym``."""

    def __init__(self) -> None:
        self.exprs: list = []
        self.index: dict = {}

    def __call__(self, x: Any) -> Any:
        if isinstance(x, SymInt):
            e = x.expr
            if e.is_Integer:
                return int(e)
            k = self.index.get(e)
            if k is None:
                k = self.index[e] = len(self.exprs)
                self.exprs.append(e)
            return Sym(k, "size")
        t = type(x)
        if t is tuple or t is list:
            return t(self(y) for y in x)
        if t is dict:
            return {k: self(v) for k, v in x.items()}
        return x


def _hint(x: Any) -> Any:
    if isinstance(x, SymInt):
        h = x.hint()
        if h is None:
            raise ExportError("[compile_program] the graph has a size only known at run time "
                              f"({x}); compile ep.module() with ember.compile instead")
        return h
    return x


def to_compiler_graph(ep: Any) -> tuple[CGraph, list, list]:
    """``(graph, lifted expressions, example arrays)``: ``ep``'s graph as the compiler's."""
    lift = _Lift()
    refs: dict = {}
    strided: set = set()  # values that may not be C-contiguous (tracing does not see layouts)
    inputs, nodes, examples = [], [], []
    for n in ep.graph.nodes:
        val = n.meta.get("val")
        if n.op == "placeholder":
            refs[n.name] = ("i", len(inputs))
            inputs.append((tuple(lift(d) for d in val.shape), val.dtype))
            examples.append(np.zeros(tuple(_hint(d) for d in val.shape), val.dtype.np))
        elif n.op == "call_function" and n.target is operator.getitem:
            src = refs[n.args[0].name]
            refs[n.name] = ("n", src[1], n.args[1])
        elif n.op == "call_function" and n.target.kind == "export_function":
            raise ExportError(f"[compile_program] the graph has a {n.target!r} node (a value "
                              "only known at run time); compile ep.module() with ember.compile")
        elif n.op == "call_function":
            args = tuple(refs[a.name] if isinstance(a, Node) else lift(a) for a in n.args)
            vals = val if isinstance(val, tuple) else (val,)
            specs = tuple((tuple(_hint(d) for d in v.shape), v.dtype) for v in vals)
            refs[n.name] = ("n", len(nodes), 0)
            op = n.target
            if op.kind == "view" or op.kind == "pointwise":
                loose = any(a.name in strided for a in n.args if isinstance(a, Node))
                if op is _VIEW and loose:
                    op = _RESHAPE_COPY  # a reshape that traced as a view: copy, as eager does
                elif op is not _VIEW and (op.kind == "view" or loose):
                    strided.add(n.name)
            nodes.append(CNode(op, args, lift(dict(n.kwargs)), specs))
        elif n.op == "output":
            outputs = [refs[a.name] for a in n.args[0]]
    graph = CGraph(inputs, nodes, outputs, len(lift.exprs), ("size",) * len(lift.exprs))
    graph.lifted = list(range(len(lift.exprs)))  # type: ignore[attr-defined]
    for e in lift.exprs:
        if any(s.name.startswith("u") for s in e.free_symbols):
            raise ExportError(f"[compile_program] the graph has a size only known at run time "
                              f"({e}); compile ep.module() with ember.compile instead")
    return graph, lift.exprs, examples


def _size_function(ep: Any, exprs: list) -> Callable | None:
    """``f(shapes) -> scalars or None``: binds the symbols from the user inputs' shapes, checks
    every input guard, evaluates ``exprs``; None when a check fails.  None (no function) when a
    symbol appears only inside a derived size (solved by the slow check instead)."""
    guards = ep._guards
    names: dict = {}
    first: dict = {}
    ranks = [f"len(shapes[{k}]) == {len(dims)}" for k, (_, dims) in enumerate(guards.dims)]
    for k, (_, dims) in enumerate(guards.dims):
        for d, e in enumerate(dims):
            if e.is_Symbol and e not in names:
                names[e] = f"v{len(names)}"
                first[(k, d)] = e
    checks = []
    for k, (_, dims) in enumerate(guards.dims):
        for d, e in enumerate(dims):
            if (k, d) in first:
                continue
            if e.free_symbols - names.keys():
                return None
            checks.append(f"shapes[{k}][{d}] == {pyexpr(e, names)}")
    for e, vr in guards.ranges.items():
        if e.free_symbols - names.keys():
            continue
        if vr.lower != -float("inf"):
            checks.append(f"{pyexpr(e, names)} >= {int(vr.lower)}")
        if vr.upper != float("inf"):
            checks.append(f"{pyexpr(e, names)} <= {int(vr.upper)}")
    checks += [pyexpr(g, names) for g in guards.guards if g.free_symbols <= names.keys()]
    if any(e.free_symbols - names.keys() for e in exprs):
        return None
    src = ["def sizes(shapes):"]
    if ranks:
        src += ["    if not (" + " and ".join(ranks) + "):", "        return None"]
    src += [f"    {names[e]} = shapes[{k}][{d}]" for (k, d), e in first.items()]
    if checks:
        src += ["    if not (" + " and ".join(f"({c})" for c in checks) + "):",
                "        return None"]
    src.append(f"    return [{', '.join(pyexpr(e, names) for e in exprs)}]")
    ns: dict = {}
    exec(compile("\n".join(src), "<ember.export sizes>", "exec"), {}, ns)  # noqa: S102
    return ns["sizes"]


class CompiledProgram:
    """An ``ExportedProgram`` compiled once into a size-generic callable; call it as
    ``ep.module()`` (same arguments, guards and buffer mutations).  ``graph`` is the compiler
    graph, ``exprs`` the lifted sizes, ``compiled`` what the backend returned."""

    def __init__(self, ep: Any, *, backend: Any = "inductor", mode: str | None = None) -> None:
        self.ep = ep = inline_kernel_ops(ep)
        self._run, self.exprs = build(ep, backend, mode)
        self.graph, self.compiled = self._run.graph, self._run.compiled
        self._arrays = self._run._arrays
        self._sizes = _size_function(ep, self.exprs)
        specs = ep.graph_signature.input_specs
        self._user_slots = [k for k, s in enumerate(specs) if s.kind == InputKind.USER_INPUT]

    def scalars(self, flat: list) -> list:
        """The lifted sizes for user inputs ``flat``; raises the guard's AssertionError."""
        if self._sizes is not None:
            got = self._sizes([t.shape for t in flat])
            if got is not None:
                return got
        vals = self.ep._guards.check(flat)  # raises with PyTorch's message
        return [_number(vals.value(e)) for e in self.exprs]

    def __call__(self, *args: Any, state: dict | None = None, **kwargs: Any) -> Any:
        ep = self.ep
        flat = ep._flat_user_inputs(args, kwargs)
        scalars = self.scalars(flat)
        if state is None:
            state = {s.target: ep._lifted_value(s) for s in ep.graph_signature.input_specs
                     if s.kind != InputKind.USER_INPUT}
        it = iter(flat)
        # (a kernel op's body may add constants that the caller's ``state`` lacks)
        tensors = [next(it) if s.kind == InputKind.USER_INPUT else
                   state[s.target] if s.target in state else ep._lifted_value(s)
                   for s in ep.graph_signature.input_specs]
        outs = self._run(tensors, scalars)
        return _finish(ep, outs, state, flat)


class _Runner:
    """A compiler graph compiled by a backend: ``runner(tensors, scalars) -> [tensors]``."""

    def __init__(self, graph: CGraph, compiled: Any) -> None:
        self.graph, self.compiled = graph, compiled
        self._arrays = getattr(compiled, "_ember_arrays", False)

    def __call__(self, tensors: list, scalars: list) -> list:
        if self._arrays:
            res = self.compiled([t._data for t in tensors], scalars)
            return [_wrap(np.asarray(a, dtype=self.graph._dtype_of(r).np),
                          self.graph._dtype_of(r))
                    for a, r in zip(res, self.graph.outputs)]
        res = self.compiled(*tensors, *scalars)
        return list(res) if isinstance(res, (tuple, list)) else [res]


def inline_kernel_ops(ep: Any) -> Any:
    """``ep`` with its kernel ops (``triton_op``/``kernel_op``, none mutating) replaced by their
    bodies, so the C backend places their kernels in the graph's C (``ep`` when it has none);
    every other op stays as it is."""
    from ember.library._triton import TRITON_OPS
    ops = {n.target: TRITON_OPS[n.target.name] for n in ep.graph.nodes
           if n.op == "call_function" and getattr(n.target, "name", None) in TRITON_OPS}
    ops = {t: op for t, op in ops.items() if not op._mutated}
    if not ops:
        return ep
    table: dict = {op: None for op in REGISTRY.values() if op.decomp is not None}
    table.update({t: op._decomp for t, op in ops.items()})
    return ep.run_decompositions(table)


def build(ep: Any, backend: Any, mode: str | None) -> tuple[_Runner, list]:
    """``(runner, lifted size expressions)``: ``ep.graph`` compiled once by ``backend``."""
    graph, exprs, examples = to_compiler_graph(ep)
    compiler_fn = lookup_backend(backend)
    ex = [_wrap(a, t) for a, (_, t) in zip(examples, graph.inputs)]
    if getattr(compiler_fn, "takes_mode", False):
        compiled = compiler_fn(graph, ex, mode=mode)
    else:
        compiled = compiler_fn(graph, ex)
    return _Runner(graph, compiled), exprs


class DirectCall:
    """``ember.compile(ep.module())``'s callable: the first call that autograd does not record
    compiles the program (``CompiledProgram``, once); calls that autograd records, or all calls
    when the graph cannot be compiled directly, go to ``traced`` (the tracing compile)."""

    def __init__(self, mod: Any, traced: Callable, *, backend: Any, mode: str | None) -> None:
        self.mod, self.traced, self.backend, self.mode = mod, traced, backend, mode
        self.program: CompiledProgram | None = None
        self.training: dict = {}  # which inputs require grad -> TrainingProgram
        self.unsupported: str | None = None
        self.training_unsupported: str | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.unsupported is None and not _records_grad(self.mod, args, kwargs):
            if self.program is None:
                try:
                    self.program = CompiledProgram(self.mod._ep, backend=self.backend,
                                                   mode=self.mode)
                except ExportError as e:
                    self.unsupported = str(e)
                    return self.traced(*args, **kwargs)
            return self.program(*args, state=self.mod._state(), **kwargs)
        if self.unsupported is None and self.training_unsupported is None:
            return self._training(args, kwargs)
        return self.traced(*args, **kwargs)

    def _training(self, args: tuple, kwargs: dict) -> Any:
        """A call autograd records: the compiled forward and backward graphs (one pair per
        set of inputs that require grad)."""
        from ember.export._joint import TrainingProgram
        ep = self.mod._ep
        state = self.mod._state()
        flat = ep._flat_user_inputs(args, kwargs)
        it = iter(flat)
        tensors = [next(it) if s.kind == InputKind.USER_INPUT else state[s.target]
                   for s in ep.graph_signature.input_specs]
        wants = tuple(isinstance(t, Tensor) and t.requires_grad and t.dtype.is_floating_point
                      for t in tensors)
        prog = self.training.get(wants)
        if prog is None:
            try:
                prog = self.training[wants] = TrainingProgram(ep, list(wants), self.backend,
                                                              self.mode)
            except Exception as e:  # noqa: BLE001 (the tracing path is always correct)
                # a graph the joint trace cannot handle (an op without a vjp, a value only
                # known at run time): calls autograd records take the tracing path
                self.training_unsupported = f"{type(e).__name__}: {e}"
                return self.traced(*args, **kwargs)
        vals = ep._guards.check(flat)
        return _finish(ep, prog(tensors, vals), state, flat)


def _records_grad(mod: Any, args: tuple, kwargs: dict) -> bool:
    from ember.autograd.grad_mode import is_grad_enabled
    from ember.export._inputs import leaves
    if not is_grad_enabled():
        return False
    if any(p.requires_grad for p in mod.parameters()):
        return True
    return any(isinstance(t, Tensor) and t.requires_grad
               for t in leaves(list(args) + list(kwargs.values())))


def _number(v: Any) -> Any:
    return int(v) if isinstance(v, (int, np.integer)) else v


def _finish(ep: Any, outs: list, state: dict, flat: list) -> Any:
    """User outputs in forward's structure; mutations written back (as ``ep.module()``)."""
    from ember.autograd.grad_mode import no_grad
    from ember.export._inputs import unflatten
    user_in = [s.arg.name for s in ep.graph_signature.input_specs
               if s.kind == InputKind.USER_INPUT]
    user = []
    with no_grad():
        for s, v in zip(ep.graph_signature.output_specs, outs):
            if s.kind == OutputKind.USER_OUTPUT:
                user.append(v)
            elif s.kind == OutputKind.BUFFER_MUTATION:
                state[s.target].copy_(v)
            elif s.kind == OutputKind.USER_INPUT_MUTATION:
                flat[user_in.index(s.target)].copy_(v)
    return unflatten(ep._out_spec, iter(user))


def compile_program(ep: Any, *, backend: Any = "inductor", mode: str | None = None
                    ) -> CompiledProgram:
    """Compile ``ep`` once, without retracing, into a callable with ``ep.module()``'s calling
    convention whose symbolic sizes are runtime ints (one C entry for every batch size).

    >>> ep = ember.export.export(model, (x,), dynamic_shapes={"x": {0: Dim.AUTO}})
    >>> fast = ember.export.compile_program(ep)
    >>> fast(ember.randn(33, 8)).shape
    ember.Size([33, 4])
    """
    return CompiledProgram(ep, backend=backend, mode=mode)


__all__ = ["CompiledProgram", "DirectCall", "compile_program", "inline_kernel_ops",
           "to_compiler_graph"]

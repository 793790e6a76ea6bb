"""``ember.export.unflatten(ep)``: the module hierarchy back (PyTorch's
``torch.export.unflatten``).

Export records on every node the submodule calls it was made in (``meta["nn_module_stack"]``).
``unflatten`` cuts the flat graph at those calls: each submodule becomes an
``InterpreterModule`` attribute (under its original name, holding its own parameters and
buffers) whose ``graph`` holds the nodes of its call, its inputs being the values that flow in
and its outputs those used after it; the parent's graph calls it with a ``call_module`` node.
A submodule can therefore be run alone, or replaced by another module taking and returning the
same tensors (as ``preserve_module_call_signature`` allows in PyTorch).

Example::

    >>> ep = ember.export.export(model, (x,))
    >>> um = ember.export.unflatten(ep)
    >>> um.block0.fc(x2)          # a submodule runs its own part of the graph
"""

from __future__ import annotations

import operator
from typing import Any

from ember.errors import EmberRuntimeError, EmberTypeError
from ember.export._inputs import leaves, skeleton, structure
from ember.export._inputs import unflatten as _unflatten
from ember.export._runtime import Bindings, concrete, run_graph
from ember.export.exported_program import ExportedModule, ExportedProgram, _forward_with
from ember.export.graph import Graph, Node
from ember.export.graph_signature import InputKind, TensorArgument
from ember.nn.modules.module import Module
from ember.sym import SymInt, _sympy


def _stack(n: Node) -> tuple:
    return n.meta.get("nn_module_stack") or ()


def _calls(n: Node) -> tuple:
    return n.meta.get("module_call_ids") or ()


def _runs(nodes: list, depth: int) -> list:
    """Items at ``depth``: a node made directly in this module, or ``(fqn, [nodes])`` for a
    call of a child module (consecutive nodes of one call)."""
    out: list = []
    for n in nodes:
        st = _stack(n)
        if len(st) <= depth:
            out.append(n)
            continue
        key = (st[depth][0], _calls(n)[depth] if len(_calls(n)) > depth else None)
        if out and isinstance(out[-1], tuple) and out[-1][2] == key:
            out[-1][1].append(n)
        else:
            out.append((st[depth][0], [n], key))
    return out


class _Builder:
    """Builds one module call's graph from the flat nodes it contains."""

    def __init__(self, fqn: str, attrs: dict, root: Any) -> None:
        self.fqn, self.attrs, self.root = fqn, attrs, root
        self.graph = Graph()
        self.map: dict[Node, Node] = {}
        self.inputs: list[Node] = []      # outer nodes, in placeholder order
        self.attr_of: dict[str, str] = {}  # placeholder name -> attribute path (own state)

    def value(self, a: Node) -> Node:
        got = self.map.get(a)
        if got is not None:
            return got
        target = self.attrs.get(a.name)
        prefix = self.fqn + "." if self.fqn else ""
        if target is not None and target.startswith(prefix):
            ph = self.graph.placeholder(a.name)
            self.attr_of[ph.name] = target[len(prefix):]
        else:
            ph = self.graph.placeholder(a.name)
            self.inputs.append(a)
        ph.meta = dict(a.meta)
        self.map[a] = ph
        return ph

    def arg(self, x: Any) -> Any:
        if isinstance(x, Node):
            return self.value(x)
        if isinstance(x, (tuple, list)) and any(isinstance(y, Node) for y in x):
            return type(x)(self.arg(y) for y in x)
        return x

    def force_input(self, a: Node) -> None:
        """A preserved signature's input: a placeholder even when it is this module's own state
        or passed twice."""
        ph = self.graph.placeholder(a.name)
        ph.meta = dict(a.meta)
        self.map.setdefault(a, ph)
        self.inputs.append(a)

    def build(self, nodes: list, depth: int, outputs: list) -> None:
        for item in _runs(nodes, depth):
            if isinstance(item, Node):
                n = item
                new = self.graph.create_node("call_function", n.target, self.arg(n.args),
                                             dict(n.kwargs), name=n.name)
                new.meta = dict(n.meta)
                self.map[n] = new
                continue
            self._child(item[0], item[1], depth)
        self.graph.output(tuple(self.arg(o) for o in outputs))

    def _child(self, child_fqn: str, sub: list, depth: int) -> None:
        """One call of a child module: its own builder, and a ``call_module`` node here."""
        child = _Builder(child_fqn, self.attrs, self.root)
        inside = set(sub)
        outs = [n for n in sub if any(u not in inside for u in n.users)]
        sig = self.root._take_signature(child_fqn)
        if sig is not None:  # preserve_module_call_signature: the call's own inputs/outputs
            named = self.root._nodes_by_name
            for a in sig.inputs:
                if isinstance(a, TensorArgument):
                    child.force_input(named[a.name])
            sig_outs = [named[a.name] for a in sig.outputs]
            outs = sig_outs + [n for n in outs if n not in sig_outs]
        child.build(sub, depth + 1, outs)
        local = child_fqn[len(self.fqn) + 1:] if self.fqn else child_fqn
        self.root._install(child_fqn, child, sig)
        call = self.graph.create_node("call_module", local,
                                      tuple(self.value(a) for a in child.inputs), {},
                                      name=local.replace(".", "_"))
        if sig is not None:
            call.meta["signature"] = sig
            call.meta["extra_inputs"] = len(child.inputs) - sum(
                isinstance(a, TensorArgument) for a in sig.inputs)
            call.meta["extra_outputs"] = len(outs) - len(sig.outputs)
        for j, o in enumerate(outs):
            if o in self.map and j >= len(sig.outputs if sig else ()):
                continue
            g = self.graph.create_node("call_function", operator.getitem, (call, j),
                                       name="getitem")
            g.meta = dict(o.meta)
            self.map.setdefault(o, g)


class InterpreterModule(Module):
    """A submodule of an unflattened program: its parameters and buffers, and ``forward``
    running ``graph`` (inputs: ``input_names``) with its ``call_module`` nodes."""

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "graph", None)
        object.__setattr__(self, "_attr_of", {})
        object.__setattr__(self, "_n_out", 0)
        object.__setattr__(self, "_signature", None)

    def _run(self, args: list, vals: Any) -> list:
        phs = [n for n in self.graph.nodes
               if n.op == "placeholder" and n.name not in self._attr_of]
        if len(args) != len(phs):
            raise TypeError(f"[unflatten] forward takes {len(phs)} tensors, got {len(args)}")
        vals = _bind_sizes(phs, args, vals)
        values = {p.name: a for p, a in zip(phs, args)}
        for name, path in self._attr_of.items():
            values[name] = _get_path(self, path)
        return run_graph(self.graph, values, vals, self._call_child)

    def _call_child(self, node: Node, args: list, vals: Any) -> Any:
        return _call(_get_path(self, node.target), node, args, vals)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        sig = self._signature
        if sig is None:
            outs = self._run(list(args), None)
            return outs[0] if len(outs) == 1 else tuple(outs)
        # a preserved signature: the original (args, kwargs) structure in and out
        flat = leaves((tuple(args), dict(kwargs)))
        if len(flat) != sum(isinstance(a, TensorArgument) for a in sig.inputs):
            raise EmberTypeError(f"[unflatten] {type(self).__name__} expects arguments with the "
                            f"structure {sig.in_spec}, got {structure((args, kwargs))}")
        outs = self._run(flat, None)
        return _unflatten(sig.out_spec, iter(outs[:len(sig.outputs)]))


def _call(mod: Any, node: Node, args: list, vals: Any) -> tuple:
    if isinstance(mod, InterpreterModule):
        return tuple(mod._run(args, vals))
    sig = node.meta.get("signature")
    if sig is None:
        out = mod(*args)  # a swapped-in module: same tensors in, same tensors out
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if node.meta["extra_inputs"] or node.meta["extra_outputs"]:
        raise EmberRuntimeError(
            f"[unflatten] {node.target} cannot be swapped: its exported call also reads or "
            "writes values outside its call signature (state of another module, a buffer it "
            "mutates)")
    a, kw = concrete(_unflatten(sig.in_spec, iter(args)), vals)
    out = mod(*a, **kw)
    if skeleton(structure(out)) != skeleton(sig.out_spec):
        raise TypeError(f"[unflatten] the module swapped in for {node.target} returned "
                        f"{structure(out)}; the preserved signature returns {sig.out_spec}")
    return tuple(leaves(out))


def _get_path(m: Any, path: str) -> Any:
    for p in path.split("."):
        m = getattr(m, p)
    return m


def _bind_sizes(phs: list, args: list, outer: Any) -> Bindings:
    """Symbol values: the caller's, and those the inputs' sizes give (a submodule called
    alone)."""
    sp = _sympy()
    vals = Bindings(outer or {})
    vals.env = getattr(outer, "env", None)
    for p, a in zip(phs, args):
        val = p.meta.get("val")
        for d, n in zip(getattr(val, "shape", ()), getattr(a, "shape", ())):
            if isinstance(d, SymInt) and d.expr.is_Symbol and d.expr not in vals:
                vals[d.expr] = n.expr if isinstance(n, SymInt) else sp.Integer(n)
    return vals


class UnflattenedModule(ExportedModule):
    """``unflatten(ep)``: the root module; submodules are ``InterpreterModule``s."""

    def __init__(self, ep: ExportedProgram) -> None:
        Module.__init__(self)
        object.__setattr__(self, "_ep", ep)
        object.__setattr__(self, "forward", types_method(_forward_with(ep._in_spec[0]), self))
        attrs = {s.arg.name: s.target for s in ep.graph_signature.input_specs
                 if s.kind != InputKind.USER_INPUT}
        nodes = [n for n in ep.graph.nodes if n.op == "call_function"]
        object.__setattr__(self, "_signatures", {
            e.fqn: e.signature for e in ep.module_call_graph if e.fqn and e.signature})
        object.__setattr__(self, "_nodes_by_name", {n.name: n for n in ep.graph.nodes})
        top = _Builder("", attrs, self)
        for n in ep.graph.nodes:
            if n.op == "placeholder":
                top.value(n)
        top.build(nodes, 0, list(ep.graph.output_node.args[0]))
        object.__setattr__(self, "_top", top)
        self._register_state(ep)

    def _take_signature(self, fqn: str) -> Any:
        """The preserved signature of ``fqn`` for its first call (None afterwards)."""
        return self._signatures.pop(fqn, None)

    def _install(self, fqn: str, b: _Builder, sig: Any = None) -> None:
        owner, leaf = self._owner_interp(fqn)
        m = owner._modules.get(leaf)
        if m is None:
            m = InterpreterModule()
            owner.add_module(leaf, m)
        if m.graph is None:  # the first call of a module defines its forward
            object.__setattr__(m, "graph", b.graph)
            object.__setattr__(m, "_attr_of", b.attr_of)
            object.__setattr__(m, "_signature", sig)

    def _owner_interp(self, fqn: str) -> tuple:
        *path, leaf = fqn.split(".")
        m: Module = self
        for p in path:
            sub = m._modules.get(p)
            if sub is None:
                sub = InterpreterModule()
                m.add_module(p, sub)
            m = sub
        return m, leaf

    @property
    def graph(self) -> Graph:
        return self._top.graph

    def _state(self) -> dict:
        """The lifted state by FQN; state of a submodule that was swapped out is None (only
        its own graph, which no longer runs, read it)."""
        out: dict = {}
        for s in self._ep.graph_signature.input_specs:
            if s.kind != InputKind.USER_INPUT:
                m: Any = self
                for p in s.target.split("."):
                    m = getattr(m, p, None)
                out[s.target] = m
        return out

    def __ember_compile__(self, traced: Any, **kw: Any) -> None:
        return None  # submodules may be swapped: ember.compile traces the module tree

    def _forward(self, *args: Any, **kwargs: Any) -> Any:
        state = self._state()
        top = self._top

        def runner(values: dict, vals: Any) -> list:
            return run_graph(top.graph, values, vals,
                             lambda n, a, v: _call(_get_path(self, n.target), n, a, v))
        result, muts, flat = self._ep._run(args, kwargs, state, runner)
        return self._write_back(result, muts, flat, state)


def types_method(fn: Any, obj: Any) -> Any:
    import types
    return types.MethodType(fn, obj)


def unflatten(module: ExportedProgram, flat_args_adapter: Any = None) -> UnflattenedModule:
    """The exported program as a module tree mirroring the original one (see the module
    docstring).

    >>> um = unflatten(ep)
    >>> um(x)                      # same result as ep.module()(x)
    """
    return UnflattenedModule(module)


__all__ = ["InterpreterModule", "UnflattenedModule", "unflatten"]

"""``ExportedProgram.run_decompositions``: retrace the graph with composite ops replaced by the
ops their ``decomp`` binds (ARCHITECTURE.md §2), until only ops without one remain."""

from __future__ import annotations

import operator
from typing import Any

from ember.autograd.grad_mode import no_grad
from ember.export._trace import FakeArray, Tracer
from ember.export.graph import Graph, Node
from ember.tensor import Tensor, _wrap


class _DecomposingTracer(Tracer):
    """A tracer whose ``bind`` expands ops that have a decomposition."""

    def __init__(self, graph: Graph, table: dict, env: Any) -> None:
        super().__init__(graph, {}, env)
        self.table = table
        self.active: list = []

    def bind(self, op: Any, inputs: tuple, params: dict) -> Any:
        fn = self.table.get(op, self.table.get(op.name, op.decomp))
        if fn is None or op in self.active:  # a decomposition that binds its own op keeps it
            return super().bind(op, inputs, params)
        self.active.append(op)
        try:
            return fn(*inputs, **params)
        finally:
            self.active.pop()


def rebind(ep: Any, env: dict, tracer: Any) -> Any:
    """Bind ``ep``'s call nodes again through ``tracer`` (inside its context), placeholders
    already in ``env`` (name -> tensor); each result goes into ``env``.  Returns ``get``, which
    maps a graph argument (a Node, or a list/tuple holding Nodes) to its tensor."""

    def get(x: Any) -> Any:
        if isinstance(x, Node):
            return env[x.name]
        if isinstance(x, (list, tuple)) and any(isinstance(y, Node) for y in x):
            return type(x)(get(y) for y in x)
        return x

    for n in ep.graph.nodes:
        if n.op == "call_function":
            args = [get(a) for a in n.args]
            if n.target is operator.getitem:
                env[n.name] = args[0][args[1]]
            else:
                env[n.name] = tracer.bind(n.target, tuple(args), dict(n.kwargs))
    return get


def decompose(ep: Any, table: dict | None) -> Any:
    """A copy of ``ep`` with its graph decomposed (see the module docstring)."""
    from ember.export.exported_program import ExportedProgram
    graph = Graph()
    tracer = _DecomposingTracer(graph, dict(table or {}), ep.shape_env)
    # tensors a decomposition creates (a triton op's ``empty_like``) are lifted constants
    # numbered after the program's own
    n_lifted = sum(n.op == "placeholder" and n.name.startswith("c_lifted_tensor_")
                   for n in ep.graph.nodes)
    tracer.constants = [(None, None)] * n_lifted
    env: dict = {}
    for n in ep.graph.nodes:
        if n.op == "placeholder":
            p = graph.placeholder(n.name)
            p.meta = dict(n.meta)
            v = n.meta["val"]
            env[n.name] = _wrap(FakeArray(v.shape, v.dtype.np, p), v.dtype)

    with tracer, no_grad():
        get = rebind(ep, env, tracer)
        outs = tuple(tracer.node_of(get(a)) for a in ep.graph.output_node.args[0])
        renamed = {k: tracer.node_of(v).name for k, v in env.items()
                   if isinstance(v, Tensor)}
    graph.output(outs)
    sig, constants = _signature(ep, graph), dict(ep.constants)
    new = tracer.constants[n_lifted:]
    if new:
        from ember.export._export import _order_placeholders
        from ember.export.graph_signature import InputKind, InputSpec, TensorArgument
        for name, t in new:
            constants[name.removeprefix("c_")] = t
            sig.input_specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(name),
                                             name.removeprefix("c_")))
        _order_placeholders(graph, sig.input_specs)
    return ExportedProgram(graph, sig, ep.state_dict, constants,
                           ep.range_constraints, ep.example_inputs, ep._in_spec, ep._out_spec,
                           ep._guards, dialect=ep.dialect, shape_env=ep.shape_env,
                           module_call_graph=_call_graph(ep.module_call_graph, renamed))


def _call_graph(entries: list, renamed: dict) -> list:
    """The module call graph with preserved signatures naming the new graph's nodes."""
    import copy
    out = copy.deepcopy(entries)
    for e in out:
        for a in (e.signature.inputs + e.signature.outputs) if e.signature else ():
            if hasattr(a, "name") and a.name in renamed:
                a.name = renamed[a.name]
    return out


def _signature(ep: Any, graph: Graph) -> Any:
    import copy
    sig = copy.deepcopy(ep.graph_signature)
    for s, n in zip(sig.output_specs, graph.output_node.args[0]):
        s.arg.name = n.name
    return sig

"""Training through the compiled entry: an exported program's forward and backward as two
compiled graphs (PyTorch's AOTAutograd, on ember's export graph).

``joint_graphs(ep, wants)`` retraces ``ep.graph`` with autograd recording (each node's op through
the export tracer, its ``vjp`` recorded as eager autograd would), asks the engine for the
gradients of the differentiable user outputs with respect to the inputs in ``wants`` (tangent
placeholders as the incoming gradients), and cuts the result in two: the forward graph
(``ep``'s outputs plus the values the backward reads, its *residuals*) and the backward graph
(residuals and tangents in, one gradient per wanted input out).  Both are the export ``Graph``
with symbolic sizes, so each compiles into one size-generic C entry.

``TrainingCall`` runs them under an ``ember.autograd.Function``: ``forward`` runs the compiled
forward (mutations are written back by the caller), ``backward`` the compiled backward.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from ember.autograd.grad_mode import enable_grad
from ember.export._decomp import rebind
from ember.export._trace import FakeArray, Tracer
from ember.export.graph import Graph, Node
from ember.tensor import Tensor, _record, _wrap


class _JointTracer(Tracer):
    """The export tracer, also recording autograd nodes (so the engine's backward pass binds
    each op's ``vjp`` into the same graph)."""

    def bind(self, op: Any, inputs: tuple, params: dict) -> Any:
        out = super().bind(op, inputs, params)
        if op.vjp is not None and any(isinstance(x, Tensor) and x._requires_grad
                                      for x in inputs):
            results = (out,) if op.num_outputs == 1 else tuple(out)
            needs = tuple(isinstance(y, Tensor) and y._requires_grad for y in inputs)
            _record(op, inputs, params, results, needs)
        return out


@dataclass
class JointGraphs:
    """``forward``: inputs as ``ep``'s placeholders, outputs ``ep``'s outputs then the
    residuals; ``backward``: residual placeholders then one tangent per differentiable user
    output, outputs one gradient per wanted input (None where it gets none)."""

    forward: Graph
    backward: Graph
    n_residuals: int
    tangent_outputs: list  # indices (into ep's outputs) of the outputs that take a tangent
    grads_for: list        # input indices whose gradient the backward returns
    constants: list        # tensors the vjps created (extra forward inputs, after ep's)


_ENV_STATE = ("guards", "var_to_val", "var_to_range", "var_to_source", "replacements",
              "divisible", "_decided", "deferred", "_n_backed", "_n_unbacked",
              "_n_unbacked_float")


def joint_graphs(ep: Any, wants: list[bool]) -> JointGraphs:
    """Trace forward and backward of ``ep`` for the inputs flagged in ``wants`` (one flag per
    placeholder, in signature order).  ``ep``'s shape environment is left as it was; a
    backward that would add a guard (specialize a size) raises ``EmberNotImplementedError``:
    its graphs would not serve every size the program admits."""
    import copy

    from ember.errors import EmberNotImplementedError
    env = ep.shape_env
    saved = {k: copy.copy(getattr(env, k)) for k in _ENV_STATE} if env is not None else {}
    try:
        out = _joint_graphs(ep, wants)
        added = env is not None and len(env.guards) != len(saved["guards"])
        if added:
            raise EmberNotImplementedError(
                f"[compile] the backward of this program guards on its sizes "
                f"({env.guards[len(saved['guards'])]}); calls that need gradients run traced")
        return out
    finally:
        for k, v in saved.items():
            setattr(env, k, v)


def _joint_graphs(ep: Any, wants: list[bool]) -> JointGraphs:
    from ember.autograd.engine import grad
    joint = Graph()
    tracer = _JointTracer(joint, {}, ep.shape_env)
    env: dict = {}
    primals = []
    phs = [n for n in ep.graph.nodes if n.op == "placeholder"]
    for n, want in zip(phs, wants):
        p = joint.placeholder(n.name)
        p.meta = dict(n.meta)
        v = n.meta["val"]
        t = _wrap(FakeArray(v.shape, v.dtype.np, p), v.dtype)
        if want:
            t.requires_grad_(True)
        env[n.name] = t
        primals.append(t)

    with tracer, enable_grad():
        get = rebind(ep, env, tracer)
        outs = [get(a) for a in ep.graph.output_node.args[0]]
        user = {k for k, spec in enumerate(ep.graph_signature.output_specs)
                if spec.kind.name == "USER_OUTPUT"}  # buffer mutations are not differentiated
        tangent_outputs = [k for k, o in enumerate(outs) if o.requires_grad and k in user]
        tangents = []
        for k in tangent_outputs:
            ph = joint.placeholder(f"tangents_{len(tangents) + 1}")
            tangents.append(tracer.wrap(ph, tuple(outs[k].shape), outs[k].dtype))
        grads_for = [k for k, w in enumerate(wants) if w]
        gs = grad([outs[k] for k in tangent_outputs], [primals[k] for k in grads_for],
                  grad_outputs=tangents, allow_unused=True) if tangent_outputs else \
            [None] * len(grads_for)
        fwd_out = [tracer.node_of(o) for o in outs]
        bwd_out = [None if g is None else tracer.node_of(g) for g in gs]
    out = _partition(joint, phs, fwd_out, bwd_out, tangent_outputs, grads_for)
    out.constants = [t for _, t in tracer.constants]
    return out


def _ancestors(outs: list) -> set:
    seen: set = set()
    todo = [o for o in outs if o is not None]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(a for a in _node_args(n))
    return seen


def _node_args(n: Node) -> list:
    out = []
    for a in n.args:
        if isinstance(a, Node):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(x for x in a if isinstance(x, Node))
    return out


def _copy(graph: Graph, n: Node, remap: dict) -> Node:
    def m(x: Any) -> Any:
        if isinstance(x, Node):
            return remap[x]
        if isinstance(x, (list, tuple)) and any(isinstance(y, Node) for y in x):
            return type(x)(m(y) for y in x)
        return x
    new = graph.create_node("call_function", n.target, m(n.args), dict(n.kwargs), name=n.name)
    new.meta = dict(n.meta)
    remap[n] = new
    return new


def _partition(joint: Graph, phs: list, fwd_out: list, bwd_out: list, tangent_outputs: list,
               grads_for: list) -> JointGraphs:
    """Forward: the ancestors of ``ep``'s outputs; backward: what the gradients need beyond
    them.  A forward value the backward reads is a residual (an extra forward output)."""
    fwd_nodes = _ancestors(fwd_out)
    # one output of a forward op that only the backward reads is computed by the forward (a
    # residual is one value, never a multi-output node)
    fwd_nodes |= {u for n in list(fwd_nodes) for u in n.users if u.target is operator.getitem}
    bwd_nodes = _ancestors(bwd_out) - fwd_nodes
    order = [n for n in joint.nodes if n.op in ("placeholder", "call_function")]
    residuals = []
    for n in order:
        if n in bwd_nodes or n.op == "placeholder":
            continue
        if n in fwd_nodes and any(u in bwd_nodes for u in n.users):
            residuals.append(n)
    for g in bwd_out:  # a gradient that is a forward value itself
        if g is not None and g not in bwd_nodes and g.op != "placeholder" \
                and g not in residuals:
            residuals.append(g)
    primal_res = [n for n in order if n.op == "placeholder" and not n.name.startswith(
        "tangents_") and (any(u in bwd_nodes for u in n.users) or n in bwd_out)]
    residuals = primal_res + residuals
    # the forward graph
    fwd, remap = Graph(), {}
    for n in order:
        if n.op == "placeholder" and not n.name.startswith("tangents_"):
            p = fwd.placeholder(n.name)
            p.meta = dict(n.meta)
            remap[n] = p
        elif n in fwd_nodes and n.op == "call_function":
            _copy(fwd, n, remap)
    fwd.output(tuple(remap[o] for o in fwd_out + residuals))
    # the backward graph
    bwd, bmap = Graph(), {}
    for r in residuals:
        p = bwd.placeholder(r.name)
        p.meta = dict(r.meta)
        bmap[r] = p
    for n in order:
        if n.op == "placeholder" and n.name.startswith("tangents_"):
            p = bwd.placeholder(n.name)
            p.meta = dict(n.meta)
            bmap[n] = p
    for n in order:
        if n in bwd_nodes and n.op == "call_function":
            _copy(bwd, n, bmap)
    bwd.output(tuple(None if g is None else bmap[g] for g in bwd_out))
    return JointGraphs(fwd, bwd, len(residuals), tangent_outputs, grads_for, [])


class _Compiled:
    """One export ``Graph`` compiled by a backend; called with tensors and the symbol values."""

    def __init__(self, graph: Graph, backend: Any, mode: str | None) -> None:
        from types import SimpleNamespace

        from ember.export._compile import build
        phs = [n for n in graph.nodes if n.op == "placeholder"]
        # per output: None, ("in", placeholder index) or ("out", compiled output index)
        self.where: list = []
        outs = []
        for o in graph.output_node.args[0]:
            if o is None:
                self.where.append(None)
            elif o.op == "placeholder":
                self.where.append(("in", phs.index(o)))
            else:
                self.where.append(("out", len(outs)))
                outs.append(o)
        graph.output_node.args = (tuple(outs),)
        self.run, self.exprs = build(SimpleNamespace(graph=graph), backend, mode) if outs \
            else (None, [])

    def __call__(self, tensors: list, vals: Any) -> list:
        from ember.export._compile import _number
        res = self.run(tensors, [_number(vals.value(e)) for e in self.exprs]) \
            if self.run is not None else []
        return [None if w is None else tensors[w[1]] if w[0] == "in" else res[w[1]]
                for w in self.where]


class TrainingProgram:
    """``ep`` compiled for calls that autograd records: forward and backward graphs
    (``joint_graphs``), each compiled once into a size-generic entry."""

    def __init__(self, ep: Any, wants: list[bool], backend: Any, mode: str | None) -> None:
        self.ep = ep
        self.joint = joint_graphs(ep, wants)
        self.n_out = len(ep.graph.output_node.args[0])
        self.forward = _Compiled(self.joint.forward, backend, mode)
        self.backward = _Compiled(self.joint.backward, backend, mode)

    def __call__(self, tensors: list, vals: Any) -> list:
        return list(_TrainingFunction.apply(self, vals, *tensors))


def _function() -> Any:
    from ember.autograd.function import Function

    class TrainingFunction(Function):
        """Runs the compiled forward; its backward runs the compiled backward."""

        @staticmethod
        def forward(ctx: Any, prog: TrainingProgram, vals: Any, *tensors: Any) -> tuple:
            res = prog.forward(list(tensors) + prog.joint.constants, vals)
            ctx.prog, ctx.vals = prog, vals
            ctx.residuals = res[prog.n_out:]  # values, not versions: nothing rewrites them
            outs = res[:prog.n_out]
            user = set(prog.joint.tangent_outputs)
            ctx.mark_non_differentiable(*[o for k, o in enumerate(outs) if k not in user])
            return tuple(outs)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> tuple:
            import ember
            prog = ctx.prog
            outs = prog.joint.tangent_outputs
            tangents = []
            for k in outs:
                g = grads[k]
                if g is None:
                    v = prog.ep.graph.output_node.args[0][k].meta["val"]
                    g = ember.zeros(tuple(ctx.vals.value(d.expr) if hasattr(d, "expr") else d
                                          for d in v.shape), dtype=v.dtype)
                tangents.append(g.contiguous())
            got = prog.backward(list(ctx.residuals) + tangents, ctx.vals)
            per_input: list = [None] * len(ctx.needs_input_grad)
            for k, g in zip(prog.joint.grads_for, got):
                per_input[2 + k] = g
            return tuple(per_input)
    return TrainingFunction


class _LazyFunction:
    cls: Any = None

    def apply(self, *args: Any) -> Any:
        if _LazyFunction.cls is None:
            _LazyFunction.cls = _function()
        return _LazyFunction.cls.apply(*args)


_TrainingFunction = _LazyFunction()

__all__ = ["JointGraphs", "TrainingProgram", "joint_graphs"]

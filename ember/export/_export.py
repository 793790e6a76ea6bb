"""``ember.export.export``: specs to symbols, the traced run, and the program it returns."""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator

from ember._dynamo.exc import UserError, UserErrorType
from ember.autograd.grad_mode import no_grad
from ember.export import _constraints
from ember.export._inputs import bind_arguments, flatten, leaves, structure
from ember.export._runtime import InputGuards
from ember.export._trace import FakeArray, Tracer, fake_val
from ember.export.dynamic_shapes import (
    DimSpec,
    ShapesCollection,
    check_named_dims,
    classify,
    tensor_spec_entries,
)
from ember.export.exported_program import ExportedProgram
from ember.export.graph import Graph
from ember.export.graph_signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    ModuleCallEntry,
    ModuleCallSignature,
    OutputKind,
    OutputSpec,
    TensorArgument,
)
from ember.nn.modules.module import Module
from ember.sym import ShapeEnv, SymInt
from ember.tensor import Tensor, _wrap

log = logging.getLogger("ember.export")


def export(mod: Any, args: tuple, kwargs: dict | None = None, *, dynamic_shapes: Any = None,
           strict: bool = False, preserve_module_call_signature: tuple = ()) -> ExportedProgram:
    """Trace ``mod(*args, **kwargs)`` into an ``ExportedProgram`` whose sizes are symbolic where
    ``dynamic_shapes`` says so (see docs/export.md).

    Example::

        >>> class M(ember.nn.Module):
        ...     def __init__(self):
        ...         super().__init__(); self.fc = ember.nn.Linear(8, 4)
        ...     def forward(self, x):
        ...         return self.fc(x).relu()
        >>> ep = export(M(), (ember.randn(5, 8),), dynamic_shapes={"x": {0: Dim("batch")}})
        >>> ep.range_constraints          # Dim("batch") declares [0, inf), as in PyTorch
        {s0: VR[0, int_oo]}
    """
    return _export(mod, args, kwargs, dynamic_shapes=dynamic_shapes,
                   preserve=preserve_module_call_signature)[0]


def _export(mod: Any, args: tuple, kwargs: dict | None = None, *, dynamic_shapes: Any = None,
            draft: bool = False, preserve: tuple = ()) -> tuple[ExportedProgram, Any]:
    """``(program, RealValues or None)``; ``draft`` lets code read tensor values (draft_export:
    the trace runs the graph so far on the examples and records the issue)."""
    if not isinstance(mod, Module):
        raise ValueError(f"Expected `mod` to be an instance of `torch.nn.Module`, got "
                         f"{type(mod)}.")
    if not isinstance(args, tuple):
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"Expecting `args` to be a tuple of example positional inputs, got "
                        f"{type(args)}")
    kwargs = dict(kwargs or {})
    preserve = _check_preserve(mod, preserve)
    named = bind_arguments(mod, args, kwargs)
    if isinstance(dynamic_shapes, ShapesCollection):
        dynamic_shapes = dynamic_shapes.dynamic_shapes(mod, args, kwargs)
    leaf_list = flatten(named, dynamic_shapes)
    env = ShapeEnv()
    specs = _dim_specs(leaf_list)
    info = _constraints.make_symbols(env, specs, log)
    syms = info.sizes
    graph = Graph()
    lifted, input_specs, state_dict, constants = _lift_state(mod, graph)
    fake_inputs = _user_placeholders(graph, leaf_list, specs, syms, input_specs)
    fake_named = {k: _swap(v, fake_inputs) for k, v in named.items()}
    tracer = Tracer(graph, lifted, env)
    tracer.attr_fqns = _constant_attrs(mod, lifted)
    if draft:
        from ember.export._draft import RealValues
        tracer.draft = RealValues(tracer, {
            fake_inputs[id(leaf.tensor)]._data.node.name: leaf.tensor for leaf in leaf_list}, env)
    for key, (name, _kind, _target, arr) in lifted.items():
        tracer.placeholders[key] = next(n for n in graph.nodes if n.name == name)
        tracer.keep.append(arr)
    pos = [fake_named[k] for k in list(named)[:len(args)]]
    kw = {k: fake_named[k] for k in list(named)[len(args):]}
    calls: dict = {}
    with tracer, no_grad(), _module_stack(mod, tracer, preserve, calls):
        out = mod(*pos, **kw)
        result = _outputs(tracer, out, input_specs, constants)
    output_specs, out_nodes, out_struct = result
    graph.output(tuple(out_nodes))
    _order_placeholders(graph, input_specs)
    _constraints.check_violations(info)
    ranges = _constraints.range_constraints(info)
    guards = InputGuards(
        [(leaf.guard, [_expr(syms[id(s)]) for s in ls]) for leaf, ls in zip(leaf_list, specs)],
        ranges, _constraints.runtime_guards(env))
    in_spec = (list(named), {k: structure(v) for k, v in named.items()})
    sig = ExportGraphSignature(input_specs, output_specs)
    ep = ExportedProgram(graph, sig, state_dict, constants, ranges, (args, kwargs), in_spec,
                         out_struct, guards, shape_env=env,
                         module_call_graph=_call_graph(mod, in_spec, out_struct, calls))
    return ep, tracer.draft


def _check_preserve(mod: Module, preserve: Any) -> tuple:
    if isinstance(preserve, str) or not all(isinstance(f, str) for f in preserve):
        raise UserError(UserErrorType.INVALID_INPUT,
                        "[export] preserve_module_call_signature must be a tuple of submodule "
                        f"names (FQNs), got {preserve!r}")
    for fqn in preserve:  # an unknown name raises AttributeError, as PyTorch's lookup does
        m = mod
        for part in fqn.split("."):
            m = getattr(m, part)
    return tuple(preserve)


def _call_graph(mod: Module, in_spec: tuple, out_struct: Any, calls: dict) -> list:
    """``ep.module_call_graph``: the root's signature, then every submodule (in
    ``named_modules()`` order) with its recorded signature where it was preserved."""
    root = ModuleCallSignature([], [], in_spec, out_struct, list(in_spec[0]))
    out = [ModuleCallEntry("", root)]
    for fqn, _m in mod.named_modules():
        if fqn:
            out.append(ModuleCallEntry(fqn, calls[fqn][1] if fqn in calls else None))
    return out


def _signature(tracer: Tracer, args: tuple, kwargs: dict) -> ModuleCallSignature:
    """A preserved call's inputs: tensors as their nodes, other leaves as constants."""
    call = (tuple(args), dict(kwargs))
    inputs: list = []

    def walk(x: Any) -> None:
        if isinstance(x, Tensor):
            inputs.append(TensorArgument(tracer.node_of(x).name))
        elif isinstance(x, (tuple, list)):
            for v in x:
                walk(v)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        else:
            inputs.append(ConstantArgument("", x))
    walk(call)
    return ModuleCallSignature(inputs, [], structure(call), None)


@contextlib.contextmanager
def _module_stack(mod: Module, tracer: Tracer, preserve: tuple = (),
                  calls: dict | None = None) -> Iterator[None]:
    """Record on each node the submodule calls it was made in (``meta["nn_module_stack"]``:
    ``((fqn, class name), ...)``, outermost first), for ``unflatten``; for the first call of
    each module in ``preserve``, ``calls[fqn] = (call id, ModuleCallSignature)``."""
    stack: list = []
    ids: list = []
    count = [0]
    handles = []
    for fqn, m in mod.named_modules():
        if not fqn:
            continue

        def pre(m: Any, args: Any, kwargs: Any, fqn: str = fqn) -> None:
            stack.append((fqn, type(m).__module__ + "." + type(m).__qualname__))
            count[0] += 1
            ids.append(count[0])
            if fqn in preserve and fqn not in calls and not tracer.frames:
                calls[fqn] = (count[0], _signature(tracer, args, kwargs))

        def post(m: Any, args: Any, out: Any, fqn: str = fqn) -> None:
            rec = calls.get(fqn) if calls else None
            if rec is not None and rec[0] == ids[-1]:
                _check_outputs(out, f"{fqn}'s output")
                rec[1].outputs = [TensorArgument(tracer.node_of(t).name) for t in leaves(out)]
                rec[1].out_spec = structure(out)
            stack.pop()
            ids.pop()
        handles.append(m.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(m.register_forward_hook(post))

    def on_create(n: Any) -> None:
        n.meta["nn_module_stack"] = tuple(stack)
        n.meta["module_call_ids"] = tuple(ids)
    tracer.on_create = on_create
    try:
        yield
    finally:
        tracer.on_create = None
        for h in handles:
            h.remove()


def _user_placeholders(graph: Graph, leaf_list: list, specs: list, syms: dict,
                       input_specs: list) -> dict[int, Tensor]:
    """A placeholder per input tensor and the fake tensor that stands for it while tracing
    (``{id(example tensor): fake}``)."""
    fakes: dict[int, Tensor] = {}
    for leaf, leaf_specs in zip(leaf_list, specs):
        node = graph.placeholder(leaf.name)
        shape = tuple(syms[id(s)] for s in leaf_specs)
        t = leaf.tensor
        node.meta["val"] = fake_val(shape, t.dtype)
        fakes[id(t)] = _wrap(FakeArray(shape, t.dtype.np, node), t.dtype)
        input_specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(node.name), None))
    return fakes


def _expr(x: Any) -> Any:
    from ember.sym import _sympy
    return x.expr if isinstance(x, SymInt) else _sympy().Integer(int(x))


def _swap(x: Any, fakes: dict) -> Any:
    if isinstance(x, Tensor):
        return fakes[id(x)]
    if isinstance(x, (tuple, list)):
        return type(x)(_swap(v, fakes) for v in x)
    if isinstance(x, dict):
        return {k: _swap(v, fakes) for k, v in x.items()}
    return x


def _dim_specs(leaf_list: list) -> list[list[DimSpec]]:
    out = []
    for leaf in leaf_list:
        t = leaf.tensor
        entries = tensor_spec_entries(leaf.spec, t.ndim, leaf.path)
        dims = []
        for d, (entry, hint) in enumerate(zip(entries, t.shape)):
            path = f"{leaf.path}.shape[{d}]"
            kind = classify(entry, path)
            if type(entry) is int and entry != hint:
                raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                                f"Expected input at {path} to be equal to {entry}, but got "
                                f"{hint}")
            dims.append(DimSpec(path, f"{leaf.local}.size()[{d}]", int(hint), kind, entry,
                                f"{leaf.guard}.size()[{d}]"))
        out.append(dims)
    check_named_dims([s for ls in out for s in ls])
    return out


def _lift_state(mod: Any, graph: Graph) -> tuple:
    """Placeholders for every parameter and buffer (PyTorch lifts them all), in that order."""
    lifted: dict = {}
    specs: list[InputSpec] = []
    state_dict: dict = {}
    constants: dict = {}
    if not hasattr(mod, "named_parameters"):
        return lifted, specs, state_dict, constants
    non_persistent = set()
    for mname, m in mod.named_modules():
        for b in getattr(m, "_non_persistent_buffers_set", ()):
            non_persistent.add(f"{mname}.{b}" if mname else b)
    for fqn, p in mod.named_parameters():
        node = graph.placeholder("p_" + fqn.replace(".", "_"))
        node.meta["val"] = fake_val(tuple(p.shape), p.dtype)
        lifted[id(p._data)] = (node.name, "PARAMETER", fqn, p._data)
        specs.append(InputSpec(InputKind.PARAMETER, TensorArgument(node.name), fqn))
        state_dict[fqn] = p
    for fqn, b in mod.named_buffers():
        node = graph.placeholder("b_" + fqn.replace(".", "_"))
        node.meta["val"] = fake_val(tuple(b.shape), b.dtype)
        lifted[id(b._data)] = (node.name, "BUFFER", fqn, b._data)
        persistent = fqn not in non_persistent
        specs.append(InputSpec(InputKind.BUFFER, TensorArgument(node.name), fqn, persistent))
        (state_dict if persistent else constants)[fqn] = b
    return lifted, specs, state_dict, constants


def _constant_attrs(mod: Any, lifted: dict) -> dict:
    """id(payload) -> FQN of every tensor held directly as a module attribute (not a parameter
    or buffer), first name wins: a forward that reads one lifts it under that name
    (``c_sub_w``, target ``sub.w``), as PyTorch's ``_gather_constant_attrs``; tensors in
    tuples or made by the forward stay ``lifted_tensor_<n>``."""
    out: dict = {}
    if not hasattr(mod, "named_modules"):
        return out
    for mname, m in mod.named_modules(remove_duplicate=False):
        for k, v in vars(m).items():
            if isinstance(v, Tensor) and id(v._data) not in lifted:
                out.setdefault(id(v._data), f"{mname}.{k}" if mname else k)
    return out


def _outputs(tracer: Tracer, out: Any, input_specs: list, constants: dict) -> tuple:
    """Output specs, output nodes (mutations first, as PyTorch orders them) and the
    structure of the user output."""
    specs, nodes = [], []
    by_node = {s.arg.name: s for s in input_specs}
    for t, orig in tracer.written.values():
        spec = by_node.get(orig.name)
        if spec is None or spec.kind not in (InputKind.BUFFER, InputKind.USER_INPUT):
            continue
        kind = (OutputKind.BUFFER_MUTATION if spec.kind == InputKind.BUFFER
                else OutputKind.USER_INPUT_MUTATION)
        node = tracer.node_of(t)
        specs.append(OutputSpec(kind, TensorArgument(node.name),
                                spec.target if spec.kind == InputKind.BUFFER else orig.name))
        nodes.append(node)
    _check_outputs(out)
    for t in leaves(out):
        node = tracer.node_of(t)
        specs.append(OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(node.name), None))
        nodes.append(node)
    for name, t in tracer.constants:
        target = tracer.constant_targets.get(name, name.removeprefix("c_"))
        constants[target] = t
        input_specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(name), target))
    return specs, nodes, structure(out)


def _check_outputs(out: Any, path: str = "output") -> None:
    if isinstance(out, SymInt):
        raise UserError(UserErrorType.INVALID_OUTPUT,
                        f"[export] {path} is a symbolic size ({out}); return tensors (sizes as "
                        "tensors are not supported yet)")
    if isinstance(out, (tuple, list)):
        for k, v in enumerate(out):
            _check_outputs(v, f"{path}[{k}]")
    elif isinstance(out, dict):
        for k, v in out.items():
            _check_outputs(v, f"{path}[{k!r}]")
    elif not isinstance(out, (Tensor, int, float, bool, str, type(None))):
        raise UserError(UserErrorType.INVALID_OUTPUT,
                        f"[export] {path} is a {type(out).__name__}; export supports tensors "
                        "and Python constants (in tuples, lists and dicts) as outputs")


def _order_placeholders(graph: Graph, input_specs: list) -> None:
    """Placeholders in the signature's order: parameters, buffers, constants, user inputs."""
    rank = {InputKind.PARAMETER: 0, InputKind.BUFFER: 1, InputKind.CONSTANT_TENSOR: 2,
            InputKind.USER_INPUT: 3}
    input_specs.sort(key=lambda s: rank[s.kind])  # stable: keeps each kind's order
    pos = {s.arg.name: k for k, s in enumerate(input_specs)}
    ph = sorted((n for n in graph._nodes if n.op == "placeholder"), key=lambda n: pos[n.name])
    graph._nodes = ph + [n for n in graph._nodes if n.op != "placeholder"]


__all__ = ["export"]

"""``ExportedProgram``: an exported graph with its lifted state, signature and range constraints
(PyTorch's ``torch.export.ExportedProgram``).

Example::

    >>> ep = ember.export.export(model, (x,), dynamic_shapes={"x": {0: Dim.AUTO}})
    >>> print(ep)                    # the graph with f32[s0, 8] shapes, signature, ranges
    >>> ep.module()(ember.randn(5, 8))  # runs the graph; guards check the input shapes
"""

from __future__ import annotations

import inspect
import types
from typing import Any, Iterator

from ember.export._inputs import leaves, skeleton, structure, unflatten
from ember.export._runtime import InputGuards, run_graph
from ember.export.graph import Graph
from ember.export.graph_signature import ExportGraphSignature, InputKind, OutputKind
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


class ExportedProgram:
    """The result of ``ember.export.export``; see the module docstring.

    Attributes as in PyTorch: ``graph``, ``graph_signature``, ``state_dict`` (parameters and
    persistent buffers by name), ``constants`` (lifted tensor constants, non-persistent
    buffers), ``range_constraints`` (``{sympy symbol: ValueRange}``), ``example_inputs``
    (``(args, kwargs)``), ``dialect``.
    """

    def __init__(self, graph: Graph, graph_signature: ExportGraphSignature, state_dict: dict,
                 constants: dict, range_constraints: dict, example_inputs: tuple,
                 in_spec: tuple, out_spec: Any, guards: InputGuards,
                 dialect: str = "TRAINING", shape_env: Any = None,
                 module_call_graph: list | None = None) -> None:
        self._graph = graph
        self._graph_signature = graph_signature
        self._state_dict = state_dict
        self._constants = constants
        self._range_constraints = range_constraints
        self._example_inputs = example_inputs
        self._in_spec = in_spec      # (argument names in order, {name: structure})
        self._out_spec = out_spec    # structure of forward's return value
        self._guards = guards
        self.dialect = dialect
        self.shape_env = shape_env
        self._module_call_graph = module_call_graph or []

    graph = property(lambda self: self._graph)
    graph_signature = property(lambda self: self._graph_signature)
    state_dict = property(lambda self: self._state_dict)
    constants = property(lambda self: self._constants)
    range_constraints = property(lambda self: self._range_constraints)
    example_inputs = property(lambda self: self._example_inputs)
    module_call_graph = property(lambda self: self._module_call_graph)

    @property
    def graph_module(self) -> ExportedModule:
        return self.module()

    @property
    def verifiers(self) -> list:
        return []

    # ------------------------------------------------------------------ state
    def named_parameters(self) -> Iterator[tuple[str, Tensor]]:
        for name in self.graph_signature.parameters:
            yield name, self.state_dict[name]

    def parameters(self) -> Iterator[Tensor]:
        for _, p in self.named_parameters():
            yield p

    def named_buffers(self) -> Iterator[tuple[str, Tensor]]:
        for s in self.graph_signature.input_specs:
            if s.kind == InputKind.BUFFER:
                src = self.state_dict if s.persistent else self.constants
                yield s.target, src[s.target]

    def buffers(self) -> Iterator[Tensor]:
        for _, b in self.named_buffers():
            yield b

    def _lifted_value(self, spec: Any) -> Tensor:
        if spec.kind == InputKind.PARAMETER or (spec.kind == InputKind.BUFFER
                                                and spec.persistent):
            return self.state_dict[spec.target]
        return self.constants[spec.target]

    # ------------------------------------------------------------------ running
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Unable to call ExportedProgram directly. You should use "
                           "`exported_program.module()` instead.")

    def _flat_user_inputs(self, args: tuple, kwargs: dict) -> list:
        names, structs = self._in_spec
        named = dict(zip(names, args))
        if len(args) > len(names) or set(named) & set(kwargs):
            named = None
        else:
            named.update(kwargs)
        got = None if named is None else {k: structure(v) for k, v in named.items()}
        want = {k: s for k, s in structs.items()}
        if got is None or set(got) != set(want) or any(
                skeleton(got[k]) != skeleton(want[k]) for k in want):
            raise ValueError(
                "Trying to flatten user inputs with exported input tree spec: \n"
                f"{_describe(want)}\nbut actually got inputs with tree spec of: \n"
                f"{_describe(got or {})}.\nPlease check that the inputs have the same number "
                "and type of args and kwargs as the ones you used when tracing.")
        for k in structs:
            _check_constants(want[k], got[k], k)
        flat = []
        for k in structs:
            flat.extend(leaves(named[k]))
        return flat

    def _run(self, args: tuple, kwargs: dict, state: dict, runner: Any = None) -> tuple:
        """Check guards, run the graph (or ``runner(values, vals)``); returns (user outputs,
        mutation values by target, the flat user inputs)."""
        flat = self._flat_user_inputs(args, kwargs)
        vals = self._guards.check(flat)
        values: dict = {}
        it = iter(flat)
        for s in self.graph_signature.input_specs:
            values[s.arg.name] = next(it) if s.kind == InputKind.USER_INPUT else state[s.target]
        outs = run_graph(self.graph, values, vals) if runner is None else runner(values, vals)
        user, muts = [], []
        for s, v in zip(self.graph_signature.output_specs, outs):
            if s.kind == OutputKind.USER_OUTPUT:
                user.append(v)
            else:
                muts.append((s, v))
        return unflatten(self._out_spec, iter(user)), muts, flat

    def module(self) -> ExportedModule:
        """An ``nn.Module`` that runs the graph with forward's calling convention; its
        parameters and buffers are copies of this program's state."""
        return ExportedModule(self)

    # ------------------------------------------------------------------ transformations
    def run_decompositions(self, decomp_table: dict | None = None,
                           decompose_custom_triton_ops: bool = False) -> ExportedProgram:
        """A new program whose composite ops are replaced by the ops their decompositions
        bind (ember's core primitives); ``decomp_table`` maps an ``OpDef`` (or its name) to a
        function to use instead, or to None to keep the op.  ``triton_op``s stay one node
        unless ``decompose_custom_triton_ops``: then their body's ops and kernel launches
        (``kernel_launch`` nodes) replace them."""
        from ember.export._decomp import decompose
        from ember.library._triton import TRITON_OPS
        table = dict(decomp_table or {})
        if decompose_custom_triton_ops:
            for n in self.graph.nodes:
                op = TRITON_OPS.get(getattr(n.target, "name", None))
                if n.op == "call_function" and op is not None and not op._mutated:
                    table.setdefault(n.target, op._decomp)
        return decompose(self, table)

    def validate(self) -> None:
        """Check the graph's structure and that the signature matches its placeholders,
        outputs and state."""
        self.graph.lint()
        ph = [n.name for n in self.graph.nodes if n.op == "placeholder"]
        specs = [s.arg.name for s in self.graph_signature.input_specs]
        if ph != specs:
            raise AssertionError(f"[ExportedProgram.validate] placeholders {ph} differ from the "
                                 f"signature's inputs {specs}")
        outs = self.graph.output_node.args[0]
        if len(outs) != len(self.graph_signature.output_specs):
            raise AssertionError("[ExportedProgram.validate] the graph has "
                                 f"{len(outs)} outputs, the signature "
                                 f"{len(self.graph_signature.output_specs)}")
        for s in self.graph_signature.input_specs:
            if s.kind != InputKind.USER_INPUT:
                v = self._lifted_value(s)
                fake = next(n for n in self.graph.nodes if n.name == s.arg.name).meta["val"]
                if tuple(v.shape) != tuple(fake.shape) or v.dtype != fake.dtype:
                    raise AssertionError(f"[ExportedProgram.validate] {s.target}: state "
                                         f"{tuple(v.shape)} {v.dtype} does not match the graph's "
                                         f"{fake}")

    # ------------------------------------------------------------------ printing
    def __str__(self) -> str:
        code = self.graph.python_code()
        for n in self.graph.nodes:  # cond branches, as PyTorch prints its submodules
            for sub in n.args:
                if hasattr(sub, "inputs") and hasattr(sub, "graph"):
                    inner = "\n".join("    " + ln for ln in sub.code.rstrip().split("\n"))
                    code += f"\nclass {sub.name}(torch.nn.Module):\n{inner}\n"
        body = "\n".join("        " + ln for ln in code.rstrip().split("\n"))
        ranges = "{" + ", ".join(f"{k}: {v}" for k, v in self.range_constraints.items()) + "}"
        return ("ExportedProgram:\n    class GraphModule(torch.nn.Module):\n" + body +
                "\n\nGraph signature: \n" + str(self.graph_signature) +
                f"\nRange constraints: {ranges}\n")

    __repr__ = __str__


def _check_constants(want: Any, got: Any, path: str) -> None:
    """Non-tensor inputs were constants of the trace: ``Guard failed: n == 3`` otherwise."""
    if want == "T":
        return
    kind, body = want
    if kind == "const":
        if got[1] != body or type(got[1]) is not type(body):
            raise AssertionError(f"Guard failed: {path} == {body!r}")
        return
    for (k, w), (_, g) in zip(body, got[1]) if kind == "dict" else \
            zip(enumerate(body), enumerate(got[1])):
        _check_constants(w, g, f"{path}[{k!r}]")


def _describe(structs: dict) -> str:
    return "TreeSpec(" + ", ".join(f"{k}={skeleton(v)}" for k, v in structs.items()) + ")"


def _forward_with(names: list) -> Any:
    """``forward`` with the exported function's argument names in its signature (so the module
    binds and re-exports like the original)."""
    def forward(self: ExportedModule, *args: Any, **kwargs: Any) -> Any:
        return self._forward(*args, **kwargs)
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
    forward.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return forward


class ExportedModule(Module):
    """``ep.module()``: parameters and buffers under their original names, ``forward`` with the
    original signature; input guards raise ``AssertionError("Guard failed: ...")``."""

    def __init__(self, ep: ExportedProgram) -> None:
        super().__init__()
        object.__setattr__(self, "_ep", ep)
        object.__setattr__(self, "forward", types.MethodType(_forward_with(ep._in_spec[0]), self))
        self._register_state(ep)

    def _register_state(self, ep: ExportedProgram) -> None:
        for s in ep.graph_signature.input_specs:
            if s.kind == InputKind.USER_INPUT:
                continue
            v = ep._lifted_value(s)
            owner, leaf = self._owner(s.target)
            if s.kind == InputKind.PARAMETER:
                owner.register_parameter(leaf, Parameter(v.detach().clone(),
                                                         requires_grad=v.requires_grad))
            elif s.kind == InputKind.BUFFER:
                owner.register_buffer(leaf, v.detach().clone(), persistent=bool(s.persistent))
            else:
                owner.register_buffer(leaf, v.detach().clone(), persistent=False)

    def _owner(self, fqn: str) -> tuple[Module, str]:
        *path, leaf = fqn.split(".")
        m: Module = self
        for p in path:
            sub = m._modules.get(p)
            if sub is None:
                sub = Module()
                m.add_module(p, sub)
            m = sub
        return m, leaf

    def _state(self) -> dict:
        out: dict = {}
        for s in self._ep.graph_signature.input_specs:
            if s.kind != InputKind.USER_INPUT:
                owner, leaf = self._owner(s.target)
                out[s.target] = getattr(owner, leaf)
        return out

    def _forward(self, *args: Any, **kwargs: Any) -> Any:
        state = self._state()
        result, muts, flat = self._ep._run(args, kwargs, state)
        return self._write_back(result, muts, flat, state)

    def _write_back(self, result: Any, muts: list, flat: list, state: dict) -> Any:
        user_in = [s.arg.name for s in self._ep.graph_signature.input_specs
                   if s.kind == InputKind.USER_INPUT]
        from ember.autograd.grad_mode import no_grad
        with no_grad():
            for s, v in muts:
                if s.kind == OutputKind.BUFFER_MUTATION:
                    state[s.target].copy_(v)
                elif s.kind == OutputKind.USER_INPUT_MUTATION:
                    flat[user_in.index(s.target)].copy_(v)
        return result

    def __ember_compile__(self, traced: Any, *, backend: Any, mode: str | None) -> Any:
        """``ember.compile(ep.module())``: the exported graph compiled once, size-generic,
        without retracing (``ember/export/_compile.py``); ``traced`` serves the calls that
        autograd records and graphs with run-time-only sizes."""
        from ember.export._compile import DirectCall
        return DirectCall(self, traced, backend=backend, mode=mode)

    @property
    def code(self) -> str:
        return self._ep.graph.python_code(annotate=False)

    @property
    def graph(self) -> Graph:
        return self._ep.graph


__all__ = ["ExportedModule", "ExportedProgram"]

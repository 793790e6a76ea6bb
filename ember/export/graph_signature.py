"""``ExportGraphSignature``: what each placeholder and output of an exported graph is (PyTorch's
``torch.export.graph_signature``).

Example::

    >>> ep.graph_signature.input_specs[0]
    InputSpec(kind=<InputKind.PARAMETER: 2>, arg=TensorArgument(name='p_fc_weight'),
              target='fc.weight', persistent=None)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any


class InputKind(Enum):
    USER_INPUT = auto()
    PARAMETER = auto()
    BUFFER = auto()
    CONSTANT_TENSOR = auto()
    CUSTOM_OBJ = auto()
    TOKEN = auto()


class OutputKind(Enum):
    USER_OUTPUT = auto()
    LOSS_OUTPUT = auto()
    BUFFER_MUTATION = auto()
    GRADIENT_TO_PARAMETER = auto()
    GRADIENT_TO_USER_INPUT = auto()
    USER_INPUT_MUTATION = auto()
    TOKEN = auto()
    PARAMETER_MUTATION = auto()


@dataclass
class TensorArgument:
    name: str


@dataclass
class ConstantArgument:
    name: str
    value: object = None


@dataclass
class InputSpec:
    kind: InputKind
    arg: TensorArgument
    target: str | None
    persistent: bool | None = None


@dataclass
class OutputSpec:
    kind: OutputKind
    arg: TensorArgument
    target: str | None


@dataclass
class ExportGraphSignature:
    """Input and output specs, in graph order."""

    input_specs: list[InputSpec] = field(default_factory=list)
    output_specs: list[OutputSpec] = field(default_factory=list)

    def _names(self, kind: InputKind) -> list[str]:
        return [s.arg.name for s in self.input_specs if s.kind == kind]

    @property
    def parameters(self) -> list[str]:
        return [s.target for s in self.input_specs if s.kind == InputKind.PARAMETER]

    @property
    def buffers(self) -> list[str]:
        return [s.target for s in self.input_specs if s.kind == InputKind.BUFFER]

    @property
    def lifted_tensor_constants(self) -> list[str]:
        return [s.target for s in self.input_specs if s.kind == InputKind.CONSTANT_TENSOR]

    @property
    def user_inputs(self) -> list[str]:
        return self._names(InputKind.USER_INPUT)

    @property
    def user_outputs(self) -> list[str]:
        return [s.arg.name for s in self.output_specs if s.kind == OutputKind.USER_OUTPUT]

    @property
    def inputs_to_parameters(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self.input_specs if s.kind == InputKind.PARAMETER}

    @property
    def inputs_to_buffers(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self.input_specs if s.kind == InputKind.BUFFER}

    @property
    def buffers_to_mutate(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self.output_specs
                if s.kind == OutputKind.BUFFER_MUTATION}

    @property
    def user_inputs_to_mutate(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self.output_specs
                if s.kind == OutputKind.USER_INPUT_MUTATION}

    def __str__(self) -> str:
        lines = ["    # inputs"]
        for s in self.input_specs:
            extra = f" target={s.target!r}" if s.kind != InputKind.USER_INPUT else ""
            if s.kind == InputKind.BUFFER:
                extra += f" persistent={s.persistent}"
            lines.append(f"    {s.arg.name}: {s.kind.name}{extra}")
        lines.append("    # outputs")
        for s in self.output_specs:
            extra = f" target={s.target!r}" if s.target is not None else ""
            lines.append(f"    {s.arg.name}: {s.kind.name}{extra}")
        return "\n".join(lines)


@dataclass
class ModuleCallSignature:
    """A preserved submodule call (``preserve_module_call_signature``): its flat inputs and
    outputs (``TensorArgument`` by graph node name, ``ConstantArgument`` for a non-tensor leaf),
    the structure of ``(args, kwargs)`` as called (``in_spec``) and of the return value
    (``out_spec``); for the root entry, ``forward_arg_names``."""

    inputs: list
    outputs: list
    in_spec: Any
    out_spec: Any
    forward_arg_names: list | None = None


@dataclass
class ModuleCallEntry:
    """One entry of ``ep.module_call_graph``: a module's FQN and its signature (None where the
    call signature is not preserved)."""

    fqn: str
    signature: ModuleCallSignature | None = None


__all__ = ["ConstantArgument", "ExportGraphSignature", "InputKind", "InputSpec",
           "ModuleCallEntry", "ModuleCallSignature", "OutputKind", "OutputSpec",
           "TensorArgument"]

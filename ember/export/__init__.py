"""``ember.export``: PyTorch's ``torch.export`` (ARCHITECTURE.md §6, docs/export.md).

``export(mod, args, dynamic_shapes=...)`` traces a module with symbolic sizes into an
``ExportedProgram``; ``save``/``load`` write and read it as a versioned zip archive.

Example::

    >>> from ember.export import Dim, export
    >>> ep = export(model, (ember.randn(4, 8),), dynamic_shapes={"x": {0: Dim("batch")}})
    >>> ep.module()(ember.randn(7, 8)).shape
    ember.Size([7, 4])
"""

from ember.export._compile import CompiledProgram, compile_program
from ember.export._draft import draft_export
from ember.export._export import export
from ember.export.dynamic_shapes import Dim, ShapesCollection, dims
from ember.export.exported_program import ExportedProgram
from ember.export.graph_signature import (
                                          ExportGraphSignature,
                                          InputKind,
                                          InputSpec,
                                          ModuleCallEntry,
                                          ModuleCallSignature,
                                          OutputKind,
                                          OutputSpec,
                                          TensorArgument,
)
from ember.export.serde import load, save
from ember.export.unflatten import InterpreterModule, UnflattenedModule, unflatten

__all__ = ["CompiledProgram", "Dim", "ExportGraphSignature", "ExportedProgram", "InputKind",
           "InputSpec", "InterpreterModule", "ModuleCallEntry", "ModuleCallSignature",
           "OutputKind", "OutputSpec", "ShapesCollection", "TensorArgument", "UnflattenedModule",
           "compile_program", "dims", "draft_export", "export", "load", "save", "unflatten"]

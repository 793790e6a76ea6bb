"""``ember.onnx``: importable so scripts that import it run; ONNX export does not exist in ember
yet, so ``export`` raises ``EmberNotImplementedError`` (a ``NotImplementedError``).  To ship a
model, use ``ember.export`` and AOT packages (docs/export.md)."""

from __future__ import annotations

from typing import Any

from ember.errors import EmberNotImplementedError


def export(model: Any, args: Any = (), f: Any = None, *posargs: Any, **kwargs: Any) -> Any:
    """Raises ``EmberNotImplementedError``: ember cannot write ONNX files."""
    raise EmberNotImplementedError("[onnx.export] ONNX export is not supported by ember; use "
                                   "ember.export (an ExportedProgram) or an AOT package instead")


def is_in_onnx_export() -> bool:
    """False: ember never runs an ONNX export."""
    return False


__all__ = ["export", "is_in_onnx_export"]

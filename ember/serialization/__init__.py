"""Saving and loading: ``save``/``load`` (PyTorch's zip checkpoint format by default, ember's
JSON + safetensors archive with ``format="ember"``), the safetensors format, and the allowlist
for restricted unpickling."""

from ember.serialization import safetensors
from ember.serialization._archive import load, save
from ember.serialization._errors import SerializationError, UnpicklingError
from ember.serialization._torch_pickle import (
    add_safe_globals,
    clear_safe_globals,
    get_safe_globals,
    safe_globals,
)
from ember.serialization._zipcheck import ArchiveLimits, archive_limits

__all__ = ["save", "load", "SerializationError", "UnpicklingError", "add_safe_globals",
           "get_safe_globals", "clear_safe_globals", "safe_globals", "safetensors",
           "archive_limits", "ArchiveLimits"]

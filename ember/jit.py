"""``ember.jit``: PyTorch's TorchScript entry points, for scripts that call them.

ember has no TorchScript.  ``script`` and ``trace`` return the module or function unchanged
(warning once that it runs as ordinary Python; ``ember.compile`` is ember's compiler), the
decorators (``ignore``, ``unused``, ``export``, ``script_method``) return what they decorate, and
``is_scripting()``/``is_tracing()`` are False.  ``save``/``load`` of TorchScript archives are
not supported.

>>> model = ember.jit.script(model)   # warns once; model is returned as is
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Final, TypeVar

from ember.errors import EmberNotImplementedError

_T = TypeVar("_T")
_warned = [False]


def _warn_once(what: str) -> None:
    if not _warned[0]:
        _warned[0] = True
        warnings.warn(f"ember.jit.{what}: ember has no TorchScript; the module or function is "
                      "returned unchanged and runs as Python (use ember.compile to compile it)",
                      UserWarning, stacklevel=3)


def script(obj: _T, optimize: Any = None, _frames_up: int = 0, _rcb: Any = None,
           example_inputs: Any = None) -> _T:
    """Return ``obj`` unchanged (warns once: ember has no TorchScript)."""
    _warn_once("script")
    return obj


def trace(func: _T, example_inputs: Any = None, optimize: Any = None, check_trace: bool = True,
          check_inputs: Any = None, check_tolerance: float = 1e-05, strict: bool = True,
          _force_outplace: bool = False, _module_class: Any = None,
          _compilation_unit: Any = None, example_kwarg_inputs: Any = None,
          _store_inputs: bool = True) -> _T:
    """Return ``func`` unchanged (warns once: ember has no TorchScript)."""
    _warn_once("trace")
    return func


def trace_module(mod: _T, inputs: Any = None, *args: Any, **kwargs: Any) -> _T:
    _warn_once("trace_module")
    return mod


def ignore(drop: Any = False, **kwargs: Any) -> Any:
    """``@ember.jit.ignore`` or ``@ember.jit.ignore(drop=True)``: returns the function."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn: Callable) -> Callable:
    return fn


def export(fn: Callable) -> Callable:
    return fn


def script_method(fn: Callable) -> Callable:
    return fn


def script_if_tracing(fn: Callable) -> Callable:
    return fn


def interface(obj: _T) -> _T:
    return obj


def is_scripting() -> bool:
    """False: ember never runs TorchScript."""
    return False


def is_tracing() -> bool:
    """False: ``ember.jit.trace`` does not trace."""
    return False


def annotate(the_type: Any, the_value: _T) -> _T:
    return the_value


def freeze(mod: _T, preserved_attrs: Any = None, optimize_numerics: bool = True) -> _T:
    _warn_once("freeze")
    return mod


def optimize_for_inference(mod: _T, other_methods: Any = None) -> _T:
    _warn_once("optimize_for_inference")
    return mod


def _unsupported(what: str) -> Any:
    raise EmberNotImplementedError(f"[jit.{what}] ember has no TorchScript: TorchScript archives "
                                   "cannot be saved or loaded (use ember.save / ember.export)")


def save(m: Any, f: Any, _extra_files: Any = None) -> None:
    _unsupported("save")


def load(f: Any, map_location: Any = None, _extra_files: Any = None,
         _restore_shapes: bool = False) -> Any:
    return _unsupported("load")


class ScriptModule:
    """Placeholder base so ``isinstance(m, ember.jit.ScriptModule)`` is False for every
    module (nothing is ever scripted)."""


class ScriptFunction:
    """Placeholder: nothing is ever a ``ScriptFunction`` in ember."""


__all__ = ["Final", "ScriptFunction", "ScriptModule", "annotate", "export", "freeze", "ignore",
           "interface", "is_scripting", "is_tracing", "load",
           "optimize_for_inference", "save",
           "script", "script_if_tracing", "script_method", "trace", "trace_module", "unused"]

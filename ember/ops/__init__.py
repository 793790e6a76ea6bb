"""The op registry and every OpDef: importing this package imports each op module, which
registers its OpDefs."""

import importlib as _importlib
import pkgutil as _pkgutil

from ember.ops.registry import OPS, REGISTRY, OpDef, bind, register

for _m in sorted(_pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _m.name.startswith("_") and _m.name != "registry":
        _importlib.import_module(f"{__name__}.{_m.name}")

__all__ = ["OPS", "REGISTRY", "OpDef", "bind", "register"]

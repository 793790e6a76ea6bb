"""The frontend: public functions that broadcast, promote and fill defaults, then bind
registry primitives.  Importing this package imports every module, attaching the Tensor
methods; each module's ``__all__`` lists what ``ember`` re-exports."""

import importlib as _importlib
import pkgutil as _pkgutil

MODULES = []
for _m in sorted(_pkgutil.iter_modules(__path__), key=lambda m: m.name):
    MODULES.append(_importlib.import_module(f"{__name__}.{_m.name}"))

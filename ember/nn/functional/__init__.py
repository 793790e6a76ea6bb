"""``ember.nn.functional``: each submodule's ``__all__`` is re-exported here."""

import importlib as _importlib
import pkgutil as _pkgutil

for _m in sorted(_pkgutil.iter_modules(__path__), key=lambda m: m.name):
    _mod = _importlib.import_module(f"{__name__}.{_m.name}")
    for _name in getattr(_mod, "__all__", ()):
        globals()[_name] = getattr(_mod, _name)

"""The op registry and every OpDef: importing this package imports each op module, which
registers its OpDefs."""

import importlib as _importlib
import pkgutil as _pkgutil

from ember.ops.registry import OPS, REGISTRY, OpDef, bind, register

for _m in sorted(_pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _m.name.startswith("_") and _m.name != "registry":
        _importlib.import_module(f"{__name__}.{_m.name}")

# custom ops (ember.library) register here: "ns::name" -> the callable op
PACKETS: dict = {}


class _Namespace:
    """``ember.ops.<ns>``: the custom ops of namespace ``ns`` as attributes."""

    def __init__(self, ns: str) -> None:
        self._ns = ns

    def __getattr__(self, name: str):  # noqa: ANN204
        try:
            return PACKETS[f"{self._ns}::{name}"]
        except KeyError:
            raise AttributeError(f"'_OpNamespace' '{self._ns}' object has no attribute "
                                 f"'{name}'") from None

    def __repr__(self) -> str:
        return f"<ember.ops.{self._ns}>"


def __getattr__(name: str) -> _Namespace:
    if name.startswith("__") or not any(k.startswith(name + "::") for k in PACKETS):
        raise AttributeError(f"module 'ember.ops' has no attribute {name!r}")
    # kept as a module attribute: ``ember.ops.ns.op(...)`` in a loop then costs two plain
    # lookups, not a scan of every custom op (ops are never unregistered)
    ns = globals()[name] = _Namespace(name)
    return ns


__all__ = ["OPS", "REGISTRY", "OpDef", "bind", "register"]

"""The op registry and every OpDef: importing this package imports each op module, which
registers its OpDefs."""

import importlib as _importlib
import pkgutil as _pkgutil

from ember.ops.registry import OPS, REGISTRY, OpDef, bind, register

for _m in sorted(_pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _m.name.startswith("_") and _m.name != "registry":
        _importlib.import_module(f"{__name__}.{_m.name}")

class _Packets(dict):
    """``"ns::name"`` -> the custom op (``ember.library`` registers here).  Setting or deleting
    an entry keeps the namespace objects' attributes in step, so ``ember.ops.ns.name`` is two
    plain attribute lookups (an extension op's call overhead is a few microseconds)."""

    def __setitem__(self, key: str, value: object) -> None:
        super().__setitem__(key, value)
        ns, _, name = key.partition("::")
        obj = _NAMESPACES.get(ns)
        if obj is not None:
            obj.__dict__[name] = value

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        ns, _, name = key.partition("::")
        obj = _NAMESPACES.get(ns)
        if obj is not None:
            obj.__dict__.pop(name, None)
            if not any(k.startswith(ns + "::") for k in self):
                del _NAMESPACES[ns]
                globals().pop(ns, None)

    def pop(self, key: str, *default: object) -> object:
        if key in self:
            value = self[key]
            del self[key]
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def clear(self) -> None:
        for key in list(self):
            del self[key]


PACKETS: dict = _Packets()
_NAMESPACES: dict = {}


class _Namespace:
    """``ember.ops.<ns>``: the custom ops of namespace ``ns`` as attributes (each kept in the
    instance once found: ``ember.ops.ns.op`` is a plain attribute read after the first)."""

    def __init__(self, ns: str) -> None:
        self._ns = ns

    def __getattr__(self, name: str):  # noqa: ANN204
        try:
            op = PACKETS[f"{self._ns}::{name}"]
        except KeyError:
            raise AttributeError(f"'_OpNamespace' '{self._ns}' object has no attribute "
                                 f"'{name}'") from None
        self.__dict__[name] = op  # later lookups are plain (PACKETS keeps it in step)
        return op

    def __repr__(self) -> str:
        return f"<ember.ops.{self._ns}>"


def __getattr__(name: str) -> _Namespace:
    ns = _NAMESPACES.get(name)
    if ns is not None:
        return ns
    if name.startswith("__") or not any(k.startswith(name + "::") for k in PACKETS):
        raise AttributeError(f"module 'ember.ops' has no attribute {name!r}")
    # kept as a module attribute (PACKETS drops it with the namespace's last op)
    ns = globals()[name] = _NAMESPACES[name] = _Namespace(name)
    return ns


__all__ = ["OPS", "REGISTRY", "OpDef", "bind", "register"]

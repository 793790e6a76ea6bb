"""The op registry and every OpDef: importing this package imports each op module, which
registers its OpDefs."""

import importlib as _importlib
import pkgutil as _pkgutil

from ember.ops.registry import OPS, REGISTRY, OpDef, bind, register

for _m in sorted(_pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _m.name.startswith("_") and _m.name != "registry":
        _importlib.import_module(f"{__name__}.{_m.name}")

_NAMESPACES: dict = {}  # name -> _Namespace (made once: ``ember.ops.ns.op`` is a hot path)


class _Packets(dict):
    """``PACKETS``: a dict that drops a namespace's cached attribute when its op changes."""

    def __setitem__(self, key: str, value: object) -> None:
        super().__setitem__(key, value)
        _forget(key)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        _forget(key)

    def pop(self, key: str, *default: object) -> object:
        _forget(key)
        return super().pop(key, *default)

    def clear(self) -> None:
        for key in list(self):
            _forget(key)
        super().clear()


def _forget(key: str) -> None:
    ns, _, name = key.partition("::")
    if ns in _NAMESPACES:
        _NAMESPACES[ns].__dict__.pop(name, None)


# custom ops (ember.library) register here: "ns::name" -> the callable op
PACKETS: dict = _Packets()


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
        self.__dict__[name] = op
        return op

    def __repr__(self) -> str:
        return f"<ember.ops.{self._ns}>"


def __getattr__(name: str) -> _Namespace:
    ns = _NAMESPACES.get(name)
    if ns is not None:
        return ns
    if name.startswith("__") or not any(k.startswith(name + "::") for k in PACKETS):
        raise AttributeError(f"module 'ember.ops' has no attribute {name!r}")
    ns = _NAMESPACES[name] = _Namespace(name)
    globals()[name] = ns  # later reads are plain module attributes (no __getattr__)
    return ns


__all__ = ["OPS", "REGISTRY", "OpDef", "bind", "register"]

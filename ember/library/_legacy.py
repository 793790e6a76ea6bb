"""The older registration style: ``Library(ns, "DEF")``, ``define(schema)``, ``impl(...)``."""

from __future__ import annotations

from typing import Any, Callable

from ember.errors import EmberRuntimeError
from ember.library._custom_op import PACKETS, CustomOpDef
from ember.library._schema import parse_schema

_KINDS = ("DEF", "IMPL", "FRAGMENT")


def _unimplemented(qualname: str) -> Callable:
    def raise_(*a: Any, **k: Any) -> Any:
        raise NotImplementedError(
            f"Could not run '{qualname}' with arguments from the 'CPU' backend. '{qualname}' "
            "is only available for these backends: [Meta]. (define() was called without "
            "impl())")
    return raise_


def _lookup(qualname: str, where: str) -> CustomOpDef:
    op = PACKETS.get(qualname)
    if op is None:
        raise EmberRuntimeError(f"[{where}] no op named {qualname!r}; define it first with "
                                "Library.define or ember.library.define")
    return op


class Library:
    """A namespace of ops (PyTorch's ``torch.library.Library``).

    >>> lib = Library("mylib", "FRAGMENT")
    >>> lib.define("scale(Tensor x, float c) -> Tensor")     # doctest: +SKIP
    >>> lib.impl("scale", lambda x, c: x * c, "CPU")          # doctest: +SKIP
    """

    def __init__(self, ns: str, kind: str, dispatch_key: str = "") -> None:
        if kind not in _KINDS:
            raise ValueError(f"Unsupported kind: {kind}")
        if not ns.isidentifier():
            raise ValueError(f"[Library] namespace must be an identifier, got {ns!r}")
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key
        self._defined: list[str] = []

    def __repr__(self) -> str:
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})>"

    def define(self, schema: str, alias_analysis: str = "", *, tags: Any = ()) -> str:
        """Define an op from a schema string ``"name(Tensor x) -> Tensor"``; returns its name."""
        if self.kind == "IMPL":
            raise RuntimeError("define() is not allowed on an IMPL library")
        name, sch = parse_schema(schema, "Library.define")
        if not name.isidentifier():
            raise RuntimeError(f"[Library.define] expected 'name(args) -> returns', got "
                               f"{schema!r}")
        qual = f"{self.ns}::{name}"
        if self.kind == "DEF" and qual in PACKETS and qual in self._defined:
            raise RuntimeError(f"Tried to register an operator ({qual}{sch}) with the same "
                               "name and overload name multiple times. Each overload's schema "
                               "should only be registered with a single call to def().")
        fn = _unimplemented(qual)
        fn.__name__ = name
        CustomOpDef(self.ns, name, sch, fn, tuple(a.name for a in sch.args if a.mutable))
        self._defined.append(qual)
        return name

    def impl(self, op_name: Any, fn: Callable, dispatch_key: str = "", *,
             with_keyset: bool = False, allow_override: bool = True) -> None:
        """Register ``fn`` for ``op_name`` under ``dispatch_key`` ("CPU", "Meta",
        "CompositeExplicitAutograd", ...)."""
        name = op_name if isinstance(op_name, str) else op_name._name
        qual = name if "::" in name else f"{self.ns}::{name.split('.')[0]}"
        op = _lookup(qual, "Library.impl")
        key = dispatch_key or self.dispatch_key or "CompositeImplicitAutograd"
        if key == "Meta":
            op.register_fake(fn)
        elif key in ("CPU", "CompositeExplicitAutograd", "CompositeImplicitAutograd", "Default"):
            if key != "CompositeImplicitAutograd":
                fn._ember_legacy = True  # type: ignore[attr-defined]
            op._implicit = key in ("CompositeImplicitAutograd", "Default")
            op._kernels[None] = fn
            op._kernels["cpu"] = fn
            op._init_fn = fn
            op._set_composite(key.startswith("Composite"))
        else:
            raise NotImplementedError(f"[Library.impl] dispatch key {key!r} is not supported "
                                      "by ember (CPU, Meta, CompositeExplicitAutograd, "
                                      "CompositeImplicitAutograd)")


def define(qualname: str, schema: str, *, lib: Library | None = None, tags: Any = ()) -> None:
    """``define("mylib::op", "(Tensor x) -> Tensor")``: define an op without a kernel."""
    ns, _, name = qualname.partition("::")
    (lib or Library(ns, "FRAGMENT")).define(name + schema)


def impl(qualname: Any, types: Any, func: Callable | None = None, *,
         lib: Library | None = None) -> Any:
    """Register a kernel for an op ``types`` (``"cpu"`` or a dispatch key); a decorator when
    ``func`` is omitted."""
    qual = qualname if isinstance(qualname, str) else qualname._qualname
    key = types if isinstance(types, str) else next(iter(types))
    key = {"cpu": "CPU", "meta": "Meta"}.get(key, key)

    def reg(f: Callable) -> Callable:
        ns, _, name = qual.partition("::")
        (lib or Library(ns, "FRAGMENT")).impl(name, f, key)
        return f
    return reg if func is None else reg(func)


__all__ = ["Library", "define", "impl"]

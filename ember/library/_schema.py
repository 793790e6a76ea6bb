"""Schemas of custom ops: inferred from type hints (``infer_schema``) or parsed from a string
(``Library.define``), in PyTorch's schema language (``(Tensor x, SymInt n=2) -> Tensor``)."""

from __future__ import annotations

import inspect
import numbers
import typing
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ember import dtypes as _dt
from ember.device import device as _device
from ember.tensor import Tensor

# Python annotation -> schema type (PyTorch's table, torch/_library/infer_schema.py)
_BASE: list[tuple[Any, str]] = [
    (Tensor, "Tensor"), (int, "SymInt"), (float, "float"), (bool, "bool"), (str, "str"),
    (numbers.Number, "Scalar"), (_dt.dtype, "ScalarType"), (_device, "Device"),
]
_RETURNS: dict[Any, str] = {Tensor: "Tensor", int: "SymInt", float: "float", bool: "bool",
                            numbers.Number: "Scalar"}


@dataclass(frozen=True)
class Arg:
    """One argument of a schema."""

    name: str
    type: str                  # "Tensor", "Tensor?", "SymInt[]", ...
    default: Any = inspect.Parameter.empty
    kwarg_only: bool = False
    alias: str = ""            # "a1!" for a mutated tensor

    @property
    def is_tensor(self) -> bool:
        return self.type.startswith("Tensor")

    @property
    def is_tensor_list(self) -> bool:
        """``Tensor[]``, ``Tensor?[]`` (elements may be None) or ``Tensor[]?``."""
        return self.type.startswith(("Tensor[]", "Tensor?[]"))

    @property
    def mutable(self) -> bool:
        return self.alias.endswith("!")

    def __str__(self) -> str:
        t = self.type
        if self.alias:
            t = t.replace("Tensor", f"Tensor({self.alias})", 1)
        s = f"{t} {self.name}"
        if self.default is not inspect.Parameter.empty:
            s += "=" + _default_str(self.default)
        return s


@dataclass(frozen=True)
class Schema:
    """A parsed schema: arguments and return types."""

    args: tuple[Arg, ...]
    returns: tuple[str, ...]
    returns_tuple: bool = False   # "-> (Tensor, Tensor)"; a single "-> Tensor" is not

    def __str__(self) -> str:
        parts: list[str] = []
        star = False
        for a in self.args:
            if a.kwarg_only and not star:
                parts.append("*")
                star = True
            parts.append(str(a))
        if len(self.returns) == 1 and not self.returns_tuple:
            rets = self.returns[0]
        else:
            rets = "(" + ", ".join(self.returns) + ")"
        return f"({', '.join(parts)}) -> {rets}"


def _default_str(v: Any) -> str:
    if v is None:
        return "None"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, _dt.dtype):
        return str(v).split(".")[-1]
    if isinstance(v, _device):
        return f'"{v}"'
    return repr(v)


# (schema type, "T[]" from list[T], "T?[]" from list[Optional[T]], "T[]?" from
# Optional[list[T]]): PyTorch's table (torch/_library/infer_schema.py)
_FORMS = {"Tensor": (True, True, False), "SymInt": (True, False, True),
          "float": (True, False, True), "bool": (True, False, True), "str": (False,) * 3,
          "Scalar": (True, False, False), "ScalarType": (False,) * 3, "Device": (False,) * 3}


def _base(ann: Any) -> str | None:
    for py, name in _BASE:
        if ann is py:
            return name
    return None


def _optional_of(ann: Any) -> Any:
    """``T`` for ``Optional[T]``, else None."""
    if typing.get_origin(ann) is typing.Union or type(ann).__name__ == "UnionType":
        targs = typing.get_args(ann)
        rest = [a for a in targs if a is not type(None)]
        if len(rest) == 1 and len(targs) == 2:
            return rest[0]
    return None


def _sequence_of(ann: Any) -> Any:
    """``T`` for ``list[T]``/``Sequence[T]`` (typing's or the builtin's), else None."""
    origin = typing.get_origin(ann)
    if origin is list or str(origin) == "<class 'collections.abc.Sequence'>":
        targs = typing.get_args(ann)
        return targs[0] if len(targs) == 1 else None
    return None


def _type_of(ann: Any, fn_sig: str, pname: str) -> str:
    name = _base(ann)
    if name is not None:
        return name
    inner = _optional_of(ann)
    if inner is not None:
        name = _base(inner)
        if name is not None:
            return name + "?"
        elem = _sequence_of(inner)
        name = _base(elem) if elem is not None else None
        if name is not None and _FORMS[name][2]:
            return name + "[]?"
    elem = _sequence_of(ann)
    if elem is not None:
        name = _base(elem)
        if name is not None and _FORMS[name][0]:
            return name + "[]"
        opt = _optional_of(elem)
        name = _base(opt) if opt is not None else None
        if name is not None and _FORMS[name][1]:
            return name + "?[]"
    raise ValueError(f"infer_schema(func): Parameter {pname} has unsupported type {ann}. "
                     f"Got func with signature {fn_sig})")


def _return_type(ann: Any, fn_sig: str) -> tuple[tuple[str, ...], bool]:
    if ann is None or ann is type(None):
        return (), True
    origin = typing.get_origin(ann)
    if origin is tuple:
        return tuple(_return_type(a, fn_sig)[0][0] for a in typing.get_args(ann)), True
    if origin is list and typing.get_args(ann) == (Tensor,):
        return ("Tensor[]",), False
    if ann in _RETURNS:
        return (_RETURNS[ann],), False
    raise ValueError(f"infer_schema(func): Return has unsupported type {ann}. The valid types "
                     f"are: Tensor, list[Tensor], int, float, bool, Number. Got func with "
                     f"signature {fn_sig})")


def infer_schema(prototype_function: Callable, /, *, mutates_args: Any,
                 op_name: str | None = None, tags: Any = ()) -> str:
    """The schema string of ``prototype_function`` from its type hints (PyTorch's rules:
    ``int`` is ``SymInt``, mutated tensors get alias annotations ``Tensor(a1!)``).

    >>> def f(x: Tensor, n: int = 2) -> Tensor: ...
    >>> infer_schema(f, mutates_args=())
    '(Tensor x, SymInt n=2) -> Tensor'
    """
    return str(infer(prototype_function, mutates_args, op_name))


def infer(fn: Callable, mutates_args: Any, op_name: str | None = None) -> Schema:
    """``infer_schema`` as a parsed ``Schema``."""
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: use the raw annotations
        hints = {}
    fn_sig = str(sig).replace("ember.tensor.Tensor", "ember.Tensor")
    unknown = mutates_args == "unknown"
    if not unknown:
        if isinstance(mutates_args, str) or not isinstance(mutates_args, Iterable):
            raise ValueError("mutates_args must be an iterable of argument names or 'unknown'")
        names = set(mutates_args)
        missing = names - set(sig.parameters)
        if missing:
            raise ValueError(
                f"infer_schema(func): {missing} in mutates_args were not found in the custom "
                "op's signature. mutates_args should contain the names of all args that the "
                "custom op mutates, or just the string 'unknown' if you don't know. Got func "
                f"with signature {fn_sig})")
    args = []
    for i, (pname, p) in enumerate(sig.parameters.items()):
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise ValueError("infer_schema(func): We do not support positional-only args, "
                             f"varargs, or varkwargs. Got func with signature {fn_sig})")
        if p.annotation is p.empty:
            raise ValueError(f"infer_schema(func): Parameter {pname} must have a type "
                             f"annotation. Got func with signature {fn_sig})")
        t = _type_of(hints.get(pname, p.annotation), fn_sig, pname)
        d = p.default
        if d is not p.empty and not (d is None or isinstance(d, (int, float, bool, str))
                                     or isinstance(d, (_dt.dtype, _device))):
            raise ValueError(f"infer_schema(func): Parameter {pname} has an unsupported default "
                             f"value type {type(d)}. Please file an issue on GitHub so we can "
                             f"prioritize this. Got func with signature {fn_sig})")
        alias = ""
        if t.startswith("Tensor") and (unknown or pname in mutates_args):
            alias = f"a{i}!"
        elif not t.startswith("Tensor") and not unknown and pname in mutates_args:
            raise ValueError(f"infer_schema(func): only Tensor arguments can be mutated; "
                             f"{pname} is {t}. Got func with signature {fn_sig})")
        args.append(Arg(pname, t, d, p.kind == p.KEYWORD_ONLY, alias))
    ret_ann = hints.get("return", sig.return_annotation)
    if ret_ann is inspect.Signature.empty:
        raise ValueError(f"infer_schema(func): No return type annotation was provided. Please "
                         f"add one. Got func with signature {fn_sig})")
    rets, as_tuple = _return_type(ret_ann, fn_sig)
    return Schema(tuple(args), rets, as_tuple)


# ------------------------------------------------------------------------ parsing a string
def _parse_default(s: str) -> Any:
    if s == "None":
        return None
    if s in ("True", "False"):
        return s == "True"
    if s.startswith('"') or s.startswith("'"):
        return s[1:-1]
    if s in _dt.__dict__ and isinstance(getattr(_dt, s), _dt.dtype):
        return getattr(_dt, s)
    try:
        return int(s)
    except ValueError:
        return float(s)


def parse_schema(text: str, op: str) -> tuple[str, Schema]:
    """``"name(Tensor x, *, float c=1.0) -> Tensor"`` as ``(name, Schema)``; the name may be
    empty when ``text`` starts with ``(``."""
    try:
        head, ret = text.rsplit("->", 1)
        name, _, params = head.strip().partition("(")
        params = params.strip()
        assert params.endswith(")")
        params = params[:-1]
        args = []
        kw = False
        for item in (p.strip() for p in params.split(",") if p.strip()):
            if item == "*":
                kw = True
                continue
            decl, _, default = item.partition("=")
            typ, pname = decl.rsplit(None, 1)
            alias = ""
            if "(" in typ:
                base, _, rest = typ.partition("(")
                alias, _, after = rest.partition(")")
                typ = base + after
            args.append(Arg(pname, typ, _parse_default(default.strip()) if default else
                            inspect.Parameter.empty, kw, alias))
        ret = ret.strip()
        if ret.startswith("("):
            rets = tuple(r.strip() for r in ret[1:-1].split(",") if r.strip())
            return name.strip(), Schema(tuple(args), rets, True)
        return name.strip(), Schema(tuple(args), (ret,), False)
    except (ValueError, AssertionError):
        raise RuntimeError(f"[{op}] could not parse the schema {text!r}; expected "
                           "'name(Tensor x, float c) -> Tensor'") from None


__all__ = ["Arg", "Schema", "infer", "infer_schema", "parse_schema"]

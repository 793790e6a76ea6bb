"""PyTorch's Python signatures as an oracle, and the comparison used by test_signatures.py.

Where ``inspect.signature`` works on torch's function (Python-level code) it is the oracle.
torch's C++ bindings have none; their Python signatures (with every overload) are in the type
stubs torch ships (``torch/_C/_VariableFunctions.pyi`` for ``torch.*``, ``TensorBase`` in
``torch/_C/__init__.pyi`` for Tensor methods, ``torch/_C/_nn.pyi``), and, for the rest
(``torch.linalg``, ``torch.special``), in the first line of the docstring
(``linalg.solve(A, B, *, left=True, out=None) -> Tensor``).

Compatibility rule: ember accepts every call that torch's overloads accept.  Positional
parameter i of ember has one of the names torch's overloads give position i (or ember takes
``*args`` there); every keyword-only name of an overload is accepted by name (or ember takes
``**kwargs``); ember requires no parameter that torch leaves optional; where ember and torch
both give a default to the same name, they agree.  ``out=`` is not compared (ember takes it
only in creation functions; docs/ops.md).
"""

from __future__ import annotations

import ast
import inspect
import re
from functools import cache
from pathlib import Path
from typing import Any

P = inspect.Parameter
SKIP_PARAMS = {"out"}
_PY_KEYWORDS = {"from", "lambda", "in", "is"}  # torch names a Python caller cannot pass by name


class Param:
    """One parameter of an oracle signature: name, kind ('pos', 'kw', 'varpos', 'varkw'),
    whether it has a default, and the default's source text."""

    def __init__(self, name: str, kind: str, has_default: bool, default: str | None) -> None:
        self.name, self.kind, self.has_default, self.default = name, kind, has_default, default

    def __repr__(self) -> str:
        d = f"={self.default}" if self.has_default else ""
        return f"{'*' if self.kind == 'kw' else ''}{self.name}{d}"


def _from_ast(fn: ast.FunctionDef | ast.AsyncFunctionDef, drop_self: bool) -> list[Param]:
    a = fn.args
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    out = [Param(p.arg, "pos", d is not None, ast.unparse(d) if d is not None else None)
           for p, d in zip(pos, defaults)]
    if drop_self and out and out[0].name == "self":
        out = out[1:]
    if a.vararg:
        out.append(Param(a.vararg.arg, "varpos", True, None))
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append(Param(p.arg, "kw", d is not None, ast.unparse(d) if d is not None else None))
    if a.kwarg:
        out.append(Param(a.kwarg.arg, "varkw", True, None))
    return out


def from_inspect(sig: inspect.Signature, drop_self: bool = False) -> list[Param]:
    kinds = {P.POSITIONAL_ONLY: "pos", P.POSITIONAL_OR_KEYWORD: "pos", P.VAR_POSITIONAL: "varpos",
             P.KEYWORD_ONLY: "kw", P.VAR_KEYWORD: "varkw"}
    out = []
    for p in sig.parameters.values():
        has = p.default is not P.empty or p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD)
        out.append(Param(p.name, kinds[p.kind], has,
                         repr(p.default) if p.default is not P.empty else None))
    if drop_self and out and out[0].kind == "pos":
        out = out[1:]  # the tensor itself, whatever ember's function calls it
    return out


@cache
def _stubs(torch_dir: str) -> dict[str, dict[str, list[list[Param]]]]:
    """{'torch': {name: overloads}, 'Tensor': {...}, 'nn': {...}} from torch's .pyi files."""
    base = Path(torch_dir) / "_C"
    out: dict[str, dict[str, list[list[Param]]]] = {"torch": {}, "Tensor": {}, "nn": {}}

    def add(table: dict, fn: Any, drop_self: bool) -> None:
        table.setdefault(fn.name, []).append(_from_ast(fn, drop_self))

    for fn in ast.parse((base / "_VariableFunctions.pyi").read_text()).body:
        if isinstance(fn, ast.FunctionDef):
            add(out["torch"], fn, False)
    for fn in ast.parse((base / "_nn.pyi").read_text()).body:
        if isinstance(fn, ast.FunctionDef):
            add(out["nn"], fn, False)
    for node in ast.parse((base / "__init__.pyi").read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == "TensorBase":
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef):
                    add(out["Tensor"], fn, True)
    return out


_DOC_SIG = re.compile(r"^(?:\.\. function:: )?([\w.]+)\((.*)\)\s*->", re.M)


def _from_doc(doc: str | None, name: str) -> list[list[Param]]:
    """The signatures a docstring documents: its first line and every ``.. function::`` line
    (``sum(input, dim, keepdim=False, *, dtype=None) -> Tensor``)."""
    out = []
    for m in _DOC_SIG.finditer(doc or ""):
        if m.group(1).split(".")[-1] != name:
            continue
        args = m.group(2).replace("\\*", "*")
        try:
            fn = ast.parse(f"def f({args}): pass").body[0]
        except SyntaxError:
            continue
        out.append(_from_ast(fn, False))
    return out


# torch functions bound by hand in C++ (no aten schema of their own): their docstrings are right
_MANUAL = {"tensor", "as_tensor", "asarray", "from_numpy", "sparse_coo_tensor", "frombuffer"}


def _from_schema(torch: Any, ns: str, name: str, method: bool) -> list[list[Param]]:
    """Overloads from the aten schemas the Python bindings are generated from (``self`` is
    ``input`` in functions; ``out`` variants, Dimname overloads and TorchScript's scalar
    overloads are left out)."""
    prefix = {"linalg": "linalg_", "special": "special_"}.get(ns, "")
    schemas = torch._C._jit_get_schemas_for_operator(f"aten::{prefix}{name}")
    has_tensor_overload = any("Scalar" not in sch.overload_name for sch in schemas)
    out = []
    for sch in schemas:
        if not any("Tensor" in str(r.type) for r in sch.returns):
            continue  # TorchScript's int/float/str overloads
        if any(a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
               for a in sch.arguments):
            continue  # out= variants (max.dim_max's max=, max_values=, ...)
        if any("Dimname" in str(a.type) or a.name == "out_dtype" for a in sch.arguments):
            continue  # named-tensor overloads; out_dtype products (not bound for Python here)
        if "Scalar" in sch.overload_name and has_tensor_overload:
            continue  # Python binds the Tensor overload, which takes scalars too
        params = []
        for a in sch.arguments:
            if a.name == "out":
                continue
            has = a.has_default_value()
            params.append(Param("input" if a.name == "self" else a.name,
                                "kw" if a.kwarg_only else "pos", has,
                                repr(a.default_value) if has else None))
        if method:
            if not params or params[0].name != "input":
                continue
            params = params[1:]
        out.append(params)
    return out


def torch_overloads(torch: Any, ns: str, name: str, obj: Any) -> list[list[Param]]:
    """Every Python signature torch gives ``ns.name`` (ns: 'torch', 'F', 'linalg', 'special',
    'Tensor'); [] when none can be found."""
    method = ns == "Tensor"
    try:
        return [from_inspect(inspect.signature(obj), drop_self=method)]
    except (TypeError, ValueError):
        pass
    if name not in _MANUAL:
        found = _from_schema(torch, ns, name, method)
        if found:
            return found
    documented = _from_doc(getattr(obj, "__doc__", None), name)
    if documented:
        return documented  # a method's docstring leaves out self
    stubs = _stubs(str(Path(torch.__file__).parent))
    if method:
        return stubs["Tensor"].get(name, [])
    table = stubs["torch"] if name in stubs["torch"] else stubs["nn"]
    # overloads whose first parameter is 'self' are PyTorch's deprecated spellings
    return [ov for ov in table.get(name, []) if not (ov and ov[0].name == "self")]


def problems(ember_params: list[Param], overloads: list[list[Param]]) -> list[str]:
    """Why ember's signature does not accept every call torch's overloads accept ([] if it
    does)."""
    e_pos = [p for p in ember_params if p.kind == "pos"]
    e_names = {p.name: p for p in ember_params if p.kind in ("pos", "kw")}
    e_varpos = any(p.kind == "varpos" for p in ember_params)
    e_varkw = any(p.kind == "varkw" for p in ember_params)
    out = []
    allowed_at: dict[int, set[str]] = {}
    t_pos_max, optional_pos = 0, set()
    for ov in overloads:
        pos = [p for p in ov if p.kind == "pos" and p.name not in SKIP_PARAMS]
        t_pos_max = max(t_pos_max, len(pos) + (999 if any(p.kind == "varpos" for p in ov) else 0))
        for i, p in enumerate(pos):
            allowed_at.setdefault(i, set()).add(p.name)
            if p.has_default:
                optional_pos.add(i)
    for i, names in sorted(allowed_at.items()):
        if i < len(e_pos):
            if e_pos[i].name not in names and not names & _PY_KEYWORDS:
                out.append(f"position {i} is '{e_pos[i].name}', torch: {sorted(names)}")
        elif not e_varpos:
            out.append(f"no positional parameter {i} ({sorted(names)})")
    for i, p in enumerate(e_pos):
        if not p.has_default and (i in optional_pos or i >= t_pos_max):
            out.append(f"'{p.name}' is required, torch: optional or absent")
    defaults: dict[str, set[str]] = {}
    for ov in overloads:
        for p in ov:
            if p.name in SKIP_PARAMS or p.kind in ("varpos", "varkw"):
                continue
            if p.kind == "kw" and p.name not in e_names and not e_varkw:
                out.append(f"keyword '{p.name}' is not accepted")
            if p.has_default and p.default is not None and p.default.strip() != "...":
                defaults.setdefault(p.name, set()).add(_norm(p.default))
    for name, ds in sorted(defaults.items()):
        ep = e_names.get(name)
        if ep is not None and ep.has_default and _norm(ep.default) not in ds:
            out.append(f"default {name}={ep.default}, torch: {sorted(ds)}")
    return sorted(set(out))


def _norm(src: str | None) -> str:
    """Defaults compared as values where they are literals ('1' == '1.0' is not equal:
    int vs float matters to PyTorch only for dtype inference, so both are read as numbers)."""
    if src is None:
        return "None"
    s = src.strip()
    if s in ("...",):
        return "..."
    try:
        v = ast.literal_eval(s)
    except (ValueError, SyntaxError):
        return s.replace("torch.", "").replace("ember.", "")
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, (int, float)):
        return repr(float(v))
    if isinstance(v, (list, tuple)):
        if v and len(set(v)) == 1 and isinstance(v[0], (int, float)):
            return repr(float(v[0]))  # stride=(1, 1) is stride=1
        return repr(tuple(v))
    return repr(v)

"""From specs to symbols, and from what tracing learned to errors, range constraints and
runtime guards (how ``Dim``, ``Dim.AUTO`` and ``Dim.DYNAMIC`` decide; docs/export.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ember._dynamo.exc import UserError, UserErrorType
from ember.export.dynamic_shapes import INT_OO, DimSpec, _DerivedDim
from ember.sym import ShapeEnv, SymInt, _sympy, pyexpr

_MARKED = ("You marked {name} as dynamic but your code specialized it to be a constant ({v}). "
           "If you're using mark_dynamic, either remove it or use maybe_mark_dynamic. If you're "
           "using Dim.DYNAMIC, replace it with either Dim.STATIC or Dim.AUTO.")


@dataclass
class Symbols:
    """What ``make_symbols`` made, read again after tracing: each dim's size, the named roots,
    the AUTO/DYNAMIC symbols with their specs and declared ranges, and the violations that were
    clear before tracing (a named dim with a 0/1 example)."""

    env: ShapeEnv
    sizes: dict = field(default_factory=dict)      # id(DimSpec) -> int | SymInt
    named: dict = field(default_factory=dict)      # root name -> _Named
    hinted: list = field(default_factory=list)     # (SymInt, DimSpec) of AUTO/DYNAMIC dims
    declared: dict = field(default_factory=dict)   # their symbol -> (lo, hi) as specified
    early: list = field(default_factory=list)      # violations found before tracing


class _Named:
    """A named root ``Dim`` and its symbol."""

    def __init__(self, dim: Any) -> None:
        self.dim = dim
        self.sym: Any = None        # SymInt, or an int when 0/1 specialized
        self.local = dim.__name__   # L['x'].size()[0] of its first direct use
        self.hint: int | None = None
        self.guard = dim.__name__   # x.size()[0]: the symbol's source in guards
        self.declared: tuple = (2, INT_OO)
        self.direct = False         # some input dim is this Dim itself (not only derived)


def make_symbols(env: ShapeEnv, specs: list, log: Any) -> Symbols:
    """A size per dim (``info.sizes[id(DimSpec)]``: an int or a ``SymInt``): named dims first
    (so a later AUTO dim equal to one is the one substituted), then AUTO/DYNAMIC dims in input
    order."""
    flat = [s for ls in specs for s in ls]
    info = Symbols(env)
    out = info.sizes
    roots: dict[str, _Named] = info.named
    for s in flat:
        if s.kind == "named":
            root = s.dim.root if isinstance(s.dim, _DerivedDim) else s.dim
            r = roots.setdefault(root.__name__, _Named(root))
            if not isinstance(s.dim, _DerivedDim):
                r.direct = True
                if r.hint is None:
                    r.hint, r.local, r.guard = s.hint, s.source, s.guard
    for s in flat:  # roots seen only through derived dims take their hint from one
        if s.kind == "named" and isinstance(s.dim, _DerivedDim):
            r = roots[s.dim.root.__name__]
            if r.hint is None:
                a, b = s.dim.a, s.dim.b
                if (s.hint - b) % a:
                    raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                                    f"Expected input {s.path} = {s.hint} to be of the form "
                                    f"{s.dim.__name__}, where {r.dim.__name__} is an integer")
                r.hint, r.guard = (s.hint - b) // a, r.dim.__name__
    for r in roots.values():
        _root_symbol(info, r, [s for s in flat if s.kind == "named" and _root_of(s) is r.dim])
    for s in flat:
        if s.kind == "static":
            out[id(s)] = s.hint
        elif s.kind == "named":
            r = roots[_root_of(s).__name__]
            v = s.dim.fn(r.sym) if isinstance(s.dim, _DerivedDim) else r.sym
            if _value(v) != s.hint:
                raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                                f"Expected input at {s.path} to be equal to "
                                f"{_value(v)}, but got {s.hint}")
            out[id(s)] = v
        else:
            out[id(s)] = _hint_symbol(info, s, log)
    return info


def _root_of(s: DimSpec) -> Any:
    return s.dim.root if isinstance(s.dim, _DerivedDim) else s.dim


def _value(v: Any) -> int:
    return v.hint() if isinstance(v, SymInt) else int(v)


def _root_symbol(info: Symbols, r: _Named, uses: list) -> None:
    d = r.dim
    if r.hint in (0, 1):
        r.sym = r.hint
        info.early.append((d.__name__, _MARKED.format(name=d.__name__, v=r.hint),
                           f"{d.__name__} = {r.hint}", ""))
        return
    lo, hi = max(2, d.min), d.max
    for s in uses:  # derived dims are sizes too: a*r + b >= 2
        if isinstance(s.dim, _DerivedDim):
            lo = max(lo, math.ceil((2 - s.dim.b) / s.dim.a))
    if not lo <= r.hint <= hi:
        bound = f">= {lo}" if r.hint < lo else f"<= {int(hi)}"
        raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                        f"Expected input at {uses[0].path} to be {bound}, but got "
                        f"{uses[0].hint} (the range of {d!r})")
    r.sym = info.env.create_symbol(r.hint, r.guard, min=lo,
                                   max=None if hi == INT_OO else int(hi))
    r.declared = (lo, hi)


def _hint_symbol(info: Symbols, s: DimSpec, log: Any) -> Any:
    h = s.hint
    if h in (0, 1):
        if s.kind == "dynamic":
            raise ValueError(
                "Found the following conflicts between user-specified ranges and inferred ranges "
                f"from model tracing:\n- Received user-specified dim hint {s.dim.describe()}, "
                f"but export 0/1 specialized due to hint of {h} for dimension {s.path}.")
        log.warning("dimension %s 0/1 specialized; Dim.AUTO was specified along with a sample "
                    "input with hint = %d.", s.path, h)
        return h
    lo = max(2, s.dim.min if s.dim.min is not None else 2)
    hi = s.dim.max
    if not (lo <= h and (hi is None or h <= hi)):
        raise ValueError(
            "Found the following conflicts between user-specified ranges and inferred ranges "
            f"from model tracing:\n- Received user-specified min/max range [{s.dim.min}, "
            f"{s.dim.max}], conflicting with the example input {h} for dimension {s.path}.")
    sym = info.env.create_symbol(h, s.guard, min=lo, max=hi)
    info.hinted.append((sym, s))
    info.declared[sym._expr] = (lo, INT_OO if hi is None else hi)
    return sym


# --------------------------------------------------------------------------- after tracing
def _where(env: ShapeEnv, sym: Any) -> str:
    """`` (from model.py:12)``: the user line of the first guard about ``sym``."""
    for g in env.guards:
        if sym in g.expr.free_symbols:
            return f" (guard from {g.filename}:{g.lineno})"
    return ""


def check_violations(info: Symbols) -> None:
    """Raise ``UserError`` listing every way tracing contradicted a named ``Dim`` or a
    ``Dim.DYNAMIC`` (specialized, tied to another dim, narrowed, or guarded otherwise)."""
    sp = _sympy()
    env = info.env
    found: list = list(info.early)
    named = info.named
    owner = {r.sym._expr: r for r in named.values() if isinstance(r.sym, SymInt)}
    locals_ = {e: r.local for e, r in owner.items()}
    for r in named.values():
        if not isinstance(r.sym, SymInt):
            continue
        x, name = r.sym._expr, r.dim.__name__
        e = env.simplify(x)
        if e.is_Integer:
            found.append((name, _MARKED.format(name=name, v=int(e)), f"{name} = {int(e)}")
                         + (_where(env, x),))
        elif e != x:
            others = [owner[s] for s in e.free_symbols if s in owner]
            if len(others) == len(e.free_symbols):
                rel = pyexpr(e, {o.sym.expr: o.dim.__name__ for o in others})
                if e.is_Symbol:
                    msg = (f"The values of {name} = {r.local} and {others[0].dim.__name__} = "
                           f"{others[0].local} must always be equal.")
                else:
                    msg = (f"The values of {name} = {r.local} must always be related to the "
                           f"values of {', '.join(o.dim.__name__ for o in others)} by "
                           f"{name} = {rel}.")
                found.append((name, msg, f"{name} = {rel}", _where(env, x)))
        else:
            found.extend(_narrowed(info, r, x, locals_))
    for sym, s in info.hinted:
        e = env.simplify(sym._expr)
        if s.kind == "dynamic" and e.is_Integer:
            found.append((s.source, _MARKED.format(name=s.source, v=int(e)), None,
                          _where(env, sym._expr)))
    if not found:
        return
    names = ", ".join(dict.fromkeys(f[0] for f in found))
    lines = [f"Constraints violated ({names})! For more information, run with "
             'TORCH_LOGS="+dynamic".']
    lines += [f"  - {msg}{where}" for _, msg, _, where in found]
    fixes = [fx for _, _, fx, _ in found if fx]
    if fixes:
        lines.append("Suggested fixes:")
        lines += [f"  {ln}" for fx in dict.fromkeys(fixes) for ln in fx.split("\n")]
    lines.append("The error above occurred when calling ember.export.export.")
    del sp
    err = UserError(UserErrorType.CONSTRAINT_VIOLATION, "\n".join(lines))
    err.violations = found  # type: ignore[attr-defined]  # (dim, message, fix, where): draft
    raise err


def _narrowed(info: Symbols, r: _Named, x: Any, locals_: dict) -> list:
    """Violations of a named dim that stayed a free symbol: its range narrowed, or another
    guard (divisibility, ...) restricts it."""
    sp = _sympy()
    env = info.env
    name = r.dim.__name__
    out = []
    lo, hi = r.declared
    for sym, _ in info.hinted:  # ranges declared on dims found equal
        if env.simplify(sym._expr) == x:
            vr0 = info.declared[sym._expr]
            lo, hi = max(lo, vr0[0]), min(hi, vr0[1])
    vr = env.var_to_range[x]
    if vr.lower > lo or vr.upper < hi:
        spec = f"{lo} <= {name}" + ("" if hi == INT_OO else f" <= {int(hi)}")
        new_max = "" if vr.upper == INT_OO else f", max={int(vr.upper)}"
        out.append((name, f"Not all values of {name} = {r.local} in the specified range {spec} "
                    f"satisfy the generated guard {int(vr.lower)} <= {r.local}"
                    + ("" if vr.upper == INT_OO else f" <= {int(vr.upper)}") + ".",
                    f"{name} = Dim('{name}', min={int(vr.lower)}{new_max})", _where(env, x)))
    for g in env.guards:
        if g.kind in ("eq", "specialize"):
            continue
        fact = _replaced(env, g.expr)
        if x not in fact.free_symbols or fact in (sp.true, sp.false):
            continue
        if g.kind in ("lt", "le", "gt", "ge") and env.static_truth(fact) is True:
            continue  # a linear inequality, learned as the range reported above
        fix = None
        if g.kind == "divisible":
            e, k = fact.lhs.args
            c = e.coeff(x)
            if c.is_Integer and sp.expand(e - c * x) == 0:
                m = int(k) // math.gcd(int(c), int(k))
                if m > 1:
                    top = "oo" if vr.upper == INT_OO else str(int(vr.upper) // m)
                    fix = (f"_{name} = Dim('_{name}', min={max(1, math.ceil(vr.lower / m))}, "
                           f"max={top})\n{name} = {m}*_{name}")
        out.append((name, f"Not all values of {name} = {r.local} in the specified range "
                    f"satisfy the generated guard {pyexpr(fact, locals_)}.", fix,
                    f" (guard from {g.filename}:{g.lineno})"))
    return out


def _replaced(env: ShapeEnv, expr: Any) -> Any:
    """``expr`` with the equality substitutions applied (not the divisibility facts, which
    would turn a divisibility guard into ``True``)."""
    return expr.xreplace(env.replacements) if env.replacements else expr


def range_constraints(info: Symbols) -> dict:
    """``{symbol: ValueRange}`` of the input symbols that stayed free, and of the derived
    expressions inputs have as sizes (``2*s0``), as PyTorch reports them: a named ``Dim``
    used directly reports the range the user declared (``Dim("b")``: ``[0, int_oo]``; tracing
    assumed ``>= 2``), unless an AUTO/DYNAMIC dim was found equal to it; a derived dim reports
    its root's declared range mapped through it."""
    from ember.sym import ValueRange
    env = info.env
    declared: dict = {}
    auto_targets = {env.simplify(sym._expr) for sym, _ in info.hinted}
    for r in info.named.values():
        if isinstance(r.sym, SymInt) and r.direct and r.sym._expr not in auto_targets:
            declared[r.sym._expr] = ValueRange(r.dim.min, r.dim.max)
    out = {}
    for x in info.sizes.values():
        if isinstance(x, SymInt):
            e = x.expr
            if not e.is_Symbol and not e.is_Integer and e not in out:
                out[e] = _derived_range(info, e)
    for s, vr in env.var_to_range.items():  # data-dependent sizes (u0), as PyTorch lists them
        if s not in env.var_to_val and s not in env.replacements:
            out[s] = vr
    for s, vr in env.range_constraints().items():
        out[s] = declared.get(s, vr)
    return out


def _derived_range(info: Symbols, e: Any) -> Any:
    from ember.sym import ValueRange
    named = {r.sym._expr: r for r in info.named.values()
             if isinstance(r.sym, SymInt)}
    if len(e.free_symbols) == 1:
        (s,) = e.free_symbols
        r = named.get(s)
        a, b = e.coeff(s), (e - e.coeff(s) * s)
        if r is not None and a.is_Integer and b.is_Integer and int(a) > 0:
            hi = INT_OO if r.dim.max == INT_OO else int(a) * r.dim.max + int(b)
            return ValueRange(int(a) * r.dim.min + int(b), hi)
    return info.env.bound(e)


def runtime_guards(env: ShapeEnv) -> list:
    """The guards ``ep.module()`` checks besides shapes and ranges, over the free symbols."""
    sp = _sympy()
    out = []
    for g in env.guards:
        fact = _replaced(env, g.expr)
        if fact in (sp.true, sp.false) or not fact.free_symbols:
            continue  # substitutions: checked through the input shapes themselves
        if fact not in out:
            out.append(fact)
    return out

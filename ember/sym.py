"""Symbolic sizes: ``SymInt`` and the ``ShapeEnv`` that records guards (ARCHITECTURE.md §1, §6).

Export traces a program with sizes that are symbols instead of numbers.  A ``SymInt`` wraps a
sympy expression (``s0``, ``2*s0 + 1``, ``(s0//2)``) together with its ``ShapeEnv``.  Arithmetic
stays symbolic; a comparison has to return a Python ``bool``, so it is *guarded*: decided from
the symbols' value ranges when that is possible (no guard), otherwise evaluated with the example
("hint") values and recorded as a ``Guard`` with the user's file and line.  An equality guard
becomes a substitution (``s1 -> s0``, ``s2 -> 2*s0``); a one-symbol inequality narrows a range.
``int(s)`` specializes (guards ``s == hint``); a size without a hint (``nonzero``'s row count,
an *unbacked* size) raises ``GuardOnDataDependentSymNode`` instead, naming the user's line.

sympy is imported only when the first symbol is created, so ``import ember`` does not load it.

Example::

    >>> env = ShapeEnv()
    >>> n = env.create_symbol(8, "x.shape[0]")
    >>> n * 2 + 1
    2*s0 + 1
    >>> n % 4 == 0          # guarded with the hint 8, recorded with this line
    True
    >>> env.produce_guards_expression()
    '2 <= x.shape[0] and x.shape[0] % 4 == 0'

Differences from PyTorch: symbols are numbered in creation order (``s0, s1, ...``; PyTorch
hashes the source name), a ``SymInt`` is hashable (by its expression at creation) so shape tuples
can be dict keys, and arithmetic with floats specializes (PyTorch makes a ``SymFloat``).
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterable

from ember.errors import GuardOnDataDependentSymNode

INF = math.inf
_EMBER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_sp: Any = None          # the sympy module, once loaded
_FloorDiv: Any = None    # sympy Function class for Python's ``//``


def _sympy() -> Any:
    global _sp, _FloorDiv
    if _sp is None:
        import sympy

        class FloorDiv(sympy.Function):
            """Python's ``a // b`` on integers; prints ``(a//b)`` as PyTorch does."""

            precedence = 35  # below Mul: ``2*((s0//2))`` parenthesizes it
            is_integer = True

            @classmethod
            def eval(cls, base: Any, div: Any) -> Any:
                if div == 0:
                    raise ZeroDivisionError("integer division or modulo by zero")
                if base.is_Integer and div.is_Integer:
                    return sympy.Integer(int(base) // int(div))
                if div == 1:
                    return base
                if base == 0:
                    return sympy.Integer(0)
                q = sympy.cancel(base / div)  # exact division: 2*s0 // 2, s0*s1 // s1
                if q.is_polynomial() and sympy.fraction(q)[1] == 1 and all(
                        c.is_Integer for c in sympy.expand(q).as_coefficients_dict().values()):
                    return sympy.expand(q)
                if (div.is_Integer and int(div) > 0 and isinstance(base, FloorDiv)
                        and base.args[1].is_Integer):
                    return FloorDiv(base.args[0], base.args[1] * div)
                return None

            def _sympystr(self, printer: Any) -> str:
                a, b = (printer.parenthesize(x, 999.5) for x in self.args)  # below Atom
                return f"({a}//{b})"

        _FloorDiv = FloorDiv
        _sp = sympy
    return _sp


# --------------------------------------------------------------------------- value ranges
@dataclass(frozen=True)
class ValueRange:
    """Inclusive integer range ``[lower, upper]``; ``math.inf`` for an open end.  ``is_float``:
    the range of an unbacked float (export's ``zuf0``), printed ``VR[-oo, oo]`` as PyTorch's."""

    lower: float
    upper: float
    is_float: bool = False

    def __repr__(self) -> str:
        def f(v: float) -> str:
            if self.is_float:
                return "oo" if v == INF else "-oo" if v == -INF else str(v)
            return "int_oo" if v == INF else "-int_oo" if v == -INF else str(int(v))
        return f"VR[{f(self.lower)}, {f(self.upper)}]"

    def __contains__(self, v: int) -> bool:
        return self.lower <= v <= self.upper

    def intersect(self, other: ValueRange) -> ValueRange:
        return ValueRange(max(self.lower, other.lower), min(self.upper, other.upper))


def _mul_bound(a: float, b: float) -> float:
    return 0 if a == 0 or b == 0 else a * b


@dataclass(frozen=True)
class Guard:
    """A fact tracing relied on: ``expr`` (a sympy relation that held for the example sizes), the
    user's ``filename``/``lineno`` that made it, and its ``kind``: ``eq``, ``ne``, ``lt``,
    ``le``, ``gt``, ``ge``, ``divisible`` (``Eq(Mod(e, k), 0)``) or ``specialize`` (``int(s)``)."""

    expr: Any
    filename: str
    lineno: int
    kind: str

    def __str__(self) -> str:
        return f"{self.expr}  # {self.filename}:{self.lineno} ({self.kind})"


def _called_from_user(depth: int) -> bool:
    """Whether the frame ``depth`` levels above the caller is the user's code (not ember's)."""
    f = sys._getframe(depth + 1)
    return not f.f_code.co_filename.startswith(_EMBER_DIR)


def _user_frame() -> tuple[str, int, str]:
    """File, line and function of the innermost frame outside ember (and outside sympy/numpy)."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not (fn.startswith(_EMBER_DIR) or "/sympy/" in fn or "/numpy/" in fn
                or fn.startswith("<frozen") or fn.startswith("<autocast")):
            return fn, f.f_lineno, f.f_code.co_name
        f = f.f_back
    return "<unknown>", 0, "<unknown>"


_KIND = {"Equality": "eq", "Unequality": "ne", "StrictLessThan": "lt", "LessThan": "le",
         "StrictGreaterThan": "gt", "GreaterThan": "ge"}


# --------------------------------------------------------------------------- the environment
class ShapeEnv:
    """Symbols, their example values (hints) and ranges, the guards tracing recorded, and the
    substitutions equality guards established.

    ``specialize_zero_one`` (default True, as PyTorch): a dim whose example is 0 or 1 stays that
    constant, and dynamic dims get the default range ``[2, inf)``, so ``size == 1`` checks in
    broadcasting decide without a guard.  ``default_min`` overrides that lower bound.

    Example::

        >>> env = ShapeEnv()
        >>> a, b = env.create_symbol(6, "a"), env.create_symbol(6, "b")
        >>> a == b, a + b
        (True, 2*s0)
    """

    def __init__(self, *, specialize_zero_one: bool = True, default_min: int | None = None):
        self.specialize_zero_one = specialize_zero_one
        self.default_min = (2 if specialize_zero_one else 0) if default_min is None else default_min
        self.guards: list[Guard] = []
        self.var_to_val: dict[Any, int] = {}       # backed symbol -> hint
        self.var_to_range: dict[Any, ValueRange] = {}
        self.var_to_source: dict[Any, str] = {}
        self.replacements: dict[Any, Any] = {}     # symbol -> expression it equals
        self.divisible: set[Any] = set()           # expressions e with Mod(e, k) == 0 known
        self._decided: dict[Any, bool] = {}        # relations already guarded -> their value
        self.deferred: list[Guard] = []            # ember._check'ed relations (runtime asserts)
        self.assert_hook: Any = None               # export: records a deferred assert's node
        self.lazy_user_bools = False               # export: user comparisons give SymBools
        self._n_unbacked_float = 0                 # export: zuf<k> symbols of float .item()
        self._n_backed = 0
        self._n_unbacked = 0

    # ------------------------------------------------------------------ creating symbols
    def create_symbol(self, hint: int, source_name: str | None = None, *, min: int | None = None,
                      max: int | None = None) -> SymInt | int:
        """A new size symbol ``s<k>`` with example value ``hint`` (0/1 stay plain ints when
        ``specialize_zero_one``); ``source_name`` (``"x.shape[0]"``) names it in guards."""
        hint = int(hint)
        if self.specialize_zero_one and hint in (0, 1) and min is None:
            return hint
        sp = _sympy()
        lo = self.default_min if min is None else min
        vr = ValueRange(lo, INF if max is None else max)
        if hint not in vr:
            raise ValueError(f"[ShapeEnv.create_symbol] hint {hint} is outside the range {vr}")
        sign = {"positive": True} if lo >= 1 else {"nonnegative": True} if lo >= 0 else {}
        sym = sp.Symbol(f"s{self._n_backed}", integer=True, **sign)
        self._n_backed += 1
        self.var_to_val[sym] = hint
        self.var_to_range[sym] = vr
        self.var_to_source[sym] = source_name or sym.name
        return SymInt(sym, self)

    def add_symbol(self, name: str, hint: int | None, vr: ValueRange,
                   source_name: str | None = None) -> SymInt:
        """Re-create a symbol by ``name`` (``s3``) with its hint and range, as a loaded
        exported program needs (symbols keep the names they were saved with)."""
        sp = _sympy()
        sign = {"positive": True} if vr.lower >= 1 else \
            {"nonnegative": True} if vr.lower >= 0 else {}
        sym = sp.Symbol(name, integer=True, **sign)
        kind, num = name[0], int(name[1:])
        if kind == "s":
            self._n_backed = max(self._n_backed, num + 1)
            self.var_to_val[sym] = int(hint) if hint is not None else 0
        else:
            self._n_unbacked = max(self._n_unbacked, num + 1)
        self.var_to_range[sym] = vr
        self.var_to_source[sym] = source_name or name
        return SymInt(sym, self)

    def create_unbacked_symint(self, *, min: int | None = None,
                               max: int | None = None) -> SymInt:
        """A size with no example value (``u<k>``), as a data-dependent op produces; range
        ``[min, max]`` (default unbounded, as PyTorch's; sizes use ``min=0``)."""
        sp = _sympy()
        lo = -INF if min is None else min
        sign = {"nonnegative": True} if lo >= 0 else {}
        sym = sp.Symbol(f"u{self._n_unbacked}", integer=True, **sign)
        self._n_unbacked += 1
        self.var_to_range[sym] = ValueRange(lo, INF if max is None else max)
        self.var_to_source[sym] = sym.name
        return SymInt(sym, self)

    # ------------------------------------------------------------------ simplification
    def simplify(self, expr: Any) -> Any:
        """``expr`` with equality substitutions and known divisibility applied."""
        sp = _sympy()
        if self.replacements and expr.free_symbols & self.replacements.keys():
            expr = expr.xreplace(self.replacements)
        if self.divisible and expr.has(sp.Mod):
            expr = expr.xreplace({sp.Mod(e, k): sp.Integer(0) for e, k in self.divisible})
        return expr

    def bound(self, expr: Any) -> ValueRange:
        """The value range of an integer expression, by interval arithmetic over its tree."""
        sp = _sympy()
        if expr.is_Integer:
            return ValueRange(int(expr), int(expr))
        if expr.is_Symbol:
            return self.var_to_range.get(expr, ValueRange(-INF, INF))
        args = [self.bound(a) for a in expr.args]
        if expr.is_Add:
            return ValueRange(sum(a.lower for a in args), sum(a.upper for a in args))
        if expr.is_Mul:
            lo = hi = 1
            for a in args:
                c = [_mul_bound(x, y) for x in (lo, hi) for y in (a.lower, a.upper)]
                lo, hi = min(c), max(c)
            return ValueRange(lo, hi)
        if isinstance(expr, (sp.Max, sp.Min)):
            pick = max if isinstance(expr, sp.Max) else min
            return ValueRange(pick(a.lower for a in args), pick(a.upper for a in args))
        if expr.is_Pow and expr.exp.is_Integer and int(expr.exp) >= 0 and args[0].lower >= 0:
            e = int(expr.exp)
            return ValueRange(args[0].lower ** e, args[0].upper ** e)
        if isinstance(expr, _FloorDiv) and expr.args[1].is_Integer and int(expr.args[1]) > 0:
            k = int(expr.args[1])
            lo, hi = args[0].lower, args[0].upper
            return ValueRange(lo // k if lo != -INF else -INF, hi // k if hi != INF else INF)
        if isinstance(expr, sp.Mod) and expr.args[1].is_Integer and int(expr.args[1]) > 0:
            k = int(expr.args[1])
            if 0 <= args[0].lower and args[0].upper < k:
                return args[0]
            return ValueRange(0, k - 1)
        return ValueRange(-INF, INF)

    def static_truth(self, rel: Any) -> bool | None:
        """True/False when ``rel`` holds/fails for every value in the ranges; else None."""
        sp = _sympy()
        if rel in (sp.true, sp.false):
            return bool(rel)
        vr = self.bound(sp.expand(rel.lhs - rel.rhs))
        kind = _KIND[type(rel).__name__]
        decide = {
            "eq": (vr.lower == vr.upper == 0, vr.lower > 0 or vr.upper < 0),
            "ne": (vr.lower > 0 or vr.upper < 0, vr.lower == vr.upper == 0),
            "lt": (vr.upper < 0, vr.lower >= 0), "le": (vr.upper <= 0, vr.lower > 0),
            "gt": (vr.lower > 0, vr.upper <= 0), "ge": (vr.lower >= 0, vr.upper < 0),
        }[kind]
        return True if decide[0] else False if decide[1] else None

    # ------------------------------------------------------------------ guarding
    def evaluate(self, rel: Any, kind: str | None = None) -> bool:
        """Decide the sympy relation ``rel``: statically when the ranges allow, else with the
        hints, recording the outcome as a guard at the user's line."""
        sp = _sympy()
        rel, known = self._decide(rel)
        if known is not None:
            return known
        if any(s not in self.var_to_val for s in rel.free_symbols):
            fn, line, func = _user_frame()
            raise GuardOnDataDependentSymNode(
                f"Could not guard on data-dependent expression {rel} (unhinted: {rel}).  "
                f"Consider code that does not branch on this size.\n"
                f"Caused by: ({fn}:{line} in {func})", rel)
        value = bool(rel.xreplace({s: sp.Integer(v) for s, v in self.var_to_val.items()
                                   if s in rel.free_symbols}))
        self._decided[rel] = value
        self._decided[rel.negated] = not value
        fact = self._canonical(rel if value else rel.negated)
        if fact in (sp.true, sp.false) or self.static_truth(fact) is not None:
            return value  # simplification decided it after all (Eq(s0*s1, s1): s0 >= 2)
        fn, line, _ = _user_frame()
        if kind is None:
            is_mod = (type(fact).__name__ == "Equality" and isinstance(fact.lhs, sp.Mod)
                      and fact.rhs == 0)
            kind = "divisible" if is_mod else _KIND[type(fact).__name__]
        self.guards.append(Guard(fact, fn, line, kind))
        self._learn(fact)
        return value

    def _decide(self, rel: Any) -> tuple:
        """``(rel simplified, True/False/None)``: decided from ranges or earlier guards, no
        guard recorded."""
        sp = _sympy()
        rel = self.simplify(rel)
        if self.divisible and rel.has(_FloorDiv):  # e // k is exact once k | e was guarded
            exact = {_FloorDiv(e, k): e / k for e, k in self.divisible}
            rel = rel.func(sp.expand(rel.lhs.xreplace(exact)), sp.expand(rel.rhs.xreplace(exact)))
        known = self.static_truth(rel)
        if known is None:
            known = self._decided.get(rel)  # guarded before (a fact a substitution can't show)
        return rel, known

    def defer_runtime_assert(self, rel: Any, message: str | None = None) -> None:
        """``ember._check`` of an undecided relation: assume it from now on (its outcome and
        the ranges it implies) and hand it to ``assert_hook`` (export records a graph node that
        checks it when the program runs)."""
        sp = _sympy()
        rel = self.simplify(rel)
        fact = self._canonical(rel)
        for r in (rel, fact):
            self._decided[r] = True
            self._decided[r.negated] = False
        if fact not in (sp.true, sp.false):
            self._learn(fact)
        fn, line, _ = _user_frame()
        self.deferred.append(Guard(fact, fn, line, "assert"))
        if self.assert_hook is not None:
            self.assert_hook(rel, message)

    def _canonical(self, fact: Any) -> Any:
        """A guard in a canonical, readable form (sympy's ``simplify`` is far too slow here):
        terms with positive coefficients on the left, the others on the right, a common
        integer factor divided out (``Eq(s0 + 1, s1 + 1)`` -> ``Eq(s0, s1)``), and positive
        symbols cancelled between products (``Eq(4*s2*s3, s0*s1*s2*s3)`` -> ``Eq(s0*s1, 4)``)."""
        sp = _sympy()
        diff = sp.expand(fact.lhs - fact.rhs)
        terms = sp.Add.make_args(diff)
        coeffs = [t.as_coeff_Mul()[0] for t in terms]
        if all(c.is_Integer for c in coeffs):
            g = sp.igcd(*[int(c) for c in coeffs]) if len(coeffs) > 1 else abs(int(coeffs[0]))
            if g > 1:
                terms = [t / g for t in terms]
        left = sp.Add(*[t for t in terms if t.as_coeff_Mul()[0] > 0])
        right = -sp.Add(*[t for t in terms if t.as_coeff_Mul()[0] < 0])
        fact = fact.func(left, right)
        if fact in (sp.true, sp.false):
            return fact
        if (fact.func in (sp.Eq, sp.Ne) and not fact.lhs.is_Add and not fact.rhs.is_Add
                and fact.rhs != 0 and all(x.is_positive for x in fact.free_symbols)):
            n, d = sp.fraction(sp.cancel(fact.lhs / fact.rhs))
            fact = fact.func(n, d) if not n.is_Integer or d != 1 else fact
        if fact.lhs.is_Integer and not fact.rhs.is_Integer:
            fact = fact.reversed  # Eq(s0*s1, 4), s3 > 3
        elif (fact.func in (sp.Eq, sp.Ne) and fact.lhs.is_Symbol and fact.rhs.is_Symbol
              and fact.rhs.sort_key() < fact.lhs.sort_key()):
            fact = fact.reversed  # Eq(s0, s2), whichever side the comparison had them
        return fact

    def _learn(self, fact: Any) -> None:
        sp = _sympy()
        name = type(fact).__name__
        diff = sp.expand(fact.lhs - fact.rhs)
        if name == "Equality":
            if isinstance(fact.lhs, sp.Mod) and fact.rhs == 0:
                self.divisible.add(fact.lhs.args)
                return
            self._substitute(diff)
            return
        # a range for each symbol that appears linearly: L <= a*x + rest <= U
        lo, hi = {"StrictLessThan": (-INF, -1), "LessThan": (-INF, 0),
                  "StrictGreaterThan": (1, INF), "GreaterThan": (0, INF)}.get(name, (None, None))
        if lo is None:
            return
        self._learn_floordiv(diff, lo, hi)
        for x in diff.free_symbols:
            a = diff.coeff(x)
            rest = sp.expand(diff - a * x)
            if not a.is_Integer or x in rest.free_symbols or x not in self.var_to_range:
                continue
            r = self.bound(rest)
            lo_ax, hi_ax = lo - r.upper, hi - r.lower
            a = int(a)
            if a < 0:
                lo_ax, hi_ax, a = -hi_ax, -lo_ax, -a
            new = ValueRange(math.ceil(lo_ax / a) if lo_ax != -INF else -INF,
                             math.floor(hi_ax / a) if hi_ax != INF else INF)
            self.var_to_range[x] = self.var_to_range[x].intersect(new)

    def _learn_floordiv(self, diff: Any, lo: float, hi: float) -> None:
        """``lo <= (e//k) + d <= hi`` (a pooled or strided size) bounds ``e``: ``e >= (lo-d)*k``
        and ``e <= (hi-d)*k + k - 1``; learned as linear facts on ``e`` (recursively)."""
        sp = _sympy()
        d = sp.Integer(0)
        fd = None
        for t in sp.Add.make_args(diff):
            if t.is_Integer:
                d += t
            elif isinstance(t, _FloorDiv) and fd is None and t.args[1].is_Integer \
                    and int(t.args[1]) > 0:
                fd = t
            else:
                return
        if fd is None:
            return
        e, k = fd.args[0], int(fd.args[1])
        facts = []
        if lo != -INF:
            facts.append(sp.Ge(e, (int(lo) - int(d)) * k))
        if hi != INF:
            facts.append(sp.Le(e, (int(hi) - int(d)) * k + k - 1))
        for fact in facts:
            if fact not in (sp.true, sp.false):
                self._learn(fact)

    def _substitute(self, diff: Any) -> None:
        """From ``diff == 0``: replace the newest symbol that has an integer solution."""
        sp = _sympy()
        order = sorted(diff.free_symbols, key=lambda s: (s.name[0] == "s", int(s.name[1:])),
                       reverse=True)
        for x in order:
            a = diff.coeff(x)
            rest = sp.expand(diff - a * x)
            if not a.is_Integer or x in rest.free_symbols:
                continue
            sol = sp.expand(-rest / a)
            if not all(c.is_Integer for c in sol.as_coefficients_dict().values()):
                continue
            self.replacements = {k: v.xreplace({x: sol}) for k, v in self.replacements.items()}
            self.replacements[x] = sol
            self._narrow_from(x, sol)
            return

    def _narrow_from(self, x: Any, sol: Any) -> None:
        """Carry ``x``'s range over to ``sol = c*y + d`` (or check a constant)."""
        sp = _sympy()
        vr = self.var_to_range.get(x, ValueRange(-INF, INF))
        if sol.is_Integer:
            self.var_to_range[x] = ValueRange(int(sol), int(sol))
            return
        if len(sol.free_symbols) != 1:
            return
        (y,) = sol.free_symbols
        c, d = sol.coeff(y), sp.expand(sol - sol.coeff(y) * y)
        if c.is_Integer and d.is_Integer and int(c) > 0:
            c, d = int(c), int(d)
            new = ValueRange(math.ceil((vr.lower - d) / c) if vr.lower != -INF else -INF,
                             math.floor((vr.upper - d) / c) if vr.upper != INF else INF)
            self.var_to_range[y] = self.var_to_range[y].intersect(new)

    # ------------------------------------------------------------------ checking guards
    def _value_map(self, values: dict) -> dict:
        sp = _sympy()
        by_name = {s.name: s for s in self.var_to_range}
        by_source = {src: s for s, src in self.var_to_source.items()}
        out = {}
        for k, v in values.items():
            sym = k if not isinstance(k, str) else by_name.get(k) or by_source.get(k)
            if sym is None:
                raise KeyError(f"[ShapeEnv.evaluate_guards] unknown symbol or source {k!r}")
            out[sym] = sp.Integer(int(v))
        return out

    def evaluate_guards(self, values: dict) -> bool:
        """Whether concrete sizes ``values`` (keyed by symbol, its name ``"s0"`` or its source
        name) satisfy every range and recorded guard."""
        vals = self._value_map(values)
        for s, vr in self.var_to_range.items():
            if s in vals and int(vals[s]) not in vr and s not in self.replacements:
                return False
        for g in self.guards:
            if not bool(g.expr.xreplace(vals)):
                return False
        return True

    def produce_guards_expression(self) -> str:
        """The ranges and guards as one Python expression over the source names."""
        names = dict(self.var_to_source)
        parts = []
        for s, vr in self.var_to_range.items():
            if s in self.replacements or s not in self.var_to_val:
                continue
            if vr.lower != -INF:
                parts.append(f"{int(vr.lower)} <= {names[s]}")
            if vr.upper != INF:
                parts.append(f"{names[s]} <= {int(vr.upper)}")
        parts.extend(pyexpr(g.expr, names) for g in self.guards)
        return " and ".join(parts) if parts else "True"

    def format_guards(self) -> str:
        """One line per guard with its user line (for error messages and logs)."""
        return "\n".join(str(g) for g in self.guards)

    # ------------------------------------------------------------------ what tracing learned
    def range_constraints(self) -> dict:
        """``{symbol: ValueRange}`` of the backed symbols no guard substituted away."""
        return {s: vr for s, vr in self.var_to_range.items()
                if s in self.var_to_val and s not in self.replacements}

    def specializations(self) -> dict[str, int]:
        """``{source name: value}`` of the symbols a guard pinned to a constant."""
        return {self.var_to_source[s]: int(e) for s, e in self.replacements.items()
                if e.is_Integer}

    def relations(self) -> dict[str, str]:
        """``{source name: Python expression over other sources}`` for the symbols equality
        guards tied to others, e.g. ``{"y.shape[0]": "x.shape[0]", "z.shape[0]":
        "2*x.shape[0]"}`` (export's "Suggested fixes" come from these)."""
        names = dict(self.var_to_source)
        return {names[s]: pyexpr(e, names) for s, e in self.replacements.items()
                if not e.is_Integer}


_REL_OPS = {"Equality": "==", "Unequality": "!=", "StrictLessThan": "<", "LessThan": "<=",
            "StrictGreaterThan": ">", "GreaterThan": ">="}


def pyexpr(expr: Any, names: dict | None = None) -> str:
    """``expr`` as Python source (``Mod`` as ``%``, floor division as ``//``, symbols renamed by
    ``names``)."""
    sp = _sympy()
    names = names or {}

    def go(e: Any) -> str:
        t = type(e).__name__
        if t in _REL_OPS:
            return f"{_strip(go(e.lhs))} {_REL_OPS[t]} {_strip(go(e.rhs))}"
        if e.is_Integer:
            return str(int(e))
        if e.is_Symbol:
            return names.get(e, e.name)
        if e.is_Add:
            return "(" + " + ".join(go(a) for a in e.args) + ")"
        if e.is_Mul:
            return "(" + "*".join(go(a) for a in e.args) + ")"
        if e.is_Pow and e.exp.is_Integer:
            return f"({go(e.base)}**{int(e.exp)})"
        if isinstance(e, sp.Mod):
            return f"({go(e.args[0])} % {go(e.args[1])})"
        if isinstance(e, _FloorDiv):
            return f"({go(e.args[0])} // {go(e.args[1])})"
        if isinstance(e, (sp.Max, sp.Min)):
            return f"{t.lower()}({', '.join(go(a) for a in e.args)})"
        raise NotImplementedError(f"[sym.pyexpr] cannot print {e!r} as Python")

    return _strip(go(expr))


def _strip(s: str) -> str:
    """``s`` without one pair of enclosing parentheses, when they enclose all of it."""
    if not (s.startswith("(") and s.endswith(")")):
        return s
    depth = 0
    for ch in s[1:-1]:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return s
    return s[1:-1] if depth == 0 else s


# --------------------------------------------------------------------------- SymInt
class SymInt:
    """A symbolic integer size: a sympy expression in a ``ShapeEnv``.

    Arithmetic (``+ - * // % **``, negation, ``abs``) stays symbolic and folds to a plain
    ``int`` when the result is constant; comparisons, ``bool()``, ``int()`` and ``index()``
    guard (see the module docstring).

    Example::

        >>> env = ShapeEnv(); s = env.create_symbol(6, "n")
        >>> (s * 4) // 2, s - s
        (2*s0, 0)
    """

    __slots__ = ("_expr", "env", "_hash")

    def __init__(self, expr: Any, env: ShapeEnv) -> None:
        self._expr = expr
        self.env = env
        self._hash = hash(expr)

    @property
    def expr(self) -> Any:
        """The sympy expression, with the environment's substitutions applied."""
        return self.env.simplify(self._expr)

    @property
    def node(self) -> SymInt:  # PyTorch code reads ``s.node.expr``
        return self

    def hint(self) -> int | None:
        """The value with the example sizes; None for an unbacked size."""
        e = self.expr
        if any(s not in self.env.var_to_val for s in e.free_symbols):
            return None
        return int(e.xreplace({s: _sp.Integer(v) for s, v in self.env.var_to_val.items()}))

    # -------------------------------------------------------------- arithmetic
    def _wrap(self, expr: Any) -> SymInt | int:
        expr = self.env.simplify(expr)
        return int(expr) if expr.is_Integer else SymInt(expr, self.env)

    def _other(self, other: Any) -> Any:
        if isinstance(other, SymInt):
            assert other.env is self.env, "SymInts from different ShapeEnvs"
            return other.expr
        if isinstance(other, int):  # bool included, as Python's int arithmetic does
            return _sp.Integer(int(other))
        return None

    def _binop(self, other: Any, fn: Any, reflected: bool = False) -> Any:
        o = self._other(other)
        if o is None:
            if isinstance(other, float):  # PyTorch makes a SymFloat; ember specializes
                a, b = (other, int(self)) if reflected else (int(self), other)
                return fn(a, b)
            return NotImplemented
        a, b = (o, self.expr) if reflected else (self.expr, o)
        return self._wrap(fn(a, b))

    def __add__(self, o: Any) -> Any: return self._binop(o, lambda a, b: a + b)
    def __radd__(self, o: Any) -> Any: return self._binop(o, lambda a, b: a + b, True)
    def __sub__(self, o: Any) -> Any: return self._binop(o, lambda a, b: a - b)
    def __rsub__(self, o: Any) -> Any: return self._binop(o, lambda a, b: a - b, True)
    def __mul__(self, o: Any) -> Any: return self._binop(o, lambda a, b: a * b)
    def __rmul__(self, o: Any) -> Any: return self._binop(o, lambda a, b: a * b, True)
    def __floordiv__(self, o: Any) -> Any: return self._binop(o, _floordiv)
    def __rfloordiv__(self, o: Any) -> Any: return self._binop(o, _floordiv, True)
    def __mod__(self, o: Any) -> Any: return self._binop(o, _mod)
    def __rmod__(self, o: Any) -> Any: return self._binop(o, _mod, True)

    def __pow__(self, o: Any) -> Any:
        if isinstance(o, int) and o >= 0:
            return self._wrap(self.expr ** o)
        return int(self) ** o

    def __truediv__(self, o: Any) -> float:  # PyTorch: a SymFloat; ember specializes
        return int(self) / (int(o) if isinstance(o, SymInt) else o)

    def __rtruediv__(self, o: Any) -> float:
        return o / int(self)

    def __neg__(self) -> SymInt | int: return self._wrap(-self.expr)
    def __pos__(self) -> SymInt: return self

    def __abs__(self) -> SymInt | int:
        return self if self >= 0 else -self

    # -------------------------------------------------------------- guarded comparisons
    def _rel(self, other: Any, cls_name: str) -> Any:
        o = self._other(other)
        if o is None:
            if isinstance(other, float):
                return getattr(int(self), _DUNDER[cls_name])(other)
            return NotImplemented
        rel = getattr(_sp, cls_name)(self.expr, o)
        env = self.env
        if env.lazy_user_bools and _called_from_user(2):
            # while exporting, a comparison in the user's code is a SymBool (as in PyTorch):
            # bool() guards it, ember.cond records it as its predicate without a guard
            known = env._decide(rel)[1]
            return SymBool(rel, env) if known is None else known
        if any(s not in env.var_to_val for s in rel.free_symbols):
            try:
                return env.evaluate(rel)
            except GuardOnDataDependentSymNode:  # undecided on an unbacked size: a SymBool
                return SymBool(rel, env)        # (bool() raises; ember._check asserts it)
        return env.evaluate(rel)

    def __eq__(self, o: Any) -> Any: return self._rel(o, "Eq")
    def __ne__(self, o: Any) -> Any: return self._rel(o, "Ne")
    def __lt__(self, o: Any) -> Any: return self._rel(o, "Lt")
    def __le__(self, o: Any) -> Any: return self._rel(o, "Le")
    def __gt__(self, o: Any) -> Any: return self._rel(o, "Gt")
    def __ge__(self, o: Any) -> Any: return self._rel(o, "Ge")

    def __bool__(self) -> bool:
        return self.env.evaluate(_sp.Ne(self.expr, 0))

    def __hash__(self) -> int:
        return self._hash

    def __int__(self) -> int:
        """Specialize: guard ``self == hint`` and return the hint."""
        e = self.expr
        h = self.hint()
        if h is None:
            fn, line, func = _user_frame()
            raise GuardOnDataDependentSymNode(
                f"Could not extract specialized integer from data-dependent expression {e} "
                f"(unhinted: {e}).\nCaused by: ({fn}:{line} in {func})", e)
        self.env.evaluate(_sp.Eq(e, h), kind="specialize")
        return h

    __index__ = __int__

    def __float__(self) -> float:
        return float(int(self))

    def __repr__(self) -> str:
        return str(self.expr)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(str(self), spec) if not spec or spec[-1] in "s<>^" else format(int(self),
                                                                                     spec)


class SymBool:
    """A comparison of sizes that the ranges do not decide.  Of an unbacked size ``u0`` (from
    ``.item()`` or ``nonzero``): ``bool()`` raises ``GuardOnDataDependentSymNode`` and
    ``ember._check(b)`` turns it into a runtime assert.  Of backed sizes (a comparison in the
    user's code while exporting): ``bool()`` guards it with the example values, and
    ``ember.cond(b, ...)`` records both branches with ``b`` as the predicate."""

    __slots__ = ("rel", "env")

    def __init__(self, rel: Any, env: ShapeEnv) -> None:
        self.rel = rel
        self.env = env

    @property
    def expr(self) -> Any:
        return self.rel

    def __bool__(self) -> bool:
        return self.env.evaluate(self.rel)

    def is_backed(self) -> bool:
        """Whether every symbol has an example value (``bool()`` can guard)."""
        return all(s in self.env.var_to_val for s in self.rel.free_symbols)

    def __and__(self, o: Any) -> Any:
        return self._combine(o, "And")

    def __or__(self, o: Any) -> Any:
        return self._combine(o, "Or")

    __rand__, __ror__ = __and__, __or__

    def _combine(self, o: Any, fn: str) -> Any:
        if isinstance(o, SymBool):
            return SymBool(getattr(_sp, fn)(self.rel, o.rel), self.env)
        if isinstance(o, bool):
            return SymBool(getattr(_sp, fn)(self.rel, _sp.true if o else _sp.false), self.env)
        return NotImplemented

    def __invert__(self) -> SymBool:
        return SymBool(self.rel.negated if hasattr(self.rel, "negated") else _sp.Not(self.rel),
                       self.env)

    def __int__(self) -> int:
        return int(bool(self))

    def __repr__(self) -> str:
        return pyexpr(self.rel)


_DUNDER = {"Eq": "__eq__", "Ne": "__ne__", "Lt": "__lt__", "Le": "__le__", "Gt": "__gt__",
           "Ge": "__ge__"}


def _floordiv(a: Any, b: Any) -> Any:
    return _FloorDiv(a, b)


def _mod(a: Any, b: Any) -> Any:
    if b == 0:
        raise ZeroDivisionError("integer division or modulo by zero")
    return _sp.Mod(a, b)


# --------------------------------------------------------------------------- helpers
def is_symbolic(x: Any) -> bool:
    """Whether ``x`` is a ``SymInt`` (not a plain int)."""
    return isinstance(x, SymInt)


def has_symbolic(shape: Iterable) -> bool:
    """Whether any entry of ``shape`` is a ``SymInt``."""
    return any(isinstance(d, SymInt) for d in shape)


def _env_of(*xs: Any) -> ShapeEnv | None:
    for x in xs:
        if isinstance(x, SymInt):
            return x.env
    return None


def _minmax(a: Any, b: Any, pick: str) -> Any:
    env = _env_of(a, b)
    if env is None:
        return max(a, b) if pick == "Max" else min(a, b)
    ea, eb = (x.expr if isinstance(x, SymInt) else _sp.Integer(x) for x in (a, b))
    d = env.bound(_sp.expand(ea - eb))
    if d.lower >= 0:
        win = ea if pick == "Max" else eb
    elif d.upper <= 0:
        win = eb if pick == "Max" else ea
    else:
        win = getattr(_sp, pick)(ea, eb)
    return int(win) if win.is_Integer else SymInt(win, env)


def sym_max(a: Any, b: Any) -> Any:
    """``max(a, b)`` without guarding: a ``Max`` expression unless the ranges decide it.

    Example::

        >>> env = ShapeEnv(); s = env.create_symbol(5, "n")
        >>> sym_max(s, 1), sym_max(s, 7)
        (s0, Max(7, s0))
    """
    return _minmax(a, b, "Max")


def sym_min(a: Any, b: Any) -> Any:
    """``min(a, b)`` without guarding (see ``sym_max``)."""
    return _minmax(a, b, "Min")


def guard_int(x: Any) -> int:
    """``x`` as a Python int, specializing a ``SymInt`` (with a guard)."""
    return int(x)


def sym_eq_static(a: Any, b: Any) -> bool | None:
    """Whether ``a == b`` is decided by the ranges alone (True/False) or not (None); records no
    guard."""
    env = _env_of(a, b)
    if env is None:
        return a == b
    ea, eb = (x.expr if isinstance(x, SymInt) else _sp.Integer(x) for x in (a, b))
    return env.static_truth(env.simplify(_sp.Eq(ea, eb)))


def unbacked_size(*shapes: Iterable, min: int = 0) -> SymInt | None:
    """A fresh data-dependent size for a meta whose input ``shapes`` are symbolic (None when
    they are all concrete: eager metas leave such sizes unknown)."""
    for shape in shapes:
        env = _env_of(*shape)
        if env is not None:
            return env.create_unbacked_symint(min=min)
    return None


def substitute(x: Any, values: dict) -> Any:
    """``x`` (an int, a ``SymInt`` or a nested tuple/list of them) with symbols replaced by
    ``values`` ({symbol: int}); the hints when ``values`` is None."""
    if isinstance(x, SymInt):
        vals = x.env.var_to_val if values is None else values
        e = x.expr.xreplace({s: _sp.Integer(v) for s, v in vals.items()})
        return int(e) if e.is_Integer else SymInt(e, x.env)
    if isinstance(x, (tuple, list)):
        return type(x)(substitute(v, values) for v in x)
    return x





class FakeTensor:
    """A tensor stand-in with only ``shape`` (ints and ``SymInt``s) and ``dtype``: what an
    OpDef's ``meta`` reads, so metas can run on symbolic shapes.

    Example::

        >>> env = ShapeEnv(); n = env.create_symbol(6, "x.shape[0]")
        >>> from ember import ops, float32
        >>> ops.REGISTRY["sum"].meta(FakeTensor((n, 4), float32), dims=(1,), keepdim=False)
        ((s0,), ember.float32)
    """

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Iterable, dtype: Any) -> None:
        self.shape = tuple(shape)
        self.dtype = dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> Any:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"FakeTensor({list(self.shape)}, {self.dtype})"


__all__ = ["SymBool", "SymInt", "ShapeEnv", "Guard", "ValueRange", "GuardOnDataDependentSymNode",
           "sym_max", "sym_min", "guard_int", "is_symbolic", "has_symbolic", "sym_eq_static",
           "unbacked_size", "substitute", "pyexpr", "FakeTensor"]

"""ember.sym: symbolic sizes, guards, ranges, substitutions, unbacked sizes.

Printing, guard expressions and value ranges are compared with PyTorch's own ShapeEnv
(``torch.fx.experimental.symbolic_shapes``) where the two are comparable; PyTorch names its
symbols by hashing their source, so its symbols are renamed to ember's ``s0, s1, ...`` first.
"""

from __future__ import annotations

import inspect
import math
import operator
import subprocess
import sys

import pytest

from ember.errors import EmberError, GuardOnDataDependentSymNode
from ember.sym import (
    FakeTensor,
    ShapeEnv,
    SymInt,
    ValueRange,
    substitute,
    sym_eq_static,
    sym_max,
    sym_min,
)

HERE = __file__


def _line() -> int:
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


def _env(*hints: int, **kw) -> tuple:  # noqa: ANN003
    env = ShapeEnv(**kw)
    return env, [env.create_symbol(h, f"x{i}") for i, h in enumerate(hints)]


# ---------------------------------------------------------------- PyTorch as the oracle
@pytest.fixture(scope="module")
def torch_env():
    """``make(*hints) -> (torch SymInts, rename)`` where ``rename(expr_str)`` maps PyTorch's
    symbol names to ember's creation-order names."""
    torch = pytest.importorskip("torch")
    import sympy
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic
    from torch.fx.experimental.symbolic_shapes import ShapeEnv as TorchShapeEnv

    def make(*hints: int) -> tuple:
        env = TorchShapeEnv()
        syms = []
        for i, h in enumerate(hints):
            src = ConstantSource(f"x{i}")
            s = env.create_symbol(h, src, dynamic_dim=DimDynamic.DYNAMIC)
            syms.append(env.create_symintnode(s, hint=h, source=src))
        names = {s.node.expr: sympy.Symbol(f"s{i}", integer=True, positive=True)
                 for i, s in enumerate(syms)}

        def rename(x) -> str:  # noqa: ANN001
            e = x.node.expr if isinstance(x, torch.SymInt) else x
            return str(e.xreplace(names))

        return env, syms, rename, names

    return make


EXPRS = {
    "affine": lambda a, b: a * 2 + 1,
    "floordiv": lambda a, b: a // 2,
    "mod": lambda a, b: a % 4,
    "neg": lambda a, b: -a,
    "sub": lambda a, b: a - b,
    "rsub": lambda a, b: 3 - a,
    "product": lambda a, b: 2 * a * b,
    "factored": lambda a, b: (a + 1) * b,
    "square": lambda a, b: a * a,
    "floordiv_times": lambda a, b: a // 2 * 2,
    "conv_out": lambda a, b: (a - 1) // 2 + 1,
    "numel_div": lambda a, b: (a * b) // 4,
    "sym_div": lambda a, b: a // b,
    "rfloordiv": lambda a, b: 7 // a,
    "rmod": lambda a, b: 7 % a,
    "nested": lambda a, b: (a + 1) // 2 * b,
    "exact_div": lambda a, b: (a * 4) // 2,
    "pow": lambda a, b: a ** 3,
}


@pytest.mark.parametrize("name", sorted(EXPRS))
def test_printing_matches_pytorch(torch_env, name):
    tenv, (ta, tb), rename, _ = torch_env(5, 6)
    env, (a, b) = _env(5, 6)
    fn = EXPRS[name]
    assert str(fn(a, b)) == rename(fn(ta, tb))
    assert substitute(fn(a, b), None) == fn(5, 6)


def test_constant_results_fold_to_int():
    env, (a, b) = _env(5, 6)
    for got, want in [(a - a, 0), ((a * 4) % 2, 0), (a * 0, 0), ((2 * a) // a, 2)]:
        assert type(got) is int and got == want
    assert isinstance(a + 0, SymInt) and not env.guards


GUARDS = [
    ("mod_eq", lambda a, b: a % 2 == 1),
    ("lt", lambda a, b: a < b),
    ("le_const", lambda a, b: a <= 9),
    ("gt_expr", lambda a, b: 2 * a + 1 > b),
    ("ne", lambda a, b: a != b),
]


@pytest.mark.parametrize("name,fn", GUARDS, ids=[g[0] for g in GUARDS])
def test_guards_and_ranges_match_pytorch(torch_env, name, fn):
    tenv, (ta, tb), rename, names = torch_env(5, 6)
    env, (a, b) = _env(5, 6)
    assert fn(a, b) is bool(fn(ta, tb))
    assert len(env.guards) == len(tenv.guards) == 1
    assert str(env.guards[0].expr) == rename(tenv.guards[0].expr)
    for tsym, esym in names.items():
        tr = tenv.var_to_range[tsym]
        mine = env.var_to_range[next(s for s in env.var_to_range if s.name == esym.name)]
        upper = math.inf if str(tr.upper) == "int_oo" else int(tr.upper)
        assert (mine.lower, mine.upper) == (int(tr.lower), upper), name


def test_guard_records_the_user_line_and_kind():
    env, (a, b) = _env(5, 6)
    assert a < b
    line = _line() - 1
    g = env.guards[-1]
    assert (g.filename, g.lineno, g.kind, str(g.expr)) == (HERE, line, "lt", "s0 < s1")
    assert f"{HERE}:{line}" in str(g)


def test_range_decides_without_a_guard():
    env, (a, b) = _env(5, 6)
    assert (a == 1) is False and (a != 1) is True and (a >= 2) is True and (a > 0) is True
    assert bool(a) is True and (a * b != 0) is True
    assert env.guards == []


def test_zero_one_specialize_and_are_configurable():
    env = ShapeEnv()
    assert env.create_symbol(1, "x") == 1 and type(env.create_symbol(0, "y")) is int
    s = env.create_symbol(5, "z")
    assert env.var_to_range[s.expr] == ValueRange(2, math.inf)
    assert repr(env.var_to_range[s.expr]) == "VR[2, int_oo]"
    env = ShapeEnv(specialize_zero_one=False)
    one = env.create_symbol(1, "x")
    assert isinstance(one, SymInt) and env.var_to_range[one.expr] == ValueRange(0, math.inf)
    assert (one == 1) is True and str(env.guards[0].expr) == "Eq(s0, 1)"
    r = ShapeEnv().create_symbol(20, "w", min=16, max=32)
    assert r.env.var_to_range[r.expr] == ValueRange(16, 32)
    with pytest.raises(ValueError, match="outside the range"):
        ShapeEnv().create_symbol(40, "w", min=16, max=32)


def test_equality_guards_become_substitutions():
    env, (a, b, c, d) = _env(5, 6, 6, 12)
    assert b == c
    assert str(b + c) == "2*s1" and str(c) == "s1"
    assert d == 2 * c
    assert str(d) == "2*s1" and str(d - c) == "s1"
    assert {str(k): str(v) for k, v in env.replacements.items()} == {"s2": "s1", "s3": "2*s1"}
    n_guards = len(env.guards)
    assert d == 2 * b and len(env.guards) == n_guards  # now known: no new guard
    assert env.var_to_range[b.expr] == ValueRange(2, math.inf)


def test_what_tracing_learned():
    env, (a, b, c, d) = _env(5, 5, 10, 7)
    assert b == a and c == 2 * a and int(d) == 7 and a < 9
    assert env.relations() == {"x1": "x0", "x2": "2*x0"}
    assert env.specializations() == {"x3": 7}
    assert {s.name: vr for s, vr in env.range_constraints().items()} == {
        "s0": ValueRange(2, 8)}


def test_substitution_narrows_the_range():
    env, (a, b) = _env(6, 12)
    assert a <= 10 and b == 2 * a
    assert env.var_to_range[a.expr] == ValueRange(2, 10)


def test_divisibility_guard():
    env, (e,) = _env(8)
    assert e % 4 == 0
    g = env.guards[-1]
    assert g.kind == "divisible" and str(g.expr) == "Eq(Mod(s0, 4), 0)"
    assert e % 4 == 0 and len(env.guards) == 1  # known now
    assert 4 * (e // 4) == e and len(env.guards) == 1
    assert env.evaluate_guards({"x0": 12}) and not env.evaluate_guards({"x0": 10})


def test_product_equalities_cancel():
    env, (a, b, c, d) = _env(2, 2, 5, 8)
    assert 4 * c * d == a * b * c * d
    assert str(env.guards[-1].expr) == "Eq(s0*s1, 4)"


def test_int_and_index_specialize():
    env, (f,) = _env(9)
    assert int(f) == 9
    line = _line() - 1
    g = env.guards[-1]
    assert (g.kind, str(g.expr), g.lineno) == ("specialize", "Eq(s0, 9)", line)
    assert str(f + 1) == "10" and f == 9
    env, (n,) = _env(4)
    assert list(range(n)) == [0, 1, 2, 3] and env.guards[-1].kind == "specialize"
    env, (n,) = _env(4)
    assert [10, 20, 30, 40, 50][n] == 50


def test_a_guard_is_recorded_once():
    env, (a, b) = _env(3, 4)
    assert int(a * b) == 12 and int(a * b) == 12 and (a * b != 12) is False
    assert a * b < 20 and a * b < 20
    assert [str(g.expr) for g in env.guards] == ["Eq(s0*s1, 12)", "s0*s1 < 20"]


def test_floats_specialize():
    env, (n,) = _env(6)
    assert n * 0.5 == 3.0 and n / 4 == 1.5
    assert [g.kind for g in env.guards] == ["specialize"]


def test_unbacked_sizes_raise_naming_the_line():
    env = ShapeEnv()
    u = env.create_unbacked_symint()
    assert str(u) == "u0" and str(u * 2 + 1) == "2*u0 + 1"
    with pytest.raises(GuardOnDataDependentSymNode) as info:
        bool(u == 3)
    line = _line() - 1
    assert f"({HERE}:{line} in test_unbacked_sizes_raise_naming_the_line)" in str(info.value)
    assert "Eq(u0, 3)" in str(info.value)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, EmberError)
    with pytest.raises(GuardOnDataDependentSymNode, match="data-dependent"):
        int(u)
    size = env.create_unbacked_symint(min=0)
    assert (size >= 0) is True and (size + 1 > 0) is True  # the range decides: no error
    assert env.guards == []


def test_sym_max_min():
    env, (a, b) = _env(5, 6)
    assert str(sym_max(a, 1)) == "s0" and sym_min(a, 1) == 1
    assert str(sym_max(a, 7)) == "Max(7, s0)" and str(sym_min(a, b)) == "Min(s0, s1)"
    assert substitute(sym_max(a, b), None) == 6 and sym_max(3, 4) == 4
    assert env.guards == []


def test_sym_max_prints_like_pytorch(torch_env):
    torch = pytest.importorskip("torch")
    tenv, (ta, tb), rename, _ = torch_env(5, 6)
    env, (a, b) = _env(5, 6)
    assert str(sym_max(a, b)) == rename(torch.sym_max(ta, tb))
    assert str(sym_min(a, 3)) == rename(torch.sym_min(ta, 3))


def test_symints_work_as_dict_keys():
    env, (a, b) = _env(5, 6)
    table = {(a, 3): "x", (b, 3): "y"}
    assert table[(a, 3)] == "x" and table[(b, 3)] == "y"
    assert hash(a) == hash(a) and len({a, a, b}) == 2


def test_static_equality_without_guard():
    env, (a, b) = _env(5, 6)
    assert sym_eq_static(a, a) is True and sym_eq_static(a, 1) is False
    assert sym_eq_static(a, b) is None and env.guards == []


def test_produce_guards_expression_is_python_and_agrees():
    env, (a, b, c) = _env(8, 16, 5)
    assert a % 4 == 0 and b == 2 * a and c < a and int(c) == 5
    expr = env.produce_guards_expression()
    # c < a narrowed a's range to [3, inf)
    assert expr == "3 <= x0 and x0 % 4 == 0 and x1 == 2*x0 and x2 < x0 and x2 == 5"
    for vals in [(8, 16, 5), (12, 24, 5), (12, 20, 5), (10, 20, 5), (8, 16, 6), (8, 16, 9)]:
        named = dict(zip(("x0", "x1", "x2"), vals))
        assert eval(expr, {}, dict(named)) == env.evaluate_guards(named), vals
    assert env.evaluate_guards({"s0": 12, "s1": 24, "s2": 5})


def test_evaluate_guards_checks_ranges():
    env, (a,) = _env(8)
    assert env.evaluate_guards({"x0": 3}) and not env.evaluate_guards({"x0": 1})
    with pytest.raises(KeyError, match="unknown symbol"):
        env.evaluate_guards({"nope": 3})


def test_guard_kinds_are_recorded():
    env, (a, b, c) = _env(5, 6, 8)
    _ = a < b, a <= 7, b > 3 * 0 + 5, c >= 4 * 1 + 5 - 1, a != b, c % 4 == 0
    assert [g.kind for g in env.guards] == ["lt", "le", "gt", "ge", "ne", "divisible"]


def test_fake_tensor():
    env, (n,) = _env(6)
    t = FakeTensor((n, 3), None)
    assert t.ndim == 2 and t.dim() == 2 and t.size(1) == 3 and str(t.numel()) == "3*s0"


def test_import_ember_does_not_load_sympy():
    code = "import ember, sys; print('sympy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_random_expressions_agree_with_python_ints():
    """Random trees of + - * // % over two symbols evaluate, at the hints and at other values,
    to what Python's int arithmetic gives (checks FloorDiv's exact-division folding)."""
    import random

    rng = random.Random(0)
    for _ in range(300):
        env, (a, b) = _env(rng.randint(2, 9), rng.randint(2, 9))
        vals = {a: a.hint(), b: b.hint()}
        leaves = [(a, "a"), (b, "b")] + [(k, str(k)) for k in (1, 2, 3, 4)]

        def build(depth: int) -> tuple:
            if depth == 0:
                return rng.choice(leaves)
            (x, sx), (y, sy) = build(depth - 1), build(depth - 1)
            op = rng.choice("+-*/%")
            if op in "/%":  # divide by a positive divisor: a constant, a symbol or a + b
                y, sy = rng.choice([(2, "2"), (4, "4"), (a, "a"), (a + b, "(a+b)")])
                op = "//" if op == "/" else "%"
            fns = {"+": operator.add, "-": operator.sub, "*": operator.mul,
                   "//": operator.floordiv, "%": operator.mod}
            return fns[op](x, y), f"({sx} {op} {sy})"

        expr, src = build(rng.randint(1, 4))
        for av, bv in [(vals[a], vals[b]), (11, 3), (6, 14)]:
            want = eval(src, {"a": av, "b": bv})
            got = substitute(expr, {a.expr: av, b.expr: bv}) if isinstance(expr, SymInt) else expr
            assert got == want, (src, str(expr), av, bv)
        assert env.guards == []


def test_data_dependent_messages_match_pytorch():
    torch = pytest.importorskip("torch")
    from torch.fx.experimental.symbolic_shapes import ShapeEnv as TorchShapeEnv

    tu = TorchShapeEnv().create_unbacked_symint()
    u = ShapeEnv().create_unbacked_symint()
    for fn in (int, lambda x: bool(x == 3), lambda x: bool(x * 2 > 5)):
        with pytest.raises(torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode) as t:
            fn(tu)
        with pytest.raises(GuardOnDataDependentSymNode) as e:
            fn(u)
        first = str(t.value).split(".  ")[0]
        assert str(e.value).startswith(first + "."), (str(e.value), first)

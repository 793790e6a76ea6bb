"""The C backend's structure (ARCHITECTURE.md §2): passes never ask an op's name.

Lowering rules register themselves for OpDef objects (``@lowering(OPS.softmax)``), so no file
under ``ember/compiler/c/`` may decide anything by an op's name: no comparison of ``op.name``
(or a variable holding it) with anything, no lookup keyed by it, no module-level table of
op-name strings.  Printing or logging an op's name is fine.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ember.compiler.c.lower import registry
from ember.ops import OPS, REGISTRY

C_DIR = Path(__file__).resolve().parents[2] / "ember" / "compiler" / "c"


def _is_op_name(e: ast.AST, aliases: set) -> bool:
    """``op.name``, ``<x>.op.name`` or a local that was assigned one."""
    if isinstance(e, ast.Attribute) and e.attr == "name":
        v = e.value
        return (isinstance(v, ast.Name) and v.id == "op") or \
            (isinstance(v, ast.Attribute) and v.attr == "op")
    return isinstance(e, ast.Name) and e.id in aliases


def _aliases(fn: ast.AST) -> set:
    """Names a function binds to an op's name (``name = n.op.name``; tuple unpacking too)."""
    out: set = set()
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign):
            continue
        for tgt in node.targets:
            pairs = [(tgt, node.value)]
            if isinstance(tgt, ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs = list(zip(tgt.elts, node.value.elts))
            for t, v in pairs:
                if isinstance(t, ast.Name) and _is_op_name(v, set()):
                    out.add(t.id)
    return out


def _op_name_strings(e: ast.AST) -> bool:
    """A set/frozenset/tuple/list literal of two or more strings, all of them op names (inside a
    function such literals are often other vocabularies: accumulator kinds "sum", "max")."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and \
            e.func.id in ("frozenset", "set", "tuple") and e.args:
        e = e.args[0]
    if not isinstance(e, (ast.Set, ast.Tuple, ast.List)) or len(e.elts) < 2:
        return False
    return all(isinstance(x, ast.Constant) and isinstance(x.value, str) and x.value in REGISTRY
               for x in e.elts)


def _bound_strings(tree: ast.AST) -> set:
    """Keywords bound to a string at registration (``@lowering(OPS.x, form="x")``): a rule
    that prefix-matches one matches an op's name under another name."""
    return {k.arg for d in ast.walk(tree) if isinstance(d, ast.Call) and
            isinstance(d.func, ast.Name) and d.func.id == "lowering"
            for k in d.keywords if isinstance(k.value, ast.Constant) and
            isinstance(k.value.value, str)}


def name_checks(source: str) -> list[str]:
    """Where ``source`` decides by an op's name: ``"line: what"`` for each place."""
    tree = ast.parse(source)
    bad = []
    bound = _bound_strings(tree)
    scopes = [tree] + [n for n in ast.walk(tree)
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    seen: set = set()
    for scope in scopes:
        aliases = _aliases(scope) if scope is not tree else set()
        for node in ast.walk(scope):
            key = (id(node), bool(aliases))
            if key in seen:
                continue
            seen.add(key)
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_is_op_name(s, aliases) for s in sides):
                    bad.append(f"{node.lineno}: compares an op's name")
            elif isinstance(node, ast.Subscript) and _is_op_name(node.slice, aliases):
                bad.append(f"{node.lineno}: a lookup keyed by an op's name")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in ("get", "setdefault", "pop", "__contains__") and \
                        node.args and _is_op_name(node.args[0], aliases):
                    bad.append(f"{node.lineno}: a lookup keyed by an op's name")
                elif node.func.attr in ("startswith", "endswith") and \
                        _is_op_name(node.func.value, aliases):
                    bad.append(f"{node.lineno}: matches an op's name")
                elif node.func.attr in ("startswith", "endswith") and \
                        isinstance(node.func.value, ast.Name) and node.func.value.id in bound:
                    bad.append(f"{node.lineno}: matches a registered string's prefix (register "
                               "a property for the OpDefs instead)")
    for stmt in tree.body:  # module-level tables of op names (``GEMM_OPS = frozenset(...)``)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            if any(_op_name_strings(x) for x in ast.walk(stmt.value)):
                bad.append(f"{stmt.lineno}: a table of op-name strings")
    return sorted(set(bad), key=lambda s: int(s.split(":")[0]))


@pytest.mark.parametrize("bad", [
    "if n.op.name == 'softmax':\n    pass",
    "def f(n):\n    name = n.op.name\n    return name in ('cumsum', 'cumprod')",
    "def f(n):\n    name, p = n.op.name, n.params\n    return name == 'var'",
    "RULES = {}\ndef f(n):\n    return RULES[n.op.name]",
    "def f(n, table):\n    return table.get(n.op.name)",
    "def f(op):\n    return op.name.startswith('cross_entropy')",
    "@lowering(OPS.convolution, form='convolution')\ndef f(lw, i, n, form):\n"
    "    return form.startswith('conv')",
    "OPS_SET = frozenset({'matmul', 'addmm'})",
])
def test_the_check_finds_name_tests(bad):
    assert name_checks(bad), bad


@pytest.mark.parametrize("fine", [
    "def f(n):\n    print(f'{n.op.name} lowered')",
    "def f(n, k):\n    k.ops.append(n.op.name)",
    "def f(d):\n    return d.name != 'int64'",                  # a dtype's name
    "def f(n):\n    return n.op is OPS.softmax or n.op.kind == 'pointwise'",
    "FLOATS = ('float32', 'float64')",
])
def test_the_check_lets_names_be_printed(fine):
    assert not name_checks(fine), fine


def test_no_file_of_the_c_backend_decides_by_op_name():
    files = sorted(C_DIR.rglob("*.py"))
    assert len(files) > 20, files
    bad = [f"{p.relative_to(C_DIR.parent)}:{b}" for p in files for b in name_checks(p.read_text())]
    assert not bad, "op names compared (register a rule for the OpDef instead):\n" + "\n".join(bad)


def test_rules_are_registered_by_opdef():
    """Every registered rule is keyed by a registered OpDef; the families' ops are there."""
    import ember.compiler.c.lower  # noqa: F401 - registers every family's rules

    ops = registry.lowered_ops()
    assert ops and all(REGISTRY[op.name] is op for op in ops)
    for op in (OPS.softmax, OPS.sum, OPS.matmul, OPS.cat, OPS.cumsum, OPS.dropout,
               OPS.embedding, OPS.scaled_dot_product_attention, OPS.layer_norm):
        assert registry.rule_for(op) is not None, op
    assert registry.rule_for(OPS.relu) is registry.rule_for(OPS.exp)   # by kind: pointwise
    assert registry.rule_for(OPS.nonzero) is None                     # an extern
    with pytest.raises(AttributeError, match="no op named"):
        OPS.no_such_op  # noqa: B018


def test_the_loop_ir_is_verified_after_each_pass(monkeypatch):
    """``lower_and_schedule`` verifies the fusion plan, and the program after lowering and
    after scheduling under ``config.verify_ir`` (the suite sets it), and the program once
    before codegen otherwise."""
    import ember
    from ember.compiler.c import backend
    from ember.compiler.c.ir.loop_ir import Program

    graphs = []

    def grab(graph, example_inputs):
        graphs.append(graph)
        return graph.forward

    x = ember.ones(4, 3)
    ember.compile(lambda a: (a * 2).relu().sum(-1), backend=grab)(x)
    assert graphs
    calls = []
    real = Program.verify
    monkeypatch.setattr(Program, "verify", lambda self: calls.append(1) or real(self))
    # the fusion plan (before lowering) is verified under verify_ir too
    from ember.compiler.c.schedule import FusionPlan
    real_plan = FusionPlan.verify
    monkeypatch.setattr(FusionPlan, "verify",
                        lambda self, g: calls.append("plan") or real_plan(self, g))
    for flag, want in ((True, ["plan", 1, 1]), (False, [1])):
        calls.clear()
        monkeypatch.setattr(ember.config.config, "verify_ir", flag)
        program = backend.lower_and_schedule(graphs[0])
        assert calls == want and program.kernels()

"""Graph breaks: a corpus of small programs with known break structure.

Each program is written once against a ``lib`` argument (``ember`` or ``torch``), so the same
source lines run under both.  For every program the tests check, with ``explain``: the number of
graphs and breaks, the ops of each graph, the user line reported for each break
(``break_reasons[i].user_stack[-1]``, the line marked ``# BREAK``), and that compiled results
equal eager ones.  The same corpus then runs under ``error_on_graph_break`` (nested both ways, as
decorator and context manager) and ``fullgraph=True`` (PyTorch's semantics: reference §2).
Where ember's counts agree with PyTorch's design they are compared with ``torch._dynamo.explain``.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import ember
from ember.compiler import GraphBreakError, explain
from ember.errors import EmberError

eog = ember._dynamo.error_on_graph_break


@pytest.fixture(autouse=True)
def _fresh_compiler():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


# ------------------------------------------------------------------------------ the corpus
def _helper(y):
    return y * 3


DISABLED = {"ember": ember.compiler.disable(_helper)}


def p_if(lib, x):
    y = x * 2
    if y.sum() > 0:  # BREAK
        return y + 1
    return y - 1


def p_item(lib, x):
    y = x.sin()
    s = y.sum().item()  # BREAK
    return y * s


def p_print(lib, x):
    y = x + 1
    print(y)  # BREAK
    return y * 2


def p_disable(lib, x):
    y = x + 1
    z = DISABLED[lib.__name__](y)  # BREAK
    return z.cos()


def p_loop(lib, x):
    for _ in range(3):
        x = x + 1
        if x.sum() > 100:  # BREAK
            break
    return x * 2


def _inner(y):
    z = y.exp()
    v = z.max().item()  # BREAK
    return z / v


def p_nested(lib, x):
    a = x + 1
    b = _inner(a)
    return b - 1


def p_tolist(lib, x):
    y = x * 2
    values = y.tolist()  # BREAK
    return y + len(values)


def p_numpy(lib, x):
    y = x * 2
    n = y.numpy()  # BREAK
    return y + float(n.sum())


def p_nonzero(lib, x):
    y = x * 2
    idx = y.nonzero()  # BREAK
    return idx.sum() + y.sum()


def p_mask(lib, x):
    y = x * 2
    m = y[y > 0]  # BREAK
    return m.sum()


def p_graph_break(lib, x):
    y = x + 1
    lib._dynamo.graph_break()  # BREAK
    return y * 2


def p_two_breaks(lib, x):
    y = x.cos()
    a = y.sum().item()  # BREAK
    z = y * a
    if z.mean() > -100:  # BREAK
        z = z + 1
    return z.exp()


# name: (program, graph count, break count, ops per graph, reason pattern)
CORPUS = {
    "if": (p_if, 2, 1, [["mul", "sum", "gt"], ["add"]], r"bool\(\) of a tensor"),
    "item": (p_item, 2, 1, [["sin", "sum"], ["mul"]], r"Tensor\.item\(\)"),
    "print": (p_print, 2, 1, [["add"], ["mul"]], r"printing a tensor"),
    "disable": (p_disable, 2, 1, [["add"], ["cos"]], r"disable'd function _helper"),
    # a break in a loop body breaks in every iteration that runs it (PyTorch 2.13 runs a frame
    # with a break inside a loop eagerly instead: 0 graphs)
    "loop": (p_loop, 4, 3, [["add", "sum", "gt"]] * 3 + [["mul"]], r"bool\(\) of a tensor"),
    "nested": (p_nested, 2, 1, [["add", "exp", "amax"], ["div", "sub"]], r"Tensor\.item\(\)"),
    "tolist": (p_tolist, 2, 1, [["mul"], ["add"]], r"Tensor\.tolist\(\)"),
    "numpy": (p_numpy, 2, 1, [["mul"], ["add"]], r"Tensor\.numpy\(\)"),
    "nonzero": (p_nonzero, 2, 1, [["mul"], ["sum", "sum", "convert_element_type", "add"]],
                r"nonzero has an output shape that depends on the data"),
    "mask": (p_mask, 2, 1, [["mul", "gt"], ["index", "sum"]],
             r"nonzero has an output shape that depends on the data"),
    "graph_break": (p_graph_break, 2, 1, [["add"], ["mul"]], r"graph_break\(\)"),
    "two_breaks": (p_two_breaks, 3, 2, [["cos", "sum"], ["mul", "mean", "gt"], ["add", "exp"]],
                   r"Tensor\.item\(\)|bool\(\) of a tensor"),
}


def _break_lines(fn) -> list:
    """(filename, line) of every statement marked ``# BREAK`` in ``fn`` and ``_inner``."""
    out = []
    for f in (fn, _inner) if fn is p_nested else (fn,):
        src, first = inspect.getsourcelines(f)
        out += [(inspect.getsourcefile(f), first + i) for i, line in enumerate(src)
                if line.rstrip().endswith("# BREAK")]
    return out


def _x():
    return ember.arange(6, dtype=ember.float32) - 2.0


def _eager(prog, x):
    return prog(ember, x)


def _compiled(prog, **kw):
    return ember.compile(lambda x: prog(ember, x), **kw)


def _assert_same(a, b):
    a, b = np.asarray(a.numpy()), np.asarray(b.numpy())
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------ explain
@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_explain(name, capsys):
    prog, graphs, breaks, ops, reason = CORPUS[name]
    ex = explain(lambda x: prog(ember, x))(_x())
    assert ex.graph_count == graphs
    assert ex.graph_break_count == breaks == len(ex.break_reasons)
    assert ex.ops_per_graph == ops
    assert ex.op_count == sum(len(o) for o in ops)
    lines = _break_lines(prog)
    for i, br in enumerate(ex.break_reasons):
        assert br.reason and re.search(reason, br.reason)
        top = br.user_stack[-1]
        expected = lines[0] if len(lines) == 1 else lines[i]
        assert (top.filename, top.lineno) == expected
        # the stack starts at the compiled code, not at its callers (pytest)
        assert all("_pytest" not in fs.filename for fs in br.user_stack)
    text = str(ex)
    assert f"Graph Count: {graphs}" in text and f"Graph Break Count: {breaks}" in text
    if breaks:
        assert "Break Reason 1:" in text and f"line {lines[0][1]}" in text


@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_results_equal_eager(name, capsys):
    prog = CORPUS[name][0]
    f = _compiled(prog)
    for x in (_x(), _x() * -1.0, _x() + 10.0):  # other branches and a cache hit
        _assert_same(f(x), _eager(prog, x))
        _assert_same(f(x), _eager(prog, x))


def test_nested_break_stack_names_both_frames():
    ex = explain(lambda x: p_nested(ember, x))(_x())
    names = [fs.name for fs in ex.break_reasons[0].user_stack]
    assert names[-2:] == ["p_nested", "_inner"]


def test_print_of_a_concrete_tensor_is_not_a_break(capsys):
    # only values of recorded tensors need a break: an input already has its values
    def f(x):
        print(x)
        return x * 2
    ex = explain(f)(_x())
    assert (ex.graph_count, ex.graph_break_count) == (1, 0)
    assert "tensor(" in capsys.readouterr().out


def test_break_with_nothing_recorded_makes_no_empty_graph():
    def f(x):
        ember._dynamo.graph_break()
        return x + 1
    ex = explain(f)(_x())
    assert (ex.graph_count, ex.graph_break_count, ex.ops_per_graph) == (1, 1, [["add"]])


def test_python_side_effects_run_every_call():
    seen = []

    @ember.compile
    def f(x):
        seen.append(1)
        y = x + 1
        if y.sum() > 0:
            seen.append(2)
        return y
    f(_x())
    f(_x())
    assert seen == [1, 2, 1, 2]


# ------------------------------------------------------------------------------ PyTorch
TORCH_AGREES = ["if", "item", "print", "disable", "tolist", "numpy", "nonzero", "mask",
                "graph_break"]


@pytest.mark.parametrize("name", TORCH_AGREES)
def test_corpus_counts_match_torch(name, capsys):
    torch = pytest.importorskip("torch")
    import torch._dynamo as dynamo
    DISABLED.setdefault("torch", torch.compiler.disable(_helper))
    prog, graphs, breaks, _, _ = CORPUS[name]
    dynamo.reset()
    tex = dynamo.explain(lambda x: prog(torch, x))(torch.arange(6, dtype=torch.float32) - 2.0)
    dynamo.reset()
    assert (tex.graph_count, tex.graph_break_count) == (graphs, breaks)
    if name != "numpy":  # torch traces .numpy() and breaks at the NumPy call on the next line
        top = tex.break_reasons[0].user_stack[-1]
        assert (top.filename, top.lineno) == _break_lines(prog)[0]


# ------------------------------------------------------------------------------ error_on_break
BREAKING = [n for n, v in CORPUS.items() if v[2] > 0]


@pytest.mark.parametrize("name", BREAKING)
def test_error_on_graph_break_true_raises_with_reason_and_line(name, capsys):
    prog, _, _, _, reason = CORPUS[name]
    f = _compiled(prog)
    with eog(True), pytest.raises(GraphBreakError, match=reason) as info:
        f(_x())
    err = info.value
    assert isinstance(err, EmberError) and isinstance(err, RuntimeError)
    filename, line = _break_lines(prog)[0]
    assert (err.user_stack[-1].filename, err.user_stack[-1].lineno) == (filename, line)
    assert f'File "{filename}", line {line}' in str(err)
    assert err.reason and re.search(reason, err.reason)
    # after the error nothing is left recording: the function still works
    _assert_same(f(_x()), _eager(prog, _x()))


@pytest.mark.parametrize("name", BREAKING)
def test_false_inside_true_tolerates_breaks(name, capsys):
    prog, graphs, breaks, _, _ = CORPUS[name]

    def ctx(x):
        with eog(True):
            y = x * 1.0
            with eog(False):
                out = prog(ember, y)
        return out

    def deco(x):
        with eog(True):
            return eog(False)(prog)(ember, x * 1.0)

    for wrapper in (ctx, deco):
        ex = explain(wrapper)(_x())
        assert ex.graph_break_count == breaks
        _assert_same(ember.compile(wrapper)(_x()), _eager(prog, _x()))


@pytest.mark.parametrize("name", BREAKING)
def test_true_inside_false_raises(name, capsys):
    prog = CORPUS[name][0]

    def ctx(x):
        with eog(False):
            with eog(True):
                return prog(ember, x)

    @eog(False)
    def deco(x):
        return eog(True)(prog)(ember, x)

    for wrapper in (ctx, deco):
        with pytest.raises(GraphBreakError):
            ember.compile(wrapper)(_x())


def test_innermost_setting_at_the_break_wins():
    def f(x):
        with eog(True):
            y = x * 2  # recorded under True ...
        if y.sum() > 0:  # ... but the break happens after the region: tolerated
            y = y + 1
        return y
    assert explain(f)(_x()).graph_break_count == 1

    def g(x):
        y = x * 2  # recorded under the default ...
        with eog(True):
            return y + (1 if y.sum() > 0 else 0)  # ... the break inside True raises
    with pytest.raises(GraphBreakError, match="bool"):
        ember.compile(g)(_x())


def test_error_on_graph_break_outside_compiled_code_is_a_noop(capsys):
    for name in BREAKING:
        prog = CORPUS[name][0]
        with eog(True):
            out = prog(ember, _x())
        _assert_same(out, _eager(prog, _x()))
    assert eog(True)(p_item)(ember, _x()) is not None


def test_error_on_graph_break_around_a_compiled_call_sets_its_initial_value():
    # PyTorch's docs put the decorator outside torch.compile to set the initial value
    f = ember.compile(lambda x: p_graph_break(ember, x))
    with eog(True), pytest.raises(GraphBreakError):
        f(_x())
    with pytest.raises(GraphBreakError):
        eog(True)(f)(_x())
    with pytest.raises(GraphBreakError):
        ember.compile(eog(True)(lambda x: p_graph_break(ember, x)))(_x())
    _assert_same(f(_x()), _eager(p_graph_break, _x()))  # the setting was restored


def test_error_on_graph_break_restores_after_exceptions():
    from ember._lazy import STATE
    depth = len(STATE.error_on_break)

    @eog(True)
    def bad(x):
        raise ValueError("boom")
    with pytest.raises(ValueError):
        ember.compile(bad)(_x())
    with pytest.raises(ValueError), eog(True):
        raise ValueError("boom")
    assert len(STATE.error_on_break) == depth


def test_error_on_graph_break_reachable_from_both_namespaces():
    assert ember._dynamo.error_on_graph_break is ember.compiler.error_on_graph_break


# ------------------------------------------------------------------------------ fullgraph
@pytest.mark.parametrize("name", BREAKING)
def test_fullgraph_raises_at_the_first_break(name, capsys):
    prog, _, _, _, reason = CORPUS[name]
    with pytest.raises(GraphBreakError, match=reason) as info:
        _compiled(prog, fullgraph=True)(_x())
    assert info.value.user_stack[-1].lineno == _break_lines(prog)[0][1]


def test_fullgraph_stops_at_the_first_break():
    seen = []

    def f(x):
        seen.append("before")
        a = x.sum().item()
        seen.append("after")
        return x * a
    with pytest.raises(GraphBreakError, match="item"):
        ember.compile(f, fullgraph=True)(_x())
    assert seen == ["before"]


def test_fullgraph_without_breaks_is_one_graph():
    f = ember.compile(lambda x: (x * 2).sin().sum(), fullgraph=True)
    _assert_same(f(_x()), (_x() * 2).sin().sum())


def test_fullgraph_takes_precedence_over_inner_false():
    def f(x):
        with eog(False):
            return p_if(ember, x)
    with pytest.raises(GraphBreakError):
        ember.compile(f, fullgraph=True)(_x())
    with pytest.raises(GraphBreakError):
        ember.compile(eog(False)(lambda x: p_if(ember, x)), fullgraph=True)(_x())


def test_inner_fullgraph_under_outer_non_fullgraph_still_errors():
    inner = ember.compile(lambda x: p_graph_break(ember, x), fullgraph=True)

    def outer(x):
        return inner(x) + 1
    with pytest.raises(GraphBreakError):
        ember.compile(outer)(_x())
    # a break in the outer function, outside the inner fullgraph call, is fine
    inner_ok = ember.compile(lambda x: x * 2, fullgraph=True)

    def outer_ok(x):
        y = inner_ok(x)
        ember._dynamo.graph_break()
        return y + 1
    ex = explain(outer_ok)(_x())
    assert (ex.graph_count, ex.graph_break_count) == (2, 1)


def test_inner_non_fullgraph_cannot_turn_fullgraph_off():
    inner = ember.compile(lambda x: p_graph_break(ember, x), fullgraph=False)
    with pytest.raises(GraphBreakError):
        ember.compile(lambda x: inner(x) + 1, fullgraph=True)(_x())


def test_fullgraph_applies_to_disabled_calls():
    with pytest.raises(GraphBreakError, match="disable"):
        _compiled(p_disable, fullgraph=True)(_x())


def test_disable_outside_compiled_code_just_calls():
    assert DISABLED["ember"](ember.ones(2)).tolist() == [3.0, 3.0]
    reasoned = ember.compiler.disable(_helper, reason="third-party code")
    ex = explain(lambda x: reasoned(x + 1) - 1)(_x())
    assert "third-party code" in ex.break_reasons[0].reason


def _mutating(p, x):
    p.add_(1)
    p[0].mul_(10)
    p[1:].sub_(0.5)
    return x * p.sum().item()


def test_graph_break_error_leaves_inputs_unwritten():
    # PyTorch raises before the graph runs: the recorded in-place writes never happen
    p, x = ember.ones(3), ember.ones(2)
    with pytest.raises(GraphBreakError, match="item"):
        ember.compile(_mutating, fullgraph=True)(p, x)
    assert p.tolist() == [1.0, 1.0, 1.0]
    with eog(True), pytest.raises(GraphBreakError):
        ember.compile(_mutating)(p, x)
    assert p.tolist() == [1.0, 1.0, 1.0]
    q = ember.ones(3)
    _assert_same(ember.compile(_mutating)(p, x), _mutating(q, x))
    assert p.tolist() == q.tolist() == [20.0, 1.5, 1.5]


def test_user_exception_keeps_the_effects_before_it():
    def f(p):
        p.mul_(3)
        raise ValueError("boom")
    p = ember.ones(2)
    with pytest.raises(ValueError):
        ember.compile(f)(p)
    assert p.tolist() == [3.0, 3.0]  # as in eager


def test_break_inside_a_nested_compiled_function():
    # a compiled function called from compiled code is inlined: its break splits the caller
    inner = ember.compile(_inner)

    def outer(x):
        return inner(x + 1) - 1
    ex = explain(outer)(_x())
    assert (ex.graph_count, ex.graph_break_count) == (2, 1)
    top = ex.break_reasons[0].user_stack[-1]
    assert (top.filename, top.lineno) == _break_lines(p_nested)[0]
    assert [fs.name for fs in ex.break_reasons[0].user_stack][-2:] == ["outer", "_inner"]
    _assert_same(ember.compile(outer)(_x()), p_nested(ember, _x()))

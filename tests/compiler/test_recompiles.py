"""Recompiles and dynamic shapes (reference §1.4-1.6), custom backends, ``ember.compile``'s
arguments, logging and ``explain``'s report.  Compiles are counted with a custom backend."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import ember
from ember.compiler import Graph, explain
from ember.compiler.frontend.api import RecompileLimitWarning, compiler_config
from ember.config import config
from tests.compiler.helpers import Counting


@pytest.fixture(autouse=True)
def _fresh_compiler():
    ember.compiler.reset()
    yield
    ember.compiler.reset()




def _inputs(graph):
    return [tuple(repr(s) for s in shape) for shape, _ in graph.inputs]


# ------------------------------------------------------------------------------ per code object
def test_copies_of_a_function_share_one_cache():
    cb = Counting()

    def base(x):
        return x.sin() * 2
    a = ember.compile(base, backend=cb)
    b = ember.compile(base, backend=cb)
    a(ember.ones(3))
    b(ember.ones(3))
    assert cb.count == 1
    c = ember.compile(lambda x: x.sin() * 2, backend=cb)  # another code object
    c(ember.ones(3))
    assert cb.count == 2


def test_decorated_functions_do_not_share_the_wrapper_cache():
    # functions wrapped by the same decorator (one wrapper code object) keep separate caches
    cb = Counting()
    eog = ember._dynamo.error_on_graph_break
    f = ember.compile(eog(False)(lambda x: x + 1), backend=cb, dynamic=False)
    g = ember.compile(eog(False)(lambda x: x * 2), backend=cb, dynamic=False)
    with ember.compiler.set_stance("fail_on_recompile"):
        f(ember.ones(2))
        g(ember.ones(3))  # a first compile of g's code, not a recompile of the wrapper's
    assert cb.count == 2


# ------------------------------------------------------------------------------ recompile_limit
def test_recompile_limit_default_and_alias():
    assert compiler_config.recompile_limit == 8
    assert ember._dynamo.config is compiler_config is ember.compiler.config
    assert compiler_config.cache_size_limit == 8


def test_recompile_limit_runs_new_graphs_eagerly_with_one_warning():
    cb = Counting()

    @ember.compile(backend=cb, dynamic=False)
    def k(x):
        return x + 1

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(2, 14):
            assert k(ember.zeros(n)).tolist() == [1.0] * n
        got = [x for x in w if issubclass(x.category, RecompileLimitWarning)]
        assert cb.count == 8
        assert len(got) == 1
        msg = str(got[0].message)
        assert "hit config.recompile_limit (8)" in msg
        assert "function: 'k'" in msg and __file__ in msg
        # the last reason: what differs from the newest cached graph
        assert "last reason: 0/7: tensor 'x' size mismatch at index 0. expected 9, actual 10" \
            in msg
        assert got[0].filename == __file__  # points at the user's call
        # existing entries are still used
        k(ember.zeros(3))
        k(ember.zeros(9))
    assert cb.count == 8


def test_recompile_limit_is_configurable(monkeypatch):
    monkeypatch.setattr(compiler_config, "recompile_limit", 2)
    cb = Counting()
    f = ember.compile(lambda x: x * 2, backend=cb, dynamic=False)
    with pytest.warns(RecompileLimitWarning, match=r"recompile_limit \(2\)"):
        for n in (2, 3, 4, 5):
            assert f(ember.ones(n)).tolist() == [2.0] * n
    assert cb.count == 2


def test_recompile_limit_warns_once_per_function_across_graphs():
    cb = Counting()

    @ember.compile(backend=cb, dynamic=False)
    def f(x):
        y = x + 1
        ember._dynamo.graph_break()
        return y * 2

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(2, 12):
            f(ember.ones(n))
    assert len([x for x in w if issubclass(x.category, RecompileLimitWarning)]) == 1
    assert cb.count == 16  # 8 per graph position


# ------------------------------------------------------------------------------ logging
def _run_f(sizes):
    @ember.compile
    def f(x):
        y = x * 2
        if y.sum() > 0:
            return y + 1
        return y
    for n in sizes:
        f(ember.ones(n))
    return f


def test_logs_recompiles(monkeypatch, capsys):
    monkeypatch.setattr(config, "logs", frozenset({"recompiles"}))
    _run_f((3, 4))
    err = capsys.readouterr().err
    assert "[ember.compiler recompiles] Recompiling function f in " + __file__ in err
    assert "triggered by the following guard failure(s):" in err
    assert "- 0/0: tensor 'x' size mismatch at index 0. expected 3, actual 4" in err
    assert "graph break" not in err.lower()


def test_logs_graph_breaks(monkeypatch, capsys):
    monkeypatch.setattr(config, "logs", frozenset({"graph_breaks"}))
    _run_f((3,))
    err = capsys.readouterr().err
    assert f"Graph break in user code at {__file__}:" in err
    assert "Graph Break Reason: bool() of a tensor" in err
    assert "if y.sum() > 0:" in err
    assert "Recompiling" not in err and "def graph" not in err


def test_logs_graphs(monkeypatch, capsys):
    monkeypatch.setattr(config, "logs", frozenset({"graphs"}))
    _run_f((3,))
    err = capsys.readouterr().err
    assert err.count("def graph(") == 2 and "REGISTRY['mul']" in err


def test_logs_are_quiet_by_default(monkeypatch, capsys):
    monkeypatch.setattr(config, "logs", frozenset())
    _run_f((3, 4))
    assert capsys.readouterr().err == ""


def test_ember_logs_is_read_at_import():
    code = ("import ember\n@ember.compile\ndef f(x):\n    return x + 1\n"
            "f(ember.ones(2)); f(ember.ones((2, 2)))\n")
    env = dict(os.environ, EMBER_LOGS="recompiles,graph_breaks")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, cwd=os.getcwd())
    assert out.returncode == 0, out.stderr
    assert "Recompiling function f" in out.stderr
    assert "rank mismatch. expected 1, actual 2" in out.stderr


# ------------------------------------------------------------------------------ dynamic shapes
def test_automatic_dynamic_sizes_3_4_5_two_compiles():
    cb = Counting()
    f = ember.compile(lambda x: x * 2 + 1, backend=cb)
    for n in (3, 4, 5, 6, 7):
        assert f(ember.ones(n)).tolist() == [3.0] * n
    assert cb.count == 2
    assert _inputs(cb.graphs[0]) == [("3",)]
    assert _inputs(cb.graphs[1]) == [("s0",)]


def test_automatic_dynamic_only_the_dims_that_changed():
    cb = Counting()
    f = ember.compile(lambda x: x.sum(1), backend=cb)
    for n in (3, 4, 5):
        assert f(ember.ones(n, 7)).tolist() == [7.0] * n
    assert cb.count == 2 and _inputs(cb.graphs[1]) == [("s0", "7")]
    f(ember.ones(3, 8))  # the other dim changes: one more compile, generic in both
    assert cb.count == 3 and _inputs(cb.graphs[2]) == [("s0", "s1")]
    f(ember.ones(9, 9))
    assert cb.count == 3


def test_sizes_0_and_1_stay_specialized():
    cb = Counting()
    f = ember.compile(lambda x: x + 1, backend=cb)
    for n in (3, 4, 5):
        f(ember.ones(n))
    assert cb.count == 2
    for n in (0, 1, 0, 1, 6):
        assert f(ember.ones(n)).tolist() == [2.0] * n
    assert cb.count == 4
    assert sorted(_inputs(g) for g in cb.graphs[2:]) == [[("0",)], [("1",)]]


def test_mark_dynamic_generic_from_the_first_compile():
    cb = Counting()
    f = ember.compile(lambda x: x.cos(), backend=cb)
    x = ember.ones(5, 3)
    ember._dynamo.mark_dynamic(x, 0)
    f(x)
    assert _inputs(cb.graphs[0]) == [("s0", "3")]
    for n in (6, 7, 8):
        assert ember.allclose(f(ember.ones(n, 3)), ember.ones(n, 3).cos())
    assert cb.count == 1


def test_maybe_mark_dynamic_and_lists_of_dims():
    cb = Counting()
    f = ember.compile(lambda x: x.exp(), backend=cb)
    x = ember.ones(5, 4)
    ember._dynamo.maybe_mark_dynamic(x, [0, 1])
    f(x)
    assert _inputs(cb.graphs[0]) == [("s0", "s1")]
    f(ember.ones(2, 9))
    assert cb.count == 1


def test_mark_static_keeps_specializing():
    cb = Counting()
    f = ember.compile(lambda x: x.tanh(), backend=cb)
    for n in (5, 6, 7):
        x = ember.ones(n)
        ember._dynamo.mark_static(x, 0)
        f(x)
    assert cb.count == 3
    assert [_inputs(g) for g in cb.graphs] == [[("5",)], [("6",)], [("7",)]]


def test_mark_dynamic_inside_compiled_code_raises():
    def f(x):
        ember._dynamo.mark_dynamic(x, 0)
        return x + 1
    with pytest.raises(RuntimeError, match="before the compiled call"):
        ember.compile(f)(ember.ones(3))
    with pytest.raises(RuntimeError, match="out of range"):
        ember._dynamo.mark_dynamic(ember.ones(3), 2)


def test_dynamic_true_and_false():
    cb = Counting()
    f = ember.compile(lambda x: x.sin(), backend=cb, dynamic=True)
    f(ember.ones(5))
    assert _inputs(cb.graphs[0]) == [("s0",)]
    f(ember.ones(6))
    f(ember.ones(1))  # 1 stays specialized even with dynamic=True
    assert cb.count == 2
    cb2 = Counting()
    g = ember.compile(lambda x: x.sin(), backend=cb2, dynamic=False)
    for n in (3, 4, 5, 4):
        g(ember.ones(n))
    assert cb2.count == 3 and all("s0" not in gr.python() for gr in cb2.graphs)


# ------------------------------------------------------------------------------ scalars
def test_learning_rate_schedule_at_most_two_compiles():
    cb = Counting()
    f = ember.compile(lambda x, lr: x * lr, backend=cb)
    x = ember.ones(3)
    for step in range(20):
        lr = 0.1 * 0.9 ** step
        assert f(x, lr).tolist() == (ember.ones(3) * lr).tolist()
    assert cb.count == 2
    assert cb.graphs[1].num_scalars == 1


def test_inplace_add_with_changing_alpha():
    cb = Counting()

    @ember.compile(backend=cb)
    def step(p, g, lr):
        p.add_(g, alpha=-lr)

    p, g = ember.ones(3), ember.full((3,), 0.5)
    expected = np.ones(3, dtype=np.float32)
    for i in range(10):
        lr = 0.1 / (i + 1)
        step(p, g, lr)
        expected = expected - np.float32(lr) * np.float32(0.5)
    np.testing.assert_allclose(p.numpy(), expected, rtol=1e-6)
    assert cb.count == 2


def test_int_scalar_and_dynamic_false_scalars():
    cb = Counting()
    f = ember.compile(lambda x, n: x + n, backend=cb)
    for n in range(5):
        assert f(ember.zeros(2), n).tolist() == [float(n)] * 2
    assert cb.count == 2
    cb2 = Counting()
    g = ember.compile(lambda x, lr: x * lr, backend=cb2, dynamic=False)
    for lr in (0.1, 0.2, 0.3):
        g(ember.ones(2), lr)
    assert cb2.count == 3


# ------------------------------------------------------------------------------ backends
def test_custom_backend_gets_graph_and_example_inputs():
    cb = Counting()
    f = ember.compile(lambda x, y: (x @ y).relu(), backend=cb)
    out = f(ember.ones(2, 3), ember.ones(3, 4))
    assert out.tolist() == [[3.0] * 4] * 2
    g, ex = cb.graphs[0], cb.examples[0]
    assert isinstance(g, Graph)
    g.verify()
    assert [tuple(e.shape) for e in ex] == [(2, 3), (3, 4)]
    assert all(isinstance(e, ember.Tensor) for e in ex)


def test_custom_backend_result_is_used():
    def doubling(graph, example_inputs):
        def run(*args):
            return tuple(o * 2 for o in graph.forward(*args))
        return run
    f = ember.compile(lambda x: x + 1, backend=doubling)
    assert f(ember.zeros(2)).tolist() == [2.0, 2.0]


def test_register_backend_and_list_backends():
    from ember.compiler.frontend.backends import _BACKENDS, _TAGS
    try:
        @ember._dynamo.register_backend
        def my_test_backend(graph, example_inputs):
            return graph.forward

        ember._dynamo.register_backend(my_test_backend, name="my_debug_backend",
                                       tags=("debug",))
        assert "my_test_backend" in ember._dynamo.list_backends()
        assert "my_debug_backend" not in ember._dynamo.list_backends()
        assert "eager" not in ember._dynamo.list_backends()
        assert {"eager", "my_debug_backend"} <= set(ember._dynamo.list_backends(None))
        f = ember.compile(lambda x: x - 1, backend="my_test_backend")
        assert f(ember.ones(1)).tolist() == [0.0]
        with pytest.raises(RuntimeError, match="duplicate name"):
            ember._dynamo.register_backend(my_test_backend)
    finally:
        for k in ("my_test_backend", "my_debug_backend"):
            _BACKENDS.pop(k, None)
            _TAGS.pop(k, None)


def test_unknown_backend_and_bad_backend_result():
    with pytest.raises(RuntimeError, match="Invalid backend: 'nope'"):
        ember.compile(lambda x: x, backend="nope")
    f = ember.compile(lambda x: x + 1, backend=lambda g, ex: 42)
    with pytest.raises(TypeError, match="expected a callable"):
        f(ember.ones(1))


# ------------------------------------------------------------------------------ ember.compile
def test_compile_as_decorator_with_and_without_arguments():
    @ember.compile
    def a(x):
        return x + 1

    @ember.compile()
    def b(x):
        return x + 2

    @ember.compile(fullgraph=True, dynamic=False, backend="eager")
    def c(x):
        return x + 3
    for f, k in ((a, 1), (b, 2), (c, 3)):
        assert isinstance(f, ember.compiler.CompiledFunction)
        assert f(ember.zeros(1)).tolist() == [float(k)]
    assert a.__name__ == "a" and a.__wrapped__.__name__ == "a"


def test_compile_methods():
    class Thing:
        def __init__(self):
            self.k = 3.0

        @ember.compile
        def scale(self, x):
            return x * self.k
    t = Thing()
    assert t.scale(ember.ones(2)).tolist() == [3.0, 3.0]


def test_mode_and_options_are_mutually_exclusive():
    with pytest.raises(RuntimeError, match="Either mode or options can be specified, but both "
                                           "can't be specified at the same time."):
        ember.compile(lambda x: x, mode="max-autotune", options={"max_autotune": True})
    with pytest.raises(RuntimeError, match="mode"):
        ember.compile(lambda x: x, mode="bogus")


def test_disable_true_returns_the_function():
    def f(x):
        return x
    assert ember.compile(f, disable=True) is f
    m = ember.nn.Linear(2, 2)
    assert ember.compile(m, disable=True) is m
    assert ember.compile(disable=True)(f) is f


# ------------------------------------------------------------------------------ explain
def test_explain_fields_and_str():
    def f(x):
        y = x.sin()
        a = y.sum().item()
        return (y * a).exp()
    ex = explain(f)(ember.ones(3))
    assert (ex.graph_count, ex.graph_break_count, ex.op_count) == (2, 1, 4)
    assert ex.ops_per_graph == [["sin", "sum"], ["mul", "exp"]]
    assert len(ex.graphs) == 2 and all(isinstance(g, Graph) for g in ex.graphs)
    br = ex.break_reasons[0]
    assert br.reason == "Tensor.item()"
    assert br.user_stack[-1].name == "f" and br.user_stack[-1].filename == __file__
    assert "ms" in ex.compile_times
    text = str(ex)
    for part in ("Graph Count: 2", "Graph Break Count: 1", "Op Count: 4", "Break Reasons:",
                 "Reason: Tensor.item()", "a = y.sum().item()", "Ops per Graph:", "Ops 2:",
                 "Compile Times:"):
        assert part in text, part
    assert ex.recompile_reasons == []


def test_explain_resets_and_reports_recompile_reasons():
    inner = ember.compile(lambda x: x * 2)

    @ember.compiler.disable
    def helper(x):  # runs eagerly: its compiled calls are frames of their own
        return inner(ember.ones(3)) + inner(ember.ones((3, 3))).sum()

    def f(x):
        return helper(x + 1) - 1
    ex = explain(f)(ember.ones(3))
    assert ex.recompile_reasons == ["0/0: tensor 'x' rank mismatch. expected 1, actual 2"]
    assert "Recompile Reasons:" in str(ex)


def test_explain_accepts_extra_args_and_compiled_functions():
    cf = ember.compile(lambda x, y: x + y)
    ex = explain(cf, ember.ones(2))(ember.ones(2))
    assert (ex.graph_count, ex.ops_per_graph) == (1, [["add"]])


def test_partials_and_bound_methods_share_their_function_cache():
    import functools
    cb = Counting()

    def scale(k, x):
        return x * k
    f2 = ember.compile(functools.partial(scale, 2.0), backend=cb)
    f3 = ember.compile(functools.partial(scale, 3.0), backend=cb)
    assert f2(ember.ones(1)).tolist() == [2.0]
    assert f3(ember.ones(1)).tolist() == [3.0]  # same code: the scalar became an argument
    assert cb.count == 2 and cb.graphs[1].num_scalars == 1
    with ember.compiler.set_stance("fail_on_recompile"):
        f4 = ember.compile(functools.partial(scale, 4.0), backend=cb)
        assert f4(ember.ones(1)).tolist() == [4.0]


def test_recompile_limit_with_fullgraph_raises(monkeypatch):
    # PyTorch 2.13: "Hard failure due to fullgraph=True" instead of running eagerly
    monkeypatch.setattr(compiler_config, "recompile_limit", 2)
    f = ember.compile(lambda x: x + 1, fullgraph=True, dynamic=False)
    f(ember.ones(2))
    f(ember.ones(3))
    with pytest.raises(ember.compiler.RecompileError, match=r"recompile_limit \(2\) with "
                       r"fullgraph=True[\s\S]*expected 3, actual 4"):
        f(ember.ones(4))
    assert f(ember.ones(3)).tolist() == [2.0] * 3


def test_logs_graph_breaks_of_a_call_that_raises(monkeypatch, capsys):
    monkeypatch.setattr(config, "logs", frozenset({"graph_breaks"}))

    @ember.compile
    def f(x):
        if (x * 2).sum() > 0:
            raise ValueError("positive")
        return x
    with pytest.raises(ValueError):
        f(ember.ones(2))
    assert "Graph Break Reason: bool() of a tensor" in capsys.readouterr().err


def test_cache_entries_are_per_backend():
    # PyTorch: a copy of a function compiled with another backend compiles again; going back to
    # the first backend reuses its entry
    b1, b2 = Counting(), Counting()

    def f(x):
        return x + 1
    ember.compile(f, backend=b1)(ember.ones(2))
    ember.compile(f, backend=b2)(ember.ones(2))
    ember.compile(f, backend=b1)(ember.ones(2))
    assert (b1.count, b2.count) == (1, 1)
    with ember.compiler.set_stance("default", force_backend=b2):
        ember.compile(f, backend=b1)(ember.ones(2))
    assert (b1.count, b2.count) == (1, 1)
    with ember.compiler.set_stance("fail_on_recompile"), \
            pytest.raises(ember.compiler.RecompileError, match="backend mismatch"):
        ember.compile(f, backend="eager")(ember.ones(2))


def test_marks_win_over_the_dynamic_argument():
    # PyTorch: mark_dynamic is honoured under dynamic=False; mark_static under dynamic=True
    cb = Counting()
    f = ember.compile(lambda x: x + 1, backend=cb, dynamic=False)
    x = ember.ones(5)
    ember._dynamo.mark_dynamic(x, 0)
    f(x)
    f(ember.ones(6))  # the generic graph serves it (one compile in PyTorch too)
    assert [_inputs(g) for g in cb.graphs] == [[("s0",)]]
    cb2 = Counting()
    g = ember.compile(lambda x: x * 2, backend=cb2, dynamic=True)
    y = ember.ones(4, 5)
    ember._dynamo.mark_static(y, 1)
    g(y)
    assert _inputs(cb2.graphs[0]) == [("s0", "5")]

"""``ember.compiler.set_stance``: PyTorch's stances (reference §3), checked with a counting
backend: which calls compile, which run eagerly, and which raise."""

from __future__ import annotations

import pytest

import ember
from ember.compiler import set_stance
from ember.compiler.frontend.explain import explain
from tests.compiler.helpers import Counting


@pytest.fixture(autouse=True)
def _fresh_compiler():
    ember.compiler.reset()
    set_stance("default")
    yield
    set_stance("default")
    ember.compiler.reset()




def _check(out, expected):
    assert out.tolist() == expected


# ------------------------------------------------------------------------------ forms
def test_function_context_manager_and_decorator_forms():
    cb = Counting()
    f = ember.compile(lambda x: x + 1, backend=cb)
    set_stance("force_eager")
    _check(f(ember.zeros(2)), [1.0, 1.0])
    assert cb.count == 0
    set_stance("default")
    f(ember.zeros(2))
    assert cb.count == 1

    with set_stance("force_eager"):
        f(ember.zeros(5))
        with set_stance("default"):  # nested: the inner stance wins, the outer comes back
            f(ember.zeros(6))
        f(ember.zeros(7))
    assert cb.count == 2
    f(ember.zeros(8))  # default again: 8 is served by the size-generic graph compiled for 6
    assert cb.count == 2

    @set_stance("force_eager")
    def run(x):
        return f(x)
    assert ember.compiler.frontend.api._STANCE.stance == "default"  # decorating changes nothing now
    _check(run(ember.zeros((2, 2))), [[1.0, 1.0], [1.0, 1.0]])
    assert cb.count == 2


def test_force_eager_records_nothing_and_keeps_side_effects():
    seen = []

    def f(x):
        seen.append(1)
        y = x * 2
        if y.sum() > 0:
            y = y + 1
        return y

    with set_stance("force_eager"):
        ex = explain(f)(ember.ones(3))
    assert (ex.graph_count, ex.graph_break_count, ex.op_count) == (0, 0, 0)
    assert seen == [1]
    cb = Counting()
    g = ember.compile(f, backend=cb, fullgraph=True)
    with set_stance("force_eager"):  # not even fullgraph applies: nothing is compiled
        _check(g(ember.ones(3)), [3.0, 3.0, 3.0])
    assert cb.count == 0


def test_force_eager_ignores_compile_of_modules():
    cb = Counting()
    m = ember.compile(ember.nn.Linear(3, 2), backend=cb)
    x = ember.ones(4, 3)
    with set_stance("force_eager"):
        y = m(x)
    assert cb.count == 0
    assert ember.allclose(y, m._orig_mod(x))


# ------------------------------------------------------------------------------ recompiles
def test_eager_on_recompile_tutorial_sequence():
    # PyTorch's set_stance tutorial: zeros(3) compiled, zeros(4) eager, zeros(3) compiled again
    cb = Counting()

    @ember.compile(backend=cb)
    def my_fn(x):
        return x + 1

    _check(my_fn(ember.zeros(3)), [1.0] * 3)
    assert cb.count == 1
    with set_stance("eager_on_recompile"):
        _check(my_fn(ember.zeros(4)), [1.0] * 4)
        assert cb.count == 1
        _check(my_fn(ember.zeros(3)), [1.0] * 3)
        assert cb.count == 1
    # back to default: zeros(4) now compiles (size-generic after the change)
    _check(my_fn(ember.zeros(4)), [1.0] * 4)
    assert cb.count == 2


def test_eager_on_recompile_with_graph_breaks_uses_cached_segments():
    cb = Counting()

    @ember.compile(backend=cb)
    def f(x):
        y = x * 2
        if y.sum() >= 0:
            return y + 1
        return y - 1

    f(ember.ones(3))
    assert cb.count == 2
    with set_stance("eager_on_recompile"):
        _check(f(-ember.ones(3)), [-3.0] * 3)  # graph 0 hits, graph 1 is new: eager
        _check(f(ember.ones(3)), [3.0] * 3)
    assert cb.count == 2


def test_fail_on_recompile_names_function_file_line_and_differences():
    cb = Counting()

    @ember.compile(backend=cb, dynamic=False)
    def g(x, scale):
        return x * scale

    g(ember.zeros(3), 2.0)
    g(ember.zeros((3, 3)), 2.0)
    with set_stance("fail_on_recompile"):
        _check(g(ember.zeros(3), 2.0), [0.0] * 3)  # cached: fine
        with pytest.raises(RuntimeError) as info:
            g(ember.zeros(5), 2.0)
    msg = str(info.value)
    code = g.__wrapped__.__code__
    assert "Detected recompile when ember.compile stance is 'fail_on_recompile'" in msg
    assert f"filename: '{code.co_filename}'" in msg
    assert "function name: 'g'" in msg
    assert f"line number: {code.co_firstlineno}" in msg
    # one line per cached graph, newest first, saying what differs from it
    assert "- 0/1: tensor 'x' rank mismatch. expected 2, actual 1" in msg
    assert "- 0/0: tensor 'x' size mismatch at index 0. expected 3, actual 5" in msg
    assert msg.index("0/1") < msg.index("0/0")
    assert cb.count == 2


def test_fail_on_recompile_first_compile_is_not_a_recompile():
    cb = Counting()
    f = ember.compile(lambda x: x - 1, backend=cb)
    with set_stance("fail_on_recompile"):
        _check(f(ember.ones(2)), [0.0, 0.0])
        _check(f(ember.ones(2)), [0.0, 0.0])
    assert cb.count == 1


def test_fail_on_recompile_scalar_change_names_the_scalar():
    f = ember.compile(lambda x, lr: x * lr, dynamic=False)
    f(ember.ones(2), 0.5)
    with set_stance("fail_on_recompile"), pytest.raises(RuntimeError,
                                                        match=r"expected 0\.5, actual 0\.25"):
        f(ember.ones(2), 0.25)


def test_fail_on_recompile_ignores_frames_without_tensors():
    cb = Counting()

    @ember.compile(backend=cb)
    def pure(a):
        return a + 1

    @ember.compile(backend=cb, dynamic=False)
    def make(n):
        return ember.ones(n) * 2

    assert pure(1) == 2
    make(2)
    with set_stance("fail_on_recompile"):
        assert pure(2) == 3
        _check(make(3), [2.0] * 3)  # no tensor comes in: runs eagerly, no error
    assert cb.count == 1


def test_eager_then_compile_first_call_eager_then_dynamic():
    # PyTorch: sizes 3, 4, 5, 6 under eager_then_compile -> 0, 1, 1, 1 compiles
    cb = Counting()
    f = ember.compile(lambda x: x * 3, backend=cb)
    counts = []
    with set_stance("eager_then_compile"):
        for n in (3, 4, 5, 6):
            _check(f(ember.ones(n)), [3.0] * n)
            counts.append(cb.count)
    assert counts == [0, 1, 1, 1]
    assert "s0" in cb.graphs[0].python()  # compiled size-generic from the start


def test_eager_then_compile_counts_per_code_object():
    cb = Counting()

    def base(x):
        return x.cos()
    a, b = ember.compile(base, backend=cb), ember.compile(base, backend=cb)
    with set_stance("eager_then_compile"):
        a(ember.ones(2))
        b(ember.ones(2))  # the second call of the same code: compiles
    assert cb.count == 1


# ------------------------------------------------------------------------------ errors
def test_invalid_stance_raises_when_a_compiled_function_is_next_called():
    f = ember.compile(lambda x: x + 1)
    set_stance("bogus")  # PyTorch accepts the name here ...
    assert (ember.ones(1) + 1).tolist() == [2.0]  # eager code is unaffected
    with pytest.raises(RuntimeError, match="invalid ember.compile stance 'bogus'"):
        f(ember.ones(1))  # ... and raises at the next compiled call
    set_stance("default")
    _check(f(ember.ones(1)), [2.0])
    with set_stance("nope"), pytest.raises(RuntimeError, match="invalid ember.compile stance"):
        f(ember.ones(1))
    _check(f(ember.ones(1)), [2.0])


def test_force_backend_only_with_default_stance():
    cb = Counting()
    for stance in ("force_eager", "eager_on_recompile", "fail_on_recompile",
                   "eager_then_compile"):
        with pytest.raises(RuntimeError, match="non-default stance cannot have force_backend"):
            set_stance(stance, force_backend=cb)
    assert ember.compiler.frontend.api._STANCE.stance == "default"
    f = ember.compile(lambda x: x * 5)  # its own backend is "eager"
    with set_stance("default", force_backend=cb):
        _check(f(ember.ones(2)), [5.0, 5.0])
    assert cb.count == 1


def test_set_stance_inside_a_compiled_region_raises():
    def call(x):
        set_stance("force_eager")
        return x

    def ctx(x):
        with set_stance("force_eager"):
            return x + 1

    @set_stance("force_eager")
    def decorated(x):
        return x + 1

    for body in (call, ctx, lambda x: decorated(x)):
        with pytest.raises(RuntimeError, match="attempted to set_stance in an ember.compile "
                                               "region"):
            ember.compile(body)(ember.ones(2))
    assert ember.compiler.frontend.api._STANCE.stance == "default"
    # a disable'd function runs eagerly, outside the region: allowed there
    f = ember.compile(lambda x: ember.compiler.disable(decorated)(x) * 2)
    _check(f(ember.ones(2)), [4.0, 4.0])


def test_skip_guard_eval_unsafe_is_accepted():
    f = ember.compile(lambda x: x + 2)
    with set_stance("default", skip_guard_eval_unsafe=True):
        _check(f(ember.ones(2)), [3.0, 3.0])


def test_set_stance_in_both_namespaces():
    assert ember._dynamo.set_stance is ember.compiler.set_stance


def test_fail_on_recompile_error_leaves_inputs_unwritten():
    @ember.compile(dynamic=False)
    def step(p, g):
        p.add_(g)
        return p * 2

    step(ember.ones(3), ember.ones(3))
    p = ember.ones(4)
    with set_stance("fail_on_recompile"), pytest.raises(ember.compiler.RecompileError):
        step(p, ember.ones(4))
    assert p.tolist() == [1.0] * 4
    _check(step(p, ember.ones(4)), [4.0] * 4)
    assert p.tolist() == [2.0] * 4

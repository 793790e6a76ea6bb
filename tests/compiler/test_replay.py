"""mode="reduce-overhead": replay without Python when guards pass (compiler/frontend/replay.py).

The oracle is eager ember: every replayed result is compared with the same function run eagerly.
A counter inside the compiled function shows which calls ran Python (recording calls) and which
replayed; that the counter does not move on replay is the documented contract.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.compiler.frontend.replay import ReplayFunction


@pytest.fixture(autouse=True)
def _fresh():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


def _close(a: ember.Tensor, b: ember.Tensor) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)


def _mlp() -> nn.Module:
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, 3))


def _counted(fn):
    calls = [0]

    def wrapper(*args, **kwargs):
        calls[0] += 1
        return fn(*args, **kwargs)
    wrapper.calls = calls
    return wrapper


# ------------------------------------------------------------------------------ basics
def test_dispatch_makes_replay_functions():
    f = ember.compile(lambda x: x + 1, mode="reduce-overhead")
    assert isinstance(f, ReplayFunction)
    m = _mlp()
    om = ember.compile(m, mode="reduce-overhead")
    assert isinstance(om._compiled, ReplayFunction)
    m2 = _mlp()
    m2.compile(mode="reduce-overhead")
    assert isinstance(m2._compiled_call_impl, ReplayFunction)


def test_mlp_replay_equals_eager_and_skips_python():
    m = _mlp()
    cm = ember.compile(m, mode="reduce-overhead")
    seen = []
    m[0].register_forward_pre_hook(lambda mod, args: seen.append(1))  # Python in the forward
    with ember.no_grad():
        for i in range(5):
            x = ember.randn(8, 6)
            n = len(seen)
            _close(cm(x), m(x))  # eager runs the hook too
            assert len(seen) == n + 1 + (i == 0)  # the compiled call ran Python only once
    rf = cm._compiled
    assert rf.record_count == 1 and rf.replay_count == 4


def test_side_effects_happen_on_recording_calls_only():
    log = []

    @ember.compile(mode="reduce-overhead")
    def f(x, y):
        log.append("called")
        return (x * y).sin() + 1

    x, y = ember.randn(3, 4), ember.randn(3, 4)
    for _ in range(4):
        _close(f(x, y), (x * y).sin() + 1)
    assert log == ["called"]
    assert f.replay_count == 3


def test_outputs_are_fresh_tensors():
    f = ember.compile(lambda x: (x * 2).exp(), mode="reduce-overhead")
    x = ember.randn(5)
    a = f(x)
    b = f(x)
    c = f(x)
    assert f.replay_count == 2
    assert a is not b and b is not c
    assert not np.shares_memory(b.numpy(), c.numpy())
    b.add_(100.0)   # writing into one result leaves the next one alone
    _close(f(x), (x * 2).exp())
    _close(c, (x * 2).exp())
    assert b._version == 1 and c._version == 0 and c.grad_fn is None and c.is_leaf


def test_new_argument_values_are_read_on_replay():
    f = ember.compile(lambda x, w: x @ w, mode="reduce-overhead")
    for _ in range(3):
        x, w = ember.randn(4, 3), ember.randn(3, 2)
        _close(f(x, w), x @ w)
    assert f.replay_count == 2


def test_eager_inplace_changes_of_parameters_are_seen():
    m = _mlp()
    cm = ember.compile(m, mode="reduce-overhead")
    x = ember.randn(2, 6)
    with ember.no_grad():
        cm(x)
        m[0].weight.mul_(0.5)   # same array, new values
        _close(cm(x), m(x))
    assert cm._compiled.replay_count == 1


# ------------------------------------------------------------------------------ guards
def _retraces(f, calls, make_args, change, expect_eager):
    """Call, replay, change something, call: the change must re-record with eager results."""
    f(*make_args())
    f(*make_args())
    before = calls[0]
    assert before == 1
    args = change()
    out = f(*args)
    assert calls[0] == 2, "the change did not re-record"
    _close(out, expect_eager(*args))
    out = f(*args)      # and the new state replays
    assert calls[0] == 2
    _close(out, expect_eager(*args))


def test_guard_shape():
    g = _counted(lambda x: x.sum(0) * 2)
    f = ember.compile(g, mode="reduce-overhead")
    _retraces(f, g.calls, lambda: (ember.ones(3, 4),), lambda: (ember.ones(5, 4),),
              lambda x: x.sum(0) * 2)


def test_guard_dtype():
    g = _counted(lambda x: x / 3)
    f = ember.compile(g, mode="reduce-overhead")
    _retraces(f, g.calls, lambda: (ember.arange(6.0),),
              lambda: (ember.arange(6.0, dtype=ember.float64),), lambda x: x / 3)


def test_guard_strides():
    g = _counted(lambda x: x * 2)
    f = ember.compile(g, mode="reduce-overhead")
    base = ember.randn(4, 3)
    _retraces(f, g.calls, lambda: (ember.randn(3, 4),), lambda: (base.t(),), lambda x: x * 2)


def test_guard_python_scalar():
    g = _counted(lambda x, s: x * s + s)
    f = ember.compile(g, mode="reduce-overhead")
    x = ember.randn(4)
    _retraces(f, g.calls, lambda: (x, 2.0), lambda: (x, 3.0), lambda x, s: x * s + s)


def test_guard_scalar_type_not_just_value():
    g = _counted(lambda x, s: x + s)
    f = ember.compile(g, mode="reduce-overhead")
    x = ember.arange(3)
    f(x, 1)
    out = f(x, 1.0)   # 1 == 1.0, but an int64 tensor plus a float is float32
    assert g.calls[0] == 2 and out.dtype == ember.float32


def test_guard_train_eval():
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    calls = [0]
    m.register_forward_pre_hook(lambda mod, a: calls.__setitem__(0, calls[0] + 1))
    cm = ember.compile(m, mode="reduce-overhead")
    x = ember.randn(6, 4)
    ref = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    ref.load_state_dict(m.state_dict())
    with ember.no_grad():
        m.eval()
        ref.eval()
        _close(cm(x), ref(x))
        _close(cm(x), ref(x))
        assert calls[0] == 1
        m.train()
        ref.train()
        _close(cm(x), ref(x))     # batch statistics now
        assert calls[0] == 2
        _close(cm(x), ref(x))
        assert calls[0] == 2
        m[1].eval()               # a submodule's flag alone
        ref[1].eval()
        _close(cm(x), ref(x))
        assert calls[0] == 3
    _close(m[1].running_mean, ref[1].running_mean)


def test_guard_replaced_parameter():
    m = _mlp()
    cm = ember.compile(m, mode="reduce-overhead")
    calls = [0]
    m.register_forward_pre_hook(lambda mod, a: calls.__setitem__(0, calls[0] + 1))
    x = ember.randn(2, 6)
    with ember.no_grad():
        cm(x)
        cm(x)
        m[2].weight = nn.Parameter(ember.randn(16, 16))      # a new Parameter object
        _close(cm(x), m(x))
        assert calls[0] == 2 + 1
        m[4].bias.data = ember.randn(3)                       # same Parameter, new array
        _close(cm(x), m(x))
        assert calls[0] == 4 + 1
        m[2] = nn.Linear(16, 16)                              # a replaced submodule
        _close(cm(x), m(x))
        assert calls[0] == 6 + 1
        _close(cm(x), m(x))
        assert calls[0] == 8     # replayed (the eager m(x) alone ran the hook)


def test_guard_grad_mode():
    m = _mlp()
    g = _counted(lambda x: m(x).square().sum())
    f = ember.compile(g, mode="reduce-overhead")
    x = ember.randn(4, 6)
    with ember.no_grad():
        f(x)
        f(x)
    assert g.calls[0] == 1
    # grad mode on and the parameters require grad: Python runs, autograd records
    for k in range(2):
        loss = f(x)
        assert g.calls[0] == 2 + k
        assert loss.requires_grad and loss.grad_fn is not None
        m.zero_grad()
        loss.backward()
        ref = _mlp()
        ref(x).square().sum().backward()
        _close(m[0].weight.grad, ref[0].weight.grad)
    with ember.no_grad():
        out = f(x)
    assert g.calls[0] == 3 and not out.requires_grad
    _close(out, m(x).square().sum().detach())


def test_grad_mode_on_without_requires_grad_replays():
    m = _mlp().requires_grad_(False)
    g = _counted(lambda x: m(x))
    f = ember.compile(g, mode="reduce-overhead")
    x = ember.randn(4, 6)
    f(x)
    _close(f(x), m(x))
    assert g.calls[0] == 1
    m[0].weight.requires_grad_(True)      # now autograd must record
    out = f(x)
    assert g.calls[0] == 2 and out.requires_grad
    out.sum().backward()
    assert m[0].weight.grad is not None
    f(x)
    assert g.calls[0] == 3


def test_argument_requiring_grad_is_not_replayed():
    g = _counted(lambda x: (x * x).sum())
    f = ember.compile(g, mode="reduce-overhead")
    x = ember.randn(3, requires_grad=True)
    for k in range(2):
        y = f(x)
        y.backward()
        assert g.calls[0] == k + 1
    _close(x.grad, 4 * x.detach())
    with ember.no_grad():
        f(x)
        f(x)
    assert g.calls[0] == 3


def test_guard_default_dtype():
    g = _counted(lambda x: x + ember.ones(3))
    f = ember.compile(g, mode="reduce-overhead")
    x = ember.zeros(3, dtype=ember.int32)
    assert f(x).dtype == ember.float32
    f(x)
    ember.set_default_dtype(ember.float64)
    out = f(x)
    assert g.calls[0] == 2 and out.dtype == ember.float64
    f(x)
    assert g.calls[0] == 2


def test_guard_inference_mode():
    g = _counted(lambda x: x * 2)
    f = ember.compile(g, mode="reduce-overhead")
    x = ember.randn(3)
    with ember.inference_mode():
        f(x)
        out = f(x)
        assert out.is_inference()
    assert g.calls[0] == 1
    out = f(x)
    assert g.calls[0] == 2 and not out.is_inference()


def test_guard_global_module_rebinding():
    global _GLOBAL_MODEL
    _GLOBAL_MODEL = _mlp()

    def fn(x):
        fn.calls += 1
        return _GLOBAL_MODEL(x)
    fn.calls = 0
    f = ember.compile(fn, mode="reduce-overhead")
    x = ember.randn(2, 6)
    with ember.no_grad():
        f(x)
        f(x)
        assert fn.calls == 1
        _GLOBAL_MODEL.eval()        # a module found through the function's globals
        f(x)
        assert fn.calls == 2
        ember.manual_seed(5)
        _GLOBAL_MODEL = nn.Sequential(nn.Linear(6, 3))
        _close(f(x), _GLOBAL_MODEL(x))
        assert fn.calls == 3


def test_guard_closure_tensor_rebinding():
    w = ember.randn(3)

    def fn(x):
        fn.calls += 1
        return x * w
    fn.calls = 0
    f = ember.compile(fn, mode="reduce-overhead")
    x = ember.randn(3)
    f(x)
    f(x)
    assert fn.calls == 1
    w.mul_(2.0)                      # same array: replay reads it
    _close(f(x), x * w)
    assert fn.calls == 1
    w = ember.randn(3)               # the cell now holds another tensor
    _close(f(x), x * w)
    assert fn.calls == 2


def test_guard_argument_aliasing():
    g = _counted(lambda a, b: a.add_(1) + b)
    f = ember.compile(g, mode="reduce-overhead")
    x, y = ember.zeros(3), ember.zeros(3)
    _close(f(x, y), ember.ones(3))
    _close(f(x, y), ember.full((3,), 2.0))
    assert g.calls[0] == 1
    z = ember.zeros(3)
    out = f(z, z)                      # the same tensor twice: eager gives 1 + 1
    assert g.calls[0] == 2
    _close(out, ember.full((3,), 2.0))


def test_kwargs_and_nested_arguments():
    g = _counted(lambda xs, scale=1.0, *, shift: {"s": xs[0] * scale + xs[1], "k": shift})
    f = ember.compile(g, mode="reduce-overhead")
    a, b = ember.randn(2), ember.randn(2)
    for _ in range(2):
        out = f([a, b], scale=2.0, shift="z")
        assert out["k"] == "z"
        _close(out["s"], a * 2.0 + b)
    assert g.calls[0] == 1
    f([a, b], scale=2.0, shift="y")
    f((a, b), scale=2.0, shift="y")
    assert g.calls[0] == 3


def test_unsupported_argument_runs_normally():
    class Box:
        def __init__(self, t):
            self.t = t

    g = _counted(lambda box: box.t * 2)
    f = ember.compile(g, mode="reduce-overhead")
    for k in range(3):
        b = Box(ember.randn(2))
        _close(f(b), b.t * 2)
    assert g.calls[0] == 3 and f.replay_count == 0


# ------------------------------------------------------------------------------ writes
def test_buffer_writes_applied_on_replay():
    ember.manual_seed(0)
    bn = nn.BatchNorm1d(4)
    ref = nn.BatchNorm1d(4)
    cbn = ember.compile(bn, mode="reduce-overhead")
    with ember.no_grad():
        for k in range(4):
            x = ember.randn(5, 4)
            _close(cbn(x), ref(x))
    assert cbn._compiled.replay_count == 3
    _close(bn.running_mean, ref.running_mean)
    _close(bn.running_var, ref.running_var)
    assert bn.num_batches_tracked.item() == 4
    assert bn.running_mean._version == ref.running_mean._version


def test_argument_writes_applied_on_replay():
    def fn(x, acc):
        fn.calls += 1
        acc.add_(x)
        acc[0] = -1.0
        return acc * 2
    fn.calls = 0
    f = ember.compile(fn, mode="reduce-overhead")
    acc, ref = ember.zeros(3), ember.zeros(3)
    for k in range(3):
        x = ember.randn(3)
        v0 = acc._version
        _close(f(x, acc), fn(x, ref))
        _close(acc, ref)
        assert acc._version - v0 == 2
    assert fn.calls == 1 + 3   # one recording call; fn(x, ref) are the eager runs


def test_write_into_a_global_buffer_on_replay():
    state = ember.zeros(2)

    def fn(x):
        fn.calls += 1
        state.add_(x.sum())
        return x + 0
    fn.calls = 0
    f = ember.compile(fn, mode="reduce-overhead")
    for k in range(3):
        f(ember.ones(2))
    assert fn.calls == 1
    _close(state, ember.full((2,), 6.0))


# ------------------------------------------------------------------------------ outputs
def test_return_structures_views_and_arguments():
    def fn(x):
        fn.calls += 1
        y = x.exp()
        return {"y": y, "row": y[1], "flat": (x + 1).view(-1)}, [x, 3, None], (y.t(),)
    fn.calls = 0
    f = ember.compile(fn, mode="reduce-overhead")
    for k in range(3):
        x = ember.randn(2, 3)
        (d, lst, tup) = f(x)
        _close(d["y"], x.exp())
        _close(d["row"], x.exp()[1])
        _close(d["flat"], (x + 1).view(-1))
        _close(tup[0], x.exp().t())
        assert lst[0] is x and lst[1:] == [3, None]
        # views share memory (and the version counter) with their base, as in eager
        assert d["row"]._base is d["y"] and tup[0]._base is d["y"]
        d["y"].mul_(0)
        assert d["row"].abs().sum().item() == 0 and d["row"]._version == 1
    assert fn.calls == 1


def test_returning_a_view_of_an_input_is_not_replayed():
    g = _counted(lambda x: x[0])
    f = ember.compile(g, mode="reduce-overhead")
    x = ember.randn(3, 2)
    for _ in range(2):
        out = f(x)
        _close(out, x[0])
        assert np.shares_memory(out.numpy(), x.numpy())
    assert g.calls[0] == 2 and "view" in f.why_not


def test_zero_dim_output():
    g = _counted(lambda x: (x * x).sum())
    f = ember.compile(g, mode="reduce-overhead")
    x = ember.randn(4)
    for _ in range(3):
        out = f(x)
        assert out.shape == () and out.dtype == ember.float32
        _close(out, (x * x).sum())
    assert g.calls[0] == 1


# ------------------------------------------------------------------------------ fallbacks
def test_graph_break_falls_back_for_good():
    def fn(x):
        fn.calls += 1
        if x.sum() > 0:      # data-dependent: a graph break
            return x * 2
        return x * 3
    fn.calls = 0
    f = ember.compile(fn, mode="reduce-overhead")
    for v in (1.0, -1.0, 1.0, 1.0):
        x = ember.full((2,), v)
        _close(f(x), fn(x) if False else x * (2 if v > 0 else 3))
    assert fn.calls == 4 and f._broken and f.replay_count == 0


def test_random_ops_are_not_replayed():
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    cm = ember.compile(m, mode="reduce-overhead")
    x = ember.randn(8, 4)
    with ember.no_grad():
        ember.manual_seed(1)
        got = [cm(x) for _ in range(3)]
        ember.manual_seed(1)
        want = [m(x) for _ in range(3)]
        for a, b in zip(got, want):
            _close(a, b)
        assert cm._compiled.replay_count == 0 and "random" in cm._compiled.why_not
        m.eval()    # no dropout in the graph: replays
        cm(x)
        _close(cm(x), m(x))
        assert cm._compiled.replay_count == 1


def test_fullgraph_and_stances():
    g = _counted(lambda x: x + 1)
    f = ember.compile(g, mode="reduce-overhead", fullgraph=True)
    x = ember.ones(2)
    f(x)
    f(x)
    assert g.calls[0] == 1
    with ember.compiler.set_stance("force_eager"):
        _close(f(x), x + 1)
    assert g.calls[0] == 2
    b = _counted(lambda x: x * 2 if x.sum() > 0 else x)
    fb = ember.compile(b, mode="reduce-overhead", fullgraph=True)
    with pytest.raises(ember.compiler.GraphBreakError):
        fb(x)


def test_nested_inside_another_compiled_function_inlines():
    inner = ember.compile(lambda x: x * 2, mode="reduce-overhead")
    outer = ember.compile(lambda x: inner(x) + 1)
    x = ember.randn(3)
    for _ in range(2):
        _close(outer(x), x * 2 + 1)
    assert inner.replay_count == 0


def test_explain_sees_the_graph():
    f = ember.compile(lambda x: (x + 1).relu(), mode="reduce-overhead")
    x = ember.randn(3)
    f(x)
    f(x)
    out = ember.compiler.explain(f)(x)
    assert out.graph_count == 1


def test_write_into_a_tensor_made_during_the_call():
    def fn(x):
        fn.calls += 1
        buf = ember.zeros(3)      # a concrete array each call: never a replayed write target
        buf.add_(x)
        return buf * 2
    fn.calls = 0
    f = ember.compile(fn, mode="reduce-overhead")
    for k in range(3):
        x = ember.full((3,), float(k))
        _close(f(x), x * 2)
    assert f.replay_count == 0 and "written" not in f.why_not and "writes" in f.why_not


def test_written_argument_that_is_a_view():
    def fn(x):
        fn.calls += 1
        x.mul_(2)
        return x.sum()
    fn.calls = 0
    f = ember.compile(fn, mode="reduce-overhead")
    big = ember.arange(12.0)
    ref = ember.arange(12.0)
    for start in (0, 0, 4, 4, 6):
        _close(f(big[start:start + 4]), fn(ref[start:start + 4]))
        _close(big, ref)
    small = ember.arange(4.0)     # same view shape, but a storage of another size
    _close(f(small), ember.arange(4.0).mul(2).sum())
    _close(small, ember.arange(4.0) * 2)


def test_argument_that_is_also_read_through_a_closure():
    c = ember.randn(3, 3)
    g = _counted(lambda w, x: x @ c + w.sum())
    f = ember.compile(g, mode="reduce-overhead")
    x = ember.randn(2, 3)
    other = ember.randn(3, 3)
    for w in (c, c, other, other, c):
        _close(f(w, x), x @ c + w.sum())
    assert g.calls[0] == 2 and f.replay_count == 3


def test_reset_forgets_recordings():
    g = _counted(lambda x: x - 1)
    f = ember.compile(g, mode="reduce-overhead")
    x = ember.ones(2)
    f(x)
    f(x)
    ember.compiler.reset()
    _close(f(x), x - 1)
    f(x)
    assert g.calls[0] == 2 and f.replay_count == 2


def test_shape_and_constant_returns():
    g = _counted(lambda x, n=ember.float64: (x.to(n), x.shape, ember.device("cpu"),
                                             np.float32(2)))
    f = ember.compile(g, mode="reduce-overhead")
    x = ember.randn(2, 3)
    for _ in range(2):
        y, shape, dev, c = f(x, n=ember.float64)
        assert y.dtype == ember.float64 and shape == (2, 3) and dev == ember.device("cpu")
        assert c == 2 and type(shape) is ember.Size
        _close(y, x.double())
    assert g.calls[0] == 1


_SCALE = ember.ones(3)


class _UsesGlobal(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * _SCALE


def test_globals_read_by_a_module_forward_are_guarded():
    global _SCALE
    m = _UsesGlobal()
    cm = ember.compile(m, mode="reduce-overhead")
    x = ember.randn(2, 3)
    with ember.no_grad():
        cm(x)
        cm(x)
        assert m.calls == 1
        _SCALE = ember.full((3,), 2.0)
        _close(cm(x), m.lin(x) * 2.0)
        assert m.calls == 2


def test_grad_enabled_inside_the_function_is_not_replayed():
    w = ember.ones(3, requires_grad=True)

    def fn(x):
        fn.calls += 1
        with ember.enable_grad():
            return x * w
    fn.calls = 0
    f = ember.compile(fn, mode="reduce-overhead")
    x = ember.randn(3)
    with ember.no_grad():
        for k in range(2):
            y = f(x)
            assert y.requires_grad and y.grad_fn is not None
    assert fn.calls == 2


def test_changing_sizes_replay_per_shape():
    g = _counted(lambda x: (x * 2).sum(0))
    f = ember.compile(g, mode="reduce-overhead")
    for n in (3, 4, 5, 3, 4, 5, 6, 6):
        x = ember.randn(n, 2)
        _close(f(x), (x * 2).sum(0))
    assert g.calls[0] == 4 and f.replay_count == 4


def test_returning_a_buffer_returns_the_same_object():
    bn = nn.BatchNorm1d(3)

    def fn(x):
        fn.calls += 1
        return bn(x), bn.running_mean
    fn.calls = 0
    f = ember.compile(fn, mode="reduce-overhead")
    with ember.no_grad():
        for k in range(3):
            y, rm = f(ember.randn(4, 3))
            assert rm is bn.running_mean
    assert fn.calls == 1 and bn.num_batches_tracked.item() == 3


def test_adding_a_forward_hook_rerecords():
    m = _mlp()
    cm = ember.compile(m, mode="reduce-overhead")
    x = ember.randn(2, 6)
    with ember.no_grad():
        cm(x)
        cm(x)
        h = m[4].register_forward_hook(lambda mod, args, out: out * 0)
        _close(cm(x), ember.zeros(2, 3))
        cm(x)
        h.remove()
        _close(cm(x), m(x))
    assert cm._compiled.record_count == 2 and cm._compiled.replay_count == 3


def test_custom_backend_is_what_replay_runs():
    runs = []

    def backend(graph, example_inputs):
        def run(*args):
            runs.append(len(args))
            return graph.forward(*args)
        return run

    g = _counted(lambda x, y: (x + y).tanh())
    f = ember.compile(g, backend=backend, mode="reduce-overhead")
    for _ in range(3):
        x, y = ember.randn(2, 2), ember.randn(2, 2)
        _close(f(x, y), (x + y).tanh())
    assert g.calls[0] == 1 and len(runs) == 3

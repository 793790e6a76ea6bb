"""Cheap compiled calls (issue 21): a call that records the same graph as an earlier call
follows that call's trace (``_lazy.Known``): each op reuses the cached node and spec, and the
graph is neither captured nor hashed again.  Every divergence (shapes, dtypes, layout, scalars,
parameters, aliasing, what stays alive, breaks, in-place writes) must fall back to the full path
and give what eager gives; torch is the oracle for the values."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ember
from ember.compiler import set_stance
from ember.compiler.frontend import api
from tests.compiler.helpers import Counting

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _fresh_compiler():
    ember.compiler.reset()
    set_stance("default")
    yield
    set_stance("default")
    ember.compiler.reset()


@pytest.fixture
def captures(monkeypatch):
    """How many graphs went through ``capture`` (the full path)."""
    n = [0]
    real = api.capture

    def counting(*a, **k):
        n[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(api, "capture", counting)
    return n


def _pair(a):
    a = np.asarray(a, dtype=np.float32)
    return ember.tensor(a), torch.tensor(a)


def _close(e, t):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]


def f10(x, y):
    a = x + y
    b = a * 2.0
    c = b.exp()
    d = c - x
    e = d.tanh()
    g = e * y
    h = g.relu()
    i = h + 1.0
    return i.sigmoid().sum()


def test_repeated_calls_follow_the_first(captures):
    cb = Counting()
    f = ember.compile(f10, backend=cb)
    for k in range(5):
        (ex, tx), (ey, ty) = _pair(np.arange(4) * 0.1 + k), _pair(np.ones(4) * k)
        _close(f(ex, ey), f10(tx, ty))
    assert cb.count == 1 and cb.runs == 5
    assert captures[0] == 1   # calls 2-5 followed call 1's trace


def test_c_backend_follows_and_matches_torch(captures):
    f = ember.compile(f10)
    for k in range(4):
        (ex, tx), (ey, ty) = _pair(np.linspace(-1, 1, 4) * k), _pair(np.ones(4))
        _close(f(ex, ey), f10(tx, ty))
    assert captures[0] == 1


@pytest.mark.parametrize("make", [
    lambda k: np.ones(3 + k % 2),                       # shape
    lambda k: np.ones(4, np.float64 if k % 2 else np.float32),  # dtype
])
def test_input_metadata_changes_fall_back(make, captures):
    def fn(x):
        return (x * 3.0).sin() + x
    f = ember.compile(fn)
    for k in range(4):
        a = make(k) * (k + 1)
        e, t = ember.tensor(a), torch.tensor(a)
        _close(f(e), fn(t))
    assert captures[0] >= 2


def test_layout_change_falls_back(captures):
    def fn(x):
        return x * 2.0 + 1.0
    f = ember.compile(fn)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    for k in range(4):
        src = a.T.copy() if k % 2 else a.T   # same shape, C order or not
        e, t = ember.tensor(a).t(), torch.tensor(a).t()
        if k % 2:
            e, t = ember.tensor(src), torch.tensor(src)
        _close(f(e), fn(t))
    assert captures[0] >= 2


def test_changed_python_scalar_is_not_reused(captures):
    def fn(x, s):
        return x * s + s
    f = ember.compile(fn)
    e, t = _pair([1.0, 2.0, 3.0])
    for s in (2.0, 2.0, 3.0, 3.0, 2.0, 0.5):
        _close(f(e, s), fn(t, s))
    ei = ember.tensor([1, 2, 3])
    ti = torch.tensor([1, 2, 3])
    for s in (2, 2, 2.0, 2.0, 2):   # int vs float: another dtype
        _close(f(ei, s), fn(ti, s))


def test_changed_params_are_not_reused():
    def fn(x, d):
        return x.sum(dim=d) * 2.0
    f = ember.compile(fn)
    e, t = _pair(np.arange(6).reshape(2, 3))
    for d in (0, 0, 1, 1, 0, -1):
        _close(f(e, d), fn(t, d))


def test_aliasing_change_falls_back():
    def fn(x, y):
        return x * 2.0 + y
    f = ember.compile(fn)
    (e1, t1), (e2, t2) = _pair([1.0, 2.0]), _pair([5.0, 7.0])
    for same in (False, False, True, True, False):
        _close(f(e1, e1 if same else e2), fn(t1, t1 if same else t2))


def test_what_stays_alive_changes_the_outputs():
    kept = []

    def fn(x, keep):
        a = x * 2.0
        b = a + 1.0
        if keep:
            kept.append(a)
        return b.exp()
    f = ember.compile(fn)
    e, t = _pair([0.5, 1.5])
    for keep in (False, False, True, True, False):
        _close(f(e, keep), fn(t, keep))
    assert len(kept) == 4   # two calls each, ember's and torch's
    for a in kept:
        np.testing.assert_allclose(a.numpy(), [1.0, 3.0])


def test_in_place_updates_accumulate(captures):
    def step(p, g, lr):
        p.sub_(g * lr)
        return (p * p).sum()
    f = ember.compile(step)
    ep, tp = _pair([1.0, 2.0, 3.0])
    eg, tg = _pair([0.5, 0.25, 1.0])
    for _ in range(5):
        _close(f(ep, eg, 0.1), step(tp, tg, 0.1))
        _close(ep, tp)
    assert captures[0] == 1


def test_views_and_writes_through_views():
    def fn(x):
        v = x[1:]
        v.mul_(2.0)
        return x.t() * 1.5, v.sum()
    f = ember.compile(fn)
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    e, t = ember.tensor(a), torch.tensor(a)
    for _ in range(4):
        re, rt = f(e), fn(t)
        for x, y in zip(re, rt):
            _close(x, y)
        _close(e, t)


def test_graph_breaks_follow_per_segment(captures):
    def fn(x):
        y = x * 2.0
        if y.sum() > 0:          # a break: two graphs per call
            return (y + 1.0).exp()
        return (y - 1.0).sin()
    f = ember.compile(fn)
    for k in (1, 1, -1, -1, 1):
        e, t = _pair(np.ones(3) * k)
        _close(f(e), fn(t))
    # first call: 2 graphs; each branch's second graph is captured once, the rest follow
    assert captures[0] <= 4


def test_autograd_through_followed_calls():
    def fn(x, w):
        return ((x * w).tanh() + w).sum()
    f = ember.compile(fn)
    for k in range(4):
        xa = np.linspace(-1, 1, 4).astype(np.float32) + k
        wa = np.ones(4, np.float32) * 0.3
        ex, tx = ember.tensor(xa), torch.tensor(xa)
        ew, tw = ember.tensor(wa, requires_grad=True), torch.tensor(wa, requires_grad=True)
        le, lt = f(ex, ew), fn(tx, tw)
        le.backward()
        lt.backward()
        _close(le, lt)
        _close(ew.grad, tw.grad)


def test_force_backend_does_not_reuse_the_other_backends_entry():
    cb = Counting()
    f = ember.compile(f10, backend=cb)
    (ex, tx), (ey, ty) = _pair([0.1, 0.2, 0.3, 0.4]), _pair([1.0, 1.0, 1.0, 1.0])
    f(ex, ey)
    f(ex, ey)
    assert cb.count == 1
    with set_stance("default", force_backend="eager"):
        _close(f(ex, ey), f10(tx, ty))
        _close(f(ex, ey), f10(tx, ty))
    assert cb.count == 1 and cb.runs == 2   # the forced backend ran those calls
    f(ex, ey)
    assert cb.runs == 3


def test_threads_with_different_shapes():
    def fn(x):
        return ((x * 2.0).exp() - x).tanh().sum(dim=-1)
    f = ember.compile(fn)
    errors = []

    def work(n):
        try:
            for k in range(30):
                a = np.linspace(0, 1, n * 4, dtype=np.float32).reshape(n, 4) * (k % 3)
                _close(f(ember.tensor(a)), fn(torch.tensor(a)))
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(n,)) for n in (1, 2, 3, 2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]


def test_fail_on_recompile_still_raises_after_following():
    def fn(x):
        return x * 2.0
    f = ember.compile(fn, dynamic=False)
    e = ember.ones(3)
    f(e)
    f(e)
    with set_stance("fail_on_recompile"):
        f(e)   # a hit: fine
        with pytest.raises(ember.compiler.RecompileError):
            f(ember.ones(5))


def test_graphs_that_never_repeat_stop_making_known_traces(monkeypatch):
    """A scalar that changes every call makes every call diverge: after 8 unfollowed traces
    the segment stops keeping them (no cost per call for nothing), and values stay right."""
    made = [0]
    real = api._lazy.Known

    def counting(*a, **k):
        made[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(api._lazy, "Known", counting)

    def fn(x, s):
        return (x * s).exp()
    f = ember.compile(fn, dynamic=True)
    for k in range(20):   # a new input size every call: one generic entry, never followed
        e, t = _pair(np.linspace(0.1, 0.2, 3 + k))
        _close(f(e, 1.5), fn(t, 1.5))
    assert 2 <= made[0] <= 10
    e, t = _pair([0.1, 0.2])
    # a graph that repeats again is followed again once a Known exists
    made[0] = 0
    g = ember.compile(lambda x: x * 2.0)
    for _ in range(5):
        g(e)
    assert made[0] == 1


def test_a_lifted_float_that_changes_every_call_is_followed(captures):
    """An optimizer's bias correction changes every step: once the entry takes it as a runtime
    argument, calls keep following the known trace (no capture) and pass the new number."""
    def fn(x, s):
        return (x * 2.0 / s).exp() + s
    f = ember.compile(fn)
    e, t = _pair([0.1, 0.2, 0.3])
    for k in range(3):   # compile, recompile with ``s`` lifted, make the Known
        _close(f(e, 1.0 + k / 8), fn(t, 1.0 + k / 8))
    before = captures[0]
    for k in range(3, 9):
        _close(f(e, 1.0 + k / 8), fn(t, 1.0 + k / 8))
    assert captures[0] == before
    # the structure does not change: a different constant (2.0 -> 3.0, specialized) diverges
    _close(f(e * 1.5, 2.0), fn(t * 1.5, 2.0))


def test_loosening_keeps_specialized_numbers(captures):
    def fn(x, s, c):
        return x * s + c
    f = ember.compile(fn)
    e, t = _pair([0.5, -1.0])
    for k in range(3):
        _close(f(e, 1.0 + k, 0.25), fn(t, 1.0 + k, 0.25))
    n = captures[0]
    _close(f(e, 7.5, 0.25), fn(t, 7.5, 0.25))      # lifted float: followed
    assert captures[0] == n
    _close(f(e, 7.5, 0.5), fn(t, 7.5, 0.5))        # ``c`` was specialized: diverges
    assert captures[0] == n + 1
    _close(f(e, 3, 0.25), fn(t, 3, 0.25))          # an int (bound as 3.0 for a float x)
    _close(f(e, 7.5, 0.25), fn(t, 7.5, 0.25))


def test_compiled_adamw_steps_follow_and_match_torch(captures):
    """The compiled AdamW step records through the optimizer's direct path and follows the
    known trace on later steps; parameters, moments, step counters and versions as torch."""
    ember.manual_seed(0)
    em = ember.nn.Linear(4, 3)
    tm = torch.nn.Linear(4, 3)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(em.weight.detach().numpy()))
        tm.bias.copy_(torch.tensor(em.bias.detach().numpy()))
    eo = ember.optim.AdamW(em.parameters(), lr=1e-2, weight_decay=0.1)
    to = torch.optim.AdamW(tm.parameters(), lr=1e-2, weight_decay=0.1, foreach=False)
    x, tx = _pair(np.arange(8, dtype=np.float32).reshape(2, 4) / 8)

    def estep():
        loss = (em(x) ** 2).mean()
        loss.backward()
        eo.step()
        eo.zero_grad()
        return loss

    def tstep():
        loss = (tm(tx) ** 2).mean()
        loss.backward()
        to.step()
        to.zero_grad()
        return loss
    f = ember.compile(estep)
    v0 = [(ep._version, tp._version) for ep, tp in zip(em.parameters(), tm.parameters())]
    counts = []
    for _ in range(8):
        _close(f(), tstep())
        counts.append(captures[0])
    assert counts[-1] == counts[3]   # steps 5-8 followed the known trace
    for (ev, tv), ep, tp in zip(v0, em.parameters(), tm.parameters()):
        np.testing.assert_allclose(ep.detach().numpy(), tp.detach().numpy(), rtol=1e-5,
                                   atol=1e-7)
        es, ts = eo.state[ep], to.state[tp]
        for k in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(es[k].numpy(), ts[k].numpy(), rtol=1e-5, atol=1e-9)
            assert es[k]._version == ts[k]._version
        assert float(es["step"]) == float(ts["step"]) == 8.0
        assert es["step"]._version == ts["step"]._version
        assert ep._version - ev == tp._version - tv == 16   # mul_ and addcdiv_ per step

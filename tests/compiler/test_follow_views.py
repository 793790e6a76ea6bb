"""Followed calls through view ops and state writes (issue 21, "The MLP step's recording"):
a view of an earlier node's output or of an input array that is the known trace's next node
reuses the cached node (``_bind_fast._follow_view``) and the last call's stand-in geometry
(``Known.vmemo``); a whole-array write into a state tensor takes ``Trace._write_whole``; a
followed call runs the C backend's prepared call (``api._prepared``).  Each must give what
eager torch gives, call after call, with the views sharing memory as in eager."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _bind_fast
from ember.compiler import set_stance
from ember.compiler.frontend import api

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _fresh_compiler():
    ember.compiler.reset()
    set_stance("default")
    yield
    set_stance("default")
    ember.compiler.reset()


@pytest.fixture
def counts(monkeypatch):
    """[graphs captured (the full path), views bound by ``_follow_view``]."""
    n = [0, 0]
    real_capture, real_view = api.capture, _bind_fast._follow_view

    def capture(*a, **k):
        n[0] += 1
        return real_capture(*a, **k)

    def view(*a, **k):
        n[1] += 1
        return real_view(*a, **k)
    monkeypatch.setattr(api, "capture", capture)
    monkeypatch.setattr(_bind_fast, "_follow_view", view)
    return n


def _close(e, t, strides=True):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert tuple(e.shape) == tuple(t.shape)
    if strides:
        assert e.stride() == t.stride()


def chain(x, w):
    y = (x * 2.0).reshape(3, 4)      # a view of a node's output
    z = y.permute(1, 0)              # a view of a view
    u = w.t()                        # a view of an input array
    return z * 1.5, (z @ u).sum(), y


@pytest.mark.parametrize("backend", ["c", "inductor"])
def test_view_chains_follow_and_match_torch(backend, counts):
    f = ember.compile(chain, backend=backend)
    for k in range(4):
        xa = np.linspace(-1, 1, 12).astype(np.float32) + k
        wa = np.arange(15, dtype=np.float32).reshape(5, 3) * 0.1
        got = f(ember.tensor(xa), ember.tensor(wa))
        want = chain(torch.tensor(xa), torch.tensor(wa))
        for e, t in zip(got, want):
            _close(e, t)
    assert counts[0] == 1      # calls 2-4 followed the first
    assert counts[1] == 9      # 3 views in each followed call


def test_returned_views_share_memory_with_their_base(counts):
    def fn(x):
        b = x + 1.0
        return b, b.reshape(2, 3).permute(1, 0)
    f = ember.compile(fn)
    for k in range(4):
        a = np.arange(6, dtype=np.float32) + k
        (eb, ev), (tb, tv) = f(ember.tensor(a)), fn(torch.tensor(a))
        _close(eb, tb)
        _close(ev, tv)
        eb.mul_(3.0)   # a write into the base shows through the view, as in eager
        tb.mul_(3.0)
        _close(ev, tv)
    assert counts[1] == 6


def test_views_with_grad_under_follow_match_torch():
    def fn(x, w):
        h = (x @ w.t()).reshape(-1)
        return (h * h).sum()
    f = ember.compile(fn)
    wa = np.arange(6, dtype=np.float32).reshape(2, 3) * 0.1
    ew, tw = ember.tensor(wa, requires_grad=True), torch.tensor(wa, requires_grad=True)
    for k in range(4):
        xa = np.linspace(-1, 1, 12).astype(np.float32).reshape(4, 3) + k
        le, lt = f(ember.tensor(xa), ew), fn(torch.tensor(xa), tw)
        le.backward()
        lt.backward()
        _close(le, lt)
        # values only: eager ember already lays this gradient out transposed ((1, 2) where
        # torch's AccumulateGrad gives (3, 1)), compiled or not
        _close(ew.grad, tw.grad, strides=False)


def test_state_writes_follow_and_keep_their_arrays(counts):
    def fn(s, m, g):
        s.add_(1.0)
        m.mul_(0.9).add_(g, alpha=0.1)
        return (m * s).sum()
    f = ember.compile(fn)
    es, ts = ember.zeros(()), torch.zeros(())
    em, tm = ember.zeros(4), torch.zeros(4)
    arrays = (es._data, em._data)
    for k in range(5):
        ga = np.linspace(0, 1, 4).astype(np.float32) + k
        _close(f(es, em, ember.tensor(ga)), fn(ts, tm, torch.tensor(ga)))
        _close(es, ts)
        _close(em, tm)
        assert em._version == tm._version
    assert (es._data, em._data) == arrays   # written in place, not replaced
    assert counts[0] == 1


def test_prepared_call_falls_back_when_it_declines():
    """``api._prepared``: a backend without ``bind`` is called as it is; a prepared call that
    declines (returns None: an input of another layout, a busy call) hands the call to ``fn``."""
    calls = []

    def plain(arrays, scalars):
        calls.append(("fn", len(arrays)))
        return ["out"]
    assert api._prepared(plain) is plain

    class Declining:
        def bind(self, const):
            assert const == {}
            return lambda arrays, scalars: calls.append(("bound", len(arrays)))

        def __call__(self, arrays, scalars):
            return plain(arrays, scalars)
    run = api._prepared(Declining())
    assert run([1, 2], []) == ["out"]
    assert calls == [("bound", 2), ("fn", 2)]

    class Forwarding:   # forwards attributes (the minifier's checked call): called as it is
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def __call__(self, arrays, scalars):
            return plain(arrays, scalars)
    wrapper = Forwarding(Declining())
    assert api._prepared(wrapper) is wrapper


def test_followed_c_calls_keep_matching_torch_with_a_reused_arena():
    """Temporaries of the memory plan live in arenas kept between followed calls: every call's
    values are its own."""
    def fn(x, y):
        h = (x @ y).relu()
        return (h * h + x.sum()).softmax(-1)
    f = ember.compile(fn, backend="c")
    rng = np.random.default_rng(0)
    outs = []
    for _ in range(4):
        a = rng.standard_normal((8, 16)).astype(np.float32)
        b = rng.standard_normal((16, 16)).astype(np.float32)
        e = f(ember.tensor(a), ember.tensor(b))
        _close(e, fn(torch.tensor(a), torch.tensor(b)))
        outs.append((e, fn(torch.tensor(a), torch.tensor(b))))
    for e, t in outs:   # earlier outputs were not overwritten by later calls
        _close(e, t)

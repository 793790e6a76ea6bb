"""The default-mode training step's fast paths (issue 21, branch h-mlp3): a followed op of
several outputs (AdamW's ``adam_step`` node, ``_bind_fast._follow_multi``), the optimizer's
state writes in one call (``Trace.write_all``) and ``linear``'s backward bound without its
frontends.  Each must give what the general path gives (torch is the oracle for the values
and versions) and fall back to it whenever the call differs from the known trace."""

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
def captures(monkeypatch):
    """How many graphs went through ``capture`` (the full path)."""
    n = [0]
    real = api.capture

    def counting(*a, **k):
        n[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(api, "capture", counting)
    return n


@pytest.fixture
def general_adam(monkeypatch):
    """How many ``adam_step`` nodes the general recording path (``_lazy_bind``) recorded."""
    n = [0]
    real = _bind_fast._lazy_bind

    def counting(tr, op, inputs, params):
        if op.name == "adam_step":
            n[0] += 1
        return real(tr, op, inputs, params)
    monkeypatch.setattr(_bind_fast, "_lazy_bind", counting)
    return n


class _Pair:
    """A two-layer MLP in ember and torch with AdamW, the same weights and batch."""

    def __init__(self, batch: int = 6, wd: float = 0.01) -> None:
        rng = np.random.default_rng(0)
        self.em = ember.nn.Sequential(ember.nn.Linear(5, 7), ember.nn.ReLU(),
                                      ember.nn.Linear(7, 3))
        self.tm = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(),
                                      torch.nn.Linear(7, 3))
        with torch.no_grad():
            for ep, tp in zip(self.em.parameters(), self.tm.parameters()):
                tp.copy_(torch.tensor(ep.detach().numpy()))
        self.eo = ember.optim.AdamW(self.em.parameters(), lr=1e-2, weight_decay=wd)
        self.to = torch.optim.AdamW(self.tm.parameters(), lr=1e-2, weight_decay=wd,
                                    foreach=False)
        self.batch(batch, rng)
        # versions before the steps (the initializations bump them differently)
        self.v0 = [(ep._version, tp._version)
                   for ep, tp in zip(self.em.parameters(), self.tm.parameters())]

    def batch(self, n: int, rng: np.random.Generator | None = None) -> None:
        rng = rng or np.random.default_rng(n)
        x = rng.standard_normal((n, 5)).astype(np.float32)
        y = rng.integers(0, 3, n)
        self.ex, self.tx = ember.tensor(x), torch.tensor(x)
        self.ey, self.ty = ember.tensor(y), torch.tensor(y)

    def estep(self, steps: int = 1):
        loss = ember.nn.functional.cross_entropy(self.em(self.ex), self.ey)
        loss.backward()
        for _ in range(steps):
            self.eo.step()
        self.eo.zero_grad()
        return loss

    def tstep(self, steps: int = 1):
        loss = torch.nn.functional.cross_entropy(self.tm(self.tx), self.ty)
        loss.backward()
        for _ in range(steps):
            self.to.step()
        self.to.zero_grad()
        return loss

    def check(self) -> None:
        for (ev, tv), ep, tp in zip(self.v0, self.em.parameters(), self.tm.parameters()):
            np.testing.assert_allclose(ep.detach().numpy(), tp.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
            assert ep._version - ev == tp._version - tv
            es, ts = self.eo.state[ep], self.to.state[tp]
            for k in ("exp_avg", "exp_avg_sq"):
                np.testing.assert_allclose(es[k].numpy(), ts[k].numpy(), rtol=1e-5, atol=1e-8)
                assert es[k]._version == ts[k]._version
            assert float(es["step"]) == float(ts["step"])
            assert es["step"]._version == ts["step"]._version


def _close(e, t) -> None:
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_adam_step_followed_matches_torch(captures, general_adam):
    """After the first calls, the ``adam_step`` node is followed (no general recording, no
    capture) and every parameter, moment, step count and version is torch's."""
    m = _Pair()
    f = ember.compile(m.estep)
    for _ in range(4):
        _close(f(), m.tstep())
    n_cap, n_gen = captures[0], general_adam[0]
    for _ in range(5):
        _close(f(), m.tstep())
    assert captures[0] == n_cap and general_adam[0] == n_gen   # followed all the way
    m.check()


def test_changed_betas_fall_back(captures, general_adam):
    """A number of the node the entry does not take at run time (``1 - beta1``) diverges:
    the general path records it, and the values stay torch's."""
    m = _Pair()
    f = ember.compile(m.estep)
    for _ in range(5):
        _close(f(), m.tstep())
    n_gen = general_adam[0]
    m.eo.param_groups[0]["betas"] = (0.8, 0.99)
    m.to.param_groups[0]["betas"] = (0.8, 0.99)
    for _ in range(3):
        _close(f(), m.tstep())
    assert general_adam[0] > n_gen
    m.check()


def test_a_frozen_parameter_falls_back():
    """A parameter without a gradient makes another node (fewer inputs): not followed as the
    known one, and the frozen parameter and its state stay as torch leaves them."""
    m = _Pair()
    f = ember.compile(m.estep)
    for _ in range(4):
        _close(f(), m.tstep())
    m.em[2].bias.requires_grad_(False)
    m.tm[2].bias.requires_grad_(False)
    for _ in range(3):
        _close(f(), m.tstep())
    m.check()


def test_two_optimizer_steps_in_one_call():
    """The second step of a call writes states this graph wrote already: those writes take
    the general ``write`` (and the general update), with torch's values and versions."""
    m = _Pair()
    f = ember.compile(lambda: m.estep(steps=2))
    for _ in range(4):
        _close(f(), m.tstep(steps=2))
    m.check()


def test_new_batch_size_recompiles_and_matches(captures):
    """A guard still fires: another batch size is another graph (a capture), then followed."""
    m = _Pair()
    f = ember.compile(m.estep)
    for _ in range(4):
        _close(f(), m.tstep())
    n = captures[0]
    m.batch(9)
    for _ in range(4):
        _close(f(), m.tstep())
    assert captures[0] > n
    m.check()


def test_write_all_falls_back_for_a_view_state():
    """``Trace.write_all`` of a state that is a view (not a whole array) takes ``write``: the
    base sees the write, as in eager."""
    def fn(state, new):
        tr = ember._lazy.STATE.trace
        v = new * 2.0
        assert tr.write_all([(state, v, 1)]) == []
        return state * 1.0

    base = ember.zeros(2, 3)
    view = base[0]
    new = ember.tensor(np.arange(3, dtype=np.float32))
    out = ember.compile(fn)(view, new)
    np.testing.assert_array_equal(base.numpy(), [[0, 2, 4], [0, 0, 0]])
    np.testing.assert_array_equal(out.numpy(), [0, 2, 4])
    assert view._version == 1


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 5)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_backward_matches_torch(shape, dtype):
    """``linear``'s backward (transposes and the bias sum bound directly): the gradients of
    the input, weight and bias as torch's, eagerly and in a followed compiled call."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((3, 5)).astype(dtype)
    b = rng.standard_normal(3).astype(dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    (torch.nn.functional.linear(tx, tw, tb) ** 2).sum().backward()

    def run(ex, ew, eb):
        loss = (ember.nn.functional.linear(ex, ew, eb) ** 2).sum()
        loss.backward()
        return loss

    f = ember.compile(run)
    for fn in (run, f, f, f):
        ex, ew, eb = (ember.tensor(a, requires_grad=True) for a in (x, w, b))
        fn(ex, ew, eb)
        for e, t in ((ex, tx), (ew, tw), (eb, tb)):
            np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)
            assert e.grad.numpy().dtype == np.dtype(dtype)

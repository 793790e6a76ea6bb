"""The new optimizers inside ``ember.compile``d training steps: the same parameters as eager,
one graph per steady step (the step-dependent numbers become runtime arguments, not
recompiles), and LBFGS, which reads the loss as a Python number, breaking its graph there."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from tests.compiler.helpers import Counting

OPTIMIZERS = {
    "adadelta": lambda ps: ember.optim.Adadelta(ps, lr=0.5, weight_decay=1e-2),
    "adamax": lambda ps: ember.optim.Adamax(ps, lr=1e-2, maximize=False),
    "nadam": lambda ps: ember.optim.NAdam(ps, lr=1e-2, weight_decay=1e-2,
                                          decoupled_weight_decay=True),
    "radam": lambda ps: ember.optim.RAdam(ps, lr=1e-2),
    "asgd": lambda ps: ember.optim.ASGD(ps, lr=1e-2, t0=3),
    "rprop": lambda ps: ember.optim.Rprop(ps, lr=1e-2),
}


def _mlp():
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))


def _step(m, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    return loss


def _data(n):
    ember.manual_seed(1)
    return [(ember.randn(5, 4), ember.randint(0, 3, (5,))) for _ in range(n)]


def _train(make_opt, data, backend):
    ember.manual_seed(0)
    m = _mlp()
    opt = make_opt(m.parameters())
    step = _step if backend is None else ember.compile(_step, backend=backend)
    losses = [step(m, opt, x, y).item() for x, y in data]
    return m, opt, losses


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_compiled_step_matches_eager(name):
    ember.compiler.reset()
    data = _data(8)    # RAdam switches branch (rho_t > 5) at step 6; ASGD averages from step 4
    be = Counting()
    m1, o1, l1 = _train(OPTIMIZERS[name], data, None)
    m2, o2, l2 = _train(OPTIMIZERS[name], data, be)
    assert l1 == l2
    for (n, p), q in zip(m1.named_parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy(), err_msg=n)
    for p, q in zip(m1.parameters(), m2.parameters()):
        for key, v in o1.state[p].items():
            np.testing.assert_array_equal(v.numpy(), o2.state[q][key].numpy(), err_msg=key)
    assert be.runs == len(data)
    ex = ember.compiler.explain(_step)(m2, o2, *data[0])
    assert ex.graph_count == 1 and ex.graph_break_count == 0, \
        [b.reason for b in ex.break_reasons]


# graphs over 12 steps: the first step makes the state; Adamax's and NAdam's per-step numbers are
# lifted to runtime arguments once they change (one more graph); RAdam's and ASGD's Python
# branches (rho_t > 5 from step 6; mu < 1 after step t0 + 1) switch once, each side lifting
MAX_GRAPHS = {"adadelta": 1, "adamax": 2, "nadam": 2, "radam": 4, "asgd": 4, "rprop": 1}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_compiled_step_does_not_recompile_every_step(name):
    ember.compiler.reset()
    be = Counting()
    _train(OPTIMIZERS[name], _data(12), be)
    assert len(be.graphs) <= MAX_GRAPHS[name], [g.ops()[-5:] for g in be.graphs]
    assert be.runs == 12


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_c_backend_step_matches_eager(name):
    ember.compiler.reset()
    data = _data(4)
    m1, _, l1 = _train(OPTIMIZERS[name], data, None)
    m2, _, l2 = _train(OPTIMIZERS[name], data, "c")
    np.testing.assert_allclose(l1, l2, rtol=1e-5)
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_in_compiled_function_breaks_graph_and_matches_eager(line_search_fn):
    def fit(m, opt, x, y):
        def closure():
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            return loss
        return opt.step(closure)

    def run(compiled):
        ember.manual_seed(0)
        m = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        opt = ember.optim.LBFGS(m.parameters(), max_iter=5, history_size=3,
                                line_search_fn=line_search_fn)
        ember.manual_seed(2)
        x, y = ember.randn(10, 3), ember.randn(10, 1)
        f = ember.compile(fit, backend="eager") if compiled else fit
        losses = [f(m, opt, x, y).item() for _ in range(3)]
        return m, opt, losses, (fit, m, opt, x, y)

    m1, o1, l1, _ = run(False)
    m2, o2, l2, args = run(True)
    assert l1 == l2
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    ex = ember.compiler.explain(args[0])(*args[1:])
    assert ex.graph_break_count > 0


def _state_arrays(opt):
    return [(k, v.numpy().copy()) for g in opt.param_groups for p in g["params"]
            for k, v in sorted(opt.state[p].items())]


@pytest.mark.parametrize("eager_steps", [0, 5])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_reduce_overhead_replays_match_eager(name, eager_steps):
    """Replayed steps recompute the per-step numbers (bias corrections, NAdam's mu_product)
    from the state.  ASGD steps always run their Python; so do RAdam's warm-up steps
    (rho_t <= 5, steps 1-5), and a recording refused there is not retried, so RAdam replays
    when compiled after its warm-up (``eager_steps=5``)."""
    ember.compiler.reset()
    data = _data(14)
    m1, o1, l1 = _train(OPTIMIZERS[name], data, None)
    ember.manual_seed(0)
    m2 = _mlp()
    o2 = OPTIMIZERS[name](m2.parameters())
    f = ember.compile(_step, mode="reduce-overhead", backend="eager")
    l2 = [(_step if i < eager_steps else f)(m2, o2, x, y).item() for i, (x, y) in enumerate(data)]
    assert l1 == l2
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    for (k1, v1), (k2, v2) in zip(_state_arrays(o1), _state_arrays(o2)):
        assert k1 == k2
        np.testing.assert_array_equal(v1, v2, err_msg=k1)
    if name == "asgd":
        assert f.replay_count == 0 and "ASGD" in f.why_not
    elif name == "radam" and eager_steps == 0:
        assert f.replay_count == 0 and "warm-up" in f.why_not
    else:
        # the first compiled call records (after a first step that makes the state)
        assert f.replay_count >= 14 - eager_steps - 2, (f.replay_count, f.why_not)

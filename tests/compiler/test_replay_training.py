"""mode="reduce-overhead" on whole training steps (forward, backward, optimizer step, zero_grad):
replayed steps give the same losses, parameters, gradients and optimizer state as eager, bit for
bit with the eager backend (tests/compiler/conftest.py) and within a few ulp with the C backend;
steps that a replay could not redo run their Python (``why_not`` says why)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from tests.compiler.helpers import lm_step


def _mlp():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, 3))


def _batch(k):
    rng = np.random.default_rng(k)
    x = ember.tensor(rng.standard_normal((8, 6)).astype(np.float32))
    y = ember.tensor(rng.integers(0, 3, 8), dtype=ember.int64)
    return x, y


OPTIMIZERS = {
    "adamw": lambda ps: ember.optim.AdamW(ps, lr=1e-2, weight_decay=1e-2),
    "adam": lambda ps: ember.optim.Adam(ps, lr=1e-2),
    "adam_amsgrad": lambda ps: ember.optim.Adam(ps, lr=1e-2, amsgrad=True, weight_decay=1e-3),
    "sgd_momentum": lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                               weight_decay=1e-3),
    "sgd": lambda ps: ember.optim.SGD(ps, lr=0.1),
    "adagrad": lambda ps: ember.optim.Adagrad(ps, lr=0.1, lr_decay=0.01),
    "rmsprop": lambda ps: ember.optim.RMSprop(ps, lr=1e-2, momentum=0.5),
}


def _zero_after(m, opt, x, y):
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def _zero_before(m, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    return loss


def _zero_to_zeros(m, opt, x, y):
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
    return loss


def _zeros_before_clipped(m, opt, x, y):
    opt.zero_grad(set_to_none=False)
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    ember.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
    opt.step()
    return loss


def _state_arrays(opt):
    out = []
    for group in opt.param_groups:
        for p in group["params"]:
            st = opt.state.get(p, {})
            for k in sorted(st):
                v = st[k]
                out.append((k, v.numpy().copy() if isinstance(v, ember.Tensor) else v))
    return out


def _run(make_opt, step, compiled, steps=12, backend="eager", batches=3, between=None):
    m = _mlp()
    opt = make_opt(m.parameters())
    f = ember.compile(step, mode="reduce-overhead", backend=backend) if compiled else step
    data = [_batch(k) for k in range(batches)]
    losses = []
    for i in range(steps):
        x, y = data[i % batches]
        losses.append(f(m, opt, x, y).item())
        if between is not None:
            between(i, m, opt)
    grads = [None if p.grad is None else p.grad.numpy().copy() for p in m.parameters()]
    params = [p.detach().numpy().copy() for p in m.parameters()]
    return f, losses, params, grads, _state_arrays(opt)


def _assert_same(a, b):
    _, la, pa, ga, sa = a
    _, lb, pb, gb, sb = b
    assert la == lb
    for p, q in zip(pa, pb):
        np.testing.assert_array_equal(p, q)
    for p, q in zip(ga, gb):
        assert (p is None) == (q is None)
        if p is not None:
            np.testing.assert_array_equal(p, q)
    assert len(sa) == len(sb)
    for (k1, v1), (k2, v2) in zip(sa, sb):
        assert k1 == k2
        np.testing.assert_array_equal(v1, v2)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("step", [_zero_after, _zero_before, _zero_to_zeros,
                                  _zeros_before_clipped],
                         ids=["zero_after", "zero_before", "zero_to_zeros", "clipped"])
def test_training_step_replays_bit_for_bit(name, step):
    make = OPTIMIZERS[name]
    eager = _run(make, step, False)
    comp = _run(make, step, True)
    _assert_same(comp, eager)
    f = comp[0]
    # the first step makes the optimizer's state (not replayable), the second records, and
    # every later step replays
    assert f.why_not == "" and f.replay_count >= 9, (f.replay_count, f.why_not)


class _Trainer:
    """The benchmark's shape: a bound method of a plain object holding model, optimizer and
    batch, reading them (and a number) through ``self``."""

    def __init__(self):
        self.m = _mlp()
        self.opt = ember.optim.AdamW(self.m.parameters(), lr=1e-2)
        self.x, self.y = _batch(0)
        self.n = 3

    def step(self):
        out = self.m(self.x)
        loss = F.cross_entropy(out.reshape(-1, self.n), self.y.reshape(-1))
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
        return loss


def test_bound_method_of_a_plain_object():
    a, b = _Trainer(), _Trainer()
    f = ember.compile(a.step, mode="reduce-overhead")
    for i in range(12):
        la, lb = f(), b.step()
        assert la.item() == lb.item()
        # a replayed step returns the loss as a fresh tensor without autograd history; eager's
        # loss keeps its (spent) grad_fn
        if i >= 2:
            assert not la.requires_grad and la.grad_fn is None
    assert f.replay_count == 10, f.why_not
    for p, q in zip(a.m.parameters(), b.m.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    _assert_states(a.opt, b.opt)
    # what the step reads through self is guarded: a new batch, a new number, a new optimizer
    a.x, b.x = _batch(5)[0], _batch(5)[0]
    assert f().item() == b.step().item() and f.record_count == 3
    assert f().item() == b.step().item() and f.replay_count == 11
    a.opt.param_groups[0]["lr"] = b.opt.param_groups[0]["lr"] = 5e-3
    assert f().item() == b.step().item() and f.record_count == 4
    assert f().item() == b.step().item() and f.replay_count == 12
    for p, q in zip(a.m.parameters(), b.m.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    _assert_states(a.opt, b.opt)


def _assert_states(o1, o2):
    for (k1, v1), (k2, v2) in zip(_state_arrays(o1), _state_arrays(o2)):
        assert k1 == k2
        np.testing.assert_array_equal(v1, v2)


def test_grads_accumulated_over_two_calls():
    def accumulate(m, x, y):
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        return loss

    def update(opt):
        opt.step()
        opt.zero_grad()

    results = []
    for compiled in (False, True):
        m = _mlp()
        opt = ember.optim.Adam(m.parameters(), lr=1e-2)
        acc = ember.compile(accumulate, mode="reduce-overhead") if compiled else accumulate
        upd = ember.compile(update, mode="reduce-overhead") if compiled else update
        losses = []
        for i in range(10):
            for k in range(2):                      # two micro-batches per step
                losses.append(acc(m, *_batch(2 * (i % 3) + k)).item())
            if i == 9:
                grads = [p.grad.numpy().copy() for p in m.parameters()]
            upd(opt)
        results.append((losses, [p.detach().numpy().copy() for p in m.parameters()], grads,
                        _state_arrays(opt), acc, upd))
    (l1, p1, g1, s1, _, _), (l2, p2, g2, s2, acc, upd) = results
    assert l1 == l2
    for a, b in zip(p1 + g1, p2 + g2):
        np.testing.assert_array_equal(a, b)
    for (k1, v1), (k2, v2) in zip(s1, s2):
        np.testing.assert_array_equal(v1, v2)
    # the first micro-batch (grads None) and the second (grads accumulated into) are two
    # guarded entries, both replayed
    assert acc.record_count == 2 and acc.replay_count == 18, acc.why_not
    assert upd.replay_count >= 8, upd.why_not


def test_lr_scheduler_changes_are_seen():
    def with_scheduler(make):
        def make_opt(ps):
            opt = make(ps)
            opt.test_scheduler = ember.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
            return opt
        return make_opt

    def between(i, m, opt):
        opt.test_scheduler.step()

    for name in ("adamw", "sgd_momentum"):
        ember.compiler.reset()
        make = with_scheduler(OPTIMIZERS[name])
        eager = _run(make, _zero_after, False, steps=14, between=between)
        comp = _run(make, _zero_after, True, steps=14, between=between)
        _assert_same(comp, eager)
        f = comp[0]
        # every change of lr records again (the lr is guarded by value); steps between replay
        assert f.replay_count >= 6 and f.record_count >= 4


def test_parameter_requires_grad_toggled():
    def between(i, m, opt):
        if i == 4:
            m[0].requires_grad_(False)
        if i == 6:
            m[2].weight.requires_grad_(False)    # its bias still trains
        if i == 8:
            m[0].requires_grad_(True)
        if i == 10:
            m[2].weight.requires_grad_(True)

    for name in ("adamw", "sgd_momentum"):
        ember.compiler.reset()   # each toggle is a new graph: stay under the recompile limit
        eager = _run(OPTIMIZERS[name], _zero_after, False, steps=16, between=between)
        comp = _run(OPTIMIZERS[name], _zero_after, True, steps=16, between=between)
        _assert_same(comp, eager)
        assert comp[0].replay_count >= 6


@pytest.mark.parametrize("name", ["adamw", "sgd_momentum", "adagrad"])
def test_c_backend_close_to_eager_and_equal_to_plain_compile(name):
    make = OPTIMIZERS[name]
    eager = _run(make, _zero_after, False, steps=10)
    replayed = _run(make, _zero_after, True, steps=10, backend="c")
    m = _mlp()
    opt = make(m.parameters())
    plain = ember.compile(_zero_after, backend="c")
    data = [_batch(k) for k in range(3)]
    plain_losses = [plain(m, opt, *data[i % 3]).item() for i in range(10)]
    assert replayed[0].replay_count == 8, replayed[0].why_not
    # a replay runs the very compiled graph the plain compiled call runs, with the numbers
    # recomputed: the same bits
    assert replayed[1] == plain_losses
    for p, q in zip(replayed[2], m.parameters()):
        np.testing.assert_array_equal(p, q.detach().numpy())
    # eager within a few ulp (C reductions accumulate in double; test_cbackend_models.py)
    np.testing.assert_allclose(replayed[1], eager[1], rtol=2e-6, atol=0)
    for p, q in zip(replayed[2], eager[2]):
        np.testing.assert_allclose(p, q, rtol=0, atol=5e-7)


# ------------------------------------------------------------------------------ not replayed
def _refused(step, steps=5, make=OPTIMIZERS["adam"]):
    eager = _run(make, step, False, steps=steps)
    comp = _run(make, step, True, steps=steps)
    _assert_same(comp, eager)
    f = comp[0]
    assert f.replay_count == 0
    return f.why_not


def test_returned_tensor_with_a_live_graph_is_not_replayed():
    def step(m, opt, x, y):
        out = m(x)
        loss = F.cross_entropy(out, y)
        loss.backward(retain_graph=True)
        opt.step()
        opt.zero_grad()
        return loss

    assert "autograd graph" in _refused(step)

    def forward_only(m, opt, x, y):
        return F.cross_entropy(m(x), y)

    m = _mlp()
    f = ember.compile(forward_only, mode="reduce-overhead")
    for _ in range(3):
        loss = f(m, None, *_batch(0))
        assert loss.requires_grad and loss.grad_fn is not None
    assert f.replay_count == 0 and "autograd graph" in f.why_not


def test_tensor_stored_on_an_object_is_not_replayed():
    box = {}

    def step(m, opt, x, y):
        loss = _zero_after(m, opt, x, y)
        box["last"] = loss.detach() * 2
        return loss

    assert "outlives" in _refused(step)


def test_grad_of_an_unguarded_tensor_is_not_replayed():
    extra = [ember.zeros(3, requires_grad=True)]   # reached through a list: not guarded

    def step(m, opt, x, y):
        loss = F.cross_entropy(m(x) + extra[0], y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    assert ".grad to a tensor" in _refused(step)


def test_autograd_hook_is_not_replayed():
    seen = []

    def step(m, opt, x, y):
        return _zero_after(m, opt, x, y)

    m = _mlp()
    m[0].weight.register_hook(lambda g: seen.append(1))
    opt = OPTIMIZERS["adam"](m.parameters())
    f = ember.compile(step, mode="reduce-overhead")
    for _ in range(4):
        f(m, opt, *_batch(0))
    assert f.replay_count == 0 and "hook" in f.why_not and len(seen) == 4


def test_dropout_is_not_replayed():
    def step(m, opt, x, y):
        loss = F.cross_entropy(F.dropout(m(x), 0.3), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    ember.manual_seed(7)
    assert "random" in _refused(step)


def test_tensor_lr_is_not_replayed():
    make = lambda ps: ember.optim.SGD(ps, lr=ember.tensor(0.1))  # noqa: E731
    assert "tensor" in _refused(_zero_after, make=make)


def test_scheduler_stepped_inside_is_not_replayed():
    def run(compiled):
        m = _mlp()
        opt = OPTIMIZERS["sgd_momentum"](m.parameters())
        sched = ember.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)

        def step(x, y):
            loss = _zero_after(m, opt, x, y)
            sched.step()
            return loss

        f = ember.compile(step, mode="reduce-overhead") if compiled else step
        losses = [f(*_batch(i % 3)).item() for i in range(8)]
        return losses, [p.detach().numpy().copy() for p in m.parameters()], f

    l1, p1, _ = run(False)
    l2, p2, f = run(True)
    assert l1 == l2
    for a, b in zip(p1, p2):
        np.testing.assert_array_equal(a, b)
    assert f.replay_count == 0 and "scheduler" in f.why_not


def test_unguarded_optimizer_is_not_replayed():
    m = _mlp()
    holder = [OPTIMIZERS["sgd"](m.parameters())]   # reached through a list: not guarded

    def step(x, y):
        return _zero_after(m, holder[0], x, y)

    f = ember.compile(step, mode="reduce-overhead")
    for i in range(4):
        f(*_batch(i))
    assert f.replay_count == 0 and "optimizer the guards do not hold" in f.why_not


def test_compiled_optimizer_step_sees_lr_changes():
    results = []
    for compiled in (False, True):
        m = _mlp()
        opt = OPTIMIZERS["adamw"](m.parameters())
        st = ember.compile(opt.step, mode="reduce-overhead") if compiled else opt.step
        for i in range(10):
            F.cross_entropy(m(_batch(i % 3)[0]), _batch(i % 3)[1]).backward()
            st()
            opt.zero_grad()
            if i == 5:
                opt.param_groups[0]["lr"] = 1e-3
        results.append(([p.detach().numpy().copy() for p in m.parameters()], _state_arrays(opt),
                        st))
    (p1, s1, _), (p2, s2, st) = results
    for a, b in zip(p1, p2):
        np.testing.assert_array_equal(a, b)
    for (k1, v1), (k2, v2) in zip(s1, s2):
        np.testing.assert_array_equal(v1, v2)
    assert st.replay_count >= 6, st.why_not


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_step_numbers_held_as_constants_record_again():
    # dynamic=False compiles Adam's bias corrections as constants: a recording cannot replay
    # them with new values, so it is recorded again (a bounded number of times) and the steps
    # run the normal compiled path, with eager's results
    def run(compiled):
        m = _mlp()
        opt = OPTIMIZERS["adamw"](m.parameters())
        f = ember.compile(_zero_after, mode="reduce-overhead", dynamic=False) if compiled \
            else _zero_after
        losses = [f(m, opt, *_batch(i % 3)).item() for i in range(14)]
        return losses, [p.detach().numpy().copy() for p in m.parameters()], f

    l1, p1, _ = run(False)
    l2, p2, f = run(True)
    assert l1 == l2
    for a, b in zip(p1, p2):
        np.testing.assert_array_equal(a, b)
    assert f.replay_count == 0 and f.record_count <= 12


def test_step_count_read_without_a_recipe_is_not_replayed():
    from ember.optim.optimizer import Optimizer, _advance_step, _scalar_step

    class Decaying(Optimizer):
        def __init__(self, ps):
            super().__init__(ps, {"lr": 0.1})

        def _update(self, p, group):
            st = self.state[p]
            if not st:
                st["step"] = _scalar_step()
            n = _advance_step(st["step"])     # a Python number that changes every step
            p.add_(p.grad, alpha=-group["lr"] / n)

    assert "step count" in _refused(_zero_after, steps=6, make=Decaying)


# ------------------------------------------------------------------------------ char GPT
def test_char_gpt_step_and_inference_replay_with_the_c_backend():
    """The benchmark's char GPT (embeddings and their scatter-add gradient, attention, layer
    norms, tied head): its training step replays after the first two steps and gives the very
    losses and weights of the plain compiled step; inference under no_grad replays too."""
    from ember import demo

    def make():
        ember.manual_seed(0)
        m = demo.CharGPT(20, block=16, d=32, layers=2, heads=2)
        return m, ember.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.01)

    rng = np.random.default_rng(0)
    data = [(ember.tensor(rng.integers(0, 20, (2, 16)), dtype=ember.int64),
             ember.tensor(rng.integers(0, 20, (2, 16)), dtype=ember.int64)) for _ in range(3)]
    (m1, o1), (m2, o2) = make(), make()
    replayed = ember.compile(lm_step, backend="c", mode="reduce-overhead")
    plain = ember.compile(lambda *a: lm_step(*a), backend="c")
    got = [replayed(m1, o1, *data[i % 3]).item() for i in range(6)]
    want = [plain(m2, o2, *data[i % 3]).item() for i in range(6)]
    assert replayed.replay_count == 4 and replayed.why_not == "", replayed.why_not
    assert got == want
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    infer = ember.compile(m1, backend="c", mode="reduce-overhead")
    with ember.no_grad():
        outs = [infer(x).numpy().copy() for x, _ in data]
        eager = [m1(x).numpy() for x, _ in data]
    assert infer._compiled.replay_count == 2, infer._compiled.why_not
    for a, b in zip(outs, eager):   # C reductions sum in double: within a few ulp
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-6)

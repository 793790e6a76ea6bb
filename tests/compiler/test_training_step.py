"""A whole training step (forward, ``loss.backward()``, ``optimizer.step()``, ``zero_grad``)
compiled as one function: same parameters as eager, one graph per step, bounded recompiles,
and randomness (dropout) bit for bit with the same generator state afterwards."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from tests.compiler.helpers import Counting


def _mlp(dropout=0.0):
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, 3))


class Block(nn.Module):
    """A small transformer block over token ids with a vocabulary head."""

    def __init__(self, vocab=11, d=16):
        super().__init__()
        self.vocab = vocab
        self.emb = nn.Embedding(vocab, d)
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 2, dropout=0.1, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d),
                                 nn.Dropout(0.2))
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.emb(idx)
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


OPTIMIZERS = {
    "sgd": lambda ps: ember.optim.SGD(ps, lr=0.1),
    "sgd_momentum": lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                               weight_decay=1e-3),
    "adam": lambda ps: ember.optim.Adam(ps, lr=1e-2),
    "adam_amsgrad": lambda ps: ember.optim.Adam(ps, lr=1e-2, amsgrad=True, weight_decay=1e-2),
    "adamw": lambda ps: ember.optim.AdamW(ps, lr=1e-2),
    "rmsprop": lambda ps: ember.optim.RMSprop(ps, lr=1e-2, momentum=0.5),
    "adagrad": lambda ps: ember.optim.Adagrad(ps, lr=1e-1),
}


def _step(m, opt, x, y):
    opt.zero_grad()
    out = m(x)
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    loss.backward()
    opt.step()
    return loss


def _params_equal(m1, m2):
    for (n, p), q in zip(m1.named_parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy(), err_msg=n)


def _train(make_model, make_opt, data, compiled, seed=3, backend="eager"):
    ember.manual_seed(0)
    m = make_model()
    opt = make_opt(m.parameters())
    step = ember.compile(_step, backend=backend) if compiled else _step
    ember.manual_seed(seed)
    losses = [step(m, opt, x, y).item() for x, y in data]
    return m, opt, losses, ember.random.default_generator.get_state()


def _mlp_data(n):
    ember.manual_seed(1)
    return [(ember.randn(5, 4), ember.randint(0, 3, (5,))) for _ in range(n)]


def _tok_data(n):
    ember.manual_seed(1)
    return [(ember.randint(0, 11, (2, 5)), ember.randint(0, 11, (2, 5))) for _ in range(n)]


@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_mlp_step_matches_eager(opt):
    ember.compiler.reset()
    data = _mlp_data(6)
    be = Counting()
    m1, _, l1, _ = _train(_mlp, OPTIMIZERS[opt], data, False)
    m2, o2, l2, _ = _train(_mlp, OPTIMIZERS[opt], data, True, backend=be)
    assert l1 == l2
    _params_equal(m1, m2)
    # the first step creates optimizer state (a different graph), later steps share one graph
    # with the changing numbers (Adam's bias corrections) lifted to runtime arguments
    assert len(be.graphs) <= 2, [g.ops()[:5] for g in be.graphs]
    assert be.runs == len(data)
    ex = ember.compiler.explain(_step)(m2, o2, *data[0])
    assert ex.graph_count == 1 and ex.graph_break_count == 0, \
        [b.reason for b in ex.break_reasons]


def test_zero_grad_set_to_zero_in_compiled_step():
    def step(m, opt, x, y):
        opt.zero_grad(set_to_none=False)
        F.cross_entropy(m(x), y).backward()
        opt.step()

    def run(compiled):
        ember.manual_seed(0)
        m = _mlp()
        opt = ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        f = ember.compile(step) if compiled else step
        for x, y in _mlp_data(4):
            f(m, opt, x, y)
        return m

    m1, m2 = run(False), run(True)
    _params_equal(m1, m2)
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


@pytest.mark.parametrize("opt", ["adamw", "sgd_momentum"])
def test_transformer_block_step_matches_eager(opt):
    ember.compiler.reset()
    data = _tok_data(6)
    be = Counting()
    m1, _, l1, s1 = _train(Block, OPTIMIZERS[opt], data, False)
    m2, o2, l2, s2 = _train(Block, OPTIMIZERS[opt], data, True, backend=be)
    assert l1 == l2
    _params_equal(m1, m2)
    np.testing.assert_array_equal(s1.numpy(), s2.numpy())  # same generator state afterwards
    # step 1 creates optimizer state; step 2 compiles the steady graph; random seeds/offsets
    # are runtime arguments from the start and Adam's bias corrections are lifted on their
    # first change: no compile after that
    assert len(be.graphs) <= 2 and be.runs == len(data)
    ex = ember.compiler.explain(_step)(m2, o2, *data[0])
    assert ex.graph_count == 1 and ex.graph_break_count == 0, \
        [b.reason for b in ex.break_reasons]


def test_dropout_bit_for_bit_and_generator_state():
    data = _mlp_data(5)
    for seed in (0, 7):
        m1, _, l1, s1 = _train(lambda: _mlp(0.5), OPTIMIZERS["sgd"], data, False, seed=seed)
        m2, _, l2, s2 = _train(lambda: _mlp(0.5), OPTIMIZERS["sgd"], data, True, seed=seed)
        assert l1 == l2
        _params_equal(m1, m2)
        np.testing.assert_array_equal(s1.numpy(), s2.numpy())


def test_random_ops_in_graph_advance_the_generator_like_eager():
    def f(x):
        a = F.dropout(x, 0.3)
        b = ember.rand_like(x)
        c = ember.randn(3, 2)
        return a + b, c

    x = ember.ones(3, 2)
    g = ember.random.default_generator
    be = Counting()
    cf = ember.compile(f, backend=be)
    for seed in (1, 2, 3):
        ember.manual_seed(seed)
        ra = f(x)
        sa = g.get_offset()
        ember.manual_seed(seed)
        rb = cf(x)
        assert g.get_offset() == sa
        for p, q in zip(ra, rb):
            np.testing.assert_array_equal(p.numpy(), q.numpy())
    # seeds and offsets are runtime arguments of the graph: a new seed does not recompile
    assert len(be.graphs) == 1
    assert be.graphs[0].num_scalars == 6


def test_random_offsets_never_recompile_even_with_dynamic_false():
    be = Counting()
    data = _mlp_data(5)
    m1, _, l1, s1 = _train(lambda: _mlp(0.5), OPTIMIZERS["sgd"], data, False)
    ember.manual_seed(0)
    m2 = _mlp(0.5)
    opt = OPTIMIZERS["sgd"](m2.parameters())
    step = ember.compile(_step, backend=be, dynamic=False)
    ember.manual_seed(3)
    l2 = [step(m2, opt, x, y).item() for x, y in data]
    assert l1 == l2
    _params_equal(m1, m2)
    np.testing.assert_array_equal(s1.numpy(), ember.random.default_generator.get_state().numpy())
    assert len(be.graphs) == 1


def test_generator_argument_in_graph():
    def f(x, gen):
        return x + ember.randn(x.shape, generator=gen)

    ga, gb = ember.Generator().manual_seed(5), ember.Generator().manual_seed(5)
    x = ember.zeros(4)
    cf = ember.compile(f)
    for _ in range(3):
        np.testing.assert_array_equal(f(x, ga).numpy(), cf(x, gb).numpy())
    assert ga.get_offset() == gb.get_offset()


def test_lr_schedule_does_not_recompile_every_step():
    be = Counting()

    def run(compiled):
        ember.manual_seed(0)
        m = _mlp()
        opt = ember.optim.Adam(m.parameters(), lr=1e-2)
        sched = ember.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        f = ember.compile(_step, backend=be) if compiled else _step
        for x, y in _mlp_data(20):
            f(m, opt, x, y)
            sched.step()
        return m

    m1, m2 = run(False), run(True)
    _params_equal(m1, m2)
    assert len(be.graphs) <= 2
    assert be.runs == 20


def test_batchnorm_model_step_updates_buffers():
    def make():
        return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))

    data = _mlp_data(4)
    m1, _, l1, _ = _train(make, OPTIMIZERS["adam"], data, False)
    m2, o2, l2, _ = _train(make, OPTIMIZERS["adam"], data, True)
    assert l1 == l2
    _params_equal(m1, m2)
    for (n, b1), b2 in zip(m1.named_buffers(), m2.buffers()):
        np.testing.assert_array_equal(b1.numpy(), b2.numpy(), err_msg=n)
    ex = ember.compiler.explain(_step)(m2, o2, *data[0])
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_compiled_module_with_eager_optimizer_step():
    # forward compiled (module.compile()), backward recorded by compiled autograd, optimizer
    # step eager: same parameters as all-eager training
    be = Counting()

    def run(compiled):
        ember.manual_seed(0)
        m = _mlp()
        if compiled:
            m.compile(backend=be)
        opt = ember.optim.AdamW(m.parameters(), lr=1e-2)
        for x, y in _mlp_data(4):
            opt.zero_grad()
            F.cross_entropy(m(x), y).backward()
            opt.step()
        return m

    m1, m2 = run(False), run(True)
    _params_equal(m1, m2)
    ops = [g.ops() for g in be.graphs]
    assert any("cross_entropy_backward" not in o and "linear" in o for o in ops)  # forward
    assert any("matmul" in o and "sum" in o for o in ops)                       # backward
    assert len(be.graphs) <= 4


def test_gradient_accumulation_and_gradient_penalty_steps():
    def make():
        ember.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
        return m, ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def accumulate(m, opt, xs, ys):
        opt.zero_grad()
        total = 0
        for x, y in zip(xs, ys):
            loss = F.cross_entropy(m(x), y) / len(xs)
            loss.backward()
            total = total + loss.detach()
        opt.step()
        return total

    def penalty(m, x):
        x = x.requires_grad_()
        (g,) = ember.autograd.grad(m(x).sum(), x, create_graph=True)
        pen = (g ** 2).sum()
        pen.backward()
        return pen

    (m1, o1), (m2, o2) = make(), make()
    ca, cp = ember.compile(accumulate), ember.compile(penalty)
    ember.manual_seed(1)
    for _ in range(3):
        xs = [ember.randn(5, 4) for _ in range(2)]
        ys = [ember.randint(0, 3, (5,)) for _ in range(2)]
        assert accumulate(m1, o1, xs, ys).item() == ca(m2, o2, xs, ys).item()
        x = ember.randn(2, 4)
        assert penalty(m1, x.clone()).item() == cp(m2, x.clone()).item()
        for p, q in zip(m1.parameters(), m2.parameters()):
            np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    _params_equal(m1, m2)
    for fn, args in ((accumulate, (m2, o2, xs, ys)), (penalty, (m2, x.clone()))):
        ex = ember.compiler.explain(fn)(*args)
        assert ex.graph_count == 1 and ex.graph_break_count == 0


class _Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.layer(x).mean(1))


def _cnn():
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Dropout2d(0.2), nn.Flatten(), nn.Linear(64, 3))


@pytest.mark.parametrize("model", ["cnn", "encoder"])
def test_more_models_step_as_one_graph(model):
    make, shape = {"cnn": (_cnn, (2, 2, 8, 8)), "encoder": (_Encoder, (2, 5, 8))}[model]
    ember.manual_seed(1)
    data = [(ember.randn(*shape), ember.randint(0, 3, (2,))) for _ in range(3)]
    m1, _, l1, s1 = _train(make, OPTIMIZERS["adam"], data, False)
    m2, o2, l2, s2 = _train(make, OPTIMIZERS["adam"], data, True)
    assert l1 == l2
    _params_equal(m1, m2)
    for (n, b1), b2 in zip(m1.named_buffers(), m2.buffers()):
        np.testing.assert_array_equal(b1.numpy(), b2.numpy(), err_msg=n)
    np.testing.assert_array_equal(s1.numpy(), s2.numpy())
    ex = ember.compiler.explain(_step)(m2, o2, *data[0])
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_step_with_ema_copy_of_the_model():
    def step(m, ema, opt, x, y, decay=0.9):
        _step(m, opt, x, y)
        with ember.no_grad():
            for pe, p in zip(ema.parameters(), m.parameters()):
                pe.mul_(decay).add_(p, alpha=1 - decay)
        return ema(x)

    def run(compiled):
        ember.manual_seed(0)
        m, ema = _mlp(), _mlp()
        ema.load_state_dict(m.state_dict())
        opt = OPTIMIZERS["adamw"](m.parameters())
        f = ember.compile(step) if compiled else step
        outs = [f(m, ema, opt, x, y).detach().numpy() for x, y in _mlp_data(4)]
        return m, ema, outs

    (m1, e1, o1), (m2, e2, o2) = run(False), run(True)
    _params_equal(m1, m2)
    _params_equal(e1, e2)
    for a, b in zip(o1, o2):
        np.testing.assert_array_equal(a, b)


def test_fullgraph_training_step():
    data = _mlp_data(3)
    m1, _, l1, _ = _train(_mlp, OPTIMIZERS["adam"], data, False)
    ember.manual_seed(0)
    m2 = _mlp()
    opt = OPTIMIZERS["adam"](m2.parameters())
    step = ember.compile(_step, fullgraph=True)
    ember.manual_seed(3)
    l2 = [step(m2, opt, x, y).item() for x, y in data]
    assert l1 == l2
    _params_equal(m1, m2)


def test_transformer_backward_outside_is_one_graph():
    be = Counting()
    data = _tok_data(3)

    def run(compiled):
        ember.manual_seed(0)
        m = Block()
        fwd = ember.compile(m, backend=be) if compiled else m
        grads, runs = [], []
        for x, y in data:
            ember.manual_seed(5)
            m.zero_grad()
            r0 = be.runs
            loss = F.cross_entropy(fwd(x).reshape(-1, 11), y.reshape(-1))
            r1 = be.runs
            loss.backward()
            runs.append((r1 - r0, be.runs - r1))
            grads.append([p.grad.numpy().copy() for p in m.parameters()])
        return grads, runs

    g1, _ = run(False)
    g2, runs = run(True)
    for a, b in zip(g1, g2):
        for p, q in zip(a, b):
            np.testing.assert_array_equal(p, q)
    # per step: one forward graph, one backward graph (which also covers the eager
    # cross_entropy's backward); both compiled once
    assert runs == [(1, 1)] * len(data)
    assert len(be.graphs) == 2
    assert be.graphs[1].ops()[0] == "cross_entropy_backward"

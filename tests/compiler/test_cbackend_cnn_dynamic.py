"""A compiled training step of a small CNN with ``dynamic=True`` runs in C at every batch size
(convolution, its input and weight gradients, max_pool and its backward; with static spatial
sizes also reflection padding and adaptive average pooling, forward and backward): no eager
externs, and the parameters follow eager's over several SGD steps with two batch sizes."""

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend

F = ember.nn.functional


class SmallCNN(ember.nn.Module):
    def __init__(self, pad_and_adaptive: bool):
        super().__init__()
        self.extra = pad_and_adaptive
        self.c1 = ember.nn.Conv2d(3, 6, 3, padding=1)
        self.c2 = ember.nn.Conv2d(6, 8, 3, stride=2)
        self.fc = ember.nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        if self.extra:
            x = F.pad(x, (1, 1, 1, 1), mode="reflect")
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.relu(self.c2(x))
        x = F.adaptive_avg_pool2d(x, 2) if self.extra else x[:, :, :2, :2]
        return self.fc(x.flatten(1))


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = (model(x) - y).square().mean()
    loss.backward()
    opt.step()
    return loss


def _train(monkeypatch, extra, sizes, mark_static):
    externs: list = []
    monkeypatch.setattr(cbackend, "warn_fallbacks", externs.extend)
    ember.manual_seed(0)
    eager_m, comp_m = SmallCNN(extra), SmallCNN(extra)
    comp_m.load_state_dict(eager_m.state_dict())
    opt_e = ember.optim.SGD(eager_m.parameters(), lr=0.1)
    opt_c = ember.optim.SGD(comp_m.parameters(), lr=0.1)
    step = ember.compile(_step, backend="c", dynamic=True)
    rng = np.random.default_rng(0)
    for n, hw in sizes:
        x = ember.tensor(rng.standard_normal((n, 3, hw, hw)).astype(np.float32))
        if mark_static:
            ember.compiler.mark_static(x, [1, 2, 3])
        y = ember.tensor(rng.standard_normal((n, 5)).astype(np.float32))
        want = _step(eager_m, opt_e, x, y)
        got = step(comp_m, opt_c, x, y)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        for (name, p), q in zip(comp_m.named_parameters(), eager_m.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=name)
    assert externs == [], externs


def test_cnn_training_step_dynamic_batch_and_spatial_runs_in_c(monkeypatch):
    """Batch and spatial sizes are runtime ints: conv (+ both gradients), max_pool (+ its
    scatter) and the GEMMs lower size-generically."""
    _train(monkeypatch, False, [(4, 10), (7, 12), (4, 10), (7, 12)], mark_static=False)


def test_cnn_training_step_dynamic_batch_with_pad_and_adaptive_pool_runs_in_c(monkeypatch):
    """A runtime batch; reflection padding and adaptive pooling need static spatial sizes."""
    _train(monkeypatch, True, [(4, 10), (7, 10), (4, 10), (7, 10)], mark_static=True)


def test_dynamic_cnn_gradients_match_torch():
    """Gradients of the compiled CNN (dynamic batch) against PyTorch's on the same weights."""
    torch = pytest.importorskip("torch")
    ember.manual_seed(1)
    m = SmallCNN(True)
    f = ember.compile(lambda x: m(x).square().sum(), backend="c", dynamic=True)
    rng = np.random.default_rng(1)
    tf = torch.nn.functional
    for n in (3, 5):
        xn = rng.standard_normal((n, 3, 10, 10)).astype(np.float32)
        m.zero_grad()
        x = ember.tensor(xn, requires_grad=True)
        ember.compiler.mark_static(x, [1, 2, 3])
        f(x).backward()
        tx = torch.tensor(xn, requires_grad=True)
        tw = {k: torch.tensor(v.detach().numpy(), requires_grad=True)
              for k, v in m.named_parameters()}
        h = tf.pad(tx, (1, 1, 1, 1), mode="reflect")
        h = tf.max_pool2d(tf.relu(tf.conv2d(h, tw["c1.weight"], tw["c1.bias"], padding=1)), 2)
        h = tf.relu(tf.conv2d(h, tw["c2.weight"], tw["c2.bias"], stride=2))
        out = tf.linear(tf.adaptive_avg_pool2d(h, 2).flatten(1), tw["fc.weight"], tw["fc.bias"])
        out.square().sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
        for k, p in m.named_parameters():
            np.testing.assert_allclose(p.grad.numpy(), tw[k].grad.numpy(), rtol=1e-4,
                                       atol=1e-4, err_msg=k)


@pytest.mark.parametrize("d", [1, 2])
def test_avg_pool_dynamic_runs_in_c(monkeypatch, d):
    """avg_pool (a convolution with a ones kernel, whose sizes stay static) and its backward
    over runtime batch and spatial sizes: no extern, eager's values."""
    externs: list = []
    monkeypatch.setattr(cbackend, "warn_fallbacks", externs.extend)
    pool = F.avg_pool2d if d == 2 else F.avg_pool1d

    def fn(x):
        y = pool(x, 3, stride=2, padding=1, count_include_pad=False)
        return y, ember.autograd.grad([y.square().sum()], [x])[0]

    f = ember.compile(fn, backend="c", dynamic=True)
    rng = np.random.default_rng(2)
    for n, s in ((2, 9), (5, 12)):
        x = ember.tensor(rng.standard_normal((n, 3) + (s,) * d).astype(np.float32),
                         requires_grad=True)
        for g, w in zip(f(x), fn(x)):
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-6,
                                       atol=1e-6)
    assert externs == [], externs

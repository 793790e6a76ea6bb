"""A word-language-model training loop in the style of PyTorch's example (Embedding -> 2-layer
LSTM -> Linear, truncated BPTT with detached hidden state, clip_grad_norm_, manual SGD update),
written once and run with ``lib`` = ember and torch from the same initial weights; and the same
step under ``ember.compile`` against ember eager."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

VOCAB, EMB, HID, LAYERS, BPTT, BATCH, STEPS = 40, 12, 16, 2, 5, 4, 4


def make_model(lib, rnn_type="LSTM"):
    nn = lib.nn

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(VOCAB, EMB)
            self.rnn = getattr(nn, rnn_type)(EMB, HID, LAYERS, dropout=0.0)
            self.decoder = nn.Linear(HID, VOCAB)

        def forward(self, input, hidden):
            output, hidden = self.rnn(self.encoder(input), hidden)
            decoded = self.decoder(output).view(-1, VOCAB)
            return lib.nn.functional.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if rnn_type == "LSTM":
                return (weight.new_zeros(LAYERS, bsz, HID), weight.new_zeros(LAYERS, bsz, HID))
            return weight.new_zeros(LAYERS, bsz, HID)

    return RNNModel()


def repackage_hidden(h):
    if isinstance(h, tuple):
        return tuple(v.detach() for v in h)
    return h.detach()


def make_step(lib, model, lr=5.0, clip=0.25):
    criterion = lib.nn.NLLLoss()

    def step(data, targets, hidden):
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        return loss, hidden
    return step


def corpus(seed=0):
    ids = np.random.default_rng(seed).integers(0, VOCAB, BPTT * STEPS * BATCH + BATCH)
    return ids.reshape(-1, BATCH)  # batchify: (T, B)


def batches(lib, source):
    for i in range(0, BPTT * STEPS, BPTT):
        data = lib.tensor(source[i: i + BPTT])
        target = lib.tensor(source[i + 1: i + 1 + BPTT].reshape(-1))
        yield data, target


def pair(rnn_type="LSTM"):
    t = make_model(torch, rnn_type)
    e = make_model(ember, rnn_type)
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return e, t


def train(lib, model, step, source):
    hidden = model.init_hidden(BATCH)
    losses = []
    for data, targets in batches(lib, source):
        loss, hidden = step(data, targets, hidden)
        losses.append(loss.item())
    return losses, hidden


@pytest.mark.parametrize("rnn_type", ["LSTM", "GRU"])
def test_word_lm_training_matches_torch(rnn_type):
    e, t = pair(rnn_type)
    source = corpus()
    e_losses, e_h = train(ember, e, make_step(ember, e), source)
    t_losses, t_h = train(torch, t, make_step(torch, t), source)
    np.testing.assert_allclose(e_losses, t_losses, rtol=2e-5)
    assert e_losses[-1] != e_losses[0]
    tp = dict(t.named_parameters())
    for name, p in e.named_parameters():
        np.testing.assert_allclose(p.detach().numpy(), tp[name].detach().numpy(), rtol=1e-4,
                                   atol=2e-5, err_msg=name)


def test_word_lm_compiled_step_matches_eager():
    e1, _ = pair()
    e2 = make_model(ember)
    e2.load_state_dict(e1.state_dict())
    source = corpus(1)
    eager_losses, eager_h = train(ember, e1, make_step(ember, e1), source)
    compiled = ember.compile(make_step(ember, e2))
    comp_losses, comp_h = train(ember, e2, compiled, source)
    np.testing.assert_allclose(comp_losses, eager_losses, rtol=1e-5)
    for a, b in zip(comp_h, eager_h):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-6)
    p2 = dict(e2.named_parameters())
    for name, p in e1.named_parameters():
        np.testing.assert_allclose(p2[name].detach().numpy(), p.detach().numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=name)


def test_compiled_bidirectional_packed_matches_eager():
    """A bidirectional GRU on a packed batch, forward and backward, compiled vs eager."""
    from ember.nn.utils import rnn as ernn
    gru = ember.nn.GRU(3, 5, 2, bidirectional=True, dtype=ember.float64)
    x = ember.tensor(np.random.default_rng(0).standard_normal((6, 4, 3)))

    def fn(x):
        packed = ernn.pack_padded_sequence(x, [3, 6, 2, 5], enforce_sorted=False)
        out, h = gru(packed)
        padded, _ = ernn.pad_packed_sequence(out)
        loss = (padded ** 2).sum() + h.sum()
        grads = ember.autograd.grad(loss, list(gru.parameters()))
        return loss, padded, grads

    want = fn(x)
    got = ember.compile(fn)(x)
    np.testing.assert_allclose(got[0].item(), want[0].item(), rtol=1e-12)
    np.testing.assert_allclose(got[1].detach().numpy(), want[1].detach().numpy(), rtol=1e-12,
                               atol=1e-13)
    for a, b in zip(got[2], want[2]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-11, atol=1e-12)

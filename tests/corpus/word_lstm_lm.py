"""Word-level LSTM language model, in the style of pytorch/examples' ``word_language_model``.

Exercises: nn.Embedding -> nn.LSTM (2 layers) -> nn.Linear with tied weights, ``batchify`` with
``narrow``/``view``/``t().contiguous()``, truncated BPTT with ``repackage_hidden`` (detach),
``model.zero_grad()``, ``clip_grad_norm_``, the manual update ``p.data.add_(p.grad, alpha=-lr)``,
evaluation under ``torch.no_grad()``, and whole-model ``torch.save(model, f)`` to an open file,
loaded back with ``torch.load(f, weights_only=False)`` and ``rnn.flatten_parameters()``.
Dropout is 0 (ember's and PyTorch's random streams differ).
"""
# ruff: noqa: UP008, UP045  (written the way the public examples are)

import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.corpus._common import init_from_numpy


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ["LSTM", "GRU"]:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("When using the tied flag, nhid must be equal to emsize")
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def batchify(data, bsz, device):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def evaluate(model, data_source, criterion, bptt, eval_batch_size):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i, bptt)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def run(torch, steps=5, compile=False):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    ntokens, emsize, bptt, batch_size, lr, clip = 50, 16, 6, 4, 2.0, 0.25
    rng = np.random.default_rng(2)
    corpus = torch.from_numpy(rng.integers(0, ntokens, size=batch_size * (bptt * steps + 1)))
    train_data = batchify(corpus, batch_size, device)
    val_data = batchify(torch.tensor(rng.integers(0, ntokens, size=40).tolist()), 2, device)

    model = RNNModel("LSTM", ntokens, emsize, emsize, 2, dropout=0.0, tie_weights=True)
    init_from_numpy(model, seed=2).to(device)
    step_model = torch.compile(model) if compile else model
    criterion = nn.NLLLoss()
    losses = []
    model.train()
    hidden = model.init_hidden(batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i, bptt)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = step_model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        losses.append(loss.item())
    losses.append(evaluate(model, val_data, criterion, bptt, 2))

    path = os.path.join(tempfile.mkdtemp(), "model.pt")
    with open(path, "wb") as f:
        torch.save(model, f)
    with open(path, "rb") as f:
        model = torch.load(f, weights_only=False)
        model.rnn.flatten_parameters()
    losses.append(evaluate(model, val_data, criterion, bptt, 2))
    return losses

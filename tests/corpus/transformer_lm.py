"""Transformer language model, in the style of pytorch/examples' ``word_language_model``.

Exercises: a ``PositionalEncoding`` module whose table is built with arange/exp/sin/cos and
kept with ``register_buffer``, nn.TransformerEncoderLayer / nn.TransformerEncoder (sequence-first),
``nn.Transformer.generate_square_subsequent_mask``, scaling by ``math.sqrt(ninp)``, NLLLoss on
log_softmax, ``clip_grad_norm_`` and a manual SGD update. Dropout is 0 (random streams differ).
"""
# ruff: noqa: UP008, UP045  (written the way the public examples are)

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.corpus._common import init_from_numpy


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Module):
    """Container module with an encoder, a transformer encoder, and a decoder."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super(TransformerModel, self).__init__()
        self.model_type = "Transformer"
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout, max_len=64)
        encoder_layers = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers,
                                                         enable_nested_tensor=False)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)

    def forward(self, src, has_mask=True):
        if has_mask:
            device = src.device
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                mask = nn.Transformer.generate_square_subsequent_mask(len(src)).to(device)
                self.src_mask = mask
        else:
            self.src_mask = None
        src = self.encoder(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


def run(torch, steps=5, compile=False):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    ntokens, bptt, batch_size, lr = 40, 8, 3, 0.5
    rng = np.random.default_rng(3)
    data = torch.from_numpy(rng.integers(0, ntokens, size=(bptt * steps + 1, batch_size)))
    model = TransformerModel(ntokens, 16, 2, 32, 2, dropout=0.0)
    model = init_from_numpy(model, seed=3).to(device)
    step_model = torch.compile(model) if compile else model
    criterion = nn.NLLLoss()
    losses = []
    model.train()
    for i in range(0, bptt * steps, bptt):
        source = data[i:i + bptt].to(device)
        targets = data[i + 1:i + 1 + bptt].reshape(-1).to(device)
        model.zero_grad()
        output = step_model(source)
        output = output.view(-1, ntokens)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        output = model(data[:bptt].to(device)).view(-1, ntokens)
        losses.append(criterion(output, data[1:bptt + 1].reshape(-1)).item())
    return losses

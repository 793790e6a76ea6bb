"""Time-sequence prediction, in the style of pytorch/examples' ``time_sequence_prediction``.

Exercises: two stacked nn.LSTMCell in float64 (``model.double()``, ``torch.zeros(...,
dtype=torch.double)``), a Python loop over ``input.split(1, dim=1)``, feeding predictions back for
``future`` steps, ``torch.cat(outputs, dim=1)``, MSELoss, ``optim.LBFGS(lr=0.8)`` driven by a
``closure`` (many forward/backward passes per step) and prediction under ``torch.no_grad()``.
Data: sine waves with random phase from NumPy, as ``generate_sine_wave.py`` makes them.
"""
# ruff: noqa: UP008, UP045  (written the way the public examples are)

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

from tests.corpus._common import init_from_numpy

HIDDEN = 12


class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, HIDDEN)
        self.lstm2 = nn.LSTMCell(HIDDEN, HIDDEN)
        self.linear = nn.Linear(HIDDEN, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        c_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


def generate_sine_wave(T=20, L=16, N=8, seed=2):
    rng = np.random.default_rng(seed)
    x = np.empty((N, L), "int64")
    x[:] = np.array(range(L)) + rng.integers(-4 * T, 4 * T, N).reshape(N, 1)
    return np.sin(x / 1.0 / T).astype("float64")


def run(torch, steps=3, compile=False):
    data = generate_sine_wave()
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    seq = Sequence()
    seq.double()
    init_from_numpy(seq, seed=12)
    model = torch.compile(seq) if compile else seq
    criterion = nn.MSELoss()
    # use LBFGS as optimizer since we can load the whole data to train
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=6)
    losses = []
    for i in range(steps):
        def closure():
            optimizer.zero_grad()
            out = model(input)
            loss = criterion(out, target)
            loss.backward()
            return loss
        loss = optimizer.step(closure)
        losses.append(loss.item())
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            future = 5
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            losses.append(loss.item())
            y = pred.detach().numpy()
            assert y.shape == (3, 15 + future)
    return losses

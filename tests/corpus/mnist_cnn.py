"""MNIST-style CNN, in the style of pytorch/examples' ``mnist/main.py``.

Exercises: device selection, ``torch.backends.cudnn``, Conv2d -> BatchNorm2d -> ReLU(inplace=True),
Dropout, max_pool2d, flatten, log_softmax + nll_loss, SGD with momentum, StepLR, ``model.eval()``
with ``torch.no_grad()``, ``torch.save(model.state_dict())`` and ``load_state_dict(torch.load())``.
Data: 28x28 random "digits" from NumPy. Dropout p is 0 while training (ember's and PyTorch's random
streams differ); the eval pass is deterministic either way.
"""
# ruff: noqa: UP008, UP045  (written the way the public examples are)

import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR

from tests.corpus._common import init_from_numpy


class Net(nn.Module):
    def __init__(self, dropout=0.0):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout * 2)
        self.fc1 = nn.Linear(16 * 12 * 12, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = self.relu(self.bn1(x))
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def make_data(n, seed):
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((n, 1, 28, 28)).astype(np.float32)
    labels = rng.integers(0, 10, size=n).astype(np.int64)
    return images, labels


def train(model, device, batches, optimizer, losses):
    model.train()
    for batch_idx, (data, target) in enumerate(batches):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())


def test(model, device, data, target):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        data, target = data.to(device), target.to(device)
        output = model(data)
        test_loss += F.nll_loss(output, target, reduction="sum").item()
        pred = output.argmax(dim=1, keepdim=True)
        correct += pred.eq(target.view_as(pred)).sum().item()
    return test_loss / len(target), correct


def run(torch, steps=6, compile=False):
    use_cuda = torch.cuda.is_available()
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda" if use_cuda else "cpu")
    images, labels = make_data(16 * steps + 32, seed=1)
    x = torch.from_numpy(images)
    y = torch.from_numpy(labels)
    batches = [(x[i * 16:(i + 1) * 16], y[i * 16:(i + 1) * 16]) for i in range(steps)]

    net = init_from_numpy(Net(), seed=1).to(device)
    model = torch.compile(net) if compile else net
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    for epoch in range(2):
        half = len(batches) // 2
        train(model, device, batches[epoch * half:(epoch + 1) * half], optimizer, losses)
        scheduler.step()
    test_loss, correct = test(model, device, x[-32:], y[-32:])
    losses.append(test_loss)

    path = os.path.join(tempfile.mkdtemp(), "mnist_cnn.pt")
    torch.save(net.state_dict(), path)
    restored = Net(dropout=0.25).to(device)
    restored.load_state_dict(torch.load(path))
    losses.append(test(restored, device, x[-32:], y[-32:])[0])
    return losses

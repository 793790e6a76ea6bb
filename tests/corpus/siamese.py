"""Siamese network, in the style of pytorch/examples' ``siamese_network/main.py`` (a small CNN
backbone in place of torchvision's resnet18).

Exercises: a shared backbone run on both inputs (``forward_once``), Conv2d -> BatchNorm2d ->
ReLU(inplace=True), AdaptiveAvgPool2d, ``torch.cat((output1, output2), 1)`` into a Linear head
with Sigmoid, ``self.apply(self.init_weights)`` with ``xavier_uniform_``/``fill_``, BCELoss on
pair labels, a contrastive loss on ``F.pairwise_distance``, ``optim.Adadelta(lr=1.0)`` with
``StepLR(step_size=1, gamma=0.7)``, and a test pass that thresholds ``output > 0.5``.
"""
# ruff: noqa: UP008  (written the way the public examples are)

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR

from tests.corpus._common import init_from_numpy


class SiameseNetwork(nn.Module):
    """Siamese network for image similarity estimation.

    The network takes two images, runs both through the same backbone, concatenates the two
    embeddings and predicts with a small head whether the images belong to the same class.
    """

    def __init__(self, embed=16):
        super(SiameseNetwork, self).__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(8, embed, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(embed),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((1, 1)),
        )
        self.fc_in_features = embed
        self.fc = nn.Sequential(
            nn.Linear(self.fc_in_features * 2, 32),
            nn.ReLU(inplace=True),
            nn.Linear(32, 1),
        )
        self.sigmoid = nn.Sigmoid()
        self.fc.apply(self.init_weights)

    def init_weights(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)

    def forward_once(self, x):
        output = self.backbone(x)
        output = output.view(output.size()[0], -1)
        return output

    def forward(self, input1, input2):
        output1 = self.forward_once(input1)
        output2 = self.forward_once(input2)
        output = torch.cat((output1, output2), 1)
        output = self.fc(output)
        output = self.sigmoid(output)
        return output, output1, output2


def contrastive_loss(output1, output2, label, margin=1.0):
    euclidean_distance = F.pairwise_distance(output1, output2, keepdim=True)
    return torch.mean(label * torch.pow(euclidean_distance, 2)
                      + (1 - label) * torch.pow(torch.clamp(margin - euclidean_distance, min=0.0),
                                                2))


def make_pairs(steps, batch, seed):
    """Pairs of 14x14 "digits": class-dependent mean pattern plus noise, label 1 when same."""
    rng = np.random.default_rng(seed)
    protos = rng.standard_normal((4, 1, 14, 14)).astype(np.float32)
    c1 = rng.integers(0, 4, size=(steps, batch))
    same = rng.integers(0, 2, size=(steps, batch))
    c2 = np.where(same == 1, c1, (c1 + 1 + rng.integers(0, 3, size=(steps, batch))) % 4)
    noise = 0.5 * rng.standard_normal((2, steps, batch, 1, 14, 14)).astype(np.float32)
    return protos[c1] + noise[0], protos[c2] + noise[1], same.astype(np.float32)


def run(torch, steps=4, compile=False):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    images_1, images_2, targets = make_pairs(steps + 1, 8, seed=16)
    model = init_from_numpy(SiameseNetwork(), seed=16).to(device)
    step_model = torch.compile(model) if compile else model
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    criterion = nn.BCELoss()
    losses = []
    model.train()
    for i in range(steps):
        x1, x2 = torch.from_numpy(images_1[i]).to(device), torch.from_numpy(images_2[i]).to(device)
        target = torch.from_numpy(targets[i]).to(device)
        optimizer.zero_grad()
        outputs, e1, e2 = step_model(x1, x2)
        bce = criterion(outputs.squeeze(), target)
        loss = bce + 0.1 * contrastive_loss(e1, e2, target.view(-1, 1))
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses += [bce.item(), loss.item()]
    model.eval()
    test_loss, correct = 0, 0
    with torch.no_grad():
        x1, x2 = torch.from_numpy(images_1[-1]), torch.from_numpy(images_2[-1])
        target = torch.from_numpy(targets[-1])
        outputs = model(x1, x2)[0].squeeze()
        test_loss += criterion(outputs, target).sum().item()
        pred = torch.where(outputs > 0.5, 1, 0)
        correct += pred.eq(target.view_as(pred)).sum().item()
    losses.append(test_loss)
    assert 0 <= correct <= len(target)
    return losses

"""Super-resolution with sub-pixel convolution, in the style of pytorch/examples'
``super_resolution`` (ESPCN: Shi et al. 2016).

Exercises: nn.PixelShuffle, init.orthogonal_ with ``init.calculate_gain('relu')``, Conv2d with
padding, MSELoss, Adam, and a PSNR evaluation ``10 * log10(1 / mse.item())`` under no_grad.
Images are random 8x8 luminance patches from NumPy, upscaled by 3.
"""
# ruff: noqa: UP008, UP045  (written the way the public examples are)

from math import log10

import numpy as np
import torch
import torch.nn as nn
import torch.nn.init as init
import torch.optim as optim

from tests.corpus._common import init_from_numpy


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super(Net, self).__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 16, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(16, 16, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(16, 8, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(8, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        x = self.pixel_shuffle(self.conv4(x))
        return x

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


def run(torch, steps=6, compile=False):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(7)
    targets = rng.uniform(0, 1, size=(steps + 1, 4, 1, 24, 24)).astype(np.float32)
    inputs = targets.reshape(steps + 1, 4, 1, 8, 3, 8, 3).mean(axis=(4, 6))  # 3x3 box downscale

    model = init_from_numpy(Net(upscale_factor=3), seed=7).to(device)
    step_model = torch.compile(model) if compile else model
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for step in range(steps):
        input, target = torch.from_numpy(inputs[step]).to(device), torch.from_numpy(targets[step])
        optimizer.zero_grad()
        loss = criterion(step_model(input), target.to(device))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        prediction = model(torch.from_numpy(inputs[-1]))
        mse = criterion(prediction, torch.from_numpy(targets[-1]))
        losses.append(10 * log10(1 / mse.item()))
    return losses

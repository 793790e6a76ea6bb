"""Variational autoencoder, in the style of pytorch/examples' ``vae/main.py``.

Exercises: Linear encoder with mu/logvar heads, the reparameterization trick
(``std = torch.exp(0.5 * logvar)``), sigmoid decoder, ``F.binary_cross_entropy(reduction='sum')``
plus the KL term, Adam, sampling the decoder under ``torch.no_grad()``, and whole-model
``torch.save(model, path)`` / ``torch.load(path, weights_only=False)``.
The reparameterization noise comes from NumPy (``eps=``); with ``eps=None`` the model draws it
with ``torch.randn_like`` as the example does, but ember's and PyTorch's random streams differ.
"""
# ruff: noqa: UP008, UP045  (written the way the public examples are)

import os
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim

from tests.corpus._common import init_from_numpy


class VAE(nn.Module):
    def __init__(self, hidden=64, latent=8):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.fc21 = nn.Linear(hidden, latent)
        self.fc22 = nn.Linear(hidden, latent)
        self.fc3 = nn.Linear(latent, hidden)
        self.fc4 = nn.Linear(hidden, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar, eps=None):
        std = torch.exp(0.5 * logvar)
        if eps is None:
            eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x, eps=None):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar, eps)
        return self.decode(z), mu, logvar


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    # see Appendix B from VAE paper: Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def run(torch, steps=6, compile=False):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(4)
    images = rng.uniform(0, 1, size=(steps, 8, 1, 28, 28)).astype(np.float32)
    noise = rng.standard_normal((steps, 8, 8)).astype(np.float32)
    model = init_from_numpy(VAE(), seed=4).to(device)
    step_model = torch.compile(model) if compile else model
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    model.train()
    for step in range(steps):
        data = torch.from_numpy(images[step]).to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = step_model(data, eps=torch.from_numpy(noise[step]))
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        optimizer.step()
        losses.append(loss.item() / len(data))

    model.eval()
    with torch.no_grad():
        sample = torch.from_numpy(noise[0]).to(device)
        sample = model.decode(sample).cpu()
        losses.append(sample.view(8, 1, 28, 28).mean().item())

    path = os.path.join(tempfile.mkdtemp(), "vae.pt")
    torch.save(model, path)
    restored = torch.load(path, weights_only=False)
    with torch.no_grad():
        recon, mu, logvar = restored(torch.from_numpy(images[0]), eps=torch.zeros(8, 8))
        losses.append(loss_function(recon, torch.from_numpy(images[0]), mu, logvar).item() / 8)
    return losses

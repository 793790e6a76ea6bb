"""DCGAN, in the style of pytorch/examples' ``dcgan/main.py`` (scaled to 16x16 images).

Exercises: a ConvTranspose2d generator with BatchNorm2d + ReLU(True) and Tanh, a Conv2d
discriminator with LeakyReLU(0.2, inplace=True) and Sigmoid, ``weights_init`` through
``module.apply`` (nn.init.normal_/zeros_ on ``classname.find('Conv')``), BCELoss, two Adam
optimizers with ``betas=(0.5, 0.999)``, ``torch.full(..., dtype=..., device=...)``,
``label.fill_``, ``fake.detach()`` and two backward passes into D's gradients per step.
The noise comes from NumPy (ember's and PyTorch's random streams differ); the random weights
``weights_init`` draws are then replaced by NumPy ones.
"""
# ruff: noqa: UP008, UP045  (written the way the public examples are)

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

from tests.corpus._common import init_from_numpy

nc, nz, ngf, ndf = 3, 8, 8, 8


# custom weights initialization called on netG and netD
def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self, ngpu=0):
        super(Generator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            # input is Z, going into a convolution
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            # state size. (ngf*4) x 4 x 4
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            # state size. (ngf*2) x 8 x 8
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
            # state size. (nc) x 16 x 16
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self, ngpu=0):
        super(Discriminator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            # input is (nc) x 16 x 16
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf) x 8 x 8
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf*2) x 4 x 4
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        output = self.main(input)
        return output.view(-1, 1).squeeze(1)


def run(torch, steps=4, compile=False):
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    batch_size = 6
    rng = np.random.default_rng(5)
    reals = rng.uniform(-1, 1, size=(steps, batch_size, nc, 16, 16)).astype(np.float32)
    noises = rng.standard_normal((steps, batch_size, nz, 1, 1)).astype(np.float32)

    netG = Generator().to(device)
    netG.apply(weights_init)
    init_from_numpy(netG, seed=5)
    netD = Discriminator().to(device)
    netD.apply(weights_init)
    init_from_numpy(netD, seed=6)
    G = torch.compile(netG) if compile else netG
    D = torch.compile(netD) if compile else netD

    criterion = nn.BCELoss()
    real_label, fake_label = 1.0, 0.0
    optimizerD = optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))
    losses = []
    for i in range(steps):
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        netD.zero_grad()
        real_cpu = torch.from_numpy(reals[i]).to(device)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
        output = D(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        noise = torch.from_numpy(noises[i]).to(device)
        fake = G(noise)
        label.fill_(fake_label)
        output = D(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        # (2) Update G network: maximize log(D(G(z)))
        netG.zero_grad()
        label.fill_(real_label)  # fake labels are real for generator cost
        output = D(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()
        losses += [errD.item(), errG.item(), D_x, D_G_z1, D_G_z2]
    return losses

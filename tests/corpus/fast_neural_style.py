"""Fast neural style transfer network, in the style of pytorch/examples'
``fast_neural_style/neural_style/transformer_net.py`` (Johnson et al. 2016), narrowed.

Exercises: nn.ReflectionPad2d, strided Conv2d, nn.InstanceNorm2d(affine=True), residual blocks,
nearest-neighbour ``F.interpolate(x, mode='nearest', scale_factor=2)`` upsampling, a Gram matrix
with ``view``/``transpose``/``bmm``, a content + style loss with MSELoss, and Adam.
There is no VGG here: the loss is taken on the output image itself (tiny, fast, deterministic).
"""
# ruff: noqa: UP008, UP045  (written the way the public examples are)

import numpy as np
import torch
import torch.nn.functional as F
from torch.optim import Adam

from tests.corpus._common import init_from_numpy


class TransformerNet(torch.nn.Module):
    def __init__(self):
        super(TransformerNet, self).__init__()
        # Initial convolution layers
        self.conv1 = ConvLayer(3, 8, kernel_size=9, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(8, affine=True)
        self.conv2 = ConvLayer(8, 16, kernel_size=3, stride=2)
        self.in2 = torch.nn.InstanceNorm2d(16, affine=True)
        self.conv3 = ConvLayer(16, 32, kernel_size=3, stride=2)
        self.in3 = torch.nn.InstanceNorm2d(32, affine=True)
        # Residual layers
        self.res1 = ResidualBlock(32)
        self.res2 = ResidualBlock(32)
        # Upsampling Layers
        self.deconv1 = UpsampleConvLayer(32, 16, kernel_size=3, stride=1, upsample=2)
        self.in4 = torch.nn.InstanceNorm2d(16, affine=True)
        self.deconv2 = UpsampleConvLayer(16, 8, kernel_size=3, stride=1, upsample=2)
        self.in5 = torch.nn.InstanceNorm2d(8, affine=True)
        self.deconv3 = ConvLayer(8, 3, kernel_size=9, stride=1)
        # Non-linearities
        self.relu = torch.nn.ReLU()

    def forward(self, X):
        y = self.relu(self.in1(self.conv1(X)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.relu(self.in3(self.conv3(y)))
        y = self.res1(y)
        y = self.res2(y)
        y = self.relu(self.in4(self.deconv1(y)))
        y = self.relu(self.in5(self.deconv2(y)))
        y = self.deconv3(y)
        return y


class ConvLayer(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super(ConvLayer, self).__init__()
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        out = self.reflection_pad(x)
        out = self.conv2d(out)
        return out


class ResidualBlock(torch.nn.Module):
    """ResidualBlock
    introduced in: https://arxiv.org/abs/1512.03385
    recommended architecture: http://torch.ch/blog/2016/02/04/resnets.html
    """

    def __init__(self, channels):
        super(ResidualBlock, self).__init__()
        self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in2 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        residual = x
        out = self.relu(self.in1(self.conv1(x)))
        out = self.in2(self.conv2(out))
        out = out + residual
        return out


class UpsampleConvLayer(torch.nn.Module):
    """UpsampleConvLayer
    Upsamples the input and then does a convolution. This method gives better results
    compared to ConvTranspose2d.
    ref: http://distill.pub/2016/deconv-checkerboard/
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
        super(UpsampleConvLayer, self).__init__()
        self.upsample = upsample
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        x_in = x
        if self.upsample:
            x_in = torch.nn.functional.interpolate(x_in, mode="nearest", scale_factor=self.upsample)
        out = self.reflection_pad(x_in)
        out = self.conv2d(out)
        return out


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    gram = features.bmm(features_t) / (ch * h * w)
    return gram


def run(torch, steps=4, compile=False):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(8)
    images = rng.uniform(0, 1, size=(steps, 2, 3, 16, 16)).astype(np.float32)
    style = torch.from_numpy(rng.uniform(0, 1, size=(1, 3, 16, 16)).astype(np.float32))
    transformer = init_from_numpy(TransformerNet(), seed=8).to(device)
    model = torch.compile(transformer) if compile else transformer
    optimizer = Adam(transformer.parameters(), 1e-3)
    mse_loss = torch.nn.MSELoss()
    gram_style = gram_matrix(style.to(device))
    content_weight, style_weight = 1.0, 10.0
    losses = []
    transformer.train()
    for step in range(steps):
        x = torch.from_numpy(images[step]).to(device)
        n_batch = len(x)
        optimizer.zero_grad()
        y = model(x)
        content_loss = content_weight * mse_loss(F.avg_pool2d(y, 2), F.avg_pool2d(x, 2))
        gm_y = gram_matrix(y)
        style_loss = style_weight * mse_loss(gm_y, gram_style.expand(n_batch, -1, -1))
        total_loss = content_loss + style_loss
        total_loss.backward()
        optimizer.step()
        losses += [content_loss.item(), style_loss.item()]
    transformer.eval()
    with torch.no_grad():
        output = transformer(torch.from_numpy(images[0])).cpu()
        losses.append(output.clamp(0, 255).mean().item())
    return losses

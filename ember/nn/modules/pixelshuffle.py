"""``PixelShuffle`` and ``PixelUnshuffle`` modules."""

from __future__ import annotations

from ember.nn.functional import vision as F
from ember.nn.modules.module import Module
from ember.tensor import Tensor

__all__ = ["PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """``(*, C*r*r, H, W) -> (*, C, H*r, W*r)`` (sub-pixel convolution's rearrangement).

    >>> nn.PixelShuffle(2)(ember.ones(1, 4, 2, 2)).shape
    ember.Size([1, 1, 4, 4])
    """

    __constants__ = ["upscale_factor"]
    upscale_factor: int

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H*r, W*r) -> (*, C*r*r, H, W)``, the inverse of :class:`PixelShuffle`."""

    __constants__ = ["downscale_factor"]
    downscale_factor: int

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"

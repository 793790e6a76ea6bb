"""``Fold`` and ``Unfold`` modules (col2im / im2col)."""

from __future__ import annotations

from typing import Any

from ember.nn.functional import vision as F
from ember.nn.modules.module import Module
from ember.tensor import Tensor

__all__ = ["Fold", "Unfold"]


class Fold(Module):
    """Sums sliding blocks ``(N, C*kh*kw, L)`` into ``(N, C, *output_size)``.

    >>> nn.Fold((4, 4), 2)(ember.ones(1, 8, 9)).shape
    ember.Size([1, 2, 4, 4])
    """

    __constants__ = ["output_size", "kernel_size", "dilation", "padding", "stride"]

    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        return ("output_size={output_size}, kernel_size={kernel_size}, dilation={dilation}, "
                "padding={padding}, stride={stride}".format(**self.__dict__))


class Unfold(Module):
    """Extracts sliding blocks: ``(N, C, H, W) -> (N, C*kh*kw, L)``.

    >>> nn.Unfold(2)(ember.ones(1, 2, 4, 4)).shape
    ember.Size([1, 8, 9])
    """

    __constants__ = ["kernel_size", "dilation", "padding", "stride"]

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return ("kernel_size={kernel_size}, dilation={dilation}, padding={padding}, "
                "stride={stride}".format(**self.__dict__))

"""``rrelu`` and ``channel_shuffle`` of ``ember.nn.functional``, composed from existing ops."""

from __future__ import annotations

from ember._frontend.creation import empty_like
from ember._frontend.inplace import commit_inplace
from ember._frontend.pointwise_logic import where
from ember.errors import EmberRuntimeError
from ember.nn.functional.activation import leaky_relu
from ember.tensor import Tensor

__all__ = ["channel_shuffle", "native_channel_shuffle", "rrelu", "rrelu_"]


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """Randomized leaky ReLU: slope ``U(lower, upper)`` per element in training, else the mean.

    >>> F.rrelu(ember.tensor([-1.0, 2.0]))  # eval: slope (lower + upper) / 2
    tensor([-0.2292,  2.0000])
    """
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    slope = empty_like(input.detach()).uniform_(lower, upper)
    out = where(input <= 0, input * slope, input)
    return commit_inplace(input, out, "rrelu_") if inplace else out


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False, generator: object = None) -> Tensor:
    return rrelu(input, lower, upper, training, True)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Split the C channels of ``(N, C, *)`` into ``groups`` and interleave them.

    >>> F.channel_shuffle(ember.arange(4.0).reshape(1, 4, 1), 2).flatten()
    tensor([0., 2., 1., 3.])
    """
    if groups <= 0:
        raise EmberRuntimeError(f"[channel_shuffle] Number of groups to divide channels in must "
                                f"be positive. Value of groups:{groups}")
    if input.ndim <= 2:
        raise EmberRuntimeError(f"[channel_shuffle] channel_shuffle expects input to be at least "
                                f"3D, but got input with sizes {list(input.shape)}")
    n, c, *rest = input.shape
    if c % groups:
        raise EmberRuntimeError(f"[channel_shuffle] Number of channels must be divisible by "
                                f"groups. Got {c} channels and {groups} groups.")
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(input.shape)


native_channel_shuffle = channel_shuffle

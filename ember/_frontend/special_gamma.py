"""``lgamma``, ``digamma``, ``mvlgamma`` and ``polygamma`` (orders 0 and 1) frontends over
``ember/ops/special_gamma.py``."""

from __future__ import annotations

import math

from ember._frontend.creation import arange
from ember._frontend.inplace import inplace_method
from ember._frontend.pointwise_math import float_unary
from ember.errors import EmberNotImplementedError, EmberRuntimeError
from ember.ops import special_gamma as SG
from ember.tensor import Tensor, tensor_method

__all__ = ["digamma", "lgamma", "mvlgamma", "polygamma"]


@tensor_method("lgamma")
def lgamma(input: Tensor) -> Tensor:
    """``log|Gamma(input)|`` elementwise.

    >>> ember.lgamma(ember.tensor([1.0, 3.0]))
    tensor([0.0000, 0.6931])
    """
    return float_unary(SG.LGAMMA, input)


@tensor_method("digamma")
def digamma(input: Tensor) -> Tensor:
    """The digamma function ``d/dx log Gamma(x)`` elementwise (-inf at 0).

    >>> ember.digamma(ember.tensor([1.0]))
    tensor([-0.5772])
    """
    return float_unary(SG.DIGAMMA, input)


@tensor_method("polygamma")
def _polygamma_method(input: Tensor, n: int) -> Tensor:
    return polygamma(n, input)


def polygamma(n: int, input: Tensor) -> Tensor:
    """The ``n``-th derivative of digamma; ember has orders 0 (digamma) and 1 (trigamma)."""
    if n < 0:
        raise EmberRuntimeError("[polygamma] polygamma(n, x) does not support negative n.")
    if n == 0:
        return digamma(input)
    if n == 1:
        return float_unary(SG.TRIGAMMA, input)
    raise EmberNotImplementedError(f"[polygamma] polygamma of order {n} is not implemented in "
                                   f"ember (orders 0 and 1 are)")


@tensor_method("mvlgamma")
def mvlgamma(input: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma of dimension ``p``:
    ``sum_j lgamma(x - j/2) + p (p-1)/4 log(pi)``."""
    if p < 1:
        raise EmberRuntimeError("[mvlgamma] p has to be greater than or equal to 1")
    if not input.dtype.is_floating_point:
        from ember import dtypes as dt
        input = input.to(dt.get_default_dtype())
    if input.numel() and not bool((input > 0.5 * (p - 1)).all()):
        raise EmberRuntimeError(f"[mvlgamma] All elements must be greater than (p-1)/2 "
                                f"= {0.5 * (p - 1)}")
    args = arange(-p * 0.5 + 0.5, 0.5, 0.5, dtype=input.dtype) + input.unsqueeze(-1)
    return lgamma(args).sum(-1) + p * (p - 1) * math.log(math.pi) / 4


inplace_method("lgamma_", lgamma)
inplace_method("digamma_", digamma)
inplace_method("mvlgamma_", mvlgamma)
inplace_method("polygamma_", _polygamma_method)

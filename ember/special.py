"""``ember.special``: the functions of ``torch.special`` that ember has.

Most are PyTorch's aliases of top-level ops (``expit`` is ``sigmoid``, ``exp2``, ``logit``,
``xlogy``, ...); ``sinc``, ``xlog1py``, ``entr`` and ``ndtr`` are compositions of existing ops,
so their gradients come from those ops.  Functions that need new special-function kernels
(Bessel functions, zeta, polygamma of order >= 2, ...) are not part of ember yet;
``gammaln``/``psi``/``digamma``/``multigammaln`` come from ``ember/ops/special_gamma.py``.
"""

from __future__ import annotations

import math

from ember._frontend.core import check_tensor
from ember._frontend.creation import full_like, ones_like, zeros_like
from ember._frontend.inplace import inplace_method
from ember._frontend.pointwise_logic import where
from ember._frontend.pointwise_math import (
    erf,
    erfc,
    erfinv,
    exp2,
    expm1,
    log,
    log1p,
    logit,
    round,
    sigmoid,
    sin,
    xlogy,
)
from ember._frontend.reduction import logsumexp
from ember._frontend.scan import log_softmax, softmax
from ember._frontend.special_gamma import digamma, lgamma, mvlgamma, polygamma
from ember.tensor import Tensor, tensor_method

__all__ = ["digamma", "entr", "erf", "erfc", "erfinv", "exp2", "expit", "expm1", "gammaln",
           "log1p", "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr", "polygamma",
           "psi", "round", "sinc", "softmax", "xlog1py", "xlogy"]

expit = sigmoid
gammaln = lgamma
psi = digamma


def multigammaln(input: Tensor, p: int) -> Tensor:
    """Alias of ``mvlgamma``: the multivariate log-gamma of dimension ``p``."""
    return mvlgamma(input, p)


def _float(input: Tensor) -> Tensor:
    return input if input.dtype.is_floating_point else input.float()


@tensor_method("sinc")
def sinc(input: Tensor) -> Tensor:
    """``sin(pi x) / (pi x)``, 1 at 0 (gradient 0 there).

    >>> ember.special.sinc(ember.tensor([0.0, 0.5]))
    tensor([1.0000, 0.6366])
    """
    check_tensor(input, "sinc")
    x = _float(input)
    zero = x == 0
    safe = where(zero, ones_like(x), x) * math.pi
    return where(zero, ones_like(x), sin(safe) / safe)


inplace_method("sinc_", sinc)


def xlog1py(input: Tensor | float, other: Tensor | float) -> Tensor:
    """``input * log1p(other)``, 0 where ``input == 0`` (unless ``other`` is NaN).

    >>> ember.special.xlog1py(ember.tensor([0.0, 2.0]), ember.tensor([-1.0, 0.0]))
    tensor([0., 0.])
    """
    if not isinstance(other, Tensor):
        check_tensor(input, "xlog1py")
        other = full_like(_float(input), other)
    if not isinstance(input, Tensor):
        input = full_like(_float(other), input)
    x, y = input, other
    lg = log1p(y)
    lg = where((x == 0) & (y <= -1), zeros_like(lg), lg)
    return x * lg


def entr(input: Tensor) -> Tensor:
    """Elementwise entropy ``-x ln x`` (0 at 0, -inf below 0).

    >>> ember.special.entr(ember.tensor([0.0, 1.0]))
    tensor([0., -0.])
    """
    check_tensor(input, "entr")
    x = _float(input)
    pos = x > 0
    val = -x * log(where(pos, x, ones_like(x)))
    rest = where(x == 0, zeros_like(x), full_like(x, -math.inf))
    return where(pos | x.isnan(), val, rest)


def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF, ``erfc(-x / sqrt(2)) / 2``.

    >>> ember.special.ndtr(ember.tensor([0.0]))
    tensor([0.5000])
    """
    check_tensor(input, "ndtr")
    return 0.5 * erfc(_float(input) * -math.sqrt(0.5))

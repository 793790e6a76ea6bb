"""Dropout: ``dropout`` (a ``random`` primitive drawing its mask from the Philox stream),
``dropout1d/2d/3d`` (whole channels) and ``alpha_dropout``."""

from __future__ import annotations

from ember import random as _random
from ember._frontend.inplace import commit_inplace
from ember.errors import EmberRuntimeError, EmberValueError
from ember.ops import random as R
from ember.ops.registry import bind
from ember.tensor import Tensor

__all__ = ["alpha_dropout", "dropout", "dropout1d", "dropout2d", "dropout3d",
           "feature_alpha_dropout"]


def _check_p(p: float) -> float:
    if p < 0.0 or p > 1.0:
        raise EmberValueError(f"[dropout] dropout probability has to be between 0 and 1, but got "
                              f"{p}")
    return float(p)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
            *, generator: _random.Generator | None = None) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``
    (``F.dropout(x, 0.1)``); the identity when ``training`` is False."""
    p = _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input   # PyTorch returns the input itself here
    s, off = _random.resolve(generator)._consume(input.numel())
    out = bind(R.DROPOUT, input, p=p, seed=s, offset=off)
    return commit_inplace(input, out, "dropout_") if inplace else out


def _feature_dropout(input: Tensor, p: float, training: bool, inplace: bool, op: str,
                     batched_ndim: int) -> Tensor:
    """Drop whole channels: one mask value per (N, C), broadcast over the spatial dims."""
    p = _check_p(p)
    nd = input.ndim
    if op == "dropout1d" and nd not in (2, 3):
        raise EmberRuntimeError(f"[{op}] dropout1d: Expected 2D or 3D input, but received a "
                                f"{nd}D input. Note that dropout1d exists to provide channel-wise "
                                f"dropout on inputs with 1 spatial dimension, a channel "
                                f"dimension, and an optional batch dimension (i.e. 2D or 3D "
                                f"inputs).")
    if nd < 2:
        raise EmberRuntimeError(f"[{op}] Feature dropout requires at least 2 dimensions in the "
                                f"input")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    # one mask value per (N, C); dropout1d/3d treat unbatched input as a batch of one, while
    # dropout2d (like PyTorch) always reads dims 0 and 1 as (N, C)
    lead = 2 if nd == batched_ndim or op == "dropout2d" else 1
    from ember._frontend.creation import ones
    mask_shape = tuple(input.shape[:lead]) + (1,) * (nd - lead)
    noise = dropout(ones(mask_shape, dtype=input.dtype), p, True)
    out = input * noise
    return commit_inplace(input, out, op + "_") if inplace else out


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, L) or (C, L) input."""
    return _feature_dropout(input, p, training, inplace, "dropout1d", 3)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, H, W) or (C, H, W) input."""
    return _feature_dropout(input, p, training, inplace, "dropout2d", 4)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input."""
    return _feature_dropout(input, p, training, inplace, "dropout3d", 5)


_ALPHA = 1.7580993408473766   # -SELU's scale * alpha: the value SELU saturates at, negated


def _alpha_dropout(input: Tensor, p: float, training: bool, inplace: bool, feature: bool,
                   op: str) -> Tensor:
    p = _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        out = input * 0.0
        return commit_inplace(input, out, op + "_") if inplace else out
    from ember._frontend.creation import full
    from ember._frontend.random import bernoulli
    shape = tuple(input.shape)
    if feature:
        shape = shape[:2] + (1,) * (len(shape) - 2)
    keep = bernoulli(full(shape, 1.0 - p, dtype=input.dtype))
    # PyTorch: input * keep * a + (keep - 1) * alpha * a + alpha * a * p
    a = 1.0 / ((_ALPHA * _ALPHA * p + 1.0) * (1.0 - p)) ** 0.5
    b = (keep - 1.0) * (_ALPHA * a) + _ALPHA * a * p
    out = input * (keep * a) + b
    return commit_inplace(input, out, op + "_") if inplace else out


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False) -> Tensor:
    """Dropout that keeps SELU's self-normalizing mean and variance."""
    return _alpha_dropout(input, p, training, inplace, False, "alpha_dropout")


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor:
    """``alpha_dropout`` of whole channels."""
    return _alpha_dropout(input, p, training, inplace, True, "feature_alpha_dropout")

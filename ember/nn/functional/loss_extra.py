"""More losses and distances of ``ember.nn.functional`` (margin, embedding, Poisson, Gaussian,
triplet losses; ``pairwise_distance``, ``pdist``), composed from existing ember ops so that
autograd and ``ember.compile`` need nothing new.  Formulas and checks follow PyTorch's ATen
implementations (``aten/src/ATen/native/Loss.cpp``, ``Distance.cpp``)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, Callable

from ember import dtypes as dt
from ember._frontend import creation as _cr
from ember._frontend import pointwise_logic as _pl
from ember._frontend import pointwise_math as _pm
from ember._frontend.core import check_tensor
from ember._frontend.reduction import vector_norm
from ember._frontend.structure import triu_indices
from ember.autograd import grad_mode as _gm
from ember.errors import EmberRuntimeError, EmberValueError, ShapeError
from ember.nn.functional.activation import logsigmoid
from ember.nn.functional.loss import _reduction
from ember.tensor import Tensor

__all__ = [
    "cosine_embedding_loss", "gaussian_nll_loss", "hinge_embedding_loss", "log_sigmoid",
    "margin_ranking_loss", "multi_margin_loss", "multilabel_soft_margin_loss", "pairwise_distance",
    "pdist", "poisson_nll_loss", "soft_margin_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
]

log_sigmoid = logsigmoid  # the C++ name of F.logsigmoid
ember = SimpleNamespace(zeros_like=_cr.zeros_like, ones_like=_cr.ones_like, arange=_cr.arange,
                        where=_pl.where, minimum=_pl.minimum, exp=_pm.exp, log=_pm.log,
                        log1p=_pm.log1p, triu_indices=triu_indices)


def _apply(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def _size(t: Tensor) -> str:
    return f"torch.Size([{', '.join(str(s) for s in t.shape)}])"


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                        size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``, reduced.

    >>> F.margin_ranking_loss(ember.tensor([1.0]), ember.tensor([2.0]), ember.tensor([1.0]))
    tensor(1.)
    """
    red = _reduction(reduction, size_average, reduce)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise EmberRuntimeError(
            f"[margin_ranking_loss] margin_ranking_loss : All input tensors should have same "
            f"dimension but got sizes: input1: {_size(input1)}, input2: {_size(input2)}, "
            f"target: {_size(target)} ")
    return _apply((-target * (input1 - input2) + margin).clamp_min(0), red)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         size_average: Any = None, reduce: Any = None,
                         reduction: str = "mean") -> Tensor:
    """``input`` where ``target == 1``, ``max(0, margin - input)`` where ``target == -1``."""
    red = _reduction(reduction, size_average, reduce)
    zeros = ember.zeros_like(input)
    margin_clamp = (margin - input).clamp_min(0)
    out_margin = ember.where(target != 1, margin_clamp, zeros)
    out_self = ember.where(target != -1, input, zeros)
    return _apply(out_margin + out_self, red)


def soft_margin_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                     reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * input))``, reduced."""
    red = _reduction(reduction, size_average, reduce)
    return _apply(ember.log1p(ember.exp(-target * input)), red)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                          size_average: Any = None, reduce: Any = None,
                          reduction: str = "mean") -> Tensor:
    """``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos(x1, x2) - margin)`` where -1."""
    red = _reduction(reduction, size_average, reduce)
    tdim = target.dim()
    if tdim not in (0, 1):
        raise EmberRuntimeError("[cosine_embedding_loss] 0D or 1D target tensor expected, "
                                "multi-target not supported")
    if tdim == 1 and (input1.dim() != 2 or input2.dim() != 2):
        raise EmberRuntimeError(
            f"[cosine_embedding_loss] 1D target tensor expects 2D input tensors, but found "
            f"inputs with sizes {list(input1.shape)} and {list(input2.shape)}.")
    if tdim == 0 and (input1.dim() != 1 or input2.dim() != 1):
        raise EmberRuntimeError(
            f"[cosine_embedding_loss] 0D target tensor expects 1D input tensors, but found "
            f"inputs with sizes {list(input1.shape)} and {list(input2.shape)}.")
    eps = 1e-12
    prod_sum = (input1 * input2).sum(tdim)
    mag1 = (input1 * input1).sum(tdim) + eps
    mag2 = (input2 * input2).sum(tdim) + eps
    cos = prod_sum / (mag1 * mag2).sqrt()
    zeros = ember.zeros_like(cos)
    pos = ember.where(target == 1, 1 - cos, zeros)
    neg = ember.where(target == -1, (cos - margin).clamp_min(0), zeros)
    return _apply(pos + neg, red)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average: Any = None, reduce: Any = None,
                                reduction: str = "mean") -> Tensor:
    """Mean over classes of ``-(y log sigmoid(x) + (1 - y) log sigmoid(-x))``."""
    red = _reduction(reduction, size_average, reduce)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(class_dim) / input.shape[class_dim]
    return _apply(loss, red)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """``0.5 * (log(max(var, eps)) + (input - target)**2 / max(var, eps))`` (+ const), reduced."""
    if isinstance(var, float):
        if var < 0:
            raise EmberValueError("[gaussian_nll_loss] var has negative entry/entries")
        var = var * ember.ones_like(input)
    elif bool((var < 0).any()):
        raise EmberValueError("[gaussian_nll_loss] var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim and sum(
                y for x, y in zip(input.shape, var.shape) if x != y) == 1):
            raise EmberValueError("[gaussian_nll_loss] var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise EmberValueError(f"[gaussian_nll_loss] {reduction} is not valid")
    var = var.clone()
    with _gm.no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (ember.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _apply(loss, reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average: Any = None, eps: float = 1e-8, reduce: Any = None,
                     reduction: str = "mean") -> Tensor:
    """Poisson negative log likelihood: ``exp(input) - target * input`` (``log_input``)."""
    red = _reduction(reduction, size_average, reduce)
    if log_input:
        loss = ember.exp(input) - target * input
    else:
        loss = input - target * ember.log(input + eps)
    if full:
        stirling = target * ember.log(target) - target + 0.5 * ember.log(2 * math.pi * target)
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _apply(loss, red)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """p-norm of ``x1 - x2 + eps`` over the last dimension.

    >>> F.pairwise_distance(ember.tensor([[0.0, 0.0]]), ember.tensor([[3.0, 4.0]]))
    tensor([5.0000])
    """
    check_tensor(x1, "pairwise_distance", "x1")
    check_tensor(x2, "pairwise_distance", "x2")
    out_dim = max(x1.dim(), x2.dim())
    if out_dim == 0:
        return vector_norm(x1 - x2 + eps, p, keepdim=keepdim)
    return vector_norm(x1 - x2 + eps, p, dim=out_dim - 1, keepdim=keepdim)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """p-norm distances between the rows of a 2-D ``input``, upper triangle, row-major.

    >>> F.pdist(ember.tensor([[0.0, 0.0], [3.0, 4.0]]))
    tensor([5.])
    """
    check_tensor(input, "pdist")
    if input.dim() != 2:
        raise ShapeError(f"[pdist] pdist only supports 2D tensors, got: {input.dim()}D")
    if not input.dtype.is_floating_point:
        raise EmberRuntimeError("[pdist] pdist only supports floating-point dtypes")
    if p < 0:
        raise EmberRuntimeError("[pdist] pdist only supports non-negative p values")
    n = input.shape[0]
    rows, cols = ember.triu_indices(n, n, 1)
    return vector_norm(input[rows] - input[cols], p, dim=1)


def _triplet(anchor: Tensor, positive: Tensor, negative: Tensor, dist: Callable,
             margin: float, swap: bool, reduction: str) -> Tensor:
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = ember.minimum(d_neg, dist(positive, negative))
    return _apply((margin + d_pos - d_neg).clamp_min(0), reduction)


def _check_triplet_dims(anchor: Tensor, positive: Tensor, negative: Tensor, op: str) -> None:
    a, p, n = anchor.ndim, positive.ndim, negative.ndim
    if not (a == p == n):
        raise EmberRuntimeError(
            f"[{op}] The anchor, positive, and negative tensors are expected to have the same "
            f"number of dimensions, but got: anchor {a}D, positive {p}D, and negative {n}D "
            f"inputs")


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2, eps: float = 1e-6, swap: bool = False,
                        size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d = pairwise_distance(., ., p, eps)``."""
    red = _reduction(reduction, size_average, reduce)
    if margin <= 0:
        raise EmberValueError(f"[triplet_margin_loss] margin must be greater than 0, got {margin}")
    _check_triplet_dims(anchor, positive, negative, "triplet_margin_loss")
    return _triplet(anchor, positive, negative,
                    lambda x, y: pairwise_distance(x, y, p, eps), margin, swap, red)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Callable | None = None,
                                      margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:
    """``triplet_margin_loss`` with any ``distance_function`` (default pairwise_distance)."""
    if margin <= 0:
        raise EmberValueError(f"[triplet_margin_with_distance_loss] margin must be greater "
                              f"than 0, got {margin}")
    red = _reduction(reduction)
    _check_triplet_dims(anchor, positive, negative, "triplet_margin_with_distance_loss")
    return _triplet(anchor, positive, negative, distance_function or pairwise_distance,
                    margin, swap, red)


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average: Any = None,
                      reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Multi-class hinge: ``sum_{i != y} max(0, margin - x[y] + x[i])**p / C``."""
    red = _reduction(reduction, size_average, reduce)
    if p not in (1, 2):
        raise EmberValueError("[multi_margin_loss] only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise EmberValueError("[multi_margin_loss] weight must be one-dimensional")
    if input.dim() > 2:
        raise ShapeError(f"[multi_margin_loss] Expected non-empty vector or matrix with optional "
                         f"0-dim batch size, but got: {_size(input)}")
    x = input.reshape(-1, input.shape[-1]) if input.dim() else input.reshape(1, 1)
    t = target.reshape(-1)
    if t.shape[0] != x.shape[0]:
        raise ShapeError(f"[multi_margin_loss] inconsistent target size: {_size(target)} for "
                         f"input of size: {_size(input)}")
    if t.dtype != dt.int64:
        raise EmberRuntimeError(f"[multi_margin_loss] expected scalar type Long but found "
                                f"{t.dtype}")
    x_y = x.gather(1, t.unsqueeze(1))
    z = (margin - x_y + x).clamp_min(0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight[t].unsqueeze(1)
    onehot = ember.arange(x.shape[1]).unsqueeze(0) == t.unsqueeze(1)
    loss = z.masked_fill(onehot, 0).sum(1) / x.shape[1]
    if input.dim() < 2 and red == "none":
        loss = loss.reshape(())
    return _apply(loss, red)

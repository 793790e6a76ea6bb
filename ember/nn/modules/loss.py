"""Loss modules over ``ember.nn.functional``; ``weight``/``pos_weight`` are buffers and the
legacy ``size_average``/``reduce`` flags map to ``reduction`` as in PyTorch."""

from __future__ import annotations

import warnings
from typing import Any

from ember._frontend.creation import zeros_like
from ember._frontend.pointwise_logic import where
from ember.errors import EmberRuntimeError
from ember.nn import functional as F
from ember.nn.functional.loss import _reduction
from ember.nn.modules.module import Module
from ember.tensor import Tensor

__all__ = [
    "BCELoss", "BCEWithLogitsLoss", "CosineEmbeddingLoss", "CrossEntropyLoss",
    "HingeEmbeddingLoss", "HuberLoss", "KLDivLoss", "L1Loss", "MSELoss", "MarginRankingLoss",
    "NLLLoss", "SmoothL1Loss", "SoftMarginLoss",
]


def _legacy_get_string(size_average: Any, reduce: Any, emit_warning: bool = True) -> str:
    """PyTorch's ``_Reduction.legacy_get_string``."""
    if size_average is None:
        size_average = True
    if reduce is None:
        reduce = True
    if size_average and reduce:
        ret = "mean"
    elif reduce:
        ret = "sum"
    else:
        ret = "none"
    if emit_warning:
        warnings.warn(f"size_average and reduce args will be deprecated, please use "
                      f"reduction='{ret}' instead.", stacklevel=3)
    return ret


class _Loss(Module):
    reduction: str

    def __init__(self, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            self.reduction = _legacy_get_string(size_average, reduce)
        else:
            self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, size_average: Any = None,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class L1Loss(_Loss):
    """Mean absolute error."""

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of class targets given log-probabilities."""

    __constants__ = ["ignore_index", "reduction"]
    ignore_index: int

    def __init__(self, weight: Tensor | None = None, size_average: Any = None,
                 ignore_index: int = -100, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence with ``input`` in log space (``target`` too when
    ``log_target``)."""

    __constants__ = ["reduction"]

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class MSELoss(_Loss):
    """Mean squared error."""

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities."""

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, weight=self.weight,
                                      reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Sigmoid + binary cross entropy, computed stably from logits; ``pos_weight`` scales the
    positive term."""

    def __init__(self, weight: Tensor | None = None, size_average: Any = None,
                 reduce: Any = None, reduction: str = "mean",
                 pos_weight: Tensor | None = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)
        self.weight: Tensor | None
        self.pos_weight: Tensor | None

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """``nll_loss(log_softmax(input, 1), target)`` with class weights, ``ignore_index`` and
    label smoothing; probability targets are accepted too."""

    __constants__ = ["ignore_index", "reduction", "label_smoothing"]
    ignore_index: int
    label_smoothing: float

    def __init__(self, weight: Tensor | None = None, size_average: Any = None,
                 ignore_index: int = -100, reduce: Any = None, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, weight=self.weight,
                               ignore_index=self.ignore_index, reduction=self.reduction,
                               label_smoothing=self.label_smoothing)


class SmoothL1Loss(_Loss):
    """Squared error below ``beta`` (scaled by ``0.5/beta``), absolute error above."""

    __constants__ = ["reduction"]

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Squared error below ``delta`` (halved), ``delta``-scaled absolute error above."""

    __constants__ = ["reduction", "delta"]

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


def _reduce(output: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return output.mean()
    if reduction == "sum":
        return output.sum()
    return output


class CosineEmbeddingLoss(_Loss):
    """``1 - cos(x1, x2)`` for ``y == 1``, ``max(0, cos(x1, x2) - margin)`` for ``y == -1``
    (PyTorch's formula, with 1e-12 added to each squared magnitude)."""

    __constants__ = ["margin", "reduction"]
    margin: float

    def __init__(self, margin: float = 0.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        red = _reduction(self.reduction)
        td = target.dim()
        if td not in (0, 1):
            raise EmberRuntimeError("[cosine_embedding_loss] 0D or 1D target tensor expected, "
                                    "multi-target not supported")
        if input1.dim() != td + 1 or input2.dim() != td + 1:
            raise EmberRuntimeError(
                f"[cosine_embedding_loss] {td}D target tensor expects {td + 1}D input tensors, "
                f"but found inputs with sizes {list(input1.shape)} and {list(input2.shape)}.")
        prod_sum = (input1 * input2).sum(td)
        mag1 = (input1 * input1).sum(td) + 1e-12
        mag2 = (input2 * input2).sum(td) + 1e-12
        cos = prod_sum / (mag1 * mag2).sqrt()
        zeros = zeros_like(cos)
        out = (where(target == 1, 1 - cos, zeros)
               + where(target == -1, (cos - self.margin).clamp_min(0), zeros))
        return _reduce(out, red)


class MarginRankingLoss(_Loss):
    """``max(0, -y * (x1 - x2) + margin)``."""

    __constants__ = ["margin", "reduction"]
    margin: float

    def __init__(self, margin: float = 0.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        red = _reduction(self.reduction)
        if not (input1.dim() == input2.dim() == target.dim()):
            raise EmberRuntimeError(
                f"[margin_ranking_loss] margin_ranking_loss : All input tensors should have "
                f"same dimension but got sizes: input1: {input1.size()}, input2: "
                f"{input2.size()}, target: {target.size()} ")
        return _reduce((-target * (input1 - input2) + self.margin).clamp_min(0), red)


class SoftMarginLoss(_Loss):
    """``log(1 + exp(-y * x))``."""

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        red = _reduction(self.reduction)
        return _reduce((-input * target).exp().log1p(), red)


class HingeEmbeddingLoss(_Loss):
    """``x`` where ``y == 1``, ``max(0, margin - x)`` where ``y == -1``."""

    __constants__ = ["margin", "reduction"]
    margin: float

    def __init__(self, margin: float = 1.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        red = _reduction(self.reduction)
        zeros = zeros_like(input)
        out = (where(target != 1, (self.margin - input).clamp_min(0), zeros)
               + where(target != -1, input, zeros))
        return _reduce(out, red)

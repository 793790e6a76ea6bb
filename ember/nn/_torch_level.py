"""The functional forms PyTorch also exposes at the top level (``torch.conv2d``,
``torch.layer_norm``, ``torch.kl_div``, ...), with the ATen signatures those have: losses take
``reduction`` as ATen's enum (0 none, 1 mean, 2 sum), norms take a trailing ``cudnn_enabled``.
Each forwards to ``ember.nn.functional``; ``ember/__init__.py`` re-exports ``__all__``."""

from __future__ import annotations

from typing import Any, Sequence

from ember.nn import functional as F
from ember.nn.functional import loss_extra as LX
from ember.nn.functional.dropout import _feature_dropout
from ember.tensor import Tensor

__all__ = [
    "adaptive_avg_pool1d", "alpha_dropout", "avg_pool1d", "batch_norm", "bilinear",
    "binary_cross_entropy_with_logits", "celu", "channel_shuffle", "constant_pad_nd", "conv1d",
    "conv2d", "conv_transpose1d", "conv_transpose2d", "cosine_embedding_loss",
    "cosine_similarity", "embedding", "feature_alpha_dropout", "feature_dropout",
    "frobenius_norm", "group_norm", "hardshrink", "hinge_embedding_loss", "instance_norm",
    "kl_div", "layer_norm", "margin_ranking_loss", "max_pool1d", "max_pool1d_with_indices",
    "max_pool2d", "native_channel_shuffle", "native_layer_norm",
    "pairwise_distance", "pdist", "pixel_shuffle", "pixel_unshuffle", "poisson_nll_loss",
    "prelu", "relu", "rms_norm", "rrelu", "selu", "threshold", "triplet_margin_loss",
]

_ENUM = {0: "none", 1: "mean", 2: "sum"}

adaptive_avg_pool1d = F.adaptive_avg_pool1d
avg_pool1d = F.avg_pool1d
bilinear = F.bilinear
conv1d, conv2d = F.conv1d, F.conv2d
conv_transpose1d, conv_transpose2d = F.conv_transpose1d, F.conv_transpose2d
cosine_similarity = F.cosine_similarity
hardshrink = F.hardshrink
channel_shuffle = native_channel_shuffle = F.channel_shuffle

pairwise_distance, pdist = LX.pairwise_distance, LX.pdist
pixel_shuffle, pixel_unshuffle = F.pixel_shuffle, F.pixel_unshuffle
prelu = F.prelu
rms_norm = F.rms_norm
max_pool1d, max_pool2d = F.max_pool1d, F.max_pool2d


def relu(input: Tensor) -> Tensor:
    """``max(input, 0)``."""
    return F.relu(input)


def selu(input: Tensor) -> Tensor:
    return F.selu(input)


def celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    return F.celu(input, alpha)


def threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    return F.threshold(input, threshold, value)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          generator: Any = None) -> Tensor:
    from ember.nn.functional.activation_extra import rrelu as _rrelu
    return _rrelu(input, lower, upper, training)


def layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-05, cudnn_enable: bool = True) -> Tensor:
    """``F.layer_norm``; ``cudnn_enable`` is ignored (CPU)."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def native_layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None,
                      bias: Tensor | None, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """``(layer_norm(input), mean, rstd)``; mean and rstd keep the normalized dims as size 1."""
    dims = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    x = input.detach()
    mean = x.mean(dims, keepdim=True)
    rstd = ((x - mean) ** 2).mean(dims, keepdim=True).add(eps).rsqrt()
    return F.layer_norm(input, normalized_shape, weight, bias, eps), mean, rstd


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-05,
               cudnn_enabled: bool = True) -> Tensor:
    return F.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
               running_mean: Tensor | None, running_var: Tensor | None, training: bool,
               momentum: float, eps: float, cudnn_enabled: bool) -> Tensor:
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                  running_mean: Tensor | None, running_var: Tensor | None, use_input_stats: bool,
                  momentum: float, eps: float, cudnn_enabled: bool) -> Tensor:
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    return F.alpha_dropout(input, p, train)


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    return F.feature_alpha_dropout(input, p, train)


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Zero whole channels (dims 0 and 1 are (N, C)) with probability ``p``, scale the rest."""
    return _feature_dropout(input, p, train, False, "feature_dropout", input.ndim)


def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """``F.embedding(indices, weight)``; a negative ``padding_idx`` means none (ATen's form)."""
    return F.embedding(indices, weight, padding_idx if padding_idx >= 0 else None,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def constant_pad_nd(input: Tensor, pad: Sequence[int], value: float = 0) -> Tensor:
    return F.pad(input, pad, "constant", value)


def max_pool1d_with_indices(input: Tensor, kernel_size: Any, stride: Any = (), padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False) -> tuple[Tensor, Tensor]:
    return F.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode, True)


def frobenius_norm(input: Tensor, dim: Sequence[int], keepdim: bool = False) -> Tensor:
    """``sqrt(sum(input**2, dim))``."""
    from ember.linalg import vector_norm
    return vector_norm(input, 2, dim=tuple(dim), keepdim=keepdim)


def kl_div(input: Tensor, target: Tensor, reduction: int = 1, *,
           log_target: bool = False) -> Tensor:
    return F.kl_div(input, target, reduction=_ENUM[reduction], log_target=log_target)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     pos_weight: Tensor | None = None,
                                     reduction: int = 1) -> Tensor:
    return F.binary_cross_entropy_with_logits(input, target, weight, reduction=_ENUM[reduction],
                                              pos_weight=pos_weight)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         reduction: int = 1) -> Tensor:
    return LX.hinge_embedding_loss(input, target, margin, reduction=_ENUM[reduction])


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: int = 1) -> Tensor:
    return LX.margin_ranking_loss(input1, input2, target, margin, reduction=_ENUM[reduction])


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          reduction: int = 1) -> Tensor:
    return LX.cosine_embedding_loss(input1, input2, target, margin, reduction=_ENUM[reduction])


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float,
                     reduction: int) -> Tensor:
    return LX.poisson_nll_loss(input, target, log_input, full, eps=eps,
                               reduction=_ENUM[reduction])


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-06, swap: bool = False,
                        reduction: int = 1) -> Tensor:
    return LX._triplet(anchor, positive, negative,
                       lambda x, y: LX.pairwise_distance(x, y, p, eps), margin, swap,
                       _ENUM[reduction])


def _tensor_hardshrink(self: Tensor, lambd: float = 0.5) -> Tensor:
    """``F.hardshrink(self, lambd)``."""
    return F.hardshrink(self, lambd)


def _tensor_prelu(self: Tensor, weight: Tensor) -> Tensor:
    """``F.prelu(self, weight)``."""
    return F.prelu(self, weight)


Tensor.hardshrink = _tensor_hardshrink  # type: ignore[attr-defined]
Tensor.prelu = _tensor_prelu  # type: ignore[attr-defined]

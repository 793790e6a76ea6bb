"""``cosine_similarity`` as one fused composite OpDef with a closed-form gradient.

PyTorch divides each input by its clamped norm first (``x / max(||x||, eps)``), then sums the
product along ``dim``; the clamp runs outside autograd, so the norm's own derivative uses the
unclamped norm (and is zero for a zero vector).  The kernels follow that exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.errors import EmberNotImplementedError
from ember.ops._util import lowp
from ember.ops.registry import OpDef, bind, register


def _norms(x1: np.ndarray, x2: np.ndarray, dim: int, eps: float) -> tuple:
    r1 = np.sqrt(np.sum(x1 * x1, axis=dim, keepdims=True))
    r2 = np.sqrt(np.sum(x2 * x2, axis=dim, keepdims=True))
    return r1, r2, np.maximum(r1, eps), np.maximum(r2, eps)


def _cos_meta(x1, x2, *, dim: int, eps: float) -> tuple:  # noqa: ANN001
    shape = tuple(n for i, n in enumerate(x1.shape) if i != dim)
    return shape, x1.dtype


def _cos_eager(x1: np.ndarray, x2: np.ndarray, *, dim: int, eps: float) -> np.ndarray:
    _, _, n1, n2 = _norms(x1, x2, dim, eps)
    return np.sum((x1 / n1) * (x2 / n2), axis=dim).astype(x1.dtype, copy=False)


def _cos_bwd_meta(g, x1, x2, **params: Any) -> tuple:  # noqa: ANN001
    return (tuple(x1.shape), x1.dtype), (tuple(x2.shape), x2.dtype)


def _cos_bwd_eager(g: np.ndarray, x1: np.ndarray, x2: np.ndarray, *, dim: int,
                   eps: float) -> tuple:
    r1, r2, n1, n2 = _norms(x1, x2, dim, eps)
    out = np.sum((x1 / n1) * (x2 / n2), axis=dim, keepdims=True)
    ge = np.expand_dims(g, dim)
    with np.errstate(invalid="ignore", divide="ignore"):
        u1 = np.where(r1 == 0, 0.0, x1 / r1)
        u2 = np.where(r2 == 0, 0.0, x2 / r2)
        g1 = ge * (x2 / (n1 * n2) - out / n1 * u1)
        g2 = ge * (x1 / (n1 * n2) - out / n2 * u2)
    return g1.astype(x1.dtype), g2.astype(x2.dtype)


def _cos_vjp(ctx: Any, g: Any) -> tuple:
    x1, x2 = ctx.inputs
    g1, g2 = bind(COSINE_SIMILARITY_BACKWARD, g, x1, x2, **ctx.params)
    n1, n2 = ctx.needs_input_grad
    return (g1 if n1 else None, g2 if n2 else None)


def _cos_bwd_vjp(ctx: Any, *grads: Any) -> tuple:
    raise EmberNotImplementedError(
        "[cosine_similarity] the second derivative of cosine_similarity is not implemented")


def _cos_parts(x1: Any, x2: Any, dim: int, eps: float) -> tuple:
    """(x1, x2 in the compute dtype, their norms, the clamped norms, the similarity with
    ``dim`` kept) with ember ops, as ``_norms`` and ``_cos_eager``."""
    if x1.dtype.name in ("float16", "bfloat16"):
        x1, x2 = x1.float(), x2.float()
    r1 = (x1 * x1).sum(dim, keepdim=True).sqrt()
    r2 = (x2 * x2).sum(dim, keepdim=True).sqrt()
    n1, n2 = r1.clamp_min(eps), r2.clamp_min(eps)
    return x1, x2, r1, r2, n1, n2, ((x1 / n1) * (x2 / n2)).sum(dim, keepdim=True)


def _cos_decomp(x1: Any, x2: Any, *, dim: int, eps: float) -> Any:
    """cosine_similarity with ember ops (the C backend's decomposition)."""
    return _cos_parts(x1, x2, dim, eps)[-1].squeeze(dim).to(x1.dtype)


def _cos_bwd_decomp(g: Any, x1: Any, x2: Any, *, dim: int, eps: float) -> tuple:
    """cosine_similarity_backward with ember ops (the C backend's decomposition)."""
    dtype = x1.dtype
    x1, x2, r1, r2, n1, n2, out = _cos_parts(x1, x2, dim, eps)
    ge = g.unsqueeze(dim).to(x1.dtype)
    u1 = (x1 / r1).masked_fill(r1 == 0, 0.0)
    u2 = (x2 / r2).masked_fill(r2 == 0, 0.0)
    g1 = ge * (x2 / (n1 * n2) - out / n1 * u1)
    g2 = ge * (x1 / (n1 * n2) - out / n2 * u2)
    return g1.to(dtype), g2.to(dtype)


COSINE_SIMILARITY = register(OpDef(
    "cosine_similarity", "composite", _cos_meta, lowp(_cos_eager), _cos_vjp, save=(0, 1),
    decomp=_cos_decomp,
    doc="Cosine similarity along ``dim`` of two same-shaped inputs.",
))
COSINE_SIMILARITY_BACKWARD = register(OpDef(
    "cosine_similarity_backward", "composite", _cos_bwd_meta, lowp(_cos_bwd_eager),
    _cos_bwd_vjp, num_outputs=2, save=(0, 1, 2), tags=frozenset({"multi_output"}),
    decomp=_cos_bwd_decomp,
    doc="Gradients of cosine_similarity.",
))

"""Distance functions of ``ember.nn.functional``."""

from __future__ import annotations

from ember import dtypes as dt
from ember._frontend.core import broadcast_shapes, check_tensor, expand_to, to_dtype
from ember._frontend.inplace import _type_name
from ember.errors import DTypeRuntimeError
from ember.ops._util import wrap_dim
from ember.ops.nn_distance import COSINE_SIMILARITY
from ember.ops.registry import bind
from ember.tensor import Tensor

__all__ = ["cosine_similarity"]  # pairwise_distance: loss_extra.py


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps), dim)`` after broadcasting.

    >>> F.cosine_similarity(ember.ones(2, 3), ember.ones(3))  # tensor([1., 1.])
    """
    check_tensor(x1, "cosine_similarity", "x1")
    check_tensor(x2, "cosine_similarity", "x2")
    d = dt.result_type(x1, x2)
    if not d.is_floating_point:
        raise DTypeRuntimeError(f"[cosine_similarity] expected common dtype to be floating "
                                f"point, yet common dtype is {_type_name(d)}")
    shape = broadcast_shapes("cosine_similarity", tuple(x1.shape), tuple(x2.shape))
    axis = wrap_dim(dim, len(shape), "cosine_similarity")
    a = expand_to(to_dtype(x1, d), shape)
    b = expand_to(to_dtype(x2, d), shape)
    if not shape:
        a, b = a.reshape(1), b.reshape(1)  # type: ignore[attr-defined]
    return bind(COSINE_SIMILARITY, a, b, dim=axis, eps=float(eps))

"""``ember.linalg``: the functions of ``torch.linalg`` that ember has: products, vector norms,
``inv`` and ``solve``.

Matrix decompositions (``svd``, ``qr``, ``cholesky``, ...) are not part of ember yet.
"""

from __future__ import annotations

from typing import Any

from ember._frontend.linalg import matmul
from ember._frontend.linalg_solve import linalg_inv as inv
from ember._frontend.linalg_solve import linalg_solve as solve
from ember._frontend.misc_math import linalg_cross as cross
from ember._frontend.misc_math import linalg_multi_dot as multi_dot
from ember._frontend.misc_math import linalg_vander as vander
from ember._frontend.misc_math import matrix_power
from ember._frontend.reduction import vector_norm
from ember.ops.linalg_solve import LinAlgError
from ember.tensor import Tensor

__all__ = ["LinAlgError", "cross", "diagonal", "inv", "matmul", "matrix_power", "multi_dot",
           "solve", "vander", "vecdot", "vector_norm"]


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """Dot product of ``x`` and ``y`` along ``dim`` with broadcasting (real inputs).

    >>> ember.linalg.vecdot(ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0]))
    tensor(11.)
    """
    return (x * y).sum(dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:  # noqa: N803
    """``A.diagonal(offset, dim1, dim2)`` (a view), with linalg's defaults (the last two dims).

    >>> ember.linalg.diagonal(ember.eye(2))
    tensor([1., 1.])
    """
    return A.diagonal(offset, dim1, dim2)


class _MissingLinalgError(AttributeError, NotImplementedError):
    """An ``ember.linalg`` function that does not exist (also an AttributeError, so that
    ``hasattr`` and tools probing the module behave)."""


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise _MissingLinalgError(f"[linalg] ember.linalg.{name} is not implemented")

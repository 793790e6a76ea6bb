"""``ember.linalg``: the functions of ``torch.linalg`` that ember has: products, vector norms,
``inv`` and ``solve``.

Matrix decompositions (``svd``, ``qr``, ``cholesky``, ...) are not part of ember yet.
"""

from __future__ import annotations

from typing import Any

from ember._frontend.autocast import autocast_op
from ember._frontend.linalg import matmul
from ember._frontend.linalg_solve import linalg_inv as inv
from ember._frontend.linalg_solve import linalg_solve as solve
from ember._frontend.reduction import vector_norm
from ember.ops.linalg_solve import LinAlgError
from ember.tensor import Tensor

__all__ = ["LinAlgError", "inv", "matmul", "solve", "vecdot", "vector_norm"]


@autocast_op("lower")
def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """Dot product of ``x`` and ``y`` along ``dim`` with broadcasting (real inputs).

    >>> ember.linalg.vecdot(ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0]))
    tensor(11.)
    """
    return (x * y).sum(dim)


class _MissingLinalgError(AttributeError, NotImplementedError):
    """An ``ember.linalg`` function that does not exist (also an AttributeError, so that
    ``hasattr`` and tools probing the module behave)."""


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise _MissingLinalgError(f"[linalg] ember.linalg.{name} is not implemented")

"""``ember.linalg``: the functions of ``torch.linalg`` that ember has: products, norms,
``inv``/``solve``, determinants, Cholesky, ``eigh``, SVD, QR and what is built on them
(``pinv``, ``matrix_rank``, ``matrix_exp``, ``solve_triangular``, ...), real float32/float64.

Complex-valued functions (``eig``, ``eigvals``) and LU/LDL factorizations are not part of
ember yet.
"""

from __future__ import annotations

from typing import Any

from ember._frontend import linalg_decomp as _D
from ember._frontend.autocast import autocast_op
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

__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "cross", "det", "diagonal", "eigh",
           "eigvalsh", "inv", "matmul", "matrix_exp", "matrix_norm", "matrix_power",
           "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve",
           "solve_triangular", "svd", "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot",
           "vector_norm"]

det, slogdet, cholesky, cholesky_ex = (_D.linalg_det, _D.linalg_slogdet, _D.linalg_cholesky,
                                       _D.linalg_cholesky_ex)
eigh, eigvalsh, svd, svdvals, qr = (_D.linalg_eigh, _D.linalg_eigvalsh, _D.linalg_svd,
                                    _D.linalg_svdvals, _D.linalg_qr)
pinv, matrix_rank, matrix_norm, norm = (_D.linalg_pinv, _D.linalg_matrix_rank,
                                        _D.linalg_matrix_norm, _D.linalg_norm)
solve_triangular, tensorinv, tensorsolve = (_D.linalg_solve_triangular, _D.linalg_tensorinv,
                                            _D.linalg_tensorsolve)


def matrix_exp(input: Tensor) -> Tensor:
    """The matrix exponential of a (batch of) square matrices (``torch.linalg.matrix_exp``).

    >>> ember.linalg.matrix_exp(ember.zeros(1, 1))
    tensor([[1.]])
    """
    return _D.matrix_exp(input)


@autocast_op("lower")
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

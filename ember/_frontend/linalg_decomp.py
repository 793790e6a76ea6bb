"""``torch.linalg`` determinants, decompositions and the functions built on them: ``det``,
``slogdet``, ``logdet``, ``cholesky`` (+ ``_ex``, ``cholesky_solve``, ``cholesky_inverse``),
``eigh``/``eigvalsh``, ``svd``/``svdvals``, ``qr``, ``pinv``, ``matrix_rank``,
``matrix_norm``/``norm``, ``matrix_exp``, ``solve_triangular``, ``tensorinv``/``tensorsolve``.

The primitives are in ``ember/ops/linalg_decomp.py``; the rest are compositions, so their
gradients come from the primitives' closed forms."""

from __future__ import annotations

import math
from typing import Any, Sequence

from ember import dtypes as dt
from ember._frontend.core import check_tensor
from ember._frontend.creation import eye, zeros
from ember._frontend.linalg_solve import _no_out, linalg_inv, linalg_solve
from ember._frontend.pointwise_logic import where
from ember._frontend.reduction import _return_type, vector_norm
from ember.errors import EmberRuntimeError, EmberValueError
from ember.ops.linalg_decomp import (
    LINALG_CHOLESKY,
    LINALG_DET,
    LINALG_EIGH,
    LINALG_QR,
    LINALG_SLOGDET,
    LINALG_SVD,
)
from ember.ops.linalg_solve import check_float, check_square
from ember.ops.registry import bind
from ember.tensor import Tensor, tensor_method

__all__ = ["cholesky", "cholesky_inverse", "cholesky_solve", "det", "logdet", "matrix_exp",
           "pinverse", "qr", "slogdet", "svd", "triangular_solve"]

_slogdet_t = _return_type("slogdet", "sign logabsdet")
_eigh_t = _return_type("linalg_eigh", "eigenvalues eigenvectors")
_svd_t = _return_type("linalg_svd", "U S Vh")
_tsvd_t = _return_type("svd", "U S V")
_qr_t = _return_type("qr", "Q R")
_chol_ex_t = _return_type("linalg_cholesky_ex", "L info")
_tri_t = _return_type("triangular_solve", "solution cloned_coefficient")


def linalg_det(A: Tensor) -> Tensor:  # noqa: N803
    """The determinant of a (batch of) square matrices.

    >>> ember.linalg.det(ember.tensor([[2.0, 1.0], [1.0, 3.0]]))
    tensor(5.)
    """
    check_tensor(A, "linalg.det", "A")
    return bind(LINALG_DET, A)


@tensor_method("det")
def det(input: Tensor) -> Tensor:
    """Alias of ``linalg.det``."""
    return linalg_det(input)


def linalg_slogdet(A: Tensor) -> Any:  # noqa: N803
    """``(sign, log|det|)``, a named tuple (sign 0 and -inf for a singular matrix)."""
    check_tensor(A, "linalg.slogdet", "A")
    return _slogdet_t(*bind(LINALG_SLOGDET, A))


@tensor_method("slogdet")
def slogdet(input: Tensor) -> Any:
    return linalg_slogdet(input)


@tensor_method("logdet")
def logdet(input: Tensor) -> Tensor:
    """``log(det(input))``: NaN for a negative determinant, -inf for a singular matrix."""
    sign, logabs = linalg_slogdet(input)
    nan = logabs.detach() * 0 + math.nan
    return where(sign < 0, nan, logabs)


def linalg_cholesky(input: Tensor, *, upper: bool = False, out: Any = None) -> Tensor:
    """The Cholesky factor L (``upper``: L^T) of symmetric positive-definite matrices."""
    _no_out("linalg.cholesky", out)
    check_tensor(input, "linalg.cholesky", "A")
    lo = bind(LINALG_CHOLESKY, input)
    return lo.mT if upper else lo


def linalg_cholesky_ex(input: Tensor, *, upper: bool = False, check_errors: bool = False,
                       out: Any = None) -> Any:
    """``(L, info)``; a matrix that is not positive-definite raises (ember has no partial
    factor to return)."""
    _no_out("linalg.cholesky_ex", out)
    lo = linalg_cholesky(input, upper=upper)
    return _chol_ex_t(lo, zeros(tuple(input.shape[:-2]), dtype=dt.int32))


@tensor_method("cholesky")
def cholesky(input: Tensor, upper: bool = False) -> Tensor:
    return linalg_cholesky(input, upper=upper)


@tensor_method("cholesky_inverse")
def cholesky_inverse(input: Tensor, upper: bool = False) -> Tensor:
    """The inverse of ``A = L L^T`` (``upper``: ``U^T U``) from its Cholesky factor."""
    a = input.mT @ input if upper else input @ input.mT
    return linalg_inv(a)


@tensor_method("cholesky_solve")
def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False) -> Tensor:
    """X with ``A X = input`` where ``A = L L^T`` and ``input2`` is L (``upper``: U)."""
    a = input2.mT @ input2 if upper else input2 @ input2.mT
    return linalg_solve(a, input)


def linalg_eigh(input: Tensor, UPLO: str = "L") -> Any:  # noqa: N803
    """Eigenvalues (ascending) and eigenvectors of symmetric matrices, reading one triangle."""
    check_tensor(input, "linalg.eigh")
    if UPLO not in ("L", "U"):
        raise EmberRuntimeError(f"[linalg.eigh] Expected UPLO argument to be 'L' or 'U', but "
                                f"got {UPLO}")
    return _eigh_t(*bind(LINALG_EIGH, input, upper=UPLO == "U"))


def linalg_eigvalsh(input: Tensor, UPLO: str = "L") -> Tensor:  # noqa: N803
    return linalg_eigh(input, UPLO)[0]


def linalg_svd(A: Tensor, full_matrices: bool = True, *, driver: Any = None,  # noqa: N803
               out: Any = None) -> Any:
    """``U, S, Vh`` with ``A = U diag(S) Vh`` (singular values descending)."""
    _no_out("linalg.svd", out)
    check_tensor(A, "linalg.svd", "A")
    return _svd_t(*bind(LINALG_SVD, A, full_matrices=bool(full_matrices)))


def linalg_svdvals(A: Tensor, *, driver: Any = None, out: Any = None) -> Tensor:  # noqa: N803
    _no_out("linalg.svdvals", out)
    return bind(LINALG_SVD, A, full_matrices=False)[1]


@tensor_method("svd")
def svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> Any:
    """``torch.svd``: ``U, S, V`` (V, not Vh); zero U and V when not ``compute_uv``."""
    u, s, vh = linalg_svd(input, full_matrices=not some)
    if not compute_uv:
        return _tsvd_t(zeros(u.shape, dtype=u.dtype), s, zeros(vh.shape, dtype=vh.dtype))
    return _tsvd_t(u, s, vh.mT)


def linalg_qr(A: Tensor, mode: str = "reduced", *, out: Any = None) -> Any:  # noqa: N803
    """``Q, R`` with ``A = Q R`` (``mode``: 'reduced', 'complete' or 'r')."""
    _no_out("linalg.qr", out)
    check_tensor(A, "linalg.qr", "A")
    if mode not in ("reduced", "complete", "r"):
        raise EmberRuntimeError(f"[linalg.qr] qr received unrecognized mode '{mode}' but "
                                f"expected one of 'reduced' (default), 'r', or 'complete'")
    return _qr_t(*bind(LINALG_QR, A, mode=mode))


@tensor_method("qr")
def qr(input: Tensor, some: bool = True) -> Any:
    return linalg_qr(input, "reduced" if some else "complete")


def _tolerance(s: Tensor, atol: Any, rtol: Any, shape: tuple) -> Tensor:
    smax = s.amax(-1, keepdim=True) if s.shape[-1] else s.sum(-1, keepdim=True)
    if rtol is None:
        eps = dt.finfo(s.dtype).eps
        rtol = max(shape[-2:]) * eps if atol is None or _zero(atol) else 0.0
    tol = smax * rtol
    if atol is not None:
        tol = tol.maximum(atol * (tol * 0 + 1)) if isinstance(atol, Tensor) else \
            tol.clamp_min(atol)
    return tol


def _zero(x: Any) -> bool:
    return bool((x == 0).all()) if isinstance(x, Tensor) else x == 0


def linalg_pinv(input: Tensor, rcond: Any = None, hermitian: bool = False, *,
                atol: Any = None, rtol: Any = None, out: Any = None) -> Tensor:
    """The pseudo-inverse via the SVD, singular values below the tolerance dropped."""
    _no_out("linalg.pinv", out)
    if rcond is not None:
        rtol = rcond
    u, s, vh = linalg_svd(input, full_matrices=False)
    tol = _tolerance(s, atol, rtol, tuple(input.shape))
    keep = s > tol
    s_inv = where(keep, 1 / where(keep, s, s * 0 + 1), s * 0)
    return (vh.mT * s_inv.unsqueeze(-2)) @ u.mT


@tensor_method("pinverse")
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    return linalg_pinv(input, rtol=rcond)


def linalg_matrix_rank(input: Tensor, tol: Any = None, hermitian: bool = False, *,
                       atol: Any = None, rtol: Any = None, out: Any = None) -> Tensor:
    """The number of singular values above ``max(atol, rtol * s_max)``."""
    _no_out("linalg.matrix_rank", out)
    if tol is not None:
        atol, rtol = tol, 0.0
    s = linalg_svdvals(input.detach())
    return (s > _tolerance(s, atol, rtol, tuple(input.shape))).sum(-1)


def linalg_matrix_norm(input: Tensor, ord: Any = "fro", dim: Sequence[int] = (-2, -1),
                       keepdim: bool = False, *, dtype: Any = None, out: Any = None) -> Tensor:
    """Frobenius, nuclear, 1, -1, 2, -2, inf or -inf norm of the matrices over ``dim``."""
    _no_out("linalg.matrix_norm", out)
    x = input if dtype is None else input.to(dtype)
    d0, d1 = (dm % x.ndim for dm in dim)
    if ord == "fro":
        return vector_norm(x, 2, dim=(d0, d1), keepdim=keepdim)
    if ord in ("nuc", 2, -2):
        m = x.movedim((d0, d1), (-2, -1))
        s = linalg_svdvals(m)
        r = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
        if keepdim:
            r = r.unsqueeze(-1).unsqueeze(-1).movedim((-2, -1), (d0, d1))
        return r
    if ord in (1, -1, math.inf, -math.inf):
        red, over = (d0, d1) if abs(ord) == 1 else (d1, d0)
        a = x.abs().sum(red, keepdim=True)
        r = a.amax(over, keepdim=True) if ord > 0 else a.amin(over, keepdim=True)
        return r if keepdim else r.squeeze((d0, d1))
    raise EmberRuntimeError(f"[linalg.matrix_norm] linalg.matrix_norm: Order {ord} not "
                            f"supported.")


def linalg_norm(input: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *,
                dtype: Any = None, out: Any = None) -> Tensor:
    """``vector_norm`` or ``matrix_norm`` depending on ``ord`` and ``dim`` (as PyTorch)."""
    _no_out("linalg.norm", out)
    if dim is not None and not isinstance(dim, int) and len(dim) == 2 or \
            (dim is None and ord is not None and input.ndim == 2):
        return linalg_matrix_norm(input, ord if ord is not None else "fro",
                                  dim if dim is not None else (-2, -1), keepdim, dtype=dtype)
    if ord is not None and dim is None and input.ndim != 1:
        raise EmberRuntimeError("[linalg.norm] linalg.norm: If dim is not specified but ord is, "
                                "the input must be 1D or 2D.")
    x = input if dtype is None else input.to(dtype)
    return vector_norm(x, 2 if ord is None else ord, dim=dim, keepdim=keepdim)


_EXP_THETA = 5.371920351148152  # theta_13 of Higham's scaling-and-squaring Pade(13)
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)


@tensor_method("matrix_exp")
def matrix_exp(input: Tensor) -> Tensor:
    """The matrix exponential (Higham's scaling and squaring with a degree-13 Pade
    approximant), composed of ember ops so that it is differentiable.

    >>> ember.matrix_exp(ember.zeros(2, 2))
    tensor([[1., 0.],
            [0., 1.]])
    """
    check_square("linalg.matrix_exp", tuple(input.shape))
    check_float("linalg.matrix_exp", input.dtype)
    n = input.shape[-1]
    if n == 0 or input.numel() == 0:
        return input.clone()
    norm1 = float(input.detach().abs().sum(-2).amax()) if input.numel() else 0.0
    k = max(0, math.ceil(math.log2(norm1 / _EXP_THETA))) if norm1 > _EXP_THETA else 0
    a = input / (2 ** k) if k else input
    ident = eye(n, dtype=input.dtype).expand(input.shape)
    b = _PADE13
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
             + b[1] * ident)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 \
        + b[0] * ident
    r = linalg_solve(v - u, v + u)
    for _ in range(k):
        r = r @ r
    return r


def linalg_solve_triangular(input: Tensor, B: Tensor, *, upper: bool, left: bool = True,  # noqa: N803
                            unitriangular: bool = False, out: Any = None) -> Tensor:
    """X with ``A X = B`` (``left=False``: ``X A = B``) for triangular A, which is read from
    its ``upper`` or lower triangle only (its diagonal taken as ones if ``unitriangular``)."""
    _no_out("linalg.solve_triangular", out)
    a = input.triu() if upper else input.tril()
    if unitriangular:
        d = a.diagonal(0, -2, -1)
        a = a - d.diag_embed() + (d * 0 + 1).detach().diag_embed()
    if not left:
        return linalg_solve(a.mT, B.mT).mT
    return linalg_solve(a, B)


@tensor_method("triangular_solve")
def triangular_solve(input: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,  # noqa: N803
                     unitriangular: bool = False) -> Any:
    """``torch.triangular_solve(b, A)``: ``(X, A.clone())`` with ``op(A) X = b``."""
    a = A.mT if transpose else A
    x = linalg_solve_triangular(a, input, upper=upper != transpose, unitriangular=unitriangular)
    return _tri_t(x, A.clone())


def linalg_tensorinv(input: Tensor, ind: int = 2, *, out: Any = None) -> Tensor:
    """The inverse of ``input`` seen as a matrix (first ``ind`` dims by the rest)."""
    _no_out("linalg.tensorinv", out)
    if ind <= 0:
        raise EmberValueError("[linalg.tensorinv] Expected a strictly positive integer for "
                              f"'ind', but got {ind}")
    rows, cols = tuple(input.shape[:ind]), tuple(input.shape[ind:])
    m = math.prod(rows)
    if m != math.prod(cols):
        raise EmberRuntimeError("[linalg.tensorinv] Expected self to satisfy the requirement "
                                "prod(self.shape[ind:]) == prod(self.shape[:ind]), but got "
                                f"{math.prod(cols)} != {m}")
    return linalg_inv(input.reshape(m, m)).reshape(cols + rows)


def linalg_tensorsolve(input: Tensor, other: Tensor, dims: Any = None, *,
                       out: Any = None) -> Tensor:
    """X with ``tensordot(input, X, X.ndim) == other``."""
    _no_out("linalg.tensorsolve", out)
    a = input
    if dims is not None:
        rest = [d for d in range(a.ndim) if d not in [x % a.ndim for x in dims]]
        a = a.permute(rest + [x % a.ndim for x in dims])
    res_shape = tuple(a.shape[other.ndim:])
    m = other.numel()
    x = linalg_solve(a.reshape(m, math.prod(res_shape)), other.reshape(m))
    return x.reshape(res_shape)


"""Determinants and decompositions: ``linalg_det``, ``linalg_slogdet``, ``linalg_cholesky``,
``linalg_eigh``, ``linalg_svd`` primitives (LAPACK through NumPy, float32/float64, batched over
leading dims).  Gradients are the standard closed forms PyTorch uses
(``torch/csrc/autograd/FunctionsManual.cpp``), written with ember ops."""

from __future__ import annotations

import numpy as np

from ember.errors import EmberNotImplementedError, ShapeError
from ember.ops.linalg_solve import LINALG_INV, LinAlgError, check_float, check_square
from ember.ops.registry import OpDef, bind, register


def _square_meta(op: str, a) -> tuple:  # noqa: ANN001
    check_square(op, tuple(a.shape))
    check_float(op, a.dtype)
    return tuple(a.shape)


# ------------------------------------------------------------------------------- det, slogdet
def _det_eager(a: np.ndarray) -> np.ndarray:
    """``det`` of each matrix of a batch (LU, as LAPACK getrf)."""
    if a.shape[-1] == 0:
        return np.ones(a.shape[:-2], a.dtype)
    return np.asarray(np.linalg.det(a), a.dtype)


def _det_vjp(ctx, g):  # noqa: ANN001
    (a,) = ctx.inputs
    det = ctx.outputs[0]
    inv_t = bind(LINALG_INV, a).mT   # d det = det * tr(A^-1 dA): gA = g det A^-T
    return ((g * det).unsqueeze(-1).unsqueeze(-1) * inv_t,)


LINALG_DET = register(OpDef(
    "linalg_det", "extern", lambda a: (_square_meta("linalg.det", a)[:-2], a.dtype), _det_eager,
    _det_vjp, save=(0,), save_output=True, grad_name="LinalgDetBackward0",
    doc="Determinant of a batch of square matrices.",
))


def _slogdet_eager(a: np.ndarray) -> tuple:
    """``(sign, log|det|)`` of each matrix of a batch."""
    if a.shape[-1] == 0:
        return np.ones(a.shape[:-2], a.dtype), np.zeros(a.shape[:-2], a.dtype)
    s, l = np.linalg.slogdet(a)
    return np.asarray(s, a.dtype), np.asarray(l, a.dtype)


def _slogdet_vjp(ctx, gs, gl=None):  # noqa: ANN001
    (a,) = ctx.inputs
    if gl is None:
        return (None,)
    return (gl.unsqueeze(-1).unsqueeze(-1) * bind(LINALG_INV, a).mT,)


def _slogdet_meta(a) -> tuple:  # noqa: ANN001
    s = _square_meta("linalg.slogdet", a)[:-2]
    return (s, a.dtype), (s, a.dtype)


LINALG_SLOGDET = register(OpDef(
    "linalg_slogdet", "extern", _slogdet_meta, _slogdet_eager, _slogdet_vjp, num_outputs=2,
    save=(0,), tags=frozenset({"multi_output"}), grad_name="LinalgSlogdetBackward0",
    doc="Sign and log-absolute-determinant of a batch of square matrices.",
))


# ---------------------------------------------------------------------------------- cholesky
def _not_pd(a: np.ndarray, batch_idx: int | None) -> LinAlgError:
    m = a.reshape((-1,) + a.shape[-2:])[batch_idx or 0].astype(np.float64)
    order = next((k for k in range(1, m.shape[0] + 1)
                  if not _is_pd(m[:k, :k])), m.shape[0])
    where = f"(Batch element {batch_idx}): " if batch_idx is not None else ""
    return LinAlgError(f"[linalg.cholesky] linalg.cholesky: {where}The factorization could not "
                       f"be completed because the input is not positive-definite (the leading "
                       f"minor of order {order} is not positive-definite).")


def _is_pd(m: np.ndarray) -> bool:
    try:
        np.linalg.cholesky(m)
    except np.linalg.LinAlgError:
        return False
    return True


def _cholesky_eager(a: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor of each (symmetric, positive-definite) matrix; only the lower
    triangle of ``a`` is read, as LAPACK potrf."""
    if a.size == 0:
        return np.zeros(a.shape, a.dtype)
    sym = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
    try:
        return np.linalg.cholesky(sym).astype(a.dtype, copy=False)
    except np.linalg.LinAlgError:
        batch = sym.reshape((-1,) + sym.shape[-2:])
        idx = next(i for i, m in enumerate(batch) if not _is_pd(m))
        raise _not_pd(sym, idx if a.ndim > 2 else None) from None


def _cholesky_vjp(ctx, gl):  # noqa: ANN001
    (lo,) = ctx.outputs   # PyTorch's cholesky_backward: L^-H Phi(L^H gL) L^-1, symmetrized
    l_inv = bind(LINALG_INV, lo)
    phi = (lo.mT @ gl).tril()
    phi = phi - 0.5 * phi.diagonal(0, -2, -1).diag_embed()
    ga = l_inv.mT @ phi @ l_inv
    return (0.5 * (ga + ga.mT),)


LINALG_CHOLESKY = register(OpDef(
    "linalg_cholesky", "extern", lambda a: (_square_meta("linalg.cholesky", a), a.dtype),
    _cholesky_eager, _cholesky_vjp, save_output=True, grad_name="LinalgCholeskyExBackward0",
))


# -------------------------------------------------------------------------------------- eigh
def _eigh_eager(a: np.ndarray, *, upper: bool) -> tuple:
    """Eigenvalues (ascending) and orthonormal eigenvectors of symmetric matrices, reading
    one triangle (``upper``) as LAPACK syevd."""
    if a.size == 0:
        return np.zeros(a.shape[:-1], a.dtype), np.zeros(a.shape, a.dtype)
    w, v = np.linalg.eigh(a, UPLO="U" if upper else "L")
    return w.astype(a.dtype, copy=False), v.astype(a.dtype, copy=False)


def _eigh_vjp(ctx, gw, gv=None):  # noqa: ANN001
    w, v = ctx.outputs   # gA = V (diag(gw) + (V^T gV) / E) V^T, E_ij = w_j - w_i
    if gv is None:
        inner = gw.diag_embed()
    else:
        e = w.unsqueeze(-2) - w.unsqueeze(-1)
        vtgv = v.mT @ gv
        off = vtgv / (e + _eye(e))
        off = off - off.diagonal(0, -2, -1).diag_embed()
        inner = off if gw is None else off + gw.diag_embed()
    return (v @ inner @ v.mT,)


def _eye(e):  # noqa: ANN001, ANN202
    """Identity shaped like ``e`` (so the diagonal of ``w_j - w_i`` divides by 1, not 0)."""
    ones = (e * 0 + 1).diagonal(0, -2, -1)
    return ones.diag_embed()


def _eigh_meta(a, *, upper: bool) -> tuple:  # noqa: ANN001
    s = _square_meta("linalg.eigh", a)
    return (s[:-1], a.dtype), (s, a.dtype)


LINALG_EIGH = register(OpDef(
    "linalg_eigh", "extern", _eigh_meta, _eigh_eager, _eigh_vjp, num_outputs=2,
    save_output=True, tags=frozenset({"multi_output"}), grad_name="LinalgEighBackward0",
))


# --------------------------------------------------------------------------------------- svd
def _svd_eager(a: np.ndarray, *, full_matrices: bool) -> tuple:
    """``U, S, Vh`` of each matrix (LAPACK gesdd through NumPy)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    if a.size == 0:
        um, vn = (m, n) if full_matrices else (k, k)
        u = np.broadcast_to(np.eye(m, um, dtype=a.dtype), a.shape[:-2] + (m, um)).copy()
        vh = np.broadcast_to(np.eye(vn, n, dtype=a.dtype), a.shape[:-2] + (vn, n)).copy()
        return u, np.zeros(a.shape[:-2] + (k,), a.dtype), vh
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return u.astype(a.dtype), s.astype(a.dtype), vh.astype(a.dtype)


def _svd_vjp(ctx, gu, gs=None, gvh=None):  # noqa: ANN001
    u, s, vh = ctx.outputs
    if gu is None and gvh is None:
        return (u @ gs.diag_embed() @ vh if gs is not None else None,)
    if ctx.params["full_matrices"] and u.shape[-1] != vh.shape[-2]:
        raise EmberNotImplementedError(
            "[linalg.svd] the gradient of svd with full_matrices=True of a non-square matrix is "
            "not defined; use full_matrices=False")
    return (_svd_backward(u, s, vh, gu, gs, gvh),)


def _svd_backward(u, s, vh, gu, gs, gvh):  # noqa: ANN001, ANN202
    """PyTorch's svd_backward for real inputs (reduced U, S, Vh)."""
    v = vh.mT
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    s2 = s * s
    e = s2.unsqueeze(-2) - s2.unsqueeze(-1)
    e = e + _eye(e)
    inner = None
    if gu is not None:
        uhgu = u.mT @ gu
        inner = (uhgu - uhgu.mT) * s.unsqueeze(-2)
    if gvh is not None:
        gv = gvh.mT
        vhgv = v.mT @ gv
        t = s.unsqueeze(-1) * (vhgv - vhgv.mT)
        inner = t if inner is None else inner + t
    inner = inner / e
    inner = inner - inner.diagonal(0, -2, -1).diag_embed()
    if gs is not None:
        inner = inner + gs.diag_embed()
    if gu is not None and m > k:
        gus = gu / s.unsqueeze(-2)
        ga = u @ inner + (gus - u @ (u.mT @ gus))
    else:
        ga = u @ inner
    ga = ga @ vh
    if gvh is not None and n > k:
        gvs = gvh.mT / s.unsqueeze(-2)
        ga = ga + u @ (gvs - v @ (vh @ gvs)).mT
    return ga


def _svd_meta(a, *, full_matrices: bool) -> tuple:  # noqa: ANN001
    sh = tuple(a.shape)
    if len(sh) < 2:
        raise ShapeError("[linalg.svd] linalg.svd: The input tensor A must have at least 2 "
                         "dimensions.")
    check_float("linalg.svd", a.dtype)
    m, n = sh[-2:]
    k = min(m, n)
    um, vn = (m, n) if full_matrices else (k, k)
    b = sh[:-2]
    return (b + (m, um), a.dtype), (b + (k,), a.dtype), (b + (vn, n), a.dtype)


LINALG_SVD = register(OpDef(
    "linalg_svd", "extern", _svd_meta, _svd_eager, _svd_vjp, num_outputs=3, save_output=True,
    tags=frozenset({"multi_output"}), grad_name="LinalgSvdBackward0",
))


# ---------------------------------------------------------------------------------------- qr
def _qr_eager(a: np.ndarray, *, mode: str) -> tuple:
    """``Q, R`` of each matrix (Householder QR, LAPACK geqrf/orgqr through NumPy)."""
    m, n = a.shape[-2:]
    if a.size == 0:
        k = m if mode == "complete" else min(m, n)
        q = np.broadcast_to(np.eye(m, k, dtype=a.dtype), a.shape[:-2] + (m, k)).copy()
        return q, np.zeros(a.shape[:-2] + (k, n), a.dtype)
    q, r = np.linalg.qr(a, mode=mode if mode != "r" else "reduced")
    if mode == "r":
        q = np.zeros((0,), a.dtype)
    return q.astype(a.dtype), r.astype(a.dtype)


def _qr_vjp(ctx, *grads):  # noqa: ANN001
    raise EmberNotImplementedError("[linalg.qr] the gradient of linalg.qr is not implemented in "
                                   "ember")


def _qr_meta(a, *, mode: str) -> tuple:  # noqa: ANN001
    sh = tuple(a.shape)
    if len(sh) < 2:
        raise ShapeError("[linalg.qr] linalg.qr: The input tensor A must have at least 2 "
                         "dimensions.")
    check_float("linalg.qr", a.dtype)
    m, n = sh[-2:]
    k = m if mode == "complete" else min(m, n)
    q = (0,) if mode == "r" else sh[:-2] + (m, k)
    return (q, a.dtype), (sh[:-2] + (k, n), a.dtype)


LINALG_QR = register(OpDef(
    "linalg_qr", "extern", _qr_meta, _qr_eager, _qr_vjp, num_outputs=2,
    tags=frozenset({"multi_output"}), grad_name="LinalgQrBackward0",
))


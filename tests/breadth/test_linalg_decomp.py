"""ember.linalg determinants and decompositions against torch.linalg: values (float32/float64),
gradients in float64 against torch and finite differences, PyTorch's errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from tests.breadth.helpers import assert_same, compare

torch = pytest.importorskip("torch")
R = np.random.default_rng(4)
A = R.standard_normal((3, 3)) + 3 * np.eye(3)
AB = R.standard_normal((2, 4, 4)) + 4 * np.eye(4)
G = R.standard_normal((2, 4, 4))
SPD = G @ G.transpose(0, 2, 1) + 4 * np.eye(4)
TALL = R.standard_normal((5, 3))
WIDE = TALL.T.copy()


def tl(name):
    return getattr(torch.linalg, name)


def el(name):
    return getattr(ember.linalg, name)


@pytest.mark.parametrize("name,x", [("det", A), ("det", AB), ("det", -AB),
                                    ("slogdet", AB), ("slogdet", -A)])
def test_det_slogdet(name, x):
    compare(el(name), tl(name), (x,), grad=(0,), rtol=None)
    compare(getattr(ember, name), getattr(torch, name), (x,), dtypes=("float64",))


def test_logdet():
    for x in (SPD, -A, np.zeros((2, 2))):
        compare(ember.logdet, torch.logdet, (x,), dtypes=("float64",))
    compare(ember.logdet, torch.logdet, (SPD,), grad=(0,))


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(upper):
    compare(lambda a: ember.linalg.cholesky(a, upper=upper),
            lambda a: torch.linalg.cholesky(a, upper=upper), (SPD,), rtol=1e-5)
    # the gradient of a symmetric input: compare through a symmetrizing map
    compare(lambda a: ember.linalg.cholesky((a + a.mT) / 2, upper=upper),
            lambda a: torch.linalg.cholesky((a + a.mT) / 2, upper=upper), (SPD,),
            dtypes=("float64",), grad=(0,))
    e, t = ember.linalg.cholesky_ex(ember.tensor(SPD)), torch.linalg.cholesky_ex(torch.tensor(SPD))
    assert_same(tuple(e), tuple(t), 1e-10, 1e-12)
    compare(ember.cholesky, torch.cholesky, (SPD[0],), dtypes=("float64",))


def test_cholesky_solve_inverse():
    lo = np.linalg.cholesky(SPD[0])
    b = R.standard_normal((4, 2))
    compare(ember.cholesky_solve, torch.cholesky_solve, (b, lo), grad=(0, 1))
    compare(ember.cholesky_solve, torch.cholesky_solve, (b, lo.T.copy(), True),
            dtypes=("float64",))
    compare(ember.cholesky_inverse, torch.cholesky_inverse, (lo,), grad=(0,))
    compare(ember.cholesky_inverse, torch.cholesky_inverse, (lo.T.copy(), True),
            dtypes=("float64",))


def _sym(a):
    return (a + a.mT) / 2


def test_eigh():
    compare(lambda a: ember.linalg.eigh(a)[0], lambda a: torch.linalg.eigh(a)[0], (SPD,))
    compare(lambda a: ember.linalg.eigvalsh(_sym(a), "U"),
            lambda a: torch.linalg.eigvalsh(_sym(a), "U"), (SPD,), grad=(0,))
    # eigenvectors are defined up to sign: compare sign-invariant V diag(w^2) V^T
    def rec(lib):
        def f(a):
            w, v = lib.linalg.eigh(_sym(a))
            return (v * (w * w).unsqueeze(-2)) @ v.mT, (v * v)
        return f
    compare(rec(ember), rec(torch), (SPD,), dtypes=("float64",), grad=(0,))


@pytest.mark.parametrize("x", [A, TALL, WIDE, AB])
def test_svd(x):
    compare(ember.linalg.svdvals, torch.linalg.svdvals, (x,), grad=(0,))
    def rec(lib):  # sign-invariant functions of U, S, Vh
        def f(a):
            u, s, vh = lib.linalg.svd(a, full_matrices=False)
            return (u * s.unsqueeze(-2)) @ vh, u @ u.mT, vh.mT @ vh, u * u, vh * vh
        return f
    compare(rec(ember), rec(torch), (x,), dtypes=("float64",), grad=(0,))
    e = ember.linalg.svd(ember.tensor(x))
    t = torch.linalg.svd(torch.tensor(x))
    assert [tuple(v.shape) for v in e] == [tuple(v.shape) for v in t]
    u, s, v = ember.svd(ember.tensor(x))
    np.testing.assert_allclose(((u * s.unsqueeze(-2)) @ v.mT).numpy(), x, atol=1e-5)


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("x", [A, TALL, WIDE])
def test_qr(mode, x):
    e = ember.linalg.qr(ember.tensor(x), mode)
    t = torch.linalg.qr(torch.tensor(x), mode)
    assert [tuple(v.shape) for v in e] == [tuple(v.shape) for v in t]
    # Householder QR through LAPACK: the same signs as torch
    np.testing.assert_allclose(e.R.numpy(), t.R.numpy(), rtol=1e-10, atol=1e-12)
    if mode != "r":
        np.testing.assert_allclose(e.Q.numpy(), t.Q.numpy(), rtol=1e-10, atol=1e-12)
    a = ember.tensor(x, requires_grad=True)
    with pytest.raises(NotImplementedError, match="gradient of linalg.qr"):
        ember.linalg.qr(a)[1].sum().backward()


def test_pinv_rank_norms():
    low_rank = TALL[:, :1] @ R.standard_normal((1, 4))
    for x in (A, TALL, WIDE, low_rank):
        compare(ember.linalg.pinv, torch.linalg.pinv, (x,), rtol=1e-4, atol=1e-5,
                dtypes=("float64",))
        assert int(ember.linalg.matrix_rank(ember.tensor(x))) == \
            int(torch.linalg.matrix_rank(torch.tensor(x)))
    compare(ember.linalg.pinv, torch.linalg.pinv, (TALL,), grad=(0,), fd=False)
    compare(ember.pinverse, torch.pinverse, (WIDE,), dtypes=("float64",))
    for ord in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf):
        compare(lambda a: ember.linalg.matrix_norm(a, ord), lambda a:
                torch.linalg.matrix_norm(a, ord), (AB,), grad=(0,), rtol=1e-5)
        compare(lambda a: ember.linalg.matrix_norm(a, ord, (0, 2), True), lambda a:
                torch.linalg.matrix_norm(a, ord, (0, 2), True), (AB,), dtypes=("float64",))
    for args in ((), (None, 1), (2,), ("nuc",), (3, 1), (-1, (0, 2))):
        x = AB if args[1:] else AB[0]
        compare(lambda a: ember.linalg.norm(a, *args), lambda a: torch.linalg.norm(a, *args),
                (x,), dtypes=("float64",))


@pytest.mark.parametrize("scale", [0.1, 1.0, 30.0])
def test_matrix_exp(scale):
    x = R.standard_normal((2, 3, 3)) * scale
    compare(ember.linalg.matrix_exp, torch.linalg.matrix_exp, (x,), rtol=1e-5 * scale,
            grad=(0,) if scale < 10 else (), dtypes=("float64",))
    compare(ember.matrix_exp, torch.matrix_exp, (x[0] / scale,), dtypes=("float32",))


def test_triangular():
    b = R.standard_normal((4, 2))
    for upper in (True, False):
        for uni in (False, True):
            compare(lambda a, y: ember.linalg.solve_triangular(a, y, upper=upper,
                                                               unitriangular=uni),
                    lambda a, y: torch.linalg.solve_triangular(a, y, upper=upper,
                                                               unitriangular=uni),
                    (AB[0], b), grad=(0, 1))
    compare(lambda a, y: ember.linalg.solve_triangular(a, y, upper=True, left=False),
            lambda a, y: torch.linalg.solve_triangular(a, y, upper=True, left=False),
            (AB[0], b.T.copy()), grad=(0, 1))
    for tr in (False, True):
        compare(lambda y, a: ember.triangular_solve(y, a, False, tr),
                lambda y, a: torch.triangular_solve(y, a, False, tr), (b, AB[0]), grad=(0, 1),
                fd=False)


def test_tensorinv_tensorsolve():
    x = R.standard_normal((4, 6, 8, 3)) + 0.0
    x = (x.reshape(24, 24) + 10 * np.eye(24)).reshape(4, 6, 8, 3)
    compare(ember.linalg.tensorinv, torch.linalg.tensorinv, (x,), grad=(0,), fd=False)
    b = R.standard_normal((4, 6))
    compare(ember.linalg.tensorsolve, torch.linalg.tensorsolve, (x, b), grad=(0, 1), fd=False)


def test_errors():
    with pytest.raises(RuntimeError, match="not positive-definite \\(the leading minor of order "
                                           "2 is not positive-definite\\)"):
        ember.linalg.cholesky(ember.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(RuntimeError, match="square matrices, but they are 5 by 3"):
        ember.linalg.det(ember.tensor(TALL))
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor"):
        ember.linalg.svd(ember.ones(2, 2, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="unrecognized mode"):
        ember.linalg.qr(ember.tensor(A), "full")
    with pytest.raises(RuntimeError, match="Expected UPLO argument"):
        ember.linalg.eigh(ember.tensor(A), "X")
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        ember.linalg.slogdet(ember.ones(3))


def test_out_is_refused_not_ignored():
    a = ember.tensor(SPD[0])
    for fn in (lambda: ember.linalg.cholesky(a, out=ember.empty(4, 4)),
               lambda: ember.linalg.svdvals(a, out=ember.empty(4)),
               lambda: ember.chain_matmul(a, a, out=ember.empty(4, 4))):
        with pytest.raises(TypeError, match="out= is not supported"):
            fn()

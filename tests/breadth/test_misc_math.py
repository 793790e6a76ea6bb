"""Composite math ops (addr, aminmax, block_diag, cov, cross, trapezoid, vander, matrix_power,
multi_dot, renorm, put, fill_diagonal_, ...) against torch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from tests.breadth.helpers import assert_same, compare

torch = pytest.importorskip("torch")
R = np.random.default_rng(3)
M = R.standard_normal((4, 4))
S = M @ M.T / 4 + np.eye(4)  # well conditioned
X = R.standard_normal((3, 5))
V3 = R.standard_normal((2, 3))


def meth(name):
    return lambda a, *r, **k: getattr(a, name)(*r, **k)


CASES = {
    "addr": ((M, X[0, :4], X[1, :4]), {"beta": 0.5, "alpha": 2.0}, (0, 1, 2)),
    "block_diag": ((M[:2], X[0], np.array(1.5)), {}, (0, 1, 2)),
    "cartesian_prod": ((X[0, :3], X[1, :2]), {}, (0, 1)),
    "combinations": ((X[0],), {"r": 3}, (0,)),
    "cross": ((V3, R.standard_normal((2, 3))), {"dim": 1}, (0, 1)),
    "dist": ((X, X[::-1].copy()), {"p": 3}, (0, 1)),
    "cov": ((X,), {"correction": 0}, (0,)),
    "corrcoef": ((X,), {}, (0,)),
    "diagflat": ((X[:2, :2],), {"offset": -1}, (0,)),
    "trapezoid": ((X,), {"dx": 0.5, "dim": 0}, (0,)),
    "trapz": ((X,), {}, (0,)),
    "cumulative_trapezoid": ((X,), {"dx": 2.0}, (0,)),
    "vander": ((X[0],), {"N": 4, "increasing": True}, ()),  # torch 2.13's vander backward fails
    "chain_matmul": ((M, S, M[:, :2]), {}, (0, 1, 2)),
    "matrix_power": ((M, 5), {}, (0,)),
    "renorm": ((X, 2, 0, 1.5), {}, (0,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_grads(name):
    args, kw, grad = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(getattr(ember, name), getattr(torch, name), args, kw, grad=grad)
        if hasattr(torch.Tensor, name):
            compare(meth(name), meth(name), args, kw, dtypes=("float64",))


def test_vander_grad_finite_differences():
    x = ember.tensor(X[0], requires_grad=True)
    assert ember.autograd.gradcheck(lambda t: ember.vander(t, 4), (x,))


def test_with_sample_points_and_weights():
    xs = np.sort(R.uniform(0, 3, 5))
    compare(lambda y, x: ember.trapezoid(y, x), lambda y, x: torch.trapezoid(y, x), (X, xs),
            grad=(0, 1))
    compare(lambda y, x: ember.cumulative_trapezoid(y, x), lambda y, x:
            torch.cumulative_trapezoid(y, x), (X, xs), grad=(0, 1))
    fw, aw = np.array([1, 2, 1, 3, 1]), R.uniform(0.5, 2, 5)
    compare(lambda x, a: ember.cov(x, fweights=ember.tensor(fw), aweights=a),
            lambda x, a: torch.cov(x, fweights=torch.tensor(fw), aweights=a), (X, aw),
            grad=(0, 1))
    compare(ember.cov, torch.cov, (X[0],), dtypes=("float64",))


@pytest.mark.parametrize("n", [0, 1, 2, 3, -1, -2])
def test_matrix_power(n):
    compare(ember.linalg.matrix_power, torch.linalg.matrix_power, (S[None].repeat(2, 0), n),
            grad=(0,), rtol=1e-9 if n < 0 else None, fd=n != 0)


def test_linalg_forms():
    compare(ember.linalg.cross, torch.linalg.cross, (V3, V3[::-1].copy()), grad=(0, 1))
    compare(ember.linalg.vander, torch.linalg.vander, (X,), {"N": 3}, grad=(0,))
    compare(ember.linalg.diagonal, torch.linalg.diagonal, (R.standard_normal((2, 3, 3)),),
            {"offset": 1}, grad=(0,))
    compare(lambda *t: ember.linalg.multi_dot(t), lambda *t: torch.linalg.multi_dot(t),
            (X[0], R.standard_normal((5, 4)), M, X[1, :4]), grad=(0, 1, 2, 3))


def test_integer_and_aminmax():
    i = np.array([[3, -1, 4], [1, 5, -9]])
    compare(ember.vander, torch.vander, (i[0],), dtypes=("int64",))
    compare(ember.linalg.vander, torch.linalg.vander, (i,), dtypes=("int64",))
    for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
        e, t = ember.aminmax(ember.tensor(i), **kw), torch.aminmax(torch.tensor(i), **kw)
        assert_same(tuple(e), tuple(t), 0, 0)
        assert_same(tuple(ember.tensor(X).aminmax(**kw)), tuple(torch.tensor(X).aminmax(**kw)),
                    0, 0)
    assert ember.aminmax(ember.tensor(i)).max.item() == 5
    assert ember.combinations(ember.tensor([1, 2, 3]), 2, True).shape == (6, 2)
    compare(ember.combinations, torch.combinations, (i[0],), {"with_replacement": True},
            dtypes=("int64",))
    e = ember.unravel_index(ember.tensor([0, 7, 11, -1]), (3, 4))
    t = torch.unravel_index(torch.tensor([0, 7, 11, -1]), (3, 4))
    assert_same(e, t, 0, 0)
    assert ember.is_signed(ember.ones(1)) and not ember.is_signed(ember.ones(1, dtype=ember.uint8))


def test_put_and_fill_diagonal():
    idx = np.array([[0, 5], [-1, 3]])
    src = R.standard_normal((2, 2))
    for acc in (False, True):
        compare(lambda a, s: ember.put(a, ember.tensor(idx), s, acc),
                lambda a, s: torch.put(a, torch.tensor(idx), s, acc), (M, src), grad=(0, 1))
    for shape, wrap in (((5, 3), False), ((7, 3), True), ((3, 5), True), ((3, 3, 3), False)):
        e, t = ember.zeros(shape), torch.zeros(shape)
        e.fill_diagonal_(2.0, wrap)
        t.fill_diagonal_(2.0, wrap)
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    e, t = ember.tensor(M), torch.tensor(M)
    e.put_(ember.tensor([1, 2]), ember.tensor([9.0, 8.0], dtype=ember.float64))
    t.put_(torch.tensor([1, 2]), torch.tensor([9.0, 8.0], dtype=torch.float64))
    np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("name,args", [("addr_", (ember.ones(4), ember.ones(4))),
                                       ("heaviside_", (ember.full((4, 4), 0.5).double(),)),
                                       ("float_power_", (2,)), ("ldexp_", (ember.ones(4),)),
                                       ("renorm_", (2, 0, 1.0))])
def test_inplace_variants(name, args):
    e = ember.tensor(M)
    t = torch.tensor(M)
    targs = [torch.tensor(a.numpy()) if isinstance(a, ember.Tensor) else a for a in args]
    r = getattr(e, name)(*args)
    getattr(t, name)(*targs)
    assert r is e
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12)


def test_errors():
    m = ember.tensor(M)
    with pytest.raises(RuntimeError, match="must have length 3"):
        ember.linalg.cross(m, m)
    with pytest.raises(RuntimeError, match="Expected 1-D argument vec1"):
        ember.addr(m, m, m[0])
    with pytest.raises(RuntimeError, match="square matrices"):
        ember.matrix_power(m[:3], 2)
    with pytest.raises(RuntimeError, match="at least 2 tensors"):
        ember.linalg.multi_dot([m])
    with pytest.raises(RuntimeError, match="2 or fewer dimensions"):
        ember.block_diag(ember.ones(1, 1, 1))
    with pytest.raises(RuntimeError, match="empty dimension"):
        ember.aminmax(ember.ones(0))
    with pytest.raises(RuntimeError, match="must be greater than 1"):
        ember.linalg.vander(ember.ones(3), N=1)
    with pytest.raises(TypeError, match="integer dtype"):
        ember.unravel_index(ember.ones(2), (2,))
    with pytest.raises(RuntimeError, match="all dimensions of input must be of equal length"):
        ember.zeros(2, 3, 2).fill_diagonal_(1.0)
    with pytest.raises(RuntimeError, match="same dtype, but got self.dtype = Double"):
        m.put_(ember.tensor([0]), ember.ones(1))
    with pytest.raises(RuntimeError, match="float_power_"):
        ember.ones(2).float_power_(2)

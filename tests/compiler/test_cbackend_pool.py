"""``max_pool`` and its backward ``pool_scatter`` as ``PoolKernel``s (``c/lower/pool.py``):
no externs, bit-identical to eager ember in every dtype, equal to PyTorch."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.config import config

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

KWS = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
       dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1))]


@pytest.fixture(autouse=True)
def _two_threads():
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    yield
    ember.set_num_threads(before)


def _compiled(f, *args):
    got = ember.compile(f, backend="c", dynamic=False)(*args)
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0, cg.stats.fallbacks
    return got


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16,
                                   ember.int64, ember.int32, ember.uint8], ids=lambda d: d.name)
@pytest.mark.parametrize("kw", KWS, ids=["k2", "ceil_pad", "dilation"])
def test_max_pool2d_forward(kw, dtype):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((2, 3, 7, 9)) * 10
    x = ember.tensor(xs).to(dtype)

    def f(x):
        return ember.nn.functional.max_pool2d(x, return_indices=True, **kw)

    got = _compiled(f, x)
    want = f(x)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    if dtype in (ember.float32, ember.float64, ember.int64):
        tv, ti = torch.nn.functional.max_pool2d(torch.tensor(x.numpy()), return_indices=True,
                                                **kw)
        np.testing.assert_array_equal(got[0].numpy(), tv.numpy())
        np.testing.assert_array_equal(got[1].numpy(), ti.numpy())


def test_max_pool_nan_and_ties_as_torch():
    x = np.zeros((1, 2, 4, 4), np.float32)
    x[0, 0, 1:3, 1:3] = 1
    x[0, 1, 0, 1] = x[0, 1, 1, 2] = np.nan

    def f(x):
        return ember.nn.functional.max_pool2d(x, 2, stride=1, padding=1, return_indices=True)

    got = _compiled(f, ember.tensor(x))
    tv, ti = torch.nn.functional.max_pool2d(torch.tensor(x), 2, stride=1, padding=1,
                                            return_indices=True)
    np.testing.assert_array_equal(got[0].numpy(), tv.numpy())
    np.testing.assert_array_equal(got[1].numpy(), ti.numpy())


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("kw", KWS, ids=["k2", "ceil_pad", "dilation"])
def test_max_pool2d_backward(kw, dtype):
    rng = np.random.default_rng(1)
    x = ember.tensor(rng.standard_normal((2, 3, 7, 9))).to(dtype).requires_grad_()

    def f(x):
        y = ember.nn.functional.max_pool2d(x, **kw)
        (y * y).sum().backward()
        return x.grad

    want = f(x).float().numpy().copy()
    x.grad = None
    got = _compiled(f, x)
    np.testing.assert_array_equal(got.float().numpy(), want)   # sums as eager
    tx = torch.tensor(x.detach().float().numpy(), requires_grad=True)
    ty = torch.nn.functional.max_pool2d(tx, **kw)
    (ty * ty).sum().backward()
    tol = {"float16": 2e-3, "bfloat16": 2e-2}.get(dtype.name, 1e-5)
    np.testing.assert_allclose(got.float().numpy(), tx.grad.numpy(), rtol=tol, atol=tol)


def test_max_pool1d_threaded():
    rng = np.random.default_rng(2)
    x = ember.tensor(rng.standard_normal((8, 16, 300)).astype(np.float32))

    def f(x):
        return ember.nn.functional.max_pool1d(x, 3, 2, 1, ceil_mode=True)

    np.testing.assert_array_equal(_compiled(f, x).numpy(), f(x).numpy())

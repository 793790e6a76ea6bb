"""Large inputs take the threaded / BLAS paths (ember/ops/_parallel.py); they must give what
PyTorch gives, like the small inputs the OpInfo table uses."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import _parallel

torch = pytest.importorskip("torch")

N = _parallel.MIN_ELEMENTS * 2


@pytest.mark.parametrize("shape", [(N,), (512, N // 512), (2, N // 2), (N // 64, 4, 16)])
@pytest.mark.parametrize("name", ["add", "mul", "exp", "tanh", "eq", "maximum"])
def test_large_pointwise_matches_torch(shape, name):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    fn = getattr(torch, name)
    nargs = 1 if name in ("exp", "tanh") else 2
    e = getattr(ember, name)(*[ember.tensor(x) for x in (a, b)[:nargs]])
    t = fn(*[torch.tensor(x) for x in (a, b)[:nargs]])
    assert e.dtype.name == str(t.dtype)[6:] and tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1.3e-6, atol=1e-5)


def test_large_pointwise_noncontiguous_and_scalar():
    a = np.random.default_rng(1).standard_normal((3, N)).astype(np.float32)[:, ::2]
    e, t = ember.tensor(a) * 2.5 + 1, torch.tensor(a) * 2.5 + 1
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,dim", [((1024, N // 1024), None), ((1024, N // 1024), 1),
                                       ((1024, N // 1024), 0), ((64, 16, N // 1024), (1, 2)),
                                       ((64, 16, N // 1024), (0, 1)), ((N,), 0),
                                       ((64, 16, N // 1024), 1)])
def test_large_sum_matches_torch(dtype, shape, dim):
    a = np.random.default_rng(2).standard_normal(shape).astype(dtype)
    e = ember.tensor(a).sum(dim) if dim is not None else ember.tensor(a).sum()
    t = torch.tensor(a).sum(dim) if dim is not None else torch.tensor(a).sum()
    assert tuple(e.shape) == tuple(t.shape)
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=tol, atol=tol * 10)
    k = ember.tensor(a).sum(dim if dim is not None else (0,), keepdim=True)
    assert tuple(k.shape) == tuple(torch.tensor(a).sum(dim if dim is not None else (0,),
                                                       keepdim=True).shape)


def test_set_num_threads_round_trip():
    n = ember.get_num_threads()
    ember.set_num_threads(1)
    try:
        assert ember.get_num_threads() == 1
        a = np.arange(N, dtype=np.float32)
        assert (ember.tensor(a) + 1).numpy()[-1] == N
    finally:
        ember.set_num_threads(n)


@pytest.mark.parametrize("shape,dim", [((1024, N // 1024), 1), ((1024, N // 1024), 0),
                                       ((16, 64, N // 1024), 1), ((16, 64, N // 1024), -1)])
def test_large_softmax_matches_torch(shape, dim):
    a = np.random.default_rng(3).standard_normal(shape).astype(np.float32) * 4
    e, t = ember.softmax(ember.tensor(a), dim), torch.softmax(torch.tensor(a), dim)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["amax", "amin", "mean"])
@pytest.mark.parametrize("shape,dim", [((1024, N // 1024), 1), ((1024, N // 1024), 0),
                                       ((1024, N // 1024), (0, 1)),
                                       ((16, 64, N // 1024), (1, 2))])
def test_large_reductions_match_torch(name, shape, dim):
    a = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    e = getattr(ember.tensor(a), name)(dim)
    t = getattr(torch.tensor(a), name)(dim)
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)


def test_threaded_kernels_work_in_a_forked_child():
    import multiprocessing as mp
    a = np.arange(N, dtype=np.float32)
    (ember.tensor(a) + 1).sum()  # start the pool in the parent
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_sum, args=(q,))
    p.start()
    p.join(60)
    assert p.exitcode == 0, "forked child hung or failed"
    assert q.get(timeout=5) == float(N)


def _child_sum(q):
    q.put(float(ember.ones(N).sum()))

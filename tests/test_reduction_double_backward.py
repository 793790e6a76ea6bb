"""Second derivatives of reductions, scans, softmax and sorting against PyTorch: the vjps are
written with ember ops, so differentiating them again must give PyTorch's Hessian-vector
products."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _a(*shape, low=-2.0, high=2.0):
    return np.random.default_rng(len(shape) * 7 + shape[-1]).uniform(low, high, shape)


CASES = {
    "softmax": (lambda t, x: t.softmax(x, 1), _a(3, 4)),
    "log_softmax": (lambda t, x: t.log_softmax(x, 0), _a(3, 4)),
    "logsumexp": (lambda t, x: t.logsumexp(x, 1), _a(3, 4)),
    "var": (lambda t, x: x.var(1), _a(3, 4)),
    "std": (lambda t, x: x.std(0), _a(3, 4)),
    "norm2": (lambda t, x: x.norm(dim=1), _a(3, 4)),
    "norm3": (lambda t, x: x.norm(p=3), _a(3, 4, low=0.5)),
    "norm1.5": (lambda t, x: x.norm(p=1.5, dim=0), _a(3, 4, low=0.5)),
    "norm0.5": (lambda t, x: x.norm(p=0.5), _a(3, 4, low=0.5)),
    "norm_inf": (lambda t, x: x.norm(p=float("inf"), dim=1), _a(3, 4)),
    "cumsum": (lambda t, x: x.cumsum(1), _a(3, 4)),
    "cumprod": (lambda t, x: x.cumprod(1), _a(3, 4, low=0.5)),
    "prod": (lambda t, x: x.prod(1), _a(3, 4, low=0.5)),
    "mean": (lambda t, x: (x * x).mean(1), _a(3, 4)),
    "amax": (lambda t, x: (x * x).amax(1), _a(3, 4)),
    "max_dim": (lambda t, x: (x * x).max(1).values, _a(3, 4)),
    "sort": (lambda t, x: (x * x).sort(1).values, _a(3, 4)),
    "topk": (lambda t, x: (x * x).topk(2).values, _a(3, 4)),
    "median_dim": (lambda t, x: (x * x).median(1).values, _a(3, 5)),
    "median": (lambda t, x: (x * x).median(), _a(3, 5)),
    "kthvalue": (lambda t, x: (x * x).kthvalue(2, 0).values, _a(3, 5)),
    "cummax": (lambda t, x: (x * x).cummax(1).values, _a(3, 5)),
    "mode": (lambda t, x: (x * x).mode(1).values, _a(3, 5)),
}


def _second_order(lib, f, a):
    x = lib.tensor(a, dtype=lib.float64, requires_grad=True)
    y = f(lib, x)
    go = lib.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)), dtype=lib.float64,
                    requires_grad=True)
    (g,) = lib.autograd.grad(y, x, go, create_graph=True)
    w = lib.tensor(np.cos(np.arange(a.size)).reshape(a.shape), dtype=lib.float64)
    gx, ggo = lib.autograd.grad((g * w).sum(), [x, go], allow_unused=True)
    return [None if v is None else np.asarray(v.detach().numpy(force=True)) for v in (gx, ggo)]


@pytest.mark.parametrize("name", list(CASES))
def test_double_backward_matches_torch(name):
    f, a = CASES[name]
    for e, t in zip(_second_order(ember, f, a), _second_order(torch, f, a)):
        if e is None or t is None:
            assert (e is None or not e.any()) and (t is None or not t.any()), name
        else:
            np.testing.assert_allclose(e, t, rtol=1e-6, atol=1e-8, err_msg=name)

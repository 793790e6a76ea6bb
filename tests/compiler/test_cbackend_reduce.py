"""Reductions and row-wise kernels in the C backend (``backend="c"``) against eager.

Sums accumulate in double lanes in C while eager sums float32 pairwise in float32, so sums
compare within the conditioning bound ``(log2(n) + 2) * eps * sum(|x|)`` (eager's own
pairwise error is below ``log2(n) * eps * sum(|x|)``; the C result is within ``eps`` of the exact
sum); max/min/any/all and integer sums compare exactly.  Fusion is checked on
``cbackend.last_compiled().stats``.  Golden files pin the generated C of a sum and a layer_norm
graph (``EMBER_UPDATE_GOLDEN=1`` rewrites them).
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.codegen.unit import generate
from ember.config import config
from tests.compiler.helpers import run_c

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

GOLDEN = Path(__file__).parent / "golden"
F = ember.nn.functional


def _t(x):
    return x if isinstance(x, (tuple, list)) else (x,)


def assert_meta(got, want):
    for g, w in zip(_t(got), _t(want)):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        if g.numel() > 1:
            assert g.stride() == w.stride()


def assert_sum_close(got, want, absx, n):
    """|got - want| <= (log2(n) + 2) * eps * sum(|x|) (see the module docstring)."""
    a, b = got.numpy().astype(np.float64), want.numpy().astype(np.float64)
    eps = np.finfo(got.numpy().dtype).eps
    tol = (math.log2(max(n, 2)) + 2) * eps * np.asarray(absx, np.float64) + 1e-300
    assert np.array_equal(np.isnan(a), np.isnan(b))
    fin = ~np.isnan(a)
    err = np.abs(a - b)[fin]
    assert np.all(err <= np.broadcast_to(tol, a.shape)[fin]), f"max error {err.max()}"


def randn(*shape, dtype=ember.float32):
    return ember.randn(*shape, dtype=dtype)


# ----------------------------------------------------------------------------- sum-like
SHAPES = [((7, 53), (1,)), ((7, 53), (0,)), ((3, 4, 37), (0, 2)), ((3, 4, 37), (0, 1, 2)),
          ((2, 3, 5), (1,)), ((300,), (0,))]


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("shape,dims", SHAPES)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", ["sum", "mean", "nansum"])
def test_sum_mean(op, shape, dims, keepdim, dtype):
    def f(x):
        return getattr(x, op)(dims, keepdim=keepdim)

    x = randn(*shape, dtype=dtype)
    if op == "nansum":
        x[(0,) * len(shape)] = float("nan")
    got, want, cg = run_c(f, x)
    assert_meta(got, want)
    assert cg.stats.externs == 0 and cg.stats.kernels == 1
    n = math.prod(shape[d] for d in dims)
    a = np.abs(np.nan_to_num(x.numpy())).sum(dims, keepdims=keepdim) / (n if op == "mean" else 1)
    assert_sum_close(got, want, a, n)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("shape,dims", SHAPES[:4])
def test_amax_amin_exact_and_nan(shape, dims, dtype):
    def f(x):
        return x.amax(dims), x.amin(dims, keepdim=True)

    x = randn(*shape, dtype=dtype)
    x[(1,) * len(shape)] = float("nan")
    got, want, cg = run_c(f, x)
    assert_meta(got, want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert cg.stats.externs == 0 and cg.stats.kernels == 1  # one nest, two accumulators


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("shape,dims", SHAPES[:4])
def test_var_std(shape, dims, correction, dtype):
    def f(x):
        return x.var(dims, correction=correction), x.std(dims, correction=correction,
                                                          keepdim=True)

    x = randn(*shape, dtype=dtype) * 3 + 1
    got, want, cg = run_c(f, x)
    assert_meta(got, want)
    assert cg.stats.externs == 0 and cg.stats.kernels == 1
    n = math.prod(shape[d] for d in dims)
    eps = np.finfo(x.numpy().dtype).eps
    # each squared deviation is off by ~eps * |x - mean| * |mean error|: bound by the sum of
    # x^2 (the conditioning of the two-pass formula)
    x2 = (x.numpy().astype(np.float64) ** 2).sum(dims) / max(n - correction, 1)
    for g, w, scale in ((got[0], want[0], x2), (got[1], want[1], np.sqrt(x2))):
        err = np.abs(g.numpy().astype(np.float64).reshape(-1) - w.numpy().reshape(-1))
        assert np.all(err <= 4 * (math.log2(n) + 2) * eps * scale.reshape(-1))


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_logsumexp_and_prod(dtype):
    def f(x):
        return x.logsumexp(-1), x.logsumexp(0, keepdim=True), x.prod(1)

    x = randn(6, 41, dtype=dtype) * 0.3
    x[2, 3] = float("inf")
    x[3] = float("-inf")
    got, want, cg = run_c(f, x)
    assert_meta(got, want)
    assert cg.stats.externs == 0
    eps = np.finfo(x.numpy().dtype).eps
    for g, w in zip(got[:2], want[:2]):
        a, b = g.numpy(), w.numpy()
        assert np.array_equal(np.isinf(a), np.isinf(b)) and np.array_equal(np.isnan(a),
                                                                            np.isnan(b))
        fin = np.isfinite(b)
        assert np.all(np.abs(a[fin] - b[fin]) <= 16 * eps * (1 + np.abs(b[fin])))
    # products: every factor rounds once in eager (n * eps relative), once in double in C
    a, b = got[2].numpy(), want[2].numpy()
    np.testing.assert_array_equal(a[2:4], b[2:4])  # the rows holding inf
    fin = np.r_[0:2, 4:6]
    assert np.all(np.abs(a[fin] - b[fin]) <= 41 * eps * np.abs(b[fin]))


def test_integer_and_bool_reductions_are_exact():
    def f(x, m):
        return (x.sum(-1), x.sum(0, dtype=ember.int64), x.amax(1), x.amin(0), x.prod(1),
                m.any(-1), m.all(0), m.sum(1), (x > 0).any())

    x = ember.randint(-9, 9, (5, 33))
    m = x > 2
    got, want, cg = run_c(f, x, m)
    assert_meta(got, want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert cg.stats.externs == 0


def test_empty_reductions():
    def f(x):
        return x.sum(1), x.prod(1), x.mean(1), x.logsumexp(1)

    x = randn(3, 0)
    got, want, cg = run_c(f, x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())

    def g(x):
        return x.amax(1)

    with pytest.raises(Exception) as want_err:
        g(x)
    with pytest.raises(type(want_err.value)):
        ember.compile(g, backend="c")(x)


# ----------------------------------------------------------------------------- layouts
def test_non_contiguous_and_broadcast_inputs():
    def f(x, b):
        return x.t().sum(-1), (x.t() * b).amax(0), b.expand(5, 9).sum(0), x.permute(1, 0).mean()

    x, b = randn(9, 5), randn(5, 1)
    got, want, cg = run_c(f, x, b)
    assert_meta(got, want)
    assert cg.stats.externs == 0
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)


def test_permuted_input_keeps_eager_output_order():
    def f(x):
        return x.permute(2, 0, 1).sum(1), x.permute(2, 0, 1).amax(1, keepdim=True)

    got, want, cg = run_c(f, randn(2, 3, 4))
    assert_meta(got, want)
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-6)


# ----------------------------------------------------------------------------- fusion
def test_producers_fuse_into_the_reduction():
    def f(x, y):
        return ((x * y + 1.0).exp() * 0.5).sum(-1, keepdim=True)

    x, y = randn(16, 100), randn(100)
    got, want, cg = run_c(f, x, y)
    assert cg.stats.kernels == 1 and cg.stats.externs == 0
    (k,) = cg.program.kernels()
    assert type(k).__name__ == "ReduceKernel" and k.ops == ["mul", "add", "exp", "mul", "sum"]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    cg.program.verify()


def test_horizontal_fusion_same_input_same_dims():
    def f(x):
        h = x * 2.0
        return h.sum(-1), h.amax(-1), h.var(-1), x.mean(0)

    x = randn(12, 77)
    got, want, cg = run_c(f, x)
    assert_meta(got, want)
    kinds = [(type(k).__name__, k.ops) for k in cg.program.kernels()]
    # sum, amax, var over dim 1 of x * 2 share one nest; the mean over dim 0 is its own
    assert kinds == [("ReduceKernel", ["mul", "sum", "amax", "var"]),
                     ("ReduceKernel", ["mean"])]
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    h = 2.0 * np.abs(x.numpy())
    assert_sum_close(got[0], want[0], h.sum(-1), 77)
    assert_sum_close(got[3], want[3], np.abs(x.numpy()).sum(0) / 12, 12)
    # a sum of squares: relative error within (log2(n) + 4) eps of the value
    np.testing.assert_allclose(got[2].numpy(), want[2].numpy(), rtol=11 * 1.2e-7)


def test_reduced_value_feeds_later_pointwise_consumers():
    def f(x):
        return (x - x.mean(-1, keepdim=True)) * 2.0

    x = randn(8, 30)
    got, want, cg = run_c(f, x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
    assert cg.stats.externs == 0


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_is_one_kernel(op):
    got, want, cg = run_c(lambda x: getattr(ember, op)(x, -1), randn(64, 1024))
    assert cg.stats.kernels == 1 and cg.stats.externs == 0
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- row ops
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,norm", [((6, 50), (50,)), ((2, 3, 4, 17), (4, 17)),
                                        ((5, 1024), (1024,))])
def test_layer_norm_and_rms_norm_one_kernel(shape, norm, affine, dtype):
    w = randn(*norm, dtype=dtype) if affine else None
    b = randn(*norm, dtype=dtype) if affine else None

    def f(x, w, b):
        return F.layer_norm(x, norm, w, b), F.rms_norm(x, norm, w)

    x = randn(*shape, dtype=dtype) * 2 + 0.5
    for fn in (lambda x, w, b: f(x, w, b)[0], lambda x, w, b: f(x, w, b)[1]):
        ember.compiler.reset()
        got, want, cg = run_c(fn, x, w, b)
        assert_meta(got, want)
        assert cg.stats.kernels == 1 and cg.stats.externs == 0
        tol = 1e-5 if dtype == ember.float32 else 1e-12
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)


def test_layer_norm_with_fused_residual_and_statistics():
    def f(x, r, w, b):
        y, mean, rstd = ember.ops.registry.bind(
            ember.ops.registry.REGISTRY["layer_norm"], x + r, w, b, dims=(1,), eps=1e-5)
        return y, mean, rstd

    x, r, w, b = randn(10, 64), randn(10, 64), randn(64), randn(64)
    got, want, cg = run_c(f, x, r, w, b)
    assert_meta(got, want)
    assert cg.stats.kernels == 1 and cg.stats.externs == 0
    (k,) = cg.program.kernels()
    assert k.ops == ["add", "layer_norm"]
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w_.numpy(), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- dynamic
def test_dynamic_sizes_reuse_one_library():
    def f(x, w, b):
        return x.sum(-1), x.amax(0), F.layer_norm(x, (24,), w, b), x.var(1, keepdim=True)

    cf = ember.compile(f, backend="c")  # automatic dynamic: the row count is lifted
    builds = []
    for rows in (4, 9, 17, 33):
        x, w, b = randn(rows, 24), randn(24), randn(24)
        got, want = cf(x, w, b), f(x, w, b)
        for g, w_ in zip(got, want):
            assert_meta(g, w_)
            np.testing.assert_allclose(g.numpy(), w_.numpy(), rtol=1e-5, atol=1e-5)
        builds.append(cbackend.BUILDS[0])
    assert builds[-1] == builds[1]  # the second call's size-generic library serves the rest
    cg = cbackend.last_compiled()
    assert "s0" in cg.source and cg.stats.externs == 0 and cg.stats.kernels == 3


def test_dynamic_true_lowers_reductions():
    """dims (and a norm's ord) are structure, never lifted (as PyTorch specializes them), so
    dynamic=True graphs lower their reductions size-generically; eps and correction are read
    at run time."""
    def f(x, w, b):
        return (x.sum(-1), x.amax(0), x.argmax(1), x.max(0), x.cumsum(1),
                ember.linalg.vector_norm(x, 2, -1), x.var(1, correction=2),
                F.layer_norm(x, (24,), w, b, eps=1e-3), F.rms_norm(x, (24,), w, eps=1e-4))

    cf = ember.compile(f, backend="c", dynamic=True)
    w, b = randn(24), randn(24)
    for rows in (4, 9, 17):
        x = randn(rows, 24)
        for g, w_ in zip(cf(x, w, b), f(x, w, b)):
            for gg, ww in zip(g if isinstance(g, tuple) else (g,),
                              w_ if isinstance(w_, tuple) else (w_,)):
                assert gg.dtype == ww.dtype and tuple(gg.shape) == tuple(ww.shape)
                np.testing.assert_allclose(gg.numpy(), ww.numpy(), rtol=1e-5, atol=1e-5)
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0, cg.stats.fallbacks
    assert "s0" in cg.source and cg.graph.num_scalars >= 3  # rows, correction, eps lifted


# ----------------------------------------------------------------------------- backward
@pytest.mark.parametrize("inside", [True, False])
def test_backward_of_reductions_and_norms(inside):
    def loss_fn(x, w, b):
        h = F.layer_norm(x, (32,), w, b)
        return (h.softmax(-1) * x).sum() + x.var(0).mean() + h.amax(-1).sum()

    def step(x, w, b):
        loss = loss_fn(x, w, b)
        if inside:
            loss.backward()
        return loss

    def grads(fn):
        x = ember.tensor(x0, requires_grad=True)
        w = ember.tensor(w0, requires_grad=True)
        b = ember.tensor(b0, requires_grad=True)
        loss = fn(x, w, b)
        if not inside:
            loss.backward()
        return [loss.detach().numpy()] + [t.grad.numpy() for t in (x, w, b)]

    rng = np.random.default_rng(0)
    x0, w0, b0 = (rng.standard_normal(s, dtype=np.float32) for s in ((8, 32), (32,), (32,)))
    got = grads(ember.compile(step, backend="c"))
    want = grads(step)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)


# ----------------------------------------------------------------------------- golden
def _golden(name, fn, *args):
    ember.compile(fn, backend="c")(*args)
    cg = cbackend.last_compiled()
    src = generate(cbackend.lower_and_schedule(cg.graph), prelude=False)
    path = GOLDEN / name
    if os.environ.get("EMBER_UPDATE_GOLDEN"):
        path.write_text(src)
    assert src == path.read_text(), "generated C changed; EMBER_UPDATE_GOLDEN=1 rewrites it"


def test_golden_sum_reduction():
    _golden("sum_mul_rows.c", lambda x, y: (x * y).sum(-1), randn(4, 40), randn(40))


def test_golden_layer_norm():
    _golden("layer_norm_rows.c", lambda x, w, b: F.layer_norm(x, (40,), w, b),
            randn(4, 40), randn(40), randn(40))


# ----------------------------------------------------------------------------- backward graphs
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_backward_graph_is_one_kernel(op):
    def f(x):
        return getattr(ember, op)(x, -1)

    x0 = np.random.default_rng(1).standard_normal((16, 96), dtype=np.float32)
    g0 = np.random.default_rng(2).standard_normal((16, 96), dtype=np.float32)
    grads = []
    for fn in (ember.compile(f, backend="c"), f):
        x = ember.tensor(x0, requires_grad=True)
        fn(x).backward(ember.tensor(g0))
        grads.append(x.grad.numpy())
    cg = cbackend.last_compiled()  # the compiled backward graph (only the vjp's ops)
    assert any(n.op.name == "sum" for n in cg.graph.nodes)
    assert cg.stats.kernels == 1 and cg.stats.externs == 0
    (k,) = cg.program.kernels()
    assert len(k.passes) == 2  # the row sum, then g * y - y * sum (or g - exp(y) * sum)
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)


def test_recomputed_producer_needed_by_a_view_is_materialized():
    def f(x, y):
        h = x * y
        return h.sum(-1), h.t() + 1.0

    x, y = randn(5, 7), randn(5, 7)
    got, want, cg = run_c(f, x, y)
    assert_meta(got, want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)
    assert cg.stats.externs == 0
    cg.program.verify()


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("shape,norm,affine", [((6, 50), (50,), True), ((2, 3, 40), (40,), False),
                                               ((3, 4, 5), (4, 5), True)])
def test_layer_norm_backward_graph_is_one_kernel(shape, norm, affine, dtype):
    rng = np.random.default_rng(0)
    npdt = np.float32 if dtype == ember.float32 else np.float64
    x0, g0 = (rng.standard_normal(shape).astype(npdt) for _ in range(2))
    w0, b0 = (rng.standard_normal(norm).astype(npdt) for _ in range(2))

    def f(x, w, b):
        return F.layer_norm(x, norm, w, b)

    grads = []
    for fn in (ember.compile(f, backend="c"), f):
        x = ember.tensor(x0, requires_grad=True)
        w = ember.tensor(w0, requires_grad=affine)
        b = ember.tensor(b0, requires_grad=affine)
        fn(x, w if affine else None, b if affine else None).backward(ember.tensor(g0))
        grads.append([t.grad.numpy() for t in ((x, w, b) if affine else (x,))])
    cg = cbackend.last_compiled()
    assert [n.op.name for n in cg.graph.nodes] == ["layer_norm_backward"]
    assert cg.stats.kernels == 1 and cg.stats.externs == 0
    tol = 1e-5 if dtype == ember.float32 else 1e-12
    for g, w in zip(*grads):
        # column sums over rows: eager sums float32 per row block, C in double
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * shape[0])


# ----------------------------------------------------------------------------- cross_entropy
@pytest.mark.parametrize("shape", [(6, 50), (50,), (32, 1000)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing,ignore", [(0.0, -100), (0.1, 2)])
def test_cross_entropy_forward_is_one_kernel(shape, reduction, smoothing, ignore):
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal(shape, dtype=np.float32) * 3)
    t = ember.tensor(rng.integers(0, shape[-1], shape[:-1]).astype(np.int64))
    if len(shape) == 2 and ignore >= 0:
        t[1] = ignore

    def f(x, t):
        return F.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing,
                               ignore_index=ignore)

    got, want, cg = run_c(f, x, t)
    assert_meta(got, want)
    assert cg.stats.kernels == 1 and cg.stats.externs == 0
    # per-row log-sum-exp: a few ulps of the row's scale; sums over rows as for sum()
    lse = np.abs(x.numpy()).max(-1) + np.log(shape[-1])
    scale = np.sum(lse) if reduction != "none" else lse
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0,
                               atol=(np.log2(x.numel()) + 8) * 1.2e-7 * np.max(scale))


def test_cross_entropy_bad_target_raises_eagers_error():
    def f(x, t):
        return F.cross_entropy(x, t)

    x, t = randn(4, 5), ember.tensor(np.array([0, 7, 1, 2]))
    with pytest.raises(Exception) as want:
        f(x, t)
    with pytest.raises(type(want.value), match="out of bounds"):
        ember.compile(f, backend="c")(x, t)
    good = ember.tensor(np.array([0, 4, 1, 2]))
    np.testing.assert_allclose(ember.compile(f, backend="c")(x, good).numpy(),
                               f(x, good).numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(6, 50), (50,), (32, 1000)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing,ignore", [(0.0, -100), (0.1, 2)])
def test_cross_entropy_backward_graph_is_one_kernel(shape, reduction, smoothing, ignore, dtype):
    rng = np.random.default_rng(0)
    x0 = (rng.standard_normal(shape) * 3).astype(dtype)
    t = ember.tensor(rng.integers(0, shape[-1], shape[:-1]).astype(np.int64))
    if len(shape) == 2 and ignore >= 0:
        t[1] = ignore

    def f(x, t):
        return F.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing,
                               ignore_index=ignore)

    grads = []
    for fn in (ember.compile(f, backend="c"), f):
        x = ember.tensor(x0, requires_grad=True)
        out = fn(x, t)
        out.backward(ember.ones_like(out) * 0.7)
        grads.append(x.grad.numpy())
    cg = cbackend.last_compiled()
    assert [n.op.name for n in cg.graph.nodes][-1] == "cross_entropy_backward"
    assert cg.stats.kernels == 1 and cg.stats.externs == 0
    # softmax probabilities to a few ulps (C's exp and eager's differ in the last bit)
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(grads[0], grads[1], rtol=0, atol=16 * eps)


# ----------------------------------------------------------------------------- the OpInfo table
_TABLE = {"sum", "sum_dtype", "mean", "mean_dtype", "nansum", "nanmean", "prod", "prod_dtype",
          "amax", "amin", "amax_ties", "max_full", "min_full", "var", "std", "std_constant",
          "var_mean", "std_mean", "logsumexp", "all", "any", "norm"}


def _table_cases():
    from tests.opinfo import ops_reduction
    return [(op, d) for op in ops_reduction.OPINFOS if op.name in _TABLE for d in op.dtypes
            if d in ("float32", "float64", "int64", "bool") and d not in op.xfail]


@pytest.mark.parametrize("op,dtype", _table_cases(),
                         ids=[f"{o.name}-{d}" for o, d in _table_cases()])
def test_reduction_table_equals_eager(op, dtype):
    """Every sample of the reduction OpInfos: values within 1e-5 (float32) / 1e-12 (float64)
    relative (double accumulation vs eager's float sums), integers and flags exact, dtypes,
    shapes and strides equal."""
    from tests.opinfo.core import to_ember
    checked = 0
    for sample in op.samples(dtype, op.rng(dtype)):
        try:
            want = op.fn(ember, *[to_ember(a) for a in sample.args], **sample.kwargs)
        except Exception:  # noqa: BLE001 - error samples are another test's business
            continue
        checked += 1
        ember.compiler.reset()

        def fn(*args, _op=op, _s=sample):
            return _op.fn(ember, *args, **_s.kwargs)

        got = ember.compile(fn, backend="c")(*[to_ember(a) for a in sample.args])
        assert len(_t(got)) == len(_t(want)), repr(sample)
        for g, w in zip(_t(got), _t(want)):
            if not isinstance(w, ember.Tensor):
                assert g == w, repr(sample)
                continue
            assert_meta(g, w)
            a, b = g.numpy(), w.numpy()
            if not w.dtype.is_floating_point:
                np.testing.assert_array_equal(a, b)
                continue
            assert np.array_equal(np.isnan(a), np.isnan(b)), repr(sample)
            rel = 1e-5 if a.dtype == np.float32 else 1e-12
            fin = ~np.isnan(b)
            assert np.all((np.abs(a[fin] - b[fin]) <= rel * (1 + np.abs(b[fin])))
                          | (a[fin] == b[fin])), repr(sample)
    assert checked, f"{op.name}[{dtype}]: every sample raised eagerly, nothing was compared"


def test_outer_reductions_run_the_reduced_loop_outside():
    def f(x):
        return x.sum(0), x.amax(0), x.t().mean(1)

    x = randn(33, 40)
    x[3, 5] = float("nan")
    got, want, cg = run_c(f, x)
    assert_meta(got, want)
    ks = cg.program.kernels()
    assert all(k.interchanged() for k in ks) and "reduced loops outside" in str(ks[0])
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
    _, _, cg = run_c(lambda x: x.sum(1), x)
    assert not cg.program.kernels()[0].interchanged()


def test_reduced_space_consumers_become_finals():
    def f(x, w):
        return F.rms_norm(x, (64,), w)

    x0 = np.random.default_rng(3).standard_normal((8, 64), dtype=np.float32)
    w0 = np.random.default_rng(4).standard_normal(64, dtype=np.float32)
    g0 = np.random.default_rng(5).standard_normal((8, 64), dtype=np.float32)
    grads = []
    for fn in (ember.compile(f, backend="c"), f):
        x, w = ember.tensor(x0, requires_grad=True), ember.tensor(w0, requires_grad=True)
        fn(x, w).backward(ember.tensor(g0))
        grads.append((x.grad.numpy(), w.grad.numpy()))
    cg = cbackend.last_compiled()
    # rms_norm's vjp is decomposed: the row sum and the per-row factors (sum / n, rstd * ...)
    # share one nest; the full-shape gradient and the weight's column sum follow
    assert cg.stats.kernels <= 3 and cg.stats.externs == 0
    for g, w in zip(*grads):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_reduction_after_an_epilogue_starts_a_new_kernel():
    def f(x):
        s = x.sum(-1, keepdim=True)
        y = x * s - 1.0          # the epilogue pass of the sum's kernel ...
        z = x.t() + 1.0          # ... closed by a group of another shape
        return y, z, x.var(-1), x.amax(-1)

    x = randn(6, 40)
    got, want, cg = run_c(f, x)
    assert_meta(got, want)
    cg.program.verify()
    np.testing.assert_array_equal(got[3].numpy(), want[3].numpy())
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-4)
    ops = [k.ops for k in cg.program.kernels()]
    # the fusion plan lowers var and amax right after the sum (one nest over x, before the
    # epilogue seals it); lowered in graph order, they start a new kernel after the epilogue
    assert ["sum", "var", "amax", "mul", "sub"] in ops
    from ember.compiler.c.decompose import decompose
    from ember.compiler.c.lower import lower
    graph = decompose(cg.source_graph)
    greedy = [k.ops for k in lower(graph, cbackend._HELPERS).kernels()]
    assert ["sum", "mul", "sub"] in greedy and ["var", "amax"] in greedy


# ----------------------------------------------------------------------------- next-row prefetch
def _row_fns(cols):
    return {"softmax": lambda x, w: ember.softmax(x, -1),
            "log_softmax": lambda x, w: ember.log_softmax(x, -1),
            "layer_norm": lambda x, w: F.layer_norm(x, (cols,), w, w),
            "sum": lambda x, w: (x * x).sum(-1)}


def _check_row_result(name, got, want, x, w):
    if name == "sum":
        assert_sum_close(got, want, (x * x).sum(-1).numpy(), x.shape[-1])
    else:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cols", [1040, 20000])
def test_row_kernels_prefetch_the_next_row(cols):
    """Rows of at most 64 KiB prefetch the next row in their last pass (softmax and
    log_softmax: their exp pass, whose helper takes the next row); longer rows are left to the
    hardware.  A prefetch changes no value: the results
    match eager as elsewhere, and each row's bits are the same as when it is computed alone
    (a one-row input never prefetches)."""
    from ember.compiler.c.codegen.prefetch import PREFETCH_ROW_BYTES
    x, w = randn(9, cols), randn(cols)
    for name, fn in _row_fns(cols).items():
        got, want, cg = run_c(fn, x, w)
        assert cg.stats.kernels == 1 and cg.stats.externs == 0, name
        if name in ("softmax", "log_softmax"):   # the exp pass's helper (codegen/row_exp.py)
            fetched = "(const char *)(x + C)" in cg.source
        else:
            fetched = "__builtin_prefetch" in cg.source
        assert fetched == (cols * 4 <= PREFETCH_ROW_BYTES), name
        _check_row_result(name, got, want, x, w)
        for r in (0, 8):
            one = ember.compile(fn, backend="c", dynamic=False)(x[r:r + 1], w)
            assert np.array_equal(one.numpy()[0], got.numpy()[r]), (name, r)


def test_row_prefetch_with_runtime_row_length():
    """Under dynamic=True the row length is a runtime size: the prefetch's guard tests it in
    C (short rows prefetch, long ones do not); results as eager for both."""
    for name in _row_fns(1):
        def fn(x, w, name=name):
            return _row_fns(x.shape[-1])[name](x, w)
        cf = ember.compile(fn, backend="c", dynamic=True)
        for cols in (40, 20000):
            x, w = randn(5, cols), randn(cols)
            _check_row_result(name, cf(x, w), fn(x, w), x, w)
        cg = cbackend.last_compiled()
        assert cg.stats.externs == 0, name
        assert "<= 65536" in cg.source, name

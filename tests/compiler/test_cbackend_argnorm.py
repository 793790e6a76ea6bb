"""Index reductions, vector norms and float16/bfloat16 reductions in the C backend, against eager
ember and torch (the oracle).

* argmax/argmin and max/min along a dim (values, indices): exact; the first occurrence of the
  extreme wins and a NaN wins (the first NaN), as eager and torch;
* vector_norm (ord 2, 1, inf, -inf, 0, a general p; dims, keepdim, dtype): sums accumulate in
  double in C (eager sums pairwise in the dtype), so they compare within the sum's conditioning
  bound; max/min and the ord-0 count are exact;
* float16/bfloat16 reductions and layer_norm/rms_norm rows compute in float32 as eager does and
  round once at the store: within one ulp of the dtype of eager (both round a float32-or-better
  value once).

Each test also checks the backend's counters: the graph is C kernels only (no extern), so no
fallback is left for these ops (``stats.fallbacks``).
"""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

import ember
from ember.config import config
from tests.compiler.helpers import run_c

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

F = ember.nn.functional


def _t(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _np(t):
    a = t.detach().numpy()
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def _torch(x):
    torch = pytest.importorskip("torch")
    a = x.detach().numpy()
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def assert_exact(got, want):
    for g, w in zip(_t(got), _t(want)):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        np.testing.assert_array_equal(_np(g), _np(w))


def assert_no_externs(cg, kernels=None):
    assert cg.stats.externs == 0 and cg.stats.fallbacks == [], cg.stats.fallbacks
    if kernels is not None:
        assert cg.stats.kernels == kernels


ARG_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
              "uint8"]


def _data(shape, dtype, seed=0, nan=True):
    rng = np.random.default_rng(seed)
    if dtype in ("float32", "float64", "float16", "bfloat16"):
        a = rng.integers(-6, 7, shape).astype(np.float64) * 0.5  # ties on purpose
        a = a + rng.standard_normal(shape) * (rng.random(shape) < 0.3)
        if nan and a.ndim == 2:
            a[1, 2] = a[1, 5] = np.nan      # two NaNs in a row: the first wins
            a[2, :] = -np.inf               # a row of -inf: the first index
            a[-1, 0] = np.nan
        x = ember.tensor(a.astype(np.float32)).to(getattr(ember, dtype))
    elif dtype == "bool":
        x = ember.tensor(rng.random(shape) < 0.5)
    else:
        lo, hi = (0, 255) if dtype == "uint8" else (-100, 100)
        x = ember.tensor(rng.integers(lo, hi, shape)).to(getattr(ember, dtype))
        x = ember.where(x > 90, ember.tensor(90).to(x.dtype), x)  # ties at the top
    return x


# ----------------------------------------------------------------------------- arg / (values, idx)
@pytest.mark.parametrize("dtype", ARG_DTYPES)
def test_argmax_argmin_match_eager_and_torch(dtype):
    def f(x):
        return (x.argmax(-1), x.argmin(0), x.argmax(), x.argmin(keepdim=True),
                x.argmax(1, keepdim=True), x.t().argmin(-1))

    x = _data((5, 37), dtype)
    got, want, cg = run_c(f, x)
    assert_exact(got, want)
    assert_no_externs(cg)
    tx = _torch(x)
    ref = (tx.argmax(-1), tx.argmin(0), tx.argmax(), tx.argmin().reshape(1, 1),
           tx.argmax(1, keepdim=True), tx.t().argmin(-1))
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g.numpy(), r.numpy())


@pytest.mark.parametrize("dtype", ARG_DTYPES + ["bool"])
def test_max_min_with_indices(dtype):
    def f(x):
        return x.max(1), x.min(0, keepdim=True), x.max(-2), x.min(-1, keepdim=True)

    x = _data((6, 19), dtype, seed=1)
    got, want, cg = run_c(f, x)
    for g, w in zip(got, want):
        assert_exact(tuple(g), tuple(w))
    assert_no_externs(cg)
    tx = _torch(x)
    for (gv, gi), (tv, ti) in zip(got, (tx.max(1), tx.min(0, keepdim=True), tx.max(-2),
                                        tx.min(-1, keepdim=True))):
        np.testing.assert_array_equal(gi.numpy(), ti.numpy())
        np.testing.assert_array_equal(_np(gv), tv.float().numpy() if dtype == "bfloat16"
                                      else tv.numpy())


@pytest.mark.parametrize("dims_case", ["long_row", "3d_mid", "0d", "noncontig", "broadcast"])
def test_arg_layouts(dims_case):
    rng = np.random.default_rng(3)
    if dims_case == "long_row":  # many lane blocks plus a tail; the extreme in the tail
        a = rng.standard_normal((3, 1000)).astype(np.float32)
        a[0, 997] = 50
        a[1, 16] = a[1, 900] = 60    # a tie across lanes: the first
        a[2, 33] = np.nan
        x = ember.tensor(a)

        def f(x):
            return x.argmax(-1), x.max(1), x.argmin(1)
    elif dims_case == "3d_mid":
        x = ember.tensor(rng.integers(-3, 3, (4, 7, 5)).astype(np.float64))

        def f(x):
            return x.argmax(1), x.max(-2, keepdim=True), x.argmin(), x.min(0)
    elif dims_case == "0d":
        x = ember.tensor(2.5)

        def f(x):
            return x.argmax(), x.argmin(0), x.max(0), x.min(0, keepdim=True)
    elif dims_case == "noncontig":
        x = ember.tensor(rng.integers(-3, 3, (9, 8)).astype(np.float32))

        def f(x):
            y = x[::2, 1::3].t()
            return y.argmax(0), y.max(1), y.argmin()
    else:
        x = ember.tensor(rng.standard_normal((1, 6)).astype(np.float32))

        def f(x):
            y = x.expand(5, 6)
            return y.argmax(0), y.min(0), (y * 2).argmin(1)
    got, want, cg = run_c(f, x)
    for g, w in zip(got, want):
        assert_exact(g, w)
    assert_no_externs(cg)


def test_argmax_reduced_dim_outer_is_interchanged():
    """argmax over dim 0 of a C-order matrix runs the reduced loop outside (one accumulator
    pair per output, contiguous loads) and still picks the first maximum / NaN."""
    a = np.random.default_rng(4).integers(-4, 4, (300, 40)).astype(np.float32)
    a[7, 3] = a[100, 3] = np.nan
    x = ember.tensor(a)

    def f(x):
        return x.argmax(0), x.min(0)

    got, want, cg = run_c(f, x)
    for g, w in zip(got, want):
        assert_exact(g, w)
    assert_no_externs(cg, kernels=1)
    assert cg.program.kernels()[0].interchanged()


def test_arg_empty_dim_stays_eager_and_raises():
    def f(x):
        return x.argmax(1)

    x = ember.randn(3, 0)
    with pytest.raises(Exception) as want:
        f(x)
    with pytest.raises(type(want.value)):
        ember.compile(f, backend="c")(x)


def test_max_with_indices_fuses_with_amax_and_producers():
    def f(x, y):
        z = x * y + 1
        return z.max(-1), z.amax(-1), z.sum(-1)

    x, y = ember.randn(4, 50), ember.randn(4, 50)
    got, want, cg = run_c(f, x, y)
    assert_exact(got[0], want[0])
    assert_exact(got[1], want[1])
    np.testing.assert_allclose(got[2].numpy(), want[2].numpy(), rtol=1e-5, atol=1e-5)
    assert_no_externs(cg, kernels=1)   # one nest: the chain, three accumulators


# ----------------------------------------------------------------------------- vector_norm
ORDS = [2, 1, math.inf, -math.inf, 0, 3.5, 0.5, -1.5]


def _norm_bound(x, o, dims, keepdim, eps):
    """|C - eager| bound: both compute the eager formula; the sums' rounding differs
    (pairwise in the dtype vs double): (log2(n) + 2) * eps * sum of the terms, carried
    through the final root."""
    a = np.abs(x.astype(np.float64))
    n = max(math.prod(x.shape[d] for d in dims) if dims else x.size, 2)
    ax = dims if dims else None
    if o in (math.inf, -math.inf, 0):
        return 0.0
    terms = a ** o
    s = terms.sum(ax, keepdims=keepdim)
    rel = (math.log2(n) + 4) * eps
    with np.errstate(all="ignore"):
        val = s ** (1.0 / o)
    return np.where(np.isfinite(val), np.abs(val) * rel * (1 + 1 / abs(o)) + 1e-300, np.inf)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("o", ORDS)
def test_vector_norm_ords(o, dtype):
    torch = pytest.importorskip("torch")
    def f(x):
        return (ember.linalg.vector_norm(x, o, -1), ember.linalg.vector_norm(x, o, (0, 2),
                                                                             keepdim=True),
                ember.linalg.vector_norm(x, o))

    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 4, 33)).astype(dtype)
    a[0, 0, 0] = 0.0
    x = ember.tensor(a)
    got, want, cg = run_c(f, x)
    assert_no_externs(cg)
    eps = np.finfo(dtype).eps
    tx = torch.from_numpy(a)
    refs = (torch.linalg.vector_norm(tx, o, -1), torch.linalg.vector_norm(tx, o, (0, 2), True),
            torch.linalg.vector_norm(tx, o))
    for g, w, r, (dims, kd) in zip(got, want, refs, (((2,), False), ((0, 2), True), ((), False))):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        bound = _norm_bound(a, o, dims, kd, eps)
        assert np.all(np.abs(g.numpy() - w.numpy()) <= bound), (o, dims)
        assert np.all(np.abs(g.numpy() - r.numpy()) <= bound + 4 * eps * np.abs(r.numpy()))


def test_vector_norm_nan_inf_and_dtype_kwarg():
    def f(x):
        return (ember.linalg.vector_norm(x, math.inf, 1), ember.linalg.vector_norm(x, 2, 1),
                ember.linalg.vector_norm(x, 0, 1), ember.linalg.vector_norm(x, 1, 1,
                                                                            dtype=ember.float64),
                x.norm(dim=1), x.norm(p=1))

    a = np.random.default_rng(6).standard_normal((4, 20)).astype(np.float32)
    a[0, 3] = np.nan
    a[1, 4] = -np.inf
    a[2, :] = 0
    x = ember.tensor(a)
    got, want, cg = run_c(f, x)
    assert_no_externs(cg)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        gn, wn = g.numpy().astype(np.float64), w.numpy().astype(np.float64)
        assert np.array_equal(np.isnan(gn), np.isnan(wn)) and np.array_equal(np.isinf(gn),
                                                                              np.isinf(wn))
        fin = np.isfinite(wn)
        np.testing.assert_allclose(gn[fin], wn[fin], rtol=2e-6)
    assert got[3].dtype == ember.float64


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("o", [2, 1, math.inf, 0, 3.0])
def test_vector_norm_low_precision(o, dtype):
    def f(x):
        return ember.linalg.vector_norm(x, o, -1), ember.linalg.vector_norm(x, o, 0, True)

    x = ember.randn(6, 70).to(getattr(ember, dtype))
    got, want, cg = run_c(f, x)
    assert_no_externs(cg)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        gn, wn = _np(g).astype(np.float64), _np(w).astype(np.float64)
        ulp = _ulp(wn, dtype)
        assert np.all(np.abs(gn - wn) <= ulp), np.abs(gn - wn).max()


def test_clip_grad_norm_is_compiled():
    params = [ember.nn.Parameter(ember.randn(5, 7)), ember.nn.Parameter(ember.randn(9))]
    for p in params:
        p.grad = ember.randn(*p.shape) * 3

    def f(g1, g2):
        norms = ember.stack([ember.linalg.vector_norm(g1, 2), ember.linalg.vector_norm(g2, 2)])
        return ember.linalg.vector_norm(norms, 2)

    got, want, cg = run_c(f, params[0].grad, params[1].grad)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6)
    assert not any(x.startswith("vector_norm") for x in cg.stats.fallbacks)
    total = ember.nn.utils.clip_grad_norm_(params, 1.0)
    np.testing.assert_allclose(float(total), float(want), rtol=2e-6)


# ----------------------------------------------------------------------------- float16 / bfloat16
def _ulp(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return np.spacing(np.abs(x).astype(np.float32)).astype(np.float64) * 65536.0
    return np.spacing(np.abs(x).astype(dtype)).astype(np.float64)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_reductions(dtype):
    def f(x):
        return (x.sum(-1), x.mean(0, keepdim=True), x.amax(1), x.amin(), x.prod(1),
                x.var(1), x.std(0), x.logsumexp(-1), x.nansum(0), (x > 0).any(1),
                x.t().sum(0))

    a = (np.random.default_rng(7).standard_normal((5, 40)) * 0.5).astype(np.float32)
    x = ember.tensor(a).to(getattr(ember, dtype))
    got, want, cg = run_c(f, x)
    assert_no_externs(cg)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape), k
        gn, wn = _np(g).astype(np.float64), _np(w).astype(np.float64)
        if k in (2, 3, 9):  # amax, amin, any: exact
            np.testing.assert_array_equal(gn, wn)
            continue
        # both round a float32 (eager) or double (C) result once: one ulp of the dtype, plus
        # float32's own summation error where the sum cancels
        tol = _ulp(wn, dtype) + 64 * np.finfo(np.float32).eps * np.abs(a.astype(np.float64)).sum()
        assert np.all(np.abs(gn - wn) <= tol), (k, np.abs(gn - wn).max())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_layer_norm_and_rms_norm(dtype):
    torch = pytest.importorskip("torch")
    d = getattr(ember, dtype)
    x = ember.randn(6, 64).to(d)
    w, b = ember.randn(64).to(d), ember.randn(64).to(d)

    def f(x, w, b):
        return F.layer_norm(x, (64,), w, b), F.rms_norm(x * 2, (64,), w)

    got, want, cg = run_c(f, x, w, b)
    assert_no_externs(cg, kernels=2)
    tx, tw, tb = _torch(x), _torch(w), _torch(b)
    refs = (torch.nn.functional.layer_norm(tx, (64,), tw, tb),
            torch.nn.functional.rms_norm(tx * 2, (64,), tw))
    for g, w_, r in zip(got, want, refs):
        gn, wn = _np(g).astype(np.float64), _np(w_).astype(np.float64)
        # a few float32 roundings before the one to the dtype
        assert np.all(np.abs(gn - wn) <= 2 * _ulp(wn, dtype))
        rn = r.float().numpy().astype(np.float64)
        assert np.all(np.abs(gn - rn) <= 4 * _ulp(rn, dtype) + 4 * _ulp(np.abs(rn).max(), dtype))


def _softmax_sq_grad(x):
    x = x.detach().requires_grad_(True)
    y = F.softmax(x, -1)
    (g,) = ember.autograd.grad((y * y).sum(), [x])
    return g


@pytest.mark.parametrize("seed", [
    0, pytest.param(6, marks=pytest.mark.xfail(strict=True, reason=(
        "known gap: where float16 softmax saturates (a row max y ~ 0.96), the C backward's "
        "saturated entry is ~10 ulp of the row's largest gradient from eager (0.07483 vs "
        "0.07422; float64 of the same float16 input: 0.07421); 52 of 300 random draws exceed "
        "the 4+4 ulp bound")))])
def test_low_precision_softmax_backward_rounds_the_reduced_value(seed):
    """A float16 reduced value used in the same kernel (softmax's backward) is rounded to float16
    first, as a load of the stored value would be (eager stores it)."""
    ember.manual_seed(seed)   # the draw is fixed: the result must not depend on test order
    x = ember.randn(3, 4).to(ember.float16) * 20
    f = _softmax_sq_grad
    got, want, cg = run_c(f, x)
    gn, wn = _np(got).astype(np.float64), _np(want).astype(np.float64)
    assert np.all(np.abs(gn - wn) <= 4 * _ulp(wn, "float16") + 4 * _ulp(np.abs(wn).max(),
                                                                          "float16"))


# ----------------------------------------------------------------------------- scans
SCAN_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8",
               "bool"]


def _scan_fns(dtype):
    fns = [lambda x: x.cumsum(-1), lambda x: x.cumsum(1), lambda x: x.cumprod(0),
           lambda x: x.cummax(1), lambda x: x.cummin(-1), lambda x: x.cummax(0),
           lambda x: x.transpose(0, 2).cumsum(1), lambda x: x.transpose(0, 2).cummin(2),
           lambda x: x[:, ::2, 1:].cumprod(2), lambda x: x[:1].expand(3, 6, 5).cumsum(0)]
    if dtype in ("float32", "float64", "float16", "bfloat16"):
        fns.append(lambda x: ember.logcumsumexp(x, 1))
        fns.append(lambda x: (x * 2 + 1).cumsum(-1))
    return fns


@pytest.mark.parametrize("dtype", SCAN_DTYPES)
def test_scans_equal_eager(dtype):
    """Sequential in eager's order and accumulator type: bit for bit (logcumsumexp within
    double's last bit before its rounding), in eager's memory order (a transposed input keeps
    its order), NaN and ties as eager (cummax/cummin report the latest position)."""
    rng = np.random.default_rng(8)
    a = rng.integers(-3, 4, (3, 6, 5)).astype(np.float64) * 0.75
    a[1, 2, 3] = np.nan
    a[0, 0, :] = 1.0
    if dtype == "bool":
        x = ember.tensor(a > 0)
    elif dtype == "uint8":
        x = ember.tensor(np.nan_to_num(np.abs(a) * 4).astype(np.uint8))
    elif dtype.startswith("int"):
        x = ember.tensor(np.nan_to_num(a * 4).astype(np.int64)).to(getattr(ember, dtype))
    else:
        x = ember.tensor(a.astype(np.float32)).to(getattr(ember, dtype))
    for k, f in enumerate(_scan_fns(dtype)):
        ember.compiler.reset()
        got, want, cg = run_c(f, x)
        assert_no_externs(cg)
        for g, w in zip(_t(got), _t(want)):
            assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape), k
            # (an integer cumsum/cumprod casts to int64 first, and the pointwise lowering
            # stores a cast of a broadcast value in C order where NumPy's astype keeps the
            # stride-0 dim fastest: a layout gap of casts, not of the scan)
            if not (k == 9 and not x.dtype.is_floating_point):
                assert g.stride() == w.stride(), (k, g.stride(), w.stride())
            if k == 10 and dtype == "float64":  # logcumsumexp: ember_logaddexp vs NumPy's
                np.testing.assert_allclose(_np(g), _np(w), rtol=4e-16, atol=0)
            else:
                np.testing.assert_array_equal(_np(g), _np(w), err_msg=str(k))


def test_scans_match_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(9).standard_normal((4, 33)).astype(np.float32)
    a[2, 5] = np.nan
    x, t = ember.tensor(a), torch.from_numpy(a)

    def f(x):
        return x.cumsum(1), x.cumprod(0), x.cummax(1), x.cummin(0), ember.logcumsumexp(x, 1)

    got, want, cg = run_c(f, x)
    assert_no_externs(cg, kernels=5)
    ref = (t.cumsum(1), t.cumprod(0), t.cummax(1), t.cummin(0), torch.logcumsumexp(t, 1))
    for g, r in zip(got, ref):
        for gg, rr in zip(_t(g), tuple(r) if isinstance(r, tuple) else (r,)):
            if gg.dtype == ember.int64:
                np.testing.assert_array_equal(gg.numpy(), rr.numpy())
            else:
                np.testing.assert_allclose(gg.numpy(), rr.numpy(), rtol=1e-5, atol=1e-6)


def test_scan_reverse_and_large_threaded():
    """cumsum's backward (a reverse cumsum) and a scan big enough for the OpenMP split."""
    prev = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        x = ember.randn(300, 200)

        def f(x):
            x = x.detach().requires_grad_(True)
            y = x.cumsum(1)
            (g,) = ember.autograd.grad((y * y).sum(), [x])
            return y.detach(), g, x.detach().cumsum(0), x.detach().cummax(1)

        got, want, cg = run_c(f, x)
        for g, w in zip(got[:3], want[:3]):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
        for g, w in zip(got[3], want[3]):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
        assert not any(s.startswith(("cumsum", "cummax")) for s in cg.stats.fallbacks)
    finally:
        ember.set_num_threads(prev)


def test_scan_of_0d_and_empty():
    def f(x, e):
        return x.cumsum(0), x.cummax(0), e.cumsum(1), e.cumprod(0)

    got, want, cg = run_c(f, ember.tensor(2.5), ember.randn(3, 0))
    for g, w in zip(got, want):
        assert_exact(g, w)


# ----------------------------------------------------------------------------- softmax, any dim
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_softmax_over_other_dims(dtype):
    """softmax/log_softmax of a permuted value over its unit-stride dim are one three-pass
    ReduceKernel each; eager's memory order; NaN rows and all--inf rows as eager.  Over a
    strided dim they stay eager (three strided passes are slower than eager's NumPy)."""
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(10).standard_normal((4, 6, 5)).astype(np.float32) * 3
    a[1, 2, 3] = np.nan
    a[0, :, 0] = -np.inf
    x = ember.tensor(a).to(getattr(ember, dtype))

    def f(x):
        return (F.softmax(x.transpose(0, 2), 0), F.log_softmax(x.transpose(1, 2), 1),
                F.softmax(x.transpose(1, 2) * 2, 1), F.log_softmax(x.permute(2, 0, 1), 0))

    got, want, cg = run_c(f, x)
    assert_no_externs(cg, kernels=4)
    eps = {"float32": 2.0 ** -23, "float64": 2.0 ** -52}.get(dtype)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.stride() == w.stride()
        gn, wn = _np(g).astype(np.float64), _np(w).astype(np.float64)
        assert np.array_equal(np.isnan(gn), np.isnan(wn))
        fin = np.isfinite(wn)
        assert np.array_equal(gn[~fin & ~np.isnan(wn)], wn[~fin & ~np.isnan(wn)])
        gn, wn = gn[fin], wn[fin]
        # float32/float64: exp within a few ulp, the sum in double vs pairwise in the dtype;
        # float16/bfloat16: both compute in float32 and round once
        tol = 16 * eps * (np.abs(wn) + np.abs(wn).max()) if eps else _ulp(wn, dtype)
        assert np.all(np.abs(gn - wn) <= tol), np.abs(gn - wn).max()
    tref = torch.from_numpy(a.astype(np.float64)).transpose(0, 2)
    assert run_c(lambda x: F.softmax(x, 0), x)[2].stats.fallbacks == [
        "softmax: dim is not the unit-stride dim (strided passes: eager is faster)"]
    np.testing.assert_allclose(_np(got[0]).astype(np.float64), torch.softmax(tref, 0).numpy(),
                               rtol=2e-2 if dtype in ("float16", "bfloat16") else 1e-5,
                               atol=1e-2 if dtype in ("float16", "bfloat16") else 1e-6)


# ----------------------------------------------------------------------------- the census
def test_census_reports_these_ops_lowered():
    """``benchmarks/extern_census.py`` (the known-gaps list of docs/compiler.md) lowers the
    OpInfo samples as the backend does and reads its counters: none of these ops is left as
    an extern in any dtype, gradient or dynamic=True case (their gradients' index ops may be)."""
    from benchmarks.extern_census import census
    ops = {"argmax", "argmin", "max_dim", "min_dim", "vector_norm", "norm", "cumsum",
           "cumprod", "cummax", "cummin", "logcumsumexp", "sum", "mean", "amax", "var",
           "logsumexp", "nn.layer_norm", "nn.rms_norm"}
    seen, totals, _ = census(("fwd", "grad", "dyn"), ops)
    lowered = {"argmax", "argmin", "max_dim", "min_dim", "vector_norm", "cumsum", "cumprod",
               "cummax", "cummin", "logcumsumexp", "sum", "mean", "amax", "var", "logsumexp",
               "rms_norm"}
    assert not lowered & set(seen), {op: dict(seen[op]) for op in lowered & set(seen)}
    assert totals["graphs"] > 500 and totals["kernels"] > totals["externs"]

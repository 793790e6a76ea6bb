"""Eager float16/bfloat16 convolutions on the half GEMM kernels (``ember/ops/_hconv.py``) and
products of at most 4 rows (``ember/ops/_hsmall_c.py``), against torch 2.13, the exact value
(float64 from the half operands) and the widen + float32 BLAS path they replace.

Tolerances (as in test_hgemm_eager_c.py): both sides accumulate exact products in float32 and
round once, so each is within ``u (|s| + e) + e`` of the exact value ``s`` (u: the dtype's unit
roundoff, e = (terms + 1) * eps32 * the same sum of absolute values); two correct results
differ by at most twice that.  The C path and the fallback are at most one ulp apart.
"""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.config import config
from ember.ops import _hconv, _hgemm_c, _hsmall_c, _native

torch = pytest.importorskip("torch")
F = ember.nn.functional
TF = torch.nn.functional
HALF = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
EPS32 = float(np.finfo(np.float32).eps)

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")
needs_c = pytest.mark.skipif(not config.eager_c, reason="eager C kernels off (EMBER_EAGER_C=0)")

# (functional, input shape, weight shape, kwargs, the half C path runs: forward, dx, dw)
CASES = [
    ("conv2d", (2, 8, 9, 11), (12, 8, 3, 3), dict(padding=1), (1, 1, 1)),
    ("conv2d", (3, 16, 7, 7), (8, 16, 1, 1), {}, (1, 1, 1)),
    ("conv2d", (2, 12, 10, 9), (12, 4, 3, 2),
     dict(stride=2, padding=(1, 0), dilation=(1, 2), groups=3), (0, 1, 1)),
    ("conv2d", (2, 12, 10, 9), (30, 4, 3, 2),
     dict(stride=2, padding=(1, 0), dilation=(1, 2), groups=3), (1, 1, 1)),
    ("conv2d", (2, 6, 8, 8), (6, 6, 2, 2), dict(stride=2), (1, 1, 1)),
    ("conv2d", (1, 5, 13, 6), (7, 5, 1, 1), dict(stride=2), (1, 1, 1)),
    ("conv2d", (2, 3, 17, 15), (9, 3, 5, 3), dict(stride=(2, 3), padding=2), (1, 1, 1)),
    ("conv2d", (1, 6, 5, 5), (8, 6, 2, 2), dict(padding=3), (1, 1, 1)),
    ("conv2d", (2, 8, 9, 9), (8, 1, 3, 3), dict(padding=1, groups=8), (0, 1, 1)),
    ("conv1d", (3, 10, 31), (12, 10, 5), dict(stride=2, padding=3, dilation=2), (1, 1, 1)),
    ("conv1d", (2, 20, 17), (24, 5, 3), dict(groups=4, padding=1), (1, 1, 1)),
    ("conv1d", (2, 7, 19), (6, 7, 3), dict(padding=4, dilation=2), (1, 1, 1)),
    ("conv_transpose2d", (2, 8, 7, 6), (8, 6, 3, 3),
     dict(stride=2, padding=1, output_padding=1), (1, 1, 1)),
    ("conv_transpose1d", (2, 9, 11), (9, 5, 4), dict(stride=3), (1, 1, 1)),
    ("conv_transpose1d", (2, 9, 11), (9, 6, 3), dict(dilation=2), (1, 1, 1)),
    # stride 1 with an output_padding: the direct input gradient does not close up (col2im)
    ("conv_transpose1d", (2, 9, 11), (9, 6, 3), dict(dilation=2, output_padding=1), (1, 1, 1)),
]


def _c_on() -> bool:
    """Whether the eager half C kernels are built and on (not under EMBER_EAGER_C=0): where
    they are off, every case takes the widen + BLAS fallback, checked the same way."""
    return _hgemm_c._NATIVE.lib() is not None and _hsmall_c._NATIVE.lib() is not None


def _vals(shape, seed, dt, scale=1.0):
    x = np.random.default_rng(seed).standard_normal(shape) * scale
    return x.astype(HALF[dt])


def _ember(fn: str, x, w, g, kw: dict) -> list:
    ex, ew = (ember.from_numpy(v).requires_grad_() for v in (x, w))
    y = getattr(F, fn)(ex, ew, **kw)
    y.backward(ember.from_numpy(g))
    return [t.detach().numpy() for t in (y, ex.grad, ew.grad)]


def _torch(fn: str, x, w, g, kw: dict, dtype) -> list:
    tx, tw = (torch.from_numpy(v.astype(np.float64)).to(dtype).requires_grad_() for v in (x, w))
    y = getattr(TF, fn)(tx, tw, **kw)
    y.backward(torch.from_numpy(g.astype(np.float64)).to(dtype))
    return [t.detach().double().numpy() for t in (y, tx.grad, tw.grad)]


def _bounds(fn: str, x, w, g, kw: dict, dt: str) -> tuple:
    """(exact values, tolerances) of y, dx, dw: float64 of the half operands, and the same
    ops on absolute values for float32's summation error."""
    exact = _torch(fn, x, w, g, kw, torch.float64)
    absv = _torch(fn, np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)),
                  np.abs(g.astype(np.float64)), kw, torch.float64)
    # at most this many products in any one sum of y, dx or dw
    terms = max(w.size, x.shape[0] * int(np.prod(x.shape[2:])),
                g.shape[0] * int(np.prod(g.shape[2:])))
    u = float(ml_dtypes.finfo(HALF[dt]).eps) / 2
    tiny = float(ml_dtypes.finfo(HALF[dt]).smallest_subnormal)
    tols = []
    for e, a in zip(exact, absv):
        err = (terms + 1) * EPS32 * a
        tols.append(u * (np.abs(e) + err) + err + tiny)
    return exact, tols


def _close(got, want, tol, factor=1.0):
    d = np.abs(got.astype(np.float64) - want)
    assert np.all(d <= factor * tol), float(np.max(d / tol))


@pytest.fixture
def counted(monkeypatch):
    """Which of _hconv's three functions returned a result (the C path ran)."""
    ran = {"conv": 0, "input_grad": 0, "weight_grad": 0}
    for name in ran:
        real = getattr(_hconv, name)

        def wrap(*a, real=real, name=name):
            out = real(*a)
            ran[name] += out is not None
            return out
        monkeypatch.setattr(_hconv, name, wrap)
    return ran


@pytest.mark.parametrize("dt", list(HALF))
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_conv_forward_and_grads_match_torch(dt, case, counted):
    fn, xs, ws, kw, runs = case
    x, w = _vals(xs, 1, dt), _vals(ws, 2, dt, 0.3)
    ys = getattr(TF, fn)(torch.zeros(xs, dtype=torch.float64),
                         torch.zeros(ws, dtype=torch.float64), **kw).shape
    g = _vals(tuple(ys), 3, dt)
    got = _ember(fn, x, w, g, kw)
    # conv_transpose runs conv_input_grad forward and its vjp's convolution / weight grad
    want_runs = dict(zip(("conv", "input_grad", "weight_grad"), runs))
    if fn.startswith("conv_transpose"):
        want_runs = {"conv": runs[1], "input_grad": runs[0], "weight_grad": runs[2]}
    if not _c_on():
        want_runs = dict.fromkeys(want_runs, 0)
    assert {k: int(v > 0) for k, v in counted.items()} == want_runs
    exact, tols = _bounds(fn, x, w, g, kw, dt)
    ref = _torch(fn, x, w, g, kw, getattr(torch, dt))
    for name, a, e, t, r in zip(("y", "dx", "dw"), got, exact, tols, ref):
        assert a.dtype == HALF[dt] and a.shape == e.shape, name
        _close(a, e, t)
        if kw.get("output_padding") and kw.get("dilation"):
            # torch 2.13's half conv_transpose rounds more than once here (its y is ~2x
            # farther from the exact value than ember's, which is within the bound above)
            continue
        _close(a, r, t, 2.0)


@pytest.mark.parametrize("dt", list(HALF))
def test_conv_c_path_and_fallback_one_ulp_apart(dt):
    """The widen + BLAS fallback (no C kernels) and the half GEMM path: each float32 sum in
    another order, rounded once: at most one ulp apart, in the forward and both gradients."""
    for fn, xs, ws, kw, _runs in CASES[:2] + CASES[3:5] + CASES[9:10]:
        x, w = _vals(xs, 4, dt), _vals(ws, 5, dt, 0.3)
        g = _vals(tuple(getattr(TF, fn)(torch.zeros(xs), torch.zeros(ws), **kw).shape), 6, dt)
        new = _ember(fn, x, w, g, kw)
        old = _hgemm_c.set_enabled(False)
        try:
            ref = _ember(fn, x, w, g, kw)
        finally:
            _hgemm_c.set_enabled(old)
        for a, b in zip(new, ref):
            ulp = np.spacing(np.abs(b)).astype(np.float64)
            assert np.all(np.abs(a.astype(np.float64) - b.astype(np.float64)) <= ulp)


def test_conv_large_products_threads_same_bits():
    """A ResNet-sized 3x3 layer, bfloat16: one thread and two give the same bits (threads
    split samples or units, never k)."""
    x, w = _vals((4, 32, 20, 20), 7, "bfloat16"), _vals((48, 32, 3, 3), 8, "bfloat16", 0.1)
    g = _vals((4, 48, 20, 20), 9, "bfloat16")
    old = ember.get_num_threads()
    res = []
    try:
        for n in (1, 2):
            ember.set_num_threads(n)
            res.append(_ember("conv2d", x, w, g, dict(padding=1)))
    finally:
        ember.set_num_threads(old)
    for a, b in zip(*res):
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))


# ------------------------------------------------------------------------- small-row products
SMALL = [((1, 384), (1536, 384), True), ((3, 1000), (77, 1000), False), ((2, 1, 64), None, False),
         ((4, 33), (500, 33), True), ((2, 5), (1, 5), True), ((1, 1), (9, 1), False)]


@pytest.mark.parametrize("dt", list(HALF))
@pytest.mark.parametrize("xs,ws,bias", SMALL)
def test_small_row_linear_and_bmm_match_torch(dt, xs, ws, bias):
    """1-4 rows (a decode step) through the register-widening kernel: linear (a transposed
    weight) with and without bias, and a row-major B (x @ W, a batched bmm)."""
    x = _vals(xs, 10, dt)
    if ws is None:                     # bmm: (2, 1, 64) @ (2, 64, 40), B row-major
        b = _vals((2, 64, 40), 11, dt)
        assert (_hsmall_c.matmul(x, b) is not None) == _c_on()
        got = (ember.from_numpy(x) @ ember.from_numpy(b)).numpy()
        t = [torch.from_numpy(v.astype(np.float32)).to(getattr(torch, dt)) for v in (x, b)]
        want, exact = (t[0] @ t[1]).double().numpy(), x.astype(np.float64) @ b.astype(np.float64)
        absv = np.abs(x.astype(np.float64)) @ np.abs(b.astype(np.float64))
        terms = 64
    else:
        w, bb = _vals(ws, 12, dt, 0.2), (_vals(ws[0], 13, dt) if bias else None)
        assert (_hsmall_c.matmul(x, w.T, bb) is not None) == _c_on()
        got = F.linear(ember.from_numpy(x), ember.from_numpy(w),
                       None if bb is None else ember.from_numpy(bb)).numpy()
        t = [None if v is None else torch.from_numpy(v.astype(np.float32)).to(getattr(torch, dt))
             for v in (x, w, bb)]
        want = TF.linear(*t).double().numpy()
        extra = 0.0 if bb is None else bb.astype(np.float64)
        exact = x.astype(np.float64) @ w.astype(np.float64).T + extra
        absv = np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64)).T + np.abs(extra)
        terms = xs[-1] + 1
    u = float(ml_dtypes.finfo(HALF[dt]).eps) / 2
    err = (terms + 1) * EPS32 * absv
    tol = u * (np.abs(exact) + err) + err + float(ml_dtypes.finfo(HALF[dt]).smallest_subnormal)
    assert got.dtype == HALF[dt]
    _close(got, exact, tol)
    _close(got, want, tol, 2.0)


@needs_c
@pytest.mark.parametrize("dt", list(HALF))
def test_small_rows_one_ulp_from_widen_and_blas_and_threads(dt):
    """Against the widen + BLAS fallback (the kernel off): one ulp at most; the column split
    over two threads gives one thread's bits."""
    x, w, bb = _vals((2, 2048), 14, dt), _vals((1000, 2048), 15, dt, 0.1), _vals(1000, 16, dt)
    old = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        one = _hsmall_c.matmul(x, w.T, bb)
        ember.set_num_threads(2)
        two = F.linear(*(ember.from_numpy(v) for v in (x, w, bb))).numpy()
    finally:
        ember.set_num_threads(old)
    np.testing.assert_array_equal(one.view(np.uint16), two.view(np.uint16))
    was = _hsmall_c.set_enabled(False)
    try:
        ref = F.linear(*(ember.from_numpy(v) for v in (x, w, bb))).numpy()
    finally:
        _hsmall_c.set_enabled(was)
    ulp = np.spacing(np.abs(ref)).astype(np.float64)
    assert np.all(np.abs(one.astype(np.float64) - ref.astype(np.float64)) <= ulp)


def test_small_rows_not_applicable_and_empty():
    a = np.ones((5, 3), np.float16)
    assert _hsmall_c.matmul(a, a.T.copy()) is None                  # more than SMALL_M rows
    b = np.ones((6, 8), np.float16)[::2, ::2]                        # neither unit stride
    assert _hsmall_c.matmul(np.ones((2, 3), np.float16), b) is None
    z = _hsmall_c.matmul(np.ones((2, 0), np.float16), np.ones((0, 4), np.float16),
                         np.full(4, 2.0, np.float16))
    assert z is not None and z.tolist() == [[2.0] * 4] * 2


@needs_c
@pytest.mark.parametrize("march", ["x86-64", "x86-64-v3"])
def test_small_row_kernel_on_older_isas(tmp_path, monkeypatch, march):
    """The kernel built for baseline x86-64 (portable conversions, SSE2) and for AVX2/F16C:
    within one ulp of the host build (other vector widths: other summation orders)."""
    x = {dt: (_vals((3, 700), 17, dt), _vals((300, 700), 18, dt, 0.1)) for dt in HALF}
    host = {dt: _hsmall_c.matmul(x[dt][0], x[dt][1].T) for dt in HALF}
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    nat = _native.Native(f"hsmall-{march}", _hsmall_c.SOURCE, _hsmall_c._SYMBOLS,
                         flags=("-fopenmp-simd", f"-march={march}", "-mno-avx512f"))
    if nat.lib() is None:
        pytest.skip("no build for " + march)
    monkeypatch.setattr(_hsmall_c, "_NATIVE", nat)
    for dt in HALF:
        got = _hsmall_c.matmul(x[dt][0], x[dt][1].T)
        ulp = np.spacing(np.abs(host[dt])).astype(np.float64)
        assert np.all(np.abs(got.astype(np.float64) - host[dt].astype(np.float64)) <= ulp)


@needs_c
@pytest.mark.parametrize("dt", list(HALF))
@pytest.mark.parametrize("ks,stride,dil,pad,size", [
    ((3, 3), (2, 2), (1, 1), (1, 1), (11, 9)), ((7, 7), (2, 2), (1, 1), (3, 3), (12, 9)),
    ((2, 5), (3, 2), (2, 1), (0, 4), (13, 10)), ((1, 3), (2, 3), (1, 2), (0, 2), (9, 14)),
    ((4, 4), (4, 4), (1, 1), (0, 0), (15, 11)), ((3, 1), (1, 1), (3, 1), (5, 0), (7, 5)),
    ((2, 2), (3, 3), (1, 1), (0, 1), (10, 8))])
def test_input_grad_by_phases_is_the_exact_sum_rounded_once(dt, ks, stride, dil, pad, size):
    """The polyphase input gradient (stride-1 convolutions per residue class of the input
    pixels, no col2im) against float64: kernels larger and smaller than the stride, dilation,
    padding beyond the kernel, input pixels no window reaches."""
    n, c, o = 2, 6, 10
    out = tuple((sz + 2 * pd - dl * (k - 1) - 1) // s + 1
                for sz, pd, dl, k, s in zip(size, pad, dil, ks, stride))
    g, w = _vals((n, o) + out, 20, dt), _vals((o, c) + ks, 21, dt, 0.3)
    shape = (n, c) + size
    got = _hconv._input_grad_phases(g, w, shape, dict(
        stride=stride, padding=tuple((pd, pd) for pd in pad), dilation=dil, groups=1))
    assert got is not None and got.dtype == HALF[dt] and got.shape == shape
    exact, absv = (torch.nn.grad.conv2d_input(
        shape, torch.from_numpy(f(w.astype(np.float64))), torch.from_numpy(f(g.astype(
            np.float64))), stride=stride, padding=pad, dilation=dil).numpy()
        for f in (np.asarray, np.abs))
    u = float(ml_dtypes.finfo(HALF[dt]).eps) / 2
    err = (o * ks[0] * ks[1] + 1) * EPS32 * absv
    _close(got, exact, u * (np.abs(exact) + err) + err
           + float(ml_dtypes.finfo(HALF[dt]).smallest_subnormal))

"""Eager float16/bfloat16 against torch 2.13: products rounded once, reductions and losses.

Tolerances derive from the dtype's machine epsilon: a result rounded once to a half dtype is
within half an ulp of the exact value, so two correct implementations differ by about one ulp
(more only where the accumulation order differs, as stated per case).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.ops import _parallel

torch = pytest.importorskip("torch")
TF = torch.nn.functional

HALF = ["bfloat16", "float16"]


def _eps(name: str) -> float:
    return float(torch.finfo(getattr(torch, name)).eps)


def _arr(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _both(arr, name):
    return ember.tensor(arr).to(getattr(ember, name)), torch.tensor(arr).to(getattr(torch, name))


def _ulp_apart(e, r) -> float:
    """Largest difference of two half tensors in units of the dtype's spacing at ``r``."""
    a, b = e.numpy(), r.numpy()
    sp = np.spacing(np.abs(b)).astype(np.float64)
    return float((np.abs(a.astype(np.float64) - b.astype(np.float64)) / sp).max(initial=0))


def _ulps(e, t, name):
    """Largest difference in units of the dtype's eps relative to max(|torch|, tiny)."""
    a, b = e.float().numpy().astype(np.float64), t.float().numpy().astype(np.float64)
    return float((np.abs(a - b) / np.maximum(np.abs(b), 1e-2) / _eps(name)).max())


@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("sa,sb", [((300, 70), (70, 50)), ((512, 256), (256, 384)),
                                   ((4, 2, 129, 64), (4, 2, 64, 33)), ((0, 4), (4, 5))])
def test_half_matmul_is_the_float32_product_rounded_once(name, sa, sb):
    ea, ta = _both(_arr(sa, 1), name)
    eb, tb = _both(_arr(sb, 2), name)
    got = ea @ eb
    assert got.dtype is getattr(ember, name)
    f32 = (ea.float() @ eb.float()).to(getattr(ember, name))
    # the half GEMM kernels (ops/_hgemm_c.py) sum in float32 in another order than BLAS:
    # the float32 sums differ in their last bits, the rounded results by at most an ulp
    assert _ulp_apart(got, f32) <= 1
    if got.numel():
        # torch's CPU half GEMM accumulates in float32 too, in another order: an ulp apart
        assert _ulps(got, ta @ tb, name) <= 2


@pytest.mark.parametrize("name", HALF)
def test_half_linear_adds_the_bias_before_rounding(name):
    x, tx = _both(_arr((5, 7, 96), 3), name)
    w, tw = _both(_arr((48, 96), 4, 0.1), name)
    b, tb = _both(_arr((48,), 5), name)
    got = F.linear(x, w, b)
    ref = (x.float() @ w.float().T + b.float()).to(getattr(ember, name))
    assert _ulp_apart(got, ref) <= 1
    assert _ulps(got, TF.linear(tx, tw, tb), name) <= 2


@pytest.mark.parametrize("name", HALF)
def test_half_matmul_grads_match_torch(name):
    a, ta = _both(_arr((64, 32), 6), name)
    b, tb = _both(_arr((32, 16), 7), name)
    a.requires_grad_(), b.requires_grad_(), ta.requires_grad_(), tb.requires_grad_()
    (a @ b).sum().backward()
    (ta @ tb).sum().backward()
    assert a.grad.dtype is getattr(ember, name)
    assert _ulps(a.grad, ta.grad, name) <= 2 and _ulps(b.grad, tb.grad, name) <= 2


def test_parallel_half_product_matches_single_block():
    # the threaded split gives the bits of one thread (threads never split k), within an ulp
    # of the float32 product rounded once
    a = _arr((1024, 256), 8).astype(np.float16)
    b = _arr((256, 512), 9).astype(np.float16)
    old = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        one = _parallel.matmul_lowp(a, b)
        ember.set_num_threads(2)
        got = _parallel.matmul_lowp(a, b)
    finally:
        ember.set_num_threads(old)
    assert np.array_equal(got.view(np.uint16), one.view(np.uint16))
    ref = _parallel.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    assert np.all(np.abs(got.astype(np.float64) - ref) <= np.spacing(np.abs(ref)))


def _reduction_cases(x, tx, tgt, ttgt):
    return {
        "sum": (lambda: x.sum(), lambda: tx.sum()),
        "sum_dim": (lambda: x.sum(1), lambda: tx.sum(1)),
        "mean": (lambda: x.mean(), lambda: tx.mean()),
        "mean_dim": (lambda: x.mean(1), lambda: tx.mean(1)),
        "var": (lambda: x.var(1), lambda: tx.var(1)),
        "softmax": (lambda: F.softmax(x, -1), lambda: TF.softmax(tx, -1)),
        "log_softmax": (lambda: F.log_softmax(x, -1), lambda: TF.log_softmax(tx, -1)),
        "layer_norm": (lambda: F.layer_norm(x, (x.shape[-1],)),
                       lambda: TF.layer_norm(tx, (tx.shape[-1],))),
        "cross_entropy": (lambda: F.cross_entropy(x, tgt), lambda: TF.cross_entropy(tx, ttgt)),
    }


@pytest.mark.parametrize("name", HALF)
def test_reductions_softmax_norm_losses_accumulate_in_float32_like_torch(name):
    x, tx = _both(_arr((64, 1000), 10, 3.0), name)
    t = np.random.default_rng(11).integers(0, 1000, 64)
    for op, (ef, tf) in _reduction_cases(x, tx, ember.tensor(t), torch.tensor(t)).items():
        e, r = ef(), tf()
        assert str(e.dtype).split(".")[-1] == str(r.dtype).split(".")[-1], op
        # one rounding each (the full sum: float32 partial sums in another order, <= 1 ulp)
        assert _ulps(e, r, name) <= 1, op


@pytest.mark.parametrize("name", HALF)
def test_half_large_sum_does_not_lose_small_terms(name):
    # float32 accumulation: 2^15 ones sum exactly (half accumulation would stall at 2048/256)
    e = ember.ones(1 << 15, dtype=getattr(ember, name)).sum()
    t = torch.ones(1 << 15, dtype=getattr(torch, name)).sum()
    assert float(e) == float(t) == 32768.0


@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("n", [1, 17, 300, 5000])
@pytest.mark.parametrize("variant", ["plain", "ignore", "weight"])
def test_half_nll_and_cross_entropy_match_torch_bit_for_bit(name, n, variant):
    # torch sums the rows' losses in the half dtype (a cascade of rounded partial sums)
    rng = np.random.default_rng(n)
    x, tx = _both(_arr((n, 20), n, 3.0), name)
    t = rng.integers(0, 20, n)
    if variant == "ignore":
        t[rng.random(n) < 0.3] = -100
    w, tw = _both(rng.random(20).astype(np.float32) + 0.5, name) if variant == "weight" \
        else (None, None)
    et, tt = ember.tensor(t), torch.tensor(t)
    for red in ("mean", "sum"):
        pairs = [(F.cross_entropy(x, et, weight=w, reduction=red),
                  TF.cross_entropy(tx, tt, weight=tw, reduction=red)),
                 (F.nll_loss(F.log_softmax(x, 1), et, weight=w, reduction=red),
                  TF.nll_loss(TF.log_softmax(tx, 1), tt, weight=tw, reduction=red))]
        for e, r in pairs:
            assert e.dtype is getattr(ember, name)
            assert e.float().item() == r.float().item(), (red, e, r)

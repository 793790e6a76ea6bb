"""scaled_dot_product_attention and its fused backward as C ``AttentionKernel``s
(``ember/compiler/c/lower/attention.py``): values against eager ember and torch.

The kernel calls the same OpenBLAS as eager but in blocks of query rows (and skips key columns
masked with -inf to the end of a row), and sums softmax rows in double where eager sums
pairwise in float, so values compare with a tolerance of a few ulps of the result's scale
times sqrt of the reduced length (``close``).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.config import config

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

F = ember.nn.functional
DTYPES = [ember.float32, ember.float64]


def close(got, want, ulps=16, width=None):
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        a, b = g.detach().numpy(), w.detach().numpy()
        scale = np.abs(b).max(initial=1.0)
        n = width if width is not None else (a.shape[-1] if a.ndim else 1)
        tol = ulps * np.spacing(a.dtype.type(scale)) * max(1, int(np.sqrt(n + 1)))
        np.testing.assert_allclose(a, b, rtol=0, atol=tol)


def attention_kernels(cg) -> list:
    return [k for k in cg.program.kernels() if type(k).__name__ == "AttentionKernel"]


def qkv(b, h, L, S, E, Ev, dtype):
    ember.manual_seed(0)
    return (ember.randn(b, h, L, E, dtype=dtype), ember.randn(b, h, S, E, dtype=dtype),
            ember.randn(b, h, S, Ev, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 70, 70, 16, 16), (1, 2, 5, 9, 4, 6),
                                   (2, 1, 130, 130, 8, 8)])
def test_forward_matches_eager(dtype, causal, shape):
    q, k, v = qkv(*shape, dtype)

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal) * 1.0

    got = ember.compile(fn, backend="c", fullgraph=True)(q, k, v)
    cg = cbackend.last_compiled()
    assert len(attention_kernels(cg)) == 1 and cg.stats.externs == 0, cg.stats.fallbacks
    close(got, fn(q, k, v), width=shape[3])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("mask_kind", ["none", "causal", "float", "bool_rows_empty"])
def test_backward_matches_eager(dtype, mask_kind):
    b, h, L, S, E, Ev = 2, 3, 67, 67, 8, 12
    q, k, v = qkv(b, h, L, S, E, Ev, dtype)
    mask = None
    if mask_kind == "float":
        mask = ember.randn(L, S, dtype=dtype)
    elif mask_kind == "bool_rows_empty":  # some rows fully masked, some columns cut
        m = np.tril(np.ones((L, S), dtype=bool), k=-3)
        mask = ember.tensor(m)
    causal = mask_kind == "causal"
    g = ember.randn(b, h, L, Ev, dtype=dtype)

    def fn(q, k, v, g):
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        out = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask, is_causal=causal)
        (out * g).sum().backward()
        return out, qq.grad, kk.grad, vv.grad

    got = ember.compile(fn, backend="c", fullgraph=True)(q, k, v, g)
    cg = cbackend.last_compiled()
    names = sorted(k.ops[0] for k in attention_kernels(cg))
    assert names == ["scaled_dot_product_attention",
                     "scaled_dot_product_attention_backward"], cg.stats.fallbacks
    assert not any("scaled_dot" in f for f in cg.stats.fallbacks)
    want = fn(q, k, v, g)
    close(got, want, width=max(L, S))


def test_mask_gradient_when_used():
    """The mask's gradient (gs) is written when the graph reads it."""
    b, h, L, S, E = 1, 2, 9, 11, 4
    q, k, v = qkv(b, h, L, S, E, E, ember.float64)
    m = ember.randn(b, h, L, S, dtype=ember.float64)

    def fn(q, k, v, m):
        mm = m.detach().requires_grad_()
        qq = q.detach().requires_grad_()
        F.scaled_dot_product_attention(qq, k, v, attn_mask=mm).sum().backward()
        return mm.grad, qq.grad

    got = ember.compile(fn, backend="c", fullgraph=True)(q, k, v, m)
    cg = cbackend.last_compiled()
    bwd = [k for k in attention_kernels(cg) if k.backward]
    assert len(bwd) == 1 and bwd[0].outs[3] is not None, cg.stats.fallbacks
    close(got, fn(q, k, v, m), width=S)


def test_against_torch():
    torch = pytest.importorskip("torch")
    b, h, L, E = 2, 4, 96, 16
    q, k, v = qkv(b, h, L, L, E, E, ember.float32)
    g = ember.randn(b, h, L, E)

    def fn(q, k, v, g):
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True)
        (out * g).sum().backward()
        return out, qq.grad, kk.grad, vv.grad

    got = ember.compile(fn, backend="c", fullgraph=True)(q, k, v, g)
    tq, tk, tv = (torch.from_numpy(t.numpy().copy()).requires_grad_() for t in (q, k, v))
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    (tout * torch.from_numpy(g.numpy())).sum().backward()
    for a, t in zip(got, (tout, tq.grad, tk.grad, tv.grad)):
        t = t.detach().numpy()
        np.testing.assert_allclose(a.detach().numpy(), t, rtol=0,
                                   atol=1e-5 * max(1.0, float(np.abs(t).max())))


def test_strided_operands_and_threads():
    """q/k/v as views of one projection (the GPT layout) and as transposed copies; on one and
    on two threads."""
    b, t, d, heads = 2, 40, 24, 3
    ember.manual_seed(1)
    x = ember.randn(b, t, 3 * d)

    def fn(x):
        q, k, v = x.split(d, dim=-1)
        q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
        k = k.transpose(-1, -2).contiguous().transpose(-1, -2)  # column-major rows
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    want = fn(x)
    old = ember.get_num_threads()
    try:
        for n in (1, 2):
            ember.set_num_threads(n)
            got = ember.compile(fn, backend="c", fullgraph=True)(x)
            assert len(attention_kernels(cbackend.last_compiled())) == 1
            close(got, want, width=t)
    finally:
        ember.set_num_threads(old)


def test_non_finite_rows_like_eager():
    """A row whose scores hold +inf or NaN takes eager's path (max reset to 0)."""
    q, k, v = qkv(1, 1, 6, 6, 4, 4, ember.float32)
    qa = q.numpy().copy()
    qa[0, 0, 1, 0] = np.inf
    qa[0, 0, 2, 0] = np.nan
    q = ember.tensor(qa)

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    got = ember.compile(fn, backend="c", fullgraph=True)(q, k, v).numpy()
    want = fn(q, k, v).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------ copies
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.int64, ember.float16,
                                   ember.bool], ids=lambda d: d.name)
def test_reshape_copy_and_cat_are_copy_kernels(dtype):
    """reshape of a transposed value and cat (lower_copy.py) run in C and equal eager
    exactly."""
    ember.manual_seed(2)
    x = (ember.randn(2, 3, 5, 4) * 10).to(dtype)
    y = (ember.randn(2, 5, 7) * 10).to(dtype)

    def fn(x, y):
        r = x.transpose(1, 2).reshape(2, 5, 12)
        return ember.cat([r, y, r[:, :, :1]], dim=2), ember.cat([y, y], dim=0)

    got = ember.compile(fn, backend="c", fullgraph=True)(x, y)
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0, cg.stats.fallbacks
    for g, w in zip(got, fn(x, y)):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        assert g.is_contiguous()
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_cat_with_an_empty_input():
    x, e = ember.randn(3, 4), ember.randn(3, 0)

    def fn(x, e):
        return ember.cat([e, x * 2, e], dim=1)

    got = ember.compile(fn, backend="c", fullgraph=True)(x, e)
    np.testing.assert_array_equal(got.numpy(), fn(x, e).numpy())


def test_gpt_block_segments():
    """A transformer block's training step: attention, the head merge (reshape_copy) and the
    qkv gradient's cat all run in C (no externs from them), and the loss equals eager's."""
    from ember import demo
    ember.manual_seed(0)
    m = demo.CharGPT(20, block=16, d=32, layers=1, heads=2)

    def step(x, y):
        out = m(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        grads = [p.grad for p in m.parameters()]
        m.zero_grad()
        return loss, grads

    rng = np.random.default_rng(0)
    x = ember.tensor(rng.integers(0, 20, (2, 16)), dtype=ember.int64)
    y = ember.tensor(rng.integers(0, 20, (2, 16)), dtype=ember.int64)
    got = ember.compile(step, backend="c")(x, y)
    cg = cbackend.last_compiled()
    bad = [f for f in cg.stats.fallbacks
           if f.split(":")[0] in ("reshape_copy", "cat", "scaled_dot_product_attention",
                                  "scaled_dot_product_attention_backward")]
    assert not bad, bad
    want = step(x, y)
    close(got[0], want[0])
    for g, w in zip(got[1], want[1]):
        close(g, w, width=64)


# ------------------------------------------------------------------------------ gelu (tanh)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_gelu_tanh_backward_in_c(dtype):
    """gelu(approximate='tanh')'s backward is a pointwise C kernel (its c_expr), close to eager
    (the prelude's tanh differs from NumPy's in the last bit, which 1 - t*t magnifies where
    |t| is near 1: compared at 64 ulp of the gradient's scale) and to torch."""
    torch = pytest.importorskip("torch")
    ember.manual_seed(3)
    x, g = ember.randn(4, 300, dtype=dtype) * 3, ember.randn(4, 300, dtype=dtype)

    def fn(x, g):
        xx = x.detach().requires_grad_()
        (F.gelu(xx, approximate="tanh") * g).sum().backward()
        return xx.grad

    got = ember.compile(fn, backend="c", fullgraph=True)(x, g)
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0, cg.stats.fallbacks
    want = fn(x, g)
    scale = float(np.abs(want.numpy()).max())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0,
                               atol=64 * float(np.spacing(want.numpy().dtype.type(scale))))
    tx = torch.from_numpy(x.numpy().copy()).requires_grad_()
    (torch.nn.functional.gelu(tx, approximate="tanh") * torch.from_numpy(g.numpy())).sum() \
        .backward()
    np.testing.assert_allclose(got.numpy(), tx.grad.numpy(), rtol=0,
                               atol=64 * float(np.spacing(want.numpy().dtype.type(scale))))

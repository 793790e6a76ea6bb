"""float16/bfloat16 ``scaled_dot_product_attention`` lowered to the C attention kernel
(``lower/attention.py``'s ``_lower_half``): float32 operands, PyTorch's flash rounding of the
unnormalized probabilities for 4-d inputs, one rounding of the result; against eager (the
oracle: bit for bit in bfloat16, the row sums in double may move a float16 result by an ulp)
and against torch 2.13's CPU kernel."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend

torch = pytest.importorskip("torch")
F = ember.nn.functional

CASES = [((2, 3, 70, 16), (2, 1, 1, 70)), ((2, 3, 70, 16), None), ((3, 70, 16), None),
         ((1, 2, 5, 8), (5, 5))]


def _ulp(w: np.ndarray, dtype: str) -> np.ndarray:
    np_t = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    return np.spacing(np.abs(w).astype(np_t)).astype(np.float64)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape,mshape", CASES)
def test_half_sdpa_compiles_and_matches_eager_and_torch(dtype, shape, mshape):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    m = None if mshape is None else \
        np.where(rng.random(mshape) < 0.2, -1e4, 0).astype(np.float32)
    ed, td = getattr(ember, dtype), getattr(torch, dtype)
    args = [ember.tensor(a).to(ed) for a in (q, k, v)]
    targs = [torch.tensor(a).to(td) for a in (q, k, v)]
    if m is not None:
        args.append(ember.tensor(m).to(ed))
        targs.append(torch.tensor(m).to(td))

    def f(*a):
        return F.scaled_dot_product_attention(*a[:3], attn_mask=a[3] if len(a) > 3 else None)

    ember.compiler.reset()
    got = ember.compile(f, backend="c", fullgraph=True)(*args)
    cg = cbackend.last_compiled()
    assert cg.stats.fallback_count == 0
    assert any(type(x).__name__ == "AttentionKernel" for x in cg.program.kernels())
    want = f(*args)
    assert got.dtype == want.dtype == ed
    g, w = got.float().numpy().astype(np.float64), want.float().numpy().astype(np.float64)
    if dtype == "bfloat16":
        np.testing.assert_array_equal(g, w)
    else:
        assert np.all(np.abs(g - w) <= _ulp(w, dtype))
    t = torch.nn.functional.scaled_dot_product_attention(
        *targs[:3], attn_mask=targs[3] if len(targs) > 3 else None).float().numpy()
    # torch's flash kernel sums and rounds in blocks: each rounded probability is off by a
    # unit roundoff u of the dtype, so the output by up to u * max|v| (plus its own rounding)
    u = 2.0 ** (-8 if dtype == "bfloat16" else -11)
    vmax = np.abs(v.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16)
                  .astype(np.float64)).max()
    assert np.all(np.abs(g - t) <= 2 * u * vmax + _ulp(t, dtype))


def test_half_sdpa_backward_is_an_attention_kernel_too():
    """(Values: ``test_half_attention_backward_c.py``.)"""
    x = ember.randn(1, 2, 4, 8).to(ember.bfloat16).requires_grad_()

    def f(a):
        F.scaled_dot_product_attention(a, a, a).float().sum().backward()

    ember.compiler.reset()
    ember.compile(f, backend="c")(x)
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0
    assert any(k.ops == ["scaled_dot_product_attention_backward"]
               for k in cg.program.kernels() if type(k).__name__ == "AttentionKernel")
    assert x.grad is not None and x.grad.dtype == ember.bfloat16


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_linear_gelu_is_one_gemm_kernel(dtype):
    """The product's rounding is a value of an open group, so GELU joins it and the chain runs
    in the GEMM's epilogue: eager's two roundings (product, GELU), within one ulp of eager."""
    rng = np.random.default_rng(5)
    ed = getattr(ember, dtype)
    x = ember.tensor(rng.standard_normal((37, 48)).astype(np.float32)).to(ed)
    w = ember.tensor(rng.standard_normal((96, 48)).astype(np.float32) * 0.2).to(ed)
    b = ember.tensor(rng.standard_normal(96).astype(np.float32)).to(ed)

    def f(a, wt, bias):
        return F.gelu(F.linear(a, wt, bias))

    ember.compiler.reset()
    got = ember.compile(f, backend="c", fullgraph=True)(x, w, b)
    cg = cbackend.last_compiled()
    gemms = [k for k in cg.program.kernels() if type(k).__name__ == "GemmKernel"]
    assert len(gemms) == 1 and "gelu" in gemms[0].ops
    assert not any(type(k).__name__ == "Kernel" and "gelu" in k.ops
                   for k in cg.program.kernels())
    want = f(x, w, b)
    g, e = got.float().numpy().astype(np.float64), want.float().numpy().astype(np.float64)
    assert np.all(np.abs(g - e) <= _ulp(e, dtype))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_sdpa_forward_reads_strided_heads_in_place(dtype):
    """The forward kernel reads half q, k, v where they are (here heads of (B, L, H * E)
    projections, transposed views) and widens each head in its scratch: no float32 copies of
    q, k, v (only the mask's), and eager's bits."""
    rng = np.random.default_rng(4)
    b, t, h, e = 2, 37, 3, 16
    ed = getattr(ember, dtype)
    xs = [ember.tensor(rng.standard_normal((b, t, h * e)).astype(np.float32)).to(ed)
          for _ in range(3)]
    m = ember.tensor(np.where(rng.random((b, 1, 1, t)) < 0.2, -1e4, 0).astype(np.float32)
                     ).to(ed)

    def f(xq, xk, xv, mask):
        q, k, v = (x.view(b, t, h, e).transpose(1, 2) for x in (xq, xk, xv))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    ember.compiler.reset()
    got = ember.compile(f, backend="c", fullgraph=True)(*xs, m)
    cg = cbackend.last_compiled()
    kernels = list(cg.program.kernels())
    assert any(type(x).__name__ == "AttentionKernel" for x in kernels)
    widen = [x for x in kernels if list(getattr(x, "ops", [])) == ["to_float32"]]
    assert len(widen) == 1, [getattr(x, "name", x) for x in widen]   # the mask only
    want = f(*xs, m)
    g, w = got.float().numpy().astype(np.float64), want.float().numpy().astype(np.float64)
    if dtype == "bfloat16":
        np.testing.assert_array_equal(g, w)
    else:
        assert np.all(np.abs(g - w) <= _ulp(w, dtype))

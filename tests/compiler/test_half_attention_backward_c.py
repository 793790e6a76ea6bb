"""float16/bfloat16 ``scaled_dot_product_attention`` backward lowered to the C attention kernel
(``lower/attention.py``'s ``_lower_half``, eager ``ops/attention.py``'s ``_sdpa_bwd_lowp``):
g, q, k, v (and the mask) widened to float32 exactly, the float32 fused backward, each gradient
rounded once to the input dtype, as PyTorch's CPU math backward does.

Oracles: torch 2.13's float32 backward of the widened inputs rounded once (the same rounding
points: within one ulp of the dtype plus float32 summation noise), torch 2.13's own half
backward (its flash kernel also rounds P and dS to the dtype before the products: a bound of
the dtype's unit roundoff times the products' absolute sums) and eager ember.  Compiled for
AVX-512, x86-64-v3 and plain x86-64 (the conversions' three paths, as ``test_half_block.py``)."""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.build.toolchain import host_can_run
from ember.config import config

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")
F = ember.nn.functional
EPS32 = 2.0 ** -24          # float32 unit roundoff
UNIT = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}
NP_HALF = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
MARCH = {"x86-64-v4": ("-march=x86-64-v4",),
         "x86-64-v3": ("-march=x86-64-v3", "-mno-avx512f"),
         "x86-64": ("-march=x86-64", "-mno-avx512f")}

# (q shape, k/v length, mask shape or "causal" or None)
CASES = [((2, 3, 70, 16), 70, None), ((2, 3, 70, 16), 70, "causal"),
         ((2, 3, 70, 16), 70, (2, 1, 1, 70)), ((3, 33, 16), 47, (33, 47)),
         ((1, 2, 40, 8), 29, "causal"), ((1, 2, 5, 8), 5, (5, 5))]


def _ulp(w: np.ndarray, dtype: str) -> np.ndarray:
    return np.spacing(np.abs(w).astype(NP_HALF[dtype])).astype(np.float64)


def _inputs(dtype: str, shape: tuple, s_len: int, mask, seed: int = 0) -> dict:
    """q, k, v, the output gradient g and an additive mask, as float32 arrays holding values of
    ``dtype`` (exact in it)."""
    rng = np.random.default_rng(seed)
    kv = shape[:-2] + (s_len, shape[-1])
    h = NP_HALF[dtype]
    q, k, v = (rng.standard_normal(s).astype(h).astype(np.float32) for s in (shape, kv, kv))
    g = rng.standard_normal(shape).astype(h).astype(np.float32)
    m = None
    if isinstance(mask, tuple):
        m = np.where(rng.random(mask) < 0.2, -1e4, 0).astype(h).astype(np.float32)
    return {"q": q, "k": k, "v": v, "g": g, "m": m, "causal": mask == "causal"}


def _ember_grads(x: dict, dtype: str, compiled: bool) -> tuple:
    ed = getattr(ember, dtype)
    q, k, v = (ember.tensor(x[n]).to(ed).requires_grad_() for n in "qkv")
    m = None if x["m"] is None else ember.tensor(x["m"]).to(ed)
    g = ember.tensor(x["g"]).to(ed)

    def step(q, k, v):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=x["causal"])
        out.backward(g)

    (ember.compile(step, backend="c") if compiled else step)(q, k, v)
    for t in (q, k, v):
        assert t.grad.dtype == ed
    return tuple(t.grad.float().numpy().astype(np.float64) for t in (q, k, v))


def _torch_grads(x: dict, dtype: str | None) -> tuple:
    """torch's gradients of q, k, v: in ``dtype`` (its half backward) or, for None, in float32
    on the same values."""
    td = torch.float32 if dtype is None else getattr(torch, dtype)
    q, k, v = (torch.tensor(x[n]).to(td).requires_grad_() for n in "qkv")
    m = None if x["m"] is None else torch.tensor(x["m"]).to(td)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m,
                                                           is_causal=x["causal"])
    out.backward(torch.tensor(x["g"]).to(td))
    return tuple(t.grad.float().numpy().astype(np.float64) for t in (q, k, v))


def _abs_products(x: dict) -> tuple:
    """In float64, the absolute sums each gradient element is made of (gq = scale dS k,
    gk = scale dS^T q, gv = P^T g): with what torch's half kernel perturbs by rounding, |dS|
    plus P rowsum(|g| (|P| |v|)) (it takes dS's row term as rowsum(g o) of the output o that
    its forward rounded, after rounding P), and with dS's own uncancelled terms
    P (|dP| + rowsum(|dP| P)) (what float32 noise in dS is relative to)."""
    q, k, v, g = (x[n].astype(np.float64) for n in "qkvg")
    scale = 1 / np.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale
    if x["m"] is not None:
        s = s + x["m"]
    if x["causal"]:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    ds_terms = p * (np.abs(dp) + (np.abs(dp) * p).sum(-1, keepdims=True))
    ds_round = np.abs(ds) + p * (np.abs(g) * (p @ np.abs(v))).sum(-1, keepdims=True)
    t = lambda a: np.swapaxes(a, -1, -2)  # noqa: E731
    gv = t(p) @ np.abs(g)
    return ((scale * ds_round @ np.abs(k), scale * t(ds_round) @ np.abs(q), gv),
            (scale * ds_terms @ np.abs(k), scale * t(ds_terms) @ np.abs(q), gv))


def _noise(x: dict, terms: np.ndarray) -> np.ndarray:
    """float32 summation differences between two orders: 4 sqrt(n) unit roundoffs of the
    absolute sum (n = L + S terms along the longest chain)."""
    return 4 * np.sqrt(x["k"].shape[-2] + x["q"].shape[-2]) * EPS32 * terms


def _check(dtype: str, x: dict, got: tuple) -> None:
    rounded, terms = _abs_products(x)
    # the same rounding points as torch's float32 math rounded once: one ulp of the dtype for
    # the rounding plus float32 summation differences
    f32 = _torch_grads(x, None)
    for name, c, w, b in zip("qkv", got, f32, terms):
        w = w.astype(NP_HALF[dtype]).astype(np.float64)
        tol = _ulp(w, dtype) + _noise(x, b)
        assert np.all(np.abs(c - w) <= tol), (name, np.max(np.abs(c - w) - tol))
    # torch's half backward (flash: P and dS rounded to the dtype before its products): each
    # rounded factor is off by the unit roundoff u, so a gradient by u * its absolute sum,
    # with both results' own roundings
    u = UNIT[dtype]
    half = _torch_grads(x, dtype)
    for name, c, t, b, bt in zip("qkv", got, half, rounded, terms):
        tol = 2 * u * b + _ulp(t, dtype) + _ulp(c, dtype) + _noise(x, bt)
        assert np.all(np.abs(c - t) <= tol), (name, np.max(np.abs(c - t) - tol))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape,s_len,mask", CASES)
def test_half_sdpa_backward_is_one_c_kernel_and_matches_torch(dtype, shape, s_len, mask):
    x = _inputs(dtype, shape, s_len, mask)
    ember.compiler.reset()
    got = _ember_grads(x, dtype, compiled=True)
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0 and cg.stats.fallback_count == 0
    kinds = [k.ops for k in cg.program.kernels() if type(k).__name__ == "AttentionKernel"]
    assert ["scaled_dot_product_attention_backward"] in kinds
    _check(dtype, x, got)
    # against eager ember (the same formula in NumPy float32): a float32 difference can move a
    # rounding by one ulp of the dtype
    eager = _ember_grads(x, dtype, compiled=False)
    for c, e, b in zip(got, eager, _abs_products(x)[1]):
        assert np.all(np.abs(c - e) <= _ulp(e, dtype) + _noise(x, b))
    _check(dtype, x, eager)


@pytest.mark.parametrize("march", list(MARCH))
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_sdpa_backward_any_isa(monkeypatch, march, dtype):
    """The widening and rounding kernels around the attention kernel compiled for each level
    give the same gradients."""
    if not host_can_run(march):
        pytest.skip(f"the host cannot run {march} code")
    monkeypatch.setattr(cbackend, "EXTRA_FLAGS", cbackend.EXTRA_FLAGS + MARCH[march])
    x = _inputs(dtype, (2, 2, 37, 16), 37, "causal", seed=3)
    ember.compiler.reset()
    got = _ember_grads(x, dtype, compiled=True)
    assert cbackend.last_compiled().stats.externs == 0
    _check(dtype, x, got)


def test_half_sdpa_mask_gradient_compiled_matches_eager():
    """A float mask that requires grad: its gradient is dS rounded once, compiled as eager."""
    x = _inputs("bfloat16", (2, 2, 12, 8), 9, (2, 2, 12, 9), seed=4)
    res = []
    for compiled in (True, False):
        ed = ember.bfloat16
        q, k, v, m = (ember.tensor(x[n]).to(ed).requires_grad_() for n in "qkvm")

        def step(q, k, v, m):
            F.scaled_dot_product_attention(q, k, v, attn_mask=m).backward(
                ember.tensor(x["g"]).to(ed))

        ember.compiler.reset()
        (ember.compile(step, backend="c") if compiled else step)(q, k, v, m)
        if compiled:
            assert cbackend.last_compiled().stats.externs == 0
        res.append([t.grad.float().numpy().astype(np.float64) for t in (q, k, v, m)])
    for c, e in zip(*res):
        assert np.all(np.abs(c - e) <= _ulp(e, "bfloat16") + 1e-6 * np.abs(e).max())


class _Block(ember.nn.Module):
    def __init__(self, d: int, heads: int, causal: bool) -> None:
        super().__init__()
        self.qkv, self.proj = ember.nn.Linear(d, 3 * d), ember.nn.Linear(d, d)
        self.heads, self.causal = heads, causal

    def forward(self, x, mask=None):  # noqa: ANN001, ANN201
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal)
        return self.proj(a.transpose(1, 2).reshape(b, t, d))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("variant", ["plain", "causal", "mask"])
def test_half_attention_block_training_step_has_no_externs(dtype, variant):
    """A compiled training step (forward, backward, SGD) of a half attention block is C only,
    the attention backward one kernel, and its parameters end where eager's do."""
    ed = getattr(ember, dtype)
    rng = np.random.default_rng(7)
    x = ember.tensor(rng.standard_normal((2, 24, 32)).astype(np.float32)).to(ed)
    mask = None
    if variant == "mask":
        mask = ember.tensor(np.where(rng.random((24, 24)) < 0.2, -1e4, 0)
                            .astype(np.float32)).to(ed)
    models = []
    for compiled in (True, False):
        ember.manual_seed(0)
        model = _Block(32, 4, variant == "causal").to(ed)
        opt = ember.optim.SGD(model.parameters(), lr=0.1)

        def step(inp):
            opt.zero_grad()
            model(inp, mask).float().square().mean().backward()
            opt.step()

        ember.compiler.reset()
        (ember.compile(step, backend="c") if compiled else step)(x)
        if compiled:
            cg = cbackend.last_compiled()
            assert cg.stats.externs == 0 and cg.stats.fallback_count == 0
            assert "scaled_dot_product_attention_backward" in [
                op for k in cg.program.kernels() if type(k).__name__ == "AttentionKernel"
                for op in k.ops]
        models.append(model)
    for (name, pc), pe in zip(models[0].named_parameters(), models[1].parameters()):
        c, e = (p.detach().float().numpy().astype(np.float64) for p in (pc, pe))
        # one SGD step of lr 0.1 on values of size ~0.2: the updated weight's rounding can
        # differ by an ulp where the gradients differ by their float32 noise
        assert np.all(np.abs(c - e) <= 2 * _ulp(e, dtype)), name

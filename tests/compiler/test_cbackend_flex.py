"""flex_attention under ember.compile: ONE ``flex_attention_fused`` node lowered to one C
``FlexAttentionKernel`` (``ember/compiler/c/lower/flex.py``) with score_mod/mask_mod traced and
inlined.  Values against torch 2.13's eager flex_attention (the oracle) and ember's eager
blockwise path; float32 tolerance (the kernel sums in another order than both)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember
from ember.config import config
from ember.nn.attention import flex_attention as efa

torch = pytest.importorskip("torch")
tfa = pytest.importorskip("torch.nn.attention.flex_attention")

pytestmark = [
    pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None, reason="no C compiler"),
    pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile"),
    pytest.mark.filterwarnings("ignore:return_lse is deprecated"),
]

ATOL = 2e-5


def causal(b, h, q, kv):
    return q >= kv


def window(b, h, q, kv):
    return (q - kv <= 40) & (kv - q <= 40)


def prefix(b, h, q, kv):
    return kv < 37


def late_rows(b, h, q, kv):  # rows q < 70 keep nothing: output 0, lse -inf
    return (q >= kv) & (q >= 70)


def rel_bias(score, b, h, q, kv):
    return score + (q - kv) * 0.01


def alibi(score, b, h, q, kv):
    slope = (h + 1).float() * -0.125
    return score + slope * (q - kv).abs()


def soft_cap(score, b, h, q, kv):
    return 5 * lib_tanh(score / 5)


def lib_tanh(x):
    return torch.tanh(x) if isinstance(x, torch.Tensor) else ember.tanh(x)


def _pair(x: ember.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.array(x.numpy()))


def _qkv(B, HQ, HKV, L, S, E=32, dtype=ember.float32, seed=0):
    ember.manual_seed(seed)
    return (ember.randn(B, HQ, L, E, dtype=dtype), ember.randn(B, HKV, S, E, dtype=dtype),
            ember.randn(B, HKV, S, E, dtype=dtype))


def _run(q, k, v, score_mod=None, mask_fn=None, B=None, H=None, block=128, gqa=False,
         t_score_mod=None, t_mask_fn=None):
    """(compiled ember out, lse), (torch out, lse), explain output."""
    L, S = q.shape[-2], k.shape[-2]
    bm = None if mask_fn is None else efa.create_block_mask(mask_fn, B, H, L, S,
                                                            BLOCK_SIZE=block)
    tbm = None if mask_fn is None else tfa.create_block_mask(t_mask_fn or mask_fn, B, H, L, S,
                                                             device="cpu", BLOCK_SIZE=block)

    def fn(q, k, v):
        return efa.flex_attention(q, k, v, score_mod=score_mod, block_mask=bm,
                                  enable_gqa=gqa, return_lse=True)

    got = ember.compile(fn)(q, k, v)
    ex = ember.compiler.explain(fn)(q, k, v)
    want = tfa.flex_attention(_pair(q), _pair(k), _pair(v), score_mod=t_score_mod or score_mod,
                              block_mask=tbm, enable_gqa=gqa, return_lse=True)
    return got, want, ex


def _check(got, want, ex):
    assert ex.extern_count == 0, ex.externs
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    assert "flex_attention_fused" in str(ex)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=ATOL)


@pytest.mark.parametrize("mask", [None, causal, window, prefix, late_rows],
                         ids=["none", "causal", "window", "prefix", "late_rows"])
def test_masks_match_torch(mask):
    q, k, v = _qkv(2, 2, 2, 200, 200)
    _check(*_run(q, k, v, mask_fn=mask, block=64))


@pytest.mark.parametrize("score", [rel_bias, alibi, soft_cap], ids=["rel", "alibi", "softcap"])
def test_score_mods_match_torch(score):
    q, k, v = _qkv(1, 4, 4, 150, 170)
    _check(*_run(q, k, v, score_mod=score, mask_fn=causal, block=64))


def test_prefix_lm_or_masks_and_and_masks():
    q, k, v = _qkv(1, 2, 2, 256, 256)
    got, want, ex = _run(q, k, v, mask_fn=efa.or_masks(causal, prefix), block=64,
                         t_mask_fn=tfa.or_masks(causal, prefix))
    _check(got, want, ex)
    got, want, ex = _run(q, k, v, mask_fn=efa.and_masks(causal, window), block=64,
                         t_mask_fn=tfa.and_masks(causal, window))
    _check(got, want, ex)


def test_captured_bias_table_and_document_mask():
    L = 190
    ember.manual_seed(3)
    table = ember.randn(2 * L)
    t_table = _pair(table)
    doc = np.repeat(np.array([[0, 1, 2], [0, 0, 1]]), [60, 70, 60], axis=1)
    e_doc, t_doc = ember.tensor(doc), torch.tensor(doc)

    def e_bias(score, b, h, q, kv):
        return score + table[q - kv + L]

    def t_bias(score, b, h, q, kv):
        return score + t_table[q - kv + L]

    def e_document(b, h, q, kv):
        return e_doc[b, q] == e_doc[b, kv]

    def t_document(b, h, q, kv):
        return t_doc[b, q] == t_doc[b, kv]

    q, k, v = _qkv(2, 2, 2, L, L)
    _check(*_run(q, k, v, score_mod=e_bias, mask_fn=e_document, B=2, block=32,
                 t_score_mod=t_bias, t_mask_fn=t_document))


def test_gqa_and_lengths_not_multiple_of_block():
    q, k, v = _qkv(2, 8, 2, 77, 301)
    _check(*_run(q, k, v, mask_fn=prefix, score_mod=alibi, block=64, gqa=True))


def test_equal_to_eager_ember_and_float64():
    q, k, v = _qkv(1, 2, 2, 130, 130, dtype=ember.float64)
    bm = efa.create_block_mask(causal, None, None, 130, 130, BLOCK_SIZE=32)

    def fn(q, k, v):
        return efa.flex_attention(q, k, v, score_mod=soft_cap, block_mask=bm)

    got, want = ember.compile(fn)(q, k, v), fn(q, k, v)
    assert got.dtype == ember.float64
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_untraceable_mod_falls_back_to_the_blockwise_path():
    def branchy(score, b, h, q, kv):
        return score * 2 if bool((q > 3).all()) else score  # needs values: not traceable

    q, k, v = _qkv(1, 1, 1, 20, 20)
    fn = lambda q, k, v: efa.flex_attention(q, k, v, score_mod=branchy)  # noqa: E731
    ex = ember.compiler.explain(fn)(q, k, v)
    assert "flex_attention_fused" not in str(ex)
    want = efa.flex_attention(q, k, v, score_mod=branchy)
    np.testing.assert_allclose(ember.compile(fn)(q, k, v).numpy(), want.numpy(), atol=1e-6)


# ------------------------------------------------------------------------------- backward
def _dense_torch(q, k, v, score_mod, mask_mod, gqa=1):
    """softmax(score_mod(q k^T / sqrt(E)) masked) v from torch ops (torch's CPU flex_attention
    has no backward): the gradient oracle."""
    k = k.repeat_interleave(gqa, dim=1)
    v = v.repeat_interleave(gqa, dim=1)
    s = (q @ k.transpose(-2, -1)) / np.sqrt(q.shape[-1])
    idx = [torch.arange(n, dtype=torch.int32).view(*[n if i == d else 1 for i in range(4)])
           for d, n in enumerate(s.shape)]
    if score_mod is not None:
        s = score_mod(s, *idx)
    if mask_mod is not None:
        s = torch.where(mask_mod(*idx), s, -float("inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.where(torch.isneginf(lse)[..., None], 0.0, torch.exp(s - lse[..., None]))
    return p @ v


@pytest.mark.parametrize("gqa", [1, 2], ids=["mha", "gqa"])
def test_compiled_training_step_one_graph_matches_torch_gradients(gqa):
    B, HKV, L, E = 2, 2, 150, 16
    HQ = HKV * gqa
    ember.manual_seed(1)
    q = ember.randn(B, HQ, L, E, requires_grad=True)
    k = ember.randn(B, HKV, L, E, requires_grad=True)
    v = ember.randn(B, HKV, L, E, requires_grad=True)
    table = (ember.randn(2 * L) * 0.5).requires_grad_(True)
    t_table = _pair(table.detach()).requires_grad_(True)
    bm = efa.create_block_mask(causal, None, None, L, L, BLOCK_SIZE=64)

    def e_mod(score, b, h, qi, kv):
        return 4 * ember.tanh((score + table[qi - kv + L]) / 4)

    def t_mod(score, b, h, qi, kv):
        return 4 * torch.tanh((score + t_table[(qi - kv + L).long()]) / 4)

    def step(q, k, v):
        out = efa.flex_attention(q, k, v, score_mod=e_mod, block_mask=bm, enable_gqa=gqa > 1)
        (out * out).sum().backward()

    ex = ember.compiler.explain(step)(q, k, v)
    assert ex.graph_count == 1 and ex.extern_count == 0, ex.externs
    assert "flex_attention_fused_backward" in str(ex)
    for x in (q, k, v, table):
        x.grad = None
    ember.compile(step)(q, k, v)
    got = [x.grad.numpy() for x in (q, k, v, table)]
    tq, tk, tv = (_pair(x.detach()).requires_grad_(True) for x in (q, k, v))
    out = _dense_torch(tq, tk, tv, t_mod, causal, gqa)
    (out * out).sum().backward()
    for g, w in zip(got, (tq.grad, tk.grad, tv.grad, t_table.grad)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=2e-4)


def test_compiled_backward_equals_eager_backward_with_masks_and_lse_grad():
    ember.manual_seed(2)
    q, k, v = (ember.randn(1, 2, 130, 8, requires_grad=True) for _ in range(3))
    bm = efa.create_block_mask(efa.or_masks(causal, prefix), None, None, 130, 130,
                               BLOCK_SIZE=32)

    def step(q, k, v):
        out, lse = efa.flex_attention(q, k, v, score_mod=alibi, block_mask=bm,
                                      return_lse=True)
        (out.sum() + (lse * lse).sum()).backward()

    step(q, k, v)
    want = [x.grad.numpy().copy() for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    assert ember.compiler.explain(step)(q, k, v).extern_count == 0
    for x in (q, k, v):
        x.grad = None
    ember.compile(step)(q, k, v)
    for x, w in zip((q, k, v), want):
        np.testing.assert_allclose(x.grad.numpy(), w, rtol=1e-4, atol=2e-5)


# ------------------------------------------------------------------------- flash-decoding
def test_flash_decoding_is_chosen_by_shape():
    from ember.compiler.c.lower.flex import _splits

    assert _splits(1, 8, 1, 32768, 128, 128, 128) == 256       # decode: key partitions
    assert _splits(1, 8, 1, 32768, 128, 128, 1024) == 32       # PARTITION_SIZE option
    assert _splits(1, 8, 1024, 1024, 128, 128, 128) == 1        # prefill: row blocks suffice
    assert _splits(8, 16, 1, 4096, 128, 128, 128) == 1          # enough (batch, head) items


@pytest.mark.parametrize("L", [1, 5])
def test_compiled_flash_decoding_equals_unsplit_and_torch(L):
    S = 1000
    q, k, v = _qkv(1, 4, 2, L, S, E=16)

    def mask(b, h, qi, kv):
        return kv <= 650 + qi

    bm = efa.create_block_mask(mask, None, None, L, S)
    tbm = tfa.create_block_mask(mask, None, None, L, S, device="cpu")

    def run(opts):
        return ember.compile(lambda q, k, v: efa.flex_attention(
            q, k, v, score_mod=rel_bias, block_mask=bm, enable_gqa=True, return_lse=True,
            kernel_options=opts))(q, k, v)

    split, whole = run({"PARTITION_SIZE": 128}), run({"PARTITION_SIZE": 1 << 20})
    want = tfa.flex_attention(_pair(q), _pair(k), _pair(v), score_mod=rel_bias, block_mask=tbm,
                              enable_gqa=True, return_lse=True)
    for a, b, w in zip(split, whole, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a.numpy(), w.numpy(), rtol=1e-5, atol=ATOL)


def test_table_computed_inside_the_compiled_function_gets_its_gradient():
    L = 70
    ember.manual_seed(0)
    q, k, v = (ember.randn(1, 2, L, 8) for _ in range(3))
    param = ember.randn(2 * L, requires_grad=True)

    def fn(q, k, v):
        table = param * 2 + 1   # lazy inside the graph: captured as a node's value

        def bias(s, b, h, qi, kv):
            return s + table[qi - kv + L]

        out = efa.flex_attention(q, k, v, score_mod=bias)
        out.sum().backward()
        return out.detach()

    want = fn(q, k, v)
    g_want = param.grad.numpy().copy()
    param.grad = None
    ex = ember.compiler.explain(fn)(q, k, v)
    assert ex.extern_count == 0 and ex.graph_count == 1
    assert "flex_attention_fused_backward" in str(ex)
    param.grad = None
    got = ember.compile(fn)(q, k, v)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(param.grad.numpy(), g_want, rtol=1e-4, atol=1e-5)


def _where_mod(lib):
    def where_mod(score, b, h, q, kv):  # a Python -inf constant in a float where
        return lib.where(q >= kv, score * 0.5, -float("inf"))
    return where_mod


def _sigmoid_mod(lib):
    def sigmoid_mod(score, b, h, q, kv):
        return score * lib.sigmoid(score) + lib.exp(-(q - kv).abs() * 0.1)
    return sigmoid_mod


@pytest.mark.parametrize("make", [_where_mod, _sigmoid_mod], ids=["where_inf", "sigmoid_exp"])
def test_constants_and_more_ops_in_score_mod(make):
    q, k, v = _qkv(1, 2, 2, 50, 50, E=8)
    fn = lambda q, k, v: efa.flex_attention(q, k, v, score_mod=make(ember))  # noqa: E731
    ex = ember.compiler.explain(fn)(q, k, v)
    assert ex.extern_count == 0 and "flex_attention_fused" in str(ex)
    want = tfa.flex_attention(_pair(q), _pair(k), _pair(v), score_mod=make(torch))
    np.testing.assert_allclose(ember.compile(fn)(q, k, v).numpy(), want.numpy(), rtol=1e-5,
                               atol=ATOL)


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16], ids=["bf16", "f16"])
def test_low_precision_computes_in_float32_like_eager(dtype):
    q, k, v = (x.to(dtype) for x in _qkv(1, 2, 2, 90, 90, E=16))
    bm = efa.create_block_mask(causal, None, None, 90, 90, BLOCK_SIZE=32)

    def fn(q, k, v):
        return efa.flex_attention(q, k, v, score_mod=soft_cap, block_mask=bm)

    ex = ember.compiler.explain(fn)(q, k, v)
    assert ex.extern_count == 0 and "flex_attention_fused" in str(ex)
    got, want = ember.compile(fn)(q, k, v), fn(q, k, v)
    assert got.dtype == dtype
    eps = 2.0 ** -7 if dtype == ember.bfloat16 else 2.0 ** -10
    # both compute in float32 and round once: at most one rounding step apart
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2 * eps,
                               atol=2 * eps)


@pytest.mark.parametrize("march", ["x86-64-v4", "x86-64-v3", "x86-64"])
def test_transposed_tile_forward_on_each_instruction_set(monkeypatch, march):
    """The forward template with S^T tiles (csrc/flex_attention_t.c.in) has a 16-lane/8-row
    micro-tile under AVX-512 and an 8-lane/6-row one otherwise: each is built explicitly for
    its level (whatever the host prefers) and checked against torch, with a length that is
    not a multiple of the block or of the vector, GQA, a score_mod and a captured table."""
    from ember.compiler.c import backend as cbackend
    from ember.compiler.c.build.toolchain import host_can_run
    from ember.compiler.c.codegen import flex

    if not host_can_run(march):
        pytest.skip(f"the host cannot run {march} code")
    extra = (f"-march={march}",) + (("-mno-avx512f",) if march != "x86-64-v4" else ())
    monkeypatch.setattr(cbackend, "EXTRA_FLAGS", cbackend.EXTRA_FLAGS + extra)
    monkeypatch.setattr(cbackend, "_load_plan", lambda key: None)  # a warm run plan skips codegen
    used = []
    real = flex.transposed_tiles
    monkeypatch.setattr(flex, "transposed_tiles", lambda k: used.append(real(k)) or used[-1])
    L = 150
    table = ember.randn(2 * L)
    t_table = _pair(table)

    def e_bias(score, b, h, q, kv):
        return score + table[q - kv + L]

    def t_bias(score, b, h, q, kv):
        return score + t_table[q - kv + L]

    q, k, v = _qkv(1, 4, 2, L, L, E=40)
    _check(*_run(q, k, v, score_mod=e_bias, mask_fn=causal, block=64, gqa=True,
                 t_score_mod=t_bias))
    assert used and all(used)
    # the backward (csrc/flex_attention_bwd_t.c.in) on the same level, against torch's
    # gradients through its eager math (torch's CPU flex has no backward): a dense reference
    table.requires_grad_(True)
    bm = efa.create_block_mask(causal, None, None, L, L, BLOCK_SIZE=64)
    qs = [x.detach().requires_grad_(True) for x in (q, k, v)]

    def step(q, k, v):
        out = efa.flex_attention(q, k, v, score_mod=e_bias, block_mask=bm, enable_gqa=True)
        (out * out).sum().backward()

    used.clear()
    ember.compile(step)(*qs)
    assert used and all(used)
    tq, tk, tv = (_pair(x).requires_grad_(True) for x in (q, k, v))
    tt = t_table.clone().requires_grad_(True)
    kk, vv = tk.repeat_interleave(2, dim=1), tv.repeat_interleave(2, dim=1)
    idx = torch.arange(L)
    sc = tq @ kk.transpose(-1, -2) / np.sqrt(40) + tt[idx[:, None] - idx[None, :] + L]
    sc = sc.masked_fill(idx[:, None] < idx[None, :], float("-inf"))
    tout = torch.softmax(sc, -1) @ vv
    (tout * tout).sum().backward()
    for g, w in zip([x.grad for x in qs] + [table.grad], [tq.grad, tk.grad, tv.grad, tt.grad]):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-4)


def _bwd_grads(q, k, v, table, L, threads):
    """Gradients of q, k, v and a captured bias table through a compiled causal step (GQA,
    K/V broadcast over the batch) on ``threads`` threads."""
    bm = efa.create_block_mask(causal, q.shape[0], None, L, L, BLOCK_SIZE=64)

    def bias(score, b, h, qi, kv):
        return score + table[qi - kv + L]

    def step(q, k, v):
        out = efa.flex_attention(q, k, v, score_mod=bias, block_mask=bm, enable_gqa=True)
        (out * out).sum().backward()

    xs = [x.detach().requires_grad_(True) for x in (q, k, v)]
    table.grad = None
    before = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        ember.compile(step)(*xs)
    finally:
        ember.set_num_threads(before)
    return [x.grad.numpy() for x in xs] + [table.grad.numpy()]


def test_single_pass_backward_threads_gqa_batch_broadcast_and_table(monkeypatch):
    """The one-pass transposed backward (csrc/flex_attention_bwd_1p.c.in: dQ in per-thread
    buffers, captured gradients by atomics) on 1 and 3 threads, its two-pass fallback when
    the buffers would pass DQ_CAP, and the two-pass kernel, against torch's dense math."""
    from ember.compiler.c import backend as cbackend
    from ember.compiler.c.codegen import flex

    monkeypatch.setattr(cbackend, "_load_plan", lambda key: None)   # generate, never reuse
    L, E = 150, 40
    ember.manual_seed(5)
    q = ember.randn(2, 4, L, E)
    k, v = ember.randn(1, 2, L, E), ember.randn(1, 2, L, E)   # broadcast over the batch
    table = (ember.randn(2 * L) * 0.5).requires_grad_(True)
    used = []
    real = flex._single_pass_fmt
    monkeypatch.setattr(flex, "_single_pass_fmt", lambda *a: used.append(a[0]) or real(*a))
    one, three = _bwd_grads(q, k, v, table, L, 1), _bwd_grads(q, k, v, table, L, 3)
    assert used
    tq, tk, tv = (_pair(x).requires_grad_(True) for x in (q, k, v))
    tt = _pair(table.detach()).requires_grad_(True)
    idx = torch.arange(L)
    sc = (tq @ tk.repeat_interleave(2, 1).transpose(-1, -2) / np.sqrt(E)
          + tt[idx[:, None] - idx[None, :] + L])
    sc = sc.masked_fill(idx[:, None] < idx[None, :], float("-inf"))
    tout = torch.softmax(sc, -1) @ tv.repeat_interleave(2, 1)
    (tout * tout).sum().backward()
    want = [x.grad.numpy() for x in (tq, tk, tv, tt)]
    for a, b, w in zip(one, three, want):
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)   # only the dQ sum order differs
    monkeypatch.setattr(flex, "DQ_CAP", 0)      # the per-thread buffers do not fit
    capped = _bwd_grads(q, k, v, table, L, 3)
    monkeypatch.setattr(flex, "DQ_CAP", 256 << 20)
    monkeypatch.setattr(flex, "SINGLE_PASS", False)
    used.clear()
    two = _bwd_grads(q, k, v, table, L, 3)
    assert not used
    for a, b, c in zip(one, capped, two):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(c, a, rtol=1e-5, atol=1e-5)

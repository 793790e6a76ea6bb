"""ember.nn.attention.flex_attention against torch 2.13 (eager flex_attention on the CPU, its
create_block_mask) and, for gradients (torch's CPU flex has no backward), a dense torch
reference built from torch ops."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import ember
from ember.errors import EmberError, ShapeError
from ember.nn.attention import flex_attention as efa

torch = pytest.importorskip("torch")
tfa = pytest.importorskip("torch.nn.attention.flex_attention")

pytestmark = [
    pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile"),
    pytest.mark.filterwarnings("ignore:return_lse is deprecated"),
]


def _t(x: ember.Tensor) -> torch.Tensor:
    a = x.detach().float().numpy() if x.dtype == ember.bfloat16 else x.detach().numpy()
    t = torch.from_numpy(np.array(a))
    return t.to(torch.bfloat16) if x.dtype == ember.bfloat16 else t


def _np(x) -> np.ndarray:  # noqa: ANN001
    if isinstance(x, torch.Tensor):
        return x.detach().float().numpy() if x.dtype == torch.bfloat16 else x.detach().numpy()
    return x.detach().float().numpy() if x.dtype == ember.bfloat16 else x.detach().numpy()


# ---------------------------------------------------------------- mods, written once per library
def causal(b, h, q, kv):
    return q >= kv


def make_window(w):
    def sliding_window(b, h, q, kv):
        return (q - kv <= w) & (kv - q <= w)
    return sliding_window


def make_prefix(n):
    def prefix(b, h, q, kv):
        return kv < n
    return prefix


def make_document(doc_ids):
    def document(b, h, q, kv):
        return doc_ids[b, q] == doc_ids[b, kv]
    return document


def head_dependent(b, h, q, kv):
    return (q + h) >= kv


MASKS = {
    "causal": (lambda lib: causal, 1, 1, 300, 300, 128),
    "window": (lambda lib: make_window(100), None, None, 512, 512, 128),
    "prefix_lm": (lambda lib: lib.or_masks(causal, make_prefix(70)), None, None, 256, 256, 64),
    "and_masks": (lambda lib: lib.and_masks(causal, make_window(50)), None, None, 200, 333,
                  (64, 32)),
    "heads": (lambda lib: head_dependent, 2, 3, 130, 190, 64),
    "noop": (lambda lib: lib.noop_mask, None, None, 100, 260, 128),
}

DOC = np.repeat(np.array([[0, 1, 2, 3], [0, 0, 1, 1]]), [50, 90, 40, 76], axis=1)


def _both_block_masks(name):
    fn, B, H, L, S, bs = MASKS[name]
    e = efa.create_block_mask(fn(efa), B, H, L, S, device="cpu", BLOCK_SIZE=bs)
    t = tfa.create_block_mask(fn(tfa), B, H, L, S, device="cpu", BLOCK_SIZE=bs)
    return e, t


FIELDS = ["kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
          "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices"]


def _assert_same_block_mask(e, t):
    for f in FIELDS:
        ev, tv = getattr(e, f), getattr(t, f)
        assert (ev is None) == (tv is None), f
        if ev is not None:
            assert ev.dtype == ember.int32 and tuple(ev.shape) == tuple(tv.shape), f
            np.testing.assert_array_equal(ev.numpy(), tv.numpy(), err_msg=f)
    assert e.BLOCK_SIZE == tuple(t.BLOCK_SIZE)
    assert e.seq_lengths == tuple(t.seq_lengths)
    assert e.shape == tuple(t.shape)
    assert e.numel() == t.numel()
    assert e.sparsity() == pytest.approx(t.sparsity())
    np.testing.assert_array_equal(e.to_dense().numpy(), t.to_dense().numpy())
    assert e.to_string() == t.to_string()
    assert str(e) == str(t)
    assert repr(e) == repr(t).replace("torch.Size", "ember.Size")


@pytest.mark.parametrize("name", sorted(MASKS))
def test_block_mask_fields_match_torch(name):
    e, t = _both_block_masks(name)
    _assert_same_block_mask(e, t)


def test_document_block_mask_and_create_mask_match_torch():
    e = efa.create_block_mask(make_document(ember.tensor(DOC)), 2, None, 256, 256,
                              BLOCK_SIZE=32)
    t = tfa.create_block_mask(make_document(torch.tensor(DOC)), 2, None, 256, 256,
                              device="cpu", BLOCK_SIZE=32)
    _assert_same_block_mask(e, t)
    em = efa.create_mask(make_document(ember.tensor(DOC)), 2, 1, 256, 256)
    tm = tfa.create_mask(make_document(torch.tensor(DOC)), 2, 1, 256, 256, device="cpu")
    assert em.dtype == ember.bool
    np.testing.assert_array_equal(em.numpy(), tm.numpy())


def test_to_string_limit_and_grid():
    e, t = _both_block_masks("heads")
    assert e.to_string(grid_size=2, limit=2) == t.to_string(grid_size=2, limit=2)
    assert e.to_string(grid_size=-1) == t.to_string(grid_size=-1)


def test_getitem_adjust_from_kv_blocks_as_tuple_to():
    e, t = _both_block_masks("heads")
    for idx in [1, (0, 2), (slice(0, 2), slice(1, 2)), (-1,)]:
        _assert_same_block_mask(e[idx], t[idx])
    with pytest.raises(RuntimeError):
        e[0].mask_mod(*(ember.tensor(0),) * 4)
    e, t = _both_block_masks("causal")
    _assert_same_block_mask(e._adjust(200, 250), t._adjust(200, 250))
    e2 = efa.BlockMask.from_kv_blocks(e.kv_num_blocks, e.kv_indices, BLOCK_SIZE=64)
    t2 = tfa.BlockMask.from_kv_blocks(t.kv_num_blocks, t.kv_indices, BLOCK_SIZE=64)
    _assert_same_block_mask(e2, t2)
    tup = e.as_tuple()
    assert tup[:2] == (300, 300) and tup[-3:-1] == (128, 128) and tup[-1] is causal
    assert len(e.as_tuple(flatten=False)) == len(tup) - 2
    _assert_same_block_mask(e.to("cpu"), t)


# ------------------------------------------------------------------------------ forward vs torch
def _qkv(B, Hq, Hkv, L, S, E, Ev, dtype=ember.float32, Bkv=None, seed=0):
    g = np.random.default_rng(seed)
    q = ember.tensor(g.standard_normal((B, Hq, L, E)).astype(np.float32)).to(dtype)
    k = ember.tensor(g.standard_normal((Bkv or B, Hkv, S, E)).astype(np.float32)).to(dtype)
    v = ember.tensor(g.standard_normal((Bkv or B, Hkv, S, Ev)).astype(np.float32)).to(dtype)
    return q, k, v


def _score_mods(lib, H):
    slopes = lib.tensor([2.0 ** (-8 * (i + 1) / H) for i in range(H)])
    table = lib.tensor(np.random.default_rng(1).standard_normal(2 * 400).astype(np.float32))

    def alibi(score, b, h, q, kv):
        return score + slopes[h] * (kv - q)

    def softcap(score, b, h, q, kv):
        return 20.0 * lib.tanh(score / 20.0)

    def rel_bias(score, b, h, q, kv):
        return score + table[q - kv + 400]

    return {"none": None, "alibi": alibi, "softcap": softcap, "rel_bias": rel_bias}


def _compare(e_args, t_args, kw_e, kw_t, atol, rtol):
    eo, e_lse = efa.flex_attention(*e_args, return_lse=True, **kw_e)
    to, tlse = tfa.flex_attention(*t_args, return_lse=True, **kw_t)
    assert tuple(eo.shape) == tuple(to.shape) and tuple(e_lse.shape) == tuple(tlse.shape)
    assert str(eo.dtype).split(".")[-1] == str(to.dtype).split(".")[-1]
    assert str(e_lse.dtype).split(".")[-1] == str(tlse.dtype).split(".")[-1]
    np.testing.assert_allclose(_np(eo), _np(to), atol=atol, rtol=rtol)
    np.testing.assert_allclose(_np(e_lse), _np(tlse), atol=atol, rtol=rtol)
    return eo, e_lse


@pytest.mark.parametrize("mod", ["none", "alibi", "softcap", "rel_bias"])
def test_forward_causal_score_mods_match_torch(mod):
    q, k, v = _qkv(2, 4, 4, 300, 300, 16, 24)
    e_bm, t_bm = _both_block_masks("causal")
    _compare((q, k, v), (_t(q), _t(k), _t(v)),
             {"score_mod": _score_mods(ember, 4)[mod], "block_mask": e_bm},
             {"score_mod": _score_mods(torch, 4)[mod], "block_mask": t_bm}, 2e-5, 2e-5)


@pytest.mark.parametrize("name", ["window", "prefix_lm", "and_masks", "heads", "noop"])
def test_forward_masks_match_torch(name):
    _, B, H, L, S, _ = MASKS[name]
    q, k, v = _qkv(B or 1, H or 2, H or 2, L, S, 8, 8, seed=3)
    e_bm, t_bm = _both_block_masks(name)
    _compare((q, k, v), (_t(q), _t(k), _t(v)), {"block_mask": e_bm}, {"block_mask": t_bm},
             2e-5, 2e-5)


def test_no_block_mask_gqa_batch_broadcast_scale_float64():
    q, k, v = _qkv(3, 6, 2, 70, 150, 16, 8, dtype=ember.float64, Bkv=1)
    e_bm = efa.create_block_mask(causal, 3, None, 70, 150, BLOCK_SIZE=32)
    t_bm = tfa.create_block_mask(causal, 3, None, 70, 150, device="cpu", BLOCK_SIZE=32)
    kw = {"enable_gqa": True, "scale": 0.3}
    _compare((q, k, v), (_t(q), _t(k), _t(v)), {"block_mask": e_bm, **kw},
             {"block_mask": t_bm, **kw}, 1e-12, 1e-12)
    q, k, v = _qkv(2, 4, 2, 70, 150, 16, 8)
    _compare((q, k, v), (_t(q), _t(k), _t(v)), {"enable_gqa": True}, {"enable_gqa": True},
             2e-5, 2e-5)


def test_fully_masked_rows_give_zero_and_neg_inf_lse():
    def holes(b, h, q, kv):
        return (q >= kv) & (q % 7 != 3)

    q, k, v = _qkv(1, 2, 2, 200, 200, 8, 8)
    e_bm = efa.create_block_mask(holes, None, None, 200, 200, BLOCK_SIZE=64)
    t_bm = tfa.create_block_mask(holes, None, None, 200, 200, device="cpu", BLOCK_SIZE=64)
    eo, e_lse = _compare((q, k, v), (_t(q), _t(k), _t(v)), {"block_mask": e_bm},
                        {"block_mask": t_bm}, 2e-5, 2e-5)
    assert (eo.numpy()[:, :, 3] == 0).all() and np.isneginf(e_lse.numpy()[:, :, 3]).all()

    def upper(b, h, q, kv):  # a whole q block with nothing to attend
        return kv > q + 100

    e_bm = efa.create_block_mask(upper, None, None, 200, 200, BLOCK_SIZE=64)
    o, aux = efa.flex_attention(q, k, v, block_mask=e_bm,
                                return_aux=efa.AuxRequest(lse=True, max_scores=True))
    assert (o.numpy()[:, :, 150:] == 0).all() and np.isneginf(aux.lse.numpy()[:, :, 150:]).all()
    assert np.isneginf(aux.max_scores.numpy()[:, :, 150:]).all()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_matches_torch(dtype):
    q, k, v = _qkv(1, 2, 2, 160, 160, 16, 16, dtype=getattr(ember, dtype))
    e_bm, t_bm = efa.create_block_mask(causal, None, None, 160, 160, BLOCK_SIZE=64), \
        tfa.create_block_mask(causal, None, None, 160, 160, device="cpu", BLOCK_SIZE=64)
    eps = float(np.finfo(np.float16).eps) if dtype == "float16" else 2.0 ** -7
    # both compute in float32 and round the output once: at most one rounding step apart
    _compare((q, k, v), (_t(q), _t(k), _t(v)), {"block_mask": e_bm}, {"block_mask": t_bm},
             2 * eps, 2 * eps)


# --------------------------------------------------------------- dense torch reference (grads)
def _dense_ref(q, k, v, score_mod, mask_mod, scale=None, gqa=1):
    k = k.repeat_interleave(gqa, dim=1)
    v = v.repeat_interleave(gqa, dim=1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-2, -1)) * scale
    B, H, L, S = s.shape
    idx = [torch.arange(n, dtype=torch.int32).view(*[n if i == d else 1 for i in range(4)])
           for d, n in enumerate((B, H, L, S))]
    if score_mod is not None:
        s = score_mod(s, *idx)
    if mask_mod is not None:
        s = torch.where(mask_mod(*idx), s, -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.where(torch.isneginf(lse)[..., None], 0.0, torch.exp(s - lse[..., None]))
    return p @ v, lse, s.amax(-1)


def test_gradients_qkv_and_captured_bias_match_dense_torch():
    H = 2
    q, k, v = _qkv(2, H, H, 150, 150, 8, 8, dtype=ember.float64)
    tb = np.random.default_rng(5).standard_normal((H, 150, 150))
    eb = ember.tensor(tb, requires_grad=True)
    tbias = torch.tensor(tb, requires_grad=True)
    for x in (q, k, v):
        x.requires_grad_(True)
    tq, tk, tv = (_t(x).requires_grad_(True) for x in (q, k, v))

    def mods(bias):
        def bias_mod(score, b, h, qi, kv):
            return score + bias[h, qi, kv]
        return bias_mod

    bm = efa.create_block_mask(make_window(40), None, None, 150, 150, BLOCK_SIZE=32)
    out, lse = efa.flex_attention(q, k, v, score_mod=mods(eb), block_mask=bm, return_lse=True)
    tout, tlse, _ = _dense_ref(tq, tk, tv, mods(tbias), make_window(40))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(lse.detach().numpy(), tlse.detach().numpy(), atol=1e-12)
    g = np.random.default_rng(6).standard_normal(tuple(out.shape))
    gl = np.random.default_rng(7).standard_normal(tuple(lse.shape))
    ((out * ember.tensor(g)).sum() + (lse * ember.tensor(gl)).sum()).backward()
    ((tout * torch.tensor(g)).sum() + (tlse * torch.tensor(gl)).sum()).backward()
    for e, t in [(q, tq), (k, tk), (v, tv), (eb, tbias)]:
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), atol=1e-10, rtol=1e-9)


def test_gradients_gqa_softcap_float32():
    q, k, v = _qkv(1, 4, 2, 96, 130, 16, 8)
    for x in (q, k, v):
        x.requires_grad_(True)
    tq, tk, tv = (_t(x).requires_grad_(True) for x in (q, k, v))
    bm = efa.create_block_mask(causal, None, None, 96, 130, BLOCK_SIZE=32)
    out = efa.flex_attention(q, k, v, score_mod=_score_mods(ember, 4)["softcap"],
                             block_mask=bm, enable_gqa=True)
    tout, _, _ = _dense_ref(tq, tk, tv, _score_mods(torch, 4)["softcap"], causal, gqa=2)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), atol=2e-6)
    out.square().sum().backward()
    tout.square().sum().backward()
    for e, t in [(q, tq), (k, tk), (v, tv)]:
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), atol=2e-5, rtol=1e-4)


def test_max_scores_match_dense_reference():
    q, k, v = _qkv(1, 2, 2, 100, 100, 8, 8, dtype=ember.float64)
    bm = efa.create_block_mask(causal, None, None, 100, 100, BLOCK_SIZE=32)
    alibi = _score_mods(ember, 2)["alibi"]
    _, aux = efa.flex_attention(q, k, v, score_mod=alibi, block_mask=bm,
                                return_aux=efa.AuxRequest(max_scores=True))
    assert aux.lse is None
    _, _, tmax = _dense_ref(_t(q), _t(k), _t(v), _score_mods(torch, 2)["alibi"], causal)
    np.testing.assert_allclose(aux.max_scores.numpy(), tmax.numpy(), atol=1e-12)


# ------------------------------------------------------------------------------------ bad input
def test_errors():
    q, k, v = _qkv(1, 4, 2, 64, 64, 8, 8)
    with pytest.raises(ValueError, match="same number of heads"):
        efa.flex_attention(q, k, v)
    q3, _, _ = _qkv(1, 3, 2, 64, 64, 8, 8)
    with pytest.raises(ValueError, match="multiple of kv heads"):
        efa.flex_attention(q3, k, v, enable_gqa=True)
    with pytest.raises(ValueError, match="same embedding dimension"):
        efa.flex_attention(q[..., :4], k, v, enable_gqa=True)
    with pytest.raises(TypeError, match="same dtype"):
        efa.flex_attention(q, k.double(), v, enable_gqa=True)
    bm = efa.create_block_mask(causal, None, None, 32, 32)
    with pytest.raises(ValueError, match="smaller length"):
        efa.flex_attention(q, k, v, block_mask=bm, enable_gqa=True)
    with pytest.raises(ValueError, match="_adjust"):
        efa.flex_attention(q, k, v, block_mask=efa.create_block_mask(causal, 1, 1, 128, 64),
                           enable_gqa=True)
    with pytest.raises(ShapeError, match=r"\[flex_attention score_mod\].*does not broadcast"):
        efa.flex_attention(q, k, v, score_mod=lambda s, b, h, qi, kv: s.sum(-1),
                           enable_gqa=True)
    with pytest.raises(ValueError, match="5 positional"):
        efa.flex_attention(q, k, v, score_mod=causal, enable_gqa=True)
    with pytest.raises(RuntimeError, match="sliced BlockMask"):
        big = efa.create_block_mask(causal, 2, 1, 64, 64)
        efa.flex_attention(q, k, v, block_mask=big[0:1], enable_gqa=True)
    with pytest.raises(ValueError, match="return_lse and return_aux"):
        efa.flex_attention(q, k, v, enable_gqa=True, return_lse=True,
                           return_aux=efa.AuxRequest(lse=True))
    with pytest.raises(AssertionError, match="mask_mod"):
        efa.create_block_mask(lambda s, b, h, qi, kv: s, 1, 1, 8, 8)
    assert issubclass(ShapeError, EmberError)


# ---------------------------------------------------------------------------------------- memory
def test_causal_4096_never_allocates_the_score_matrix():
    L = 4096
    q, k, v = _qkv(1, 1, 1, L, L, 16, 16)
    tracemalloc.start()
    try:
        bm = efa.create_block_mask(causal, None, None, L, L)
        out = efa.flex_attention(q, k, v, block_mask=bm)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    dense_bytes = L * L * 4
    assert peak < dense_bytes / 8, (peak, dense_bytes)
    # spot-check rows against a dense reference on a slice
    rows = slice(4000, 4096)
    tq, tk, tv = _t(q), _t(k), _t(v)
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    np.testing.assert_allclose(out.numpy()[:, :, rows], ref.numpy()[:, :, rows], atol=1e-5)


@pytest.mark.parametrize("case", ["alibi_lse_holes", "batch_broadcast_gqa", "no_mask"])
def test_blockwise_backward_matches_dense_torch(case):
    def holes(b, h, q, kv):
        return (q >= kv) & (q % 5 != 2)

    B, Hq, Hkv, Bkv, L, S, mask, mod = {
        "alibi_lse_holes": (2, 2, 2, None, 100, 100, holes, "alibi"),
        "batch_broadcast_gqa": (3, 4, 2, 1, 90, 120, causal, "rel_bias"),
        "no_mask": (1, 2, 2, None, 70, 200, None, "none"),
    }[case]
    q, k, v = _qkv(B, Hq, Hkv, L, S, 8, 4, dtype=ember.float64, Bkv=Bkv, seed=9)
    for x in (q, k, v):
        x.requires_grad_(True)
    tq, tk, tv = (_t(x).requires_grad_(True) for x in (q, k, v))
    bm = None if mask is None else efa.create_block_mask(mask, B, None, L, S, BLOCK_SIZE=32)
    out, aux = efa.flex_attention(q, k, v, score_mod=_score_mods(ember, Hq)[mod], block_mask=bm,
                                  enable_gqa=Hq != Hkv, return_aux=efa.AuxRequest(lse=True))
    assert "FlexAttentionFunction" in type(out.grad_fn).__name__ or \
        "FlexAttentionFunction" in out.grad_fn.name()
    tout, tlse, _ = _dense_ref(tq, tk, tv, _score_mods(torch, Hq)[mod], mask, gqa=Hq // Hkv)
    g = np.random.default_rng(2).standard_normal(tuple(out.shape))
    gl = np.random.default_rng(3).standard_normal(tuple(aux.lse.shape))
    live = np.isfinite(tlse.detach().numpy())
    ((out * ember.tensor(g)).sum() + (aux.lse * ember.tensor(gl * live)).sum()).backward()
    ((tout * torch.tensor(g)).sum() + (torch.where(torch.tensor(live), tlse, 0.0)
                                       * torch.tensor(gl)).sum()).backward()
    for e, t in [(q, tq), (k, tk), (v, tv)]:
        assert tuple(e.grad.shape) == tuple(t.grad.shape)
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), atol=1e-10, rtol=1e-9)


def test_blockwise_backward_memory_stays_below_score_matrix():
    L = 2048
    q, k, v = _qkv(1, 1, 1, L, L, 16, 16)
    for x in (q, k, v):
        x.requires_grad_(True)
    bm = efa.create_block_mask(causal, None, None, L, L)
    tracemalloc.start()
    try:
        efa.flex_attention(q, k, v, block_mask=bm).sum().backward()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < L * L * 4 / 4, peak
    assert q.grad is not None and np.isfinite(q.grad.numpy()).all()


def test_double_backward_matches_dense_torch():
    q, k, v = _qkv(1, 2, 2, 40, 40, 8, 8, dtype=ember.float64, seed=4)
    for x in (q, k, v):
        x.requires_grad_(True)
    tq, tk, tv = (_t(x).requires_grad_(True) for x in (q, k, v))
    bm = efa.create_block_mask(causal, None, None, 40, 40, BLOCK_SIZE=16)
    out = efa.flex_attention(q, k, v, block_mask=bm)
    (gq,) = ember.autograd.grad(out.square().sum(), q, create_graph=True)
    gq.sum().backward()
    tout, _, _ = _dense_ref(tq, tk, tv, None, causal)
    (tgq,) = torch.autograd.grad(tout.square().sum(), tq, create_graph=True)
    tgq.sum().backward()
    np.testing.assert_allclose(gq.detach().numpy(), tgq.detach().numpy(), atol=1e-12)
    for e, t in [(k, tk), (v, tv)]:
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), atol=1e-12)


def test_create_mask_from_score_mod_matches_torch():
    def lib_mod(lib):
        def drop_far(score, b, h, q, kv):
            return lib.where((q - kv).abs() > 3, -float("inf"), score)
        return drop_far

    em = efa.create_mask(lib_mod(ember), 1, 2, 20, 30)
    tm = tfa.create_mask(lib_mod(torch), 1, 2, 20, 30, device="cpu")
    np.testing.assert_array_equal(em.numpy(), tm.numpy())


def test_only_listed_blocks_are_visited():
    # a hand-built BlockMask listing only the diagonal 32x32 blocks (noop mask_mod): attention
    # is block-diagonal, as in PyTorch's kernels
    n = 4
    num = ember.ones((1, 1, n), dtype=ember.int32)
    idx = ember.tensor(np.argsort(-np.eye(n, dtype=np.int32), axis=-1, kind="stable")
                       .astype(np.int32)[None, None])
    bm = efa.BlockMask.from_kv_blocks(num, idx, BLOCK_SIZE=32)
    assert bm.sparsity() == pytest.approx(75.0)
    q, k, v = _qkv(1, 2, 2, 128, 128, 8, 8, dtype=ember.float64)

    def block_diag(b, h, qi, kv):
        return qi // 32 == kv // 32

    out = efa.flex_attention(q, k, v, block_mask=bm)
    ref, _, _ = _dense_ref(_t(q), _t(k), _t(v), None, block_diag)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=1e-12)
    out2 = efa.flex_attention(q, k, v, kernel_options={"BLOCK_M": 16, "BLOCK_N": 48})
    ref2, _, _ = _dense_ref(_t(q), _t(k), _t(v), None, None)
    np.testing.assert_allclose(out2.numpy(), ref2.numpy(), atol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_backward_close_to_float64_reference(dtype):
    q, k, v = _qkv(1, 2, 2, 96, 96, 16, 16, dtype=getattr(ember, dtype), seed=8)
    for x in (q, k, v):
        x.requires_grad_(True)
    bm = efa.create_block_mask(causal, None, None, 96, 96, BLOCK_SIZE=32)
    efa.flex_attention(q, k, v, block_mask=bm).sum().backward()
    tq, tk, tv = (torch.from_numpy(_np(x).astype(np.float64)).requires_grad_(True)
                  for x in (q, k, v))
    _dense_ref(tq, tk, tv, None, causal)[0].sum().backward()
    eps = float(np.finfo(np.float16).eps) if dtype == "float16" else 2.0 ** -7
    for e, t in [(q, tq), (k, tk), (v, tv)]:
        assert e.grad.dtype == e.dtype
        g = t.grad.numpy()
        # float32 inside, one rounding of the result: within a few eps of the gradient's scale
        np.testing.assert_allclose(_np(e.grad), g, atol=4 * eps * np.abs(g).max(), rtol=2 * eps)

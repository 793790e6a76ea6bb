"""MultiheadAttention, TransformerEncoderLayer and TransformerEncoder against torch.nn
(float64, torch's initial state copied into ember): outputs, attention weights, input and
parameter gradients, reprs, state_dict keys, mask semantics."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember.nn import functional as EF
from ember.nn.modules.activation_attention import MultiheadAttention
from ember.nn.modules.normalization import LayerNorm
from ember.nn.modules.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from tests.nn._layer_utils import assert_close_all, load_from_torch, run_both, to_np

torch = pytest.importorskip("torch")
tnn = torch.nn

TOL = dict(rtol=1e-9, atol=1e-10)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def perturb(e, t, seed=5):
    """Non-trivial values everywhere (torch zero-inits the attention biases)."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in t.parameters():
            p.add_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.2))
    load_from_torch(e, t)


def check_meta(e, t):
    assert repr(e) == repr(t).replace("torch.", "ember.")
    assert list(e.state_dict().keys()) == list(t.state_dict().keys())
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]


def mha_pair(*args, **kwargs):
    e = MultiheadAttention(*args, dtype=ember.float64, **kwargs)
    t = tnn.MultiheadAttention(*args, dtype=torch.float64, **kwargs)
    check_meta(e, t)
    perturb(e, t)
    return e, t


def kpm(b, s, seed=1):
    m = np.random.default_rng(seed).random((b, s)) < 0.35
    m[:, 0] = False  # every row keeps at least one key
    return m


MHA_CASES = [
    # (ctor kwargs, (L, S, N), forward kwargs)
    ({}, (4, 5, 2), {}),
    ({}, (4, 5, 2), dict(need_weights=False)),
    ({}, (4, 5, 2), dict(average_attn_weights=False)),
    (dict(batch_first=True), (4, 5, 2), {}),
    (dict(batch_first=True), (4, 5, 2), dict(need_weights=False)),
    ({}, (4, 5, 2), dict(key_padding_mask=kpm(2, 5))),
    ({}, (4, 5, 2), dict(key_padding_mask=kpm(2, 5), need_weights=False)),
    ({}, (4, 5, 2), dict(key_padding_mask=np.where(kpm(2, 5), -1e9, 0.0))),
    ({}, (4, 5, 2), dict(attn_mask=np.triu(np.ones((4, 5), bool), 2))),
    ({}, (4, 5, 2), dict(attn_mask=np.triu(np.ones((4, 5), bool), 2), need_weights=False)),
    ({}, (4, 5, 2), dict(attn_mask=rand(2 * 2, 4, 5, seed=7))),
    ({}, (4, 5, 2), dict(attn_mask=rand(2 * 2, 4, 5, seed=7), need_weights=False,
                         key_padding_mask=kpm(2, 5))),
    ({}, (4, 5, 2), dict(attn_mask=rand(4, 5, seed=8), key_padding_mask=kpm(2, 5, 3) * -2.0)),
    (dict(bias=False), (3, 3, 2), {}),
    (dict(add_bias_kv=True), (4, 5, 2), dict(key_padding_mask=kpm(2, 5))),
    (dict(add_zero_attn=True), (4, 5, 2), dict(attn_mask=np.triu(np.ones((4, 5), bool), 2))),
    (dict(add_bias_kv=True, add_zero_attn=True), (4, 5, 2), dict(need_weights=False)),
    (dict(kdim=3, vdim=5), (4, 5, 2), {}),
    (dict(kdim=3, vdim=5, batch_first=True), (4, 5, 2), dict(need_weights=False,
                                                              key_padding_mask=kpm(2, 5))),
]


@pytest.mark.parametrize("ctor,dims,fwd", MHA_CASES)
def test_mha(ctor, dims, fwd):
    L, S, N = dims
    E, H = 8, 2
    e, t = mha_pair(E, H, **ctor)
    kd, vd = ctor.get("kdim", E), ctor.get("vdim", E)
    bf = ctor.get("batch_first", False)
    shp = (lambda n, s, d: (n, s, d)) if bf else (lambda n, s, d: (s, n, d))
    q, k, v = rand(*shp(N, L, E), seed=1), rand(*shp(N, S, kd), seed=2), rand(*shp(N, S, vd),
                                                                              seed=3)
    outs = run_both(e, t, torch, q, k, v, **fwd)
    if fwd.get("need_weights", True) is False:
        assert outs[0][1] is None and outs[1][1] is None
    else:
        assert tuple(outs[0][1].shape) == tuple(outs[1][1].shape)
    assert_close_all(e, t, *outs, **TOL)


def test_mha_self_attention_unbatched_and_causal():
    e, t = mha_pair(8, 4)
    x = rand(5, 8)  # unbatched (L, E)
    for fwd in ({}, dict(need_weights=False), dict(key_padding_mask=kpm(1, 5)[0])):
        for p in list(e.parameters()) + list(t.parameters()):
            p.grad = None
        outs = run_both(lambda a, **k: e(a, a, a, **k), lambda a, **k: t(a, a, a, **k), torch,
                        x, **fwd)
        assert tuple(outs[0][0].shape) == (5, 8)
        assert_close_all(e, t, *outs, **TOL)
    # is_causal with the matching mask: SDPA's causal path without weights, masked weights with
    causal = np.triu(np.ones((5, 5), bool), 1)
    xb = rand(5, 2, 8, seed=4)
    for need in (False, True):
        for p in list(e.parameters()) + list(t.parameters()):
            p.grad = None
        outs = run_both(lambda a, **k: e(a, a, a, **k), lambda a, **k: t(a, a, a, **k), torch,
                        xb, attn_mask=causal, is_causal=True, need_weights=need)
        assert_close_all(e, t, *outs, **TOL)


def test_mha_errors_and_init():
    with pytest.raises(ValueError, match="embed_dim and num_heads must be greater than 0"):
        MultiheadAttention(0, 2)
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        MultiheadAttention(6, 4)
    e = MultiheadAttention(8, 2)
    x = ember.ones(3, 2, 8)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        e(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match=r"The shape of the 2D attn_mask is"):
        e(x, x, x, attn_mask=ember.zeros(2, 3))
    with pytest.raises(AssertionError, match="only bool and floating types of attn_mask"):
        e(x, x, x, attn_mask=ember.zeros(3, 3, dtype=ember.int64))
    # torch's init: xavier in_proj, zero biases, Linear-init out_proj weight
    assert np.all(to_np(e.in_proj_bias) == 0) and np.all(to_np(e.out_proj.bias) == 0)
    bound = np.sqrt(6 / (8 + 24))
    assert np.abs(to_np(e.in_proj_weight)).max() <= bound
    assert e.bias_k is None and e.bias_v is None


def test_mha_dropout_training_shapes():
    e = MultiheadAttention(8, 2, dropout=0.5)
    x = ember.randn(3, 2, 8)
    out, w = e(x, x, x)
    assert tuple(out.shape) == (3, 2, 8) and tuple(w.shape) == (2, 3, 3)
    e.eval()
    a, _ = e(x, x, x)
    b, _ = e(x, x, x)
    np.testing.assert_array_equal(to_np(a), to_np(b))


def layer_pair(*args, **kwargs):
    ek = dict(kwargs)
    if callable(kwargs.get("activation")):
        ek["activation"] = kwargs["activation"](EF)
        kwargs = dict(kwargs, activation=kwargs["activation"](torch.nn.functional))
    e = TransformerEncoderLayer(*args, dtype=ember.float64, **ek)
    t = tnn.TransformerEncoderLayer(*args, dtype=torch.float64, **kwargs)
    check_meta(e, t)
    return e, t


LAYER_CASES = [
    (dict(), {}),
    (dict(norm_first=True), {}),
    (dict(activation="gelu", batch_first=True), {}),
    (dict(activation=lambda F: (lambda x: F.silu(x) * 0.5)), {}),
    (dict(bias=False, layer_norm_eps=1e-3), {}),
    (dict(), dict(src_key_padding_mask=kpm(2, 5))),
    (dict(norm_first=True), dict(src_mask=np.triu(np.ones((5, 5), bool), 1), is_causal=True)),
    (dict(batch_first=True), dict(src_mask=np.triu(np.full((5, 5), -np.inf), 1),
                                  src_key_padding_mask=kpm(2, 5))),
]


@pytest.mark.parametrize("ctor,fwd", LAYER_CASES)
def test_encoder_layer(ctor, fwd):
    e, t = layer_pair(8, 2, 16, **ctor)
    perturb(e, t)
    e.eval()
    t.eval()
    x = rand(2, 5, 8) if ctor.get("batch_first") else rand(5, 2, 8)
    outs = run_both(e, t, torch, x, **fwd)
    assert_close_all(e, t, *outs, **TOL)


def test_encoder_layer_unbatched_and_activation_error():
    e, t = layer_pair(8, 4, 12)
    perturb(e, t)
    e.eval()
    t.eval()
    outs = run_both(e, t, torch, rand(6, 8))
    assert_close_all(e, t, *outs, **TOL)
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        TransformerEncoderLayer(8, 2, activation="tanh")
    assert TransformerEncoderLayer(8, 2).dropout.p == 0.1


@pytest.mark.parametrize("bf,norm,fwd", [
    (False, False, {}),
    (True, True, dict(src_key_padding_mask=kpm(2, 5))),
    (False, True, dict(mask=np.triu(np.full((5, 5), -np.inf), 1))),
    (True, False, dict(mask=np.triu(np.ones((5, 5), bool), 1), is_causal=True)),
])
def test_encoder(bf, norm, fwd):
    el, tl = layer_pair(8, 2, 16, batch_first=bf)
    with warnings.catch_warnings(record=True) as ew:
        warnings.simplefilter("always")
        e = TransformerEncoder(el, 2, norm=LayerNorm(8, dtype=ember.float64) if norm else None)
    with warnings.catch_warnings(record=True) as tw:
        warnings.simplefilter("always")
        t = tnn.TransformerEncoder(tl, 2, norm=tnn.LayerNorm(8, dtype=torch.float64)
                                   if norm else None)
    assert [str(w.message) for w in ew] == [str(w.message) for w in tw]
    check_meta(e, t)
    assert e.layers[0] is not el and e.layers[0] is not e.layers[1]
    perturb(e, t)
    e.eval()
    t.eval()
    x = rand(2, 5, 8) if bf else rand(5, 2, 8)
    outs = run_both(e, t, torch, x, **fwd)
    assert_close_all(e, t, *outs, **TOL)


def test_encoder_train_mode_dropout():
    e = TransformerEncoder(TransformerEncoderLayer(8, 2, 16, dropout=0.5), 2,
                           enable_nested_tensor=False)
    x = ember.randn(5, 2, 8, requires_grad=True)
    y = e(x)
    y.sum().backward()
    assert tuple(y.shape) == (5, 2, 8) and x.grad is not None
    assert all(p.grad is not None for p in e.parameters())


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("norm", [False, True])
def test_encoder_inference_nested_path(aligned, norm):
    """Eval + no_grad + batch_first + padding mask: PyTorch's nested-tensor path zeroes the
    padded positions (before the final norm); unaligned masks fall back to the plain path."""
    el, tl = layer_pair(8, 2, 16, batch_first=True)
    e = TransformerEncoder(el, 2, norm=LayerNorm(8, dtype=ember.float64) if norm else None)
    t = tnn.TransformerEncoder(tl, 2, norm=tnn.LayerNorm(8, dtype=torch.float64)
                               if norm else None)
    perturb(e, t)
    e.eval()
    t.eval()
    m = np.zeros((3, 5), bool)
    m[0, 3:] = True
    m[2, 1:] = True
    if not aligned:
        m[1, 2] = True
    x = rand(3, 5, 8)
    with torch.no_grad():
        to = t(torch.tensor(x), src_key_padding_mask=torch.tensor(m))
    with ember.no_grad():
        eo = e(ember.tensor(x), src_key_padding_mask=ember.tensor(m))
    np.testing.assert_allclose(to_np(eo), to_np(to), rtol=1e-7, atol=1e-9)
    if aligned and not norm:
        assert np.all(to_np(eo)[m] == 0)


@pytest.mark.parametrize("need", [True, False])
@pytest.mark.parametrize("bf", [True, False])
def test_mha_and_layer_inference_no_grad(need, bf):
    """PyTorch takes fused fast paths in eval + no_grad; the values must still agree."""
    e, t = mha_pair(8, 2, batch_first=bf)
    e.eval()
    t.eval()
    x, m = (rand(2, 5, 8) if bf else rand(5, 2, 8)), kpm(2, 5)
    with torch.no_grad():
        to = t(*[torch.tensor(x)] * 3, key_padding_mask=torch.tensor(m), need_weights=need)
    with ember.no_grad():
        eo = e(*[ember.tensor(x)] * 3, key_padding_mask=ember.tensor(m), need_weights=need)
    np.testing.assert_allclose(to_np(eo[0]), to_np(to[0]), rtol=1e-9, atol=1e-12)
    assert (eo[1] is None) == (to[1] is None)
    el, tl = layer_pair(8, 2, 16, batch_first=bf)
    perturb(el, tl)
    el.eval()
    tl.eval()
    with torch.no_grad():
        to = tl(torch.tensor(x), src_key_padding_mask=torch.tensor(m))
    with ember.no_grad():
        eo = el(ember.tensor(x), src_key_padding_mask=ember.tensor(m))
    np.testing.assert_allclose(to_np(eo), to_np(to), rtol=1e-9, atol=1e-12)


def dec_pair(*args, **kwargs):
    e = TransformerDecoderLayer(*args, dtype=ember.float64, **kwargs)
    t = tnn.TransformerDecoderLayer(*args, dtype=torch.float64, **kwargs)
    check_meta(e, t)
    return e, t


@pytest.mark.parametrize("ctor,fwd,layers", [
    (dict(), {}, 0),
    (dict(norm_first=True, activation="gelu"), dict(tgt_mask=np.triu(np.ones((4, 4), bool), 1),
                                                    tgt_is_causal=True), 0),
    (dict(batch_first=True), dict(memory_key_padding_mask=kpm(2, 5),
                                  tgt_key_padding_mask=kpm(2, 4, 7)), 0),
    (dict(bias=False), dict(memory_mask=rand(4, 5, seed=11)), 0),
    (dict(), dict(tgt_mask=np.triu(np.full((4, 4), -np.inf), 1)), 2),
    (dict(batch_first=True, norm_first=True), dict(tgt_mask=np.triu(np.ones((4, 4), bool), 1),
                                                   memory_key_padding_mask=kpm(2, 5)), 3),
])
def test_decoder(ctor, fwd, layers):
    el, tl = dec_pair(8, 2, 16, **ctor)
    if layers:
        e = TransformerDecoder(el, layers, norm=LayerNorm(8, dtype=ember.float64))
        t = tnn.TransformerDecoder(tl, layers, norm=tnn.LayerNorm(8, dtype=torch.float64))
        check_meta(e, t)
    else:
        e, t = el, tl
    perturb(e, t)
    e.eval()
    t.eval()
    bf = ctor.get("batch_first", False)
    tgt, mem = (rand(2, 4, 8), rand(2, 5, 8, seed=1)) if bf else (rand(4, 2, 8),
                                                                   rand(5, 2, 8, seed=1))
    outs = run_both(e, t, torch, tgt, mem, **fwd)
    assert_close_all(e, t, *outs, **TOL)


@pytest.mark.parametrize("bf", [False, True])
def test_full_transformer(bf):
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
              dim_feedforward=12, batch_first=bf)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = Transformer(dtype=ember.float64, **kw)
        t = tnn.Transformer(dtype=torch.float64, **kw)
    check_meta(e, t)
    perturb(e, t)
    e.eval()
    t.eval()
    src, tgt = (rand(2, 5, 8), rand(2, 4, 8, seed=1)) if bf else (rand(5, 2, 8),
                                                                   rand(4, 2, 8, seed=1))
    causal = tnn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64).numpy()
    em = Transformer.generate_square_subsequent_mask(4, dtype=ember.float64)
    np.testing.assert_array_equal(to_np(em), causal)
    assert Transformer.generate_square_subsequent_mask(3).dtype == ember.float32
    outs = run_both(e, t, torch, src, tgt, tgt_mask=causal, src_key_padding_mask=kpm(2, 5),
                    memory_key_padding_mask=kpm(2, 5))
    assert_close_all(e, t, *outs, **TOL)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        e(ember.tensor(src), ember.tensor(tgt[:1] if bf else tgt[:, :1]))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal"):
        e(ember.tensor(src), ember.tensor(tgt[..., :4]))


def test_mismatched_mask_types_warn():
    e = MultiheadAttention(8, 2)
    x = ember.randn(3, 2, 8)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and "
                                         "attn_mask is deprecated"):
        e(x, x, x, key_padding_mask=ember.zeros(2, 3, dtype=ember.bool),
          attn_mask=ember.zeros(3, 3))

"""Flash-decoding in eager flex_attention (``ember/nn/attention/_flex_decode.py``): split-KV
partial results merged by log-sum-exp equal the unsplit blockwise path and torch's eager
flex_attention."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.nn.attention import _flex_decode
from ember.nn.attention import flex_attention as efa

torch = pytest.importorskip("torch")
tfa = pytest.importorskip("torch.nn.attention.flex_attention")

pytestmark = [pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile"),
              pytest.mark.filterwarnings("ignore:return_lse is deprecated")]


def rel(score, b, h, q, kv):
    return score + 0.002 * (kv - q)


def window(b, h, q, kv):
    return (kv <= 600 + q) & (kv >= 200)


def test_split_is_chosen_by_shape():
    assert _flex_decode.use_split(1, 32768, {})
    assert _flex_decode.use_split(16, 4096, {"PARTITION_SIZE": 256})
    assert not _flex_decode.use_split(128, 32768, {})
    assert not _flex_decode.use_split(1, 300, {})


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("L", [1, 7])
def test_split_equals_unsplit_and_torch(L, masked):
    S = 1100
    ember.manual_seed(0)
    q, k, v = ember.randn(2, 4, L, 16), ember.randn(2, 2, S, 16), ember.randn(2, 2, S, 8)
    bm = efa.create_block_mask(window, None, None, L, S) if masked else None
    tbm = tfa.create_block_mask(window, None, None, L, S, device="cpu") if masked else None
    assert _flex_decode.use_split(L, S, {})
    got = efa.flex_attention(q, k, v, score_mod=rel, block_mask=bm, enable_gqa=True,
                             return_lse=True)
    whole = efa.flex_attention(q, k, v, score_mod=rel, block_mask=bm, enable_gqa=True,
                               return_lse=True, kernel_options={"PARTITION_SIZE": 1 << 20})
    t = [torch.from_numpy(x.numpy()) for x in (q, k, v)]
    want = tfa.flex_attention(*t, score_mod=rel, block_mask=tbm, enable_gqa=True,
                              return_lse=True)
    for a, b, w in zip(got, whole, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a.numpy(), w.numpy(), rtol=1e-5, atol=2e-6)


def test_fully_masked_rows_in_split_path():
    S = 600
    ember.manual_seed(1)
    q, k, v = ember.randn(1, 1, 2, 8), ember.randn(1, 1, S, 8), ember.randn(1, 1, S, 8)

    def none_for_row0(b, h, q, kv):
        return q > 0

    bm = efa.create_block_mask(none_for_row0, None, None, 2, S)
    out, lse = efa.flex_attention(q, k, v, block_mask=bm, return_lse=True,
                                  kernel_options={"PARTITION_SIZE": 128})
    assert (out.numpy()[0, 0, 0] == 0).all() and np.isneginf(lse.numpy()[0, 0, 0])
    assert np.isfinite(lse.numpy()[0, 0, 1])

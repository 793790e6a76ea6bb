"""ember.nn.attention.experimental._paged_attention.PagedAttention against torch 2.13's, and
examples/flex_decode.py (paged generation equals unpaged generation)."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import ember
from ember.nn.attention import flex_attention as efa
from ember.nn.attention.experimental._paged_attention import PagedAttention as EPaged

torch = pytest.importorskip("torch")
tfa = pytest.importorskip("torch.nn.attention.flex_attention")
tpaged = pytest.importorskip("torch.nn.attention.experimental._paged_attention")

pytestmark = [pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")]

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "flex_decode.py"


def _both(n_pages=8, page=16, bsz=3):
    return EPaged(n_pages, page, bsz, device="cpu"), tpaged.PagedAttention(n_pages, page, bsz,
                                                                          device="cpu")


def _same_state(e, t, mapping=True):
    np.testing.assert_array_equal(e.page_table.numpy(), t.page_table.numpy())
    np.testing.assert_array_equal(e.capacity.numpy(), t.capacity.numpy())
    assert e.empty_pages == t.empty_pages
    if mapping:
        np.testing.assert_array_equal(e.physical_to_logical.numpy(),
                                      t.physical_to_logical.numpy())


def test_reserve_and_erase_match_torch():
    e, t = _both()
    for lib, pa in ((ember, e), (torch, t)):
        pa.reserve(lib.tensor([0]), lib.tensor([40]))
        pa.reserve(lib.tensor([1]), lib.tensor([20]))
        pa.reserve(lib.tensor([0]), lib.tensor([50]))
        pa.reserve(lib.tensor([0]), lib.tensor([10]))  # already large enough: no change
    _same_state(e, t)
    e.erase(ember.tensor([1]))
    t.erase(torch.tensor([1]))
    # torch's erase writes physical_to_logical through a copy (a no-op); ember clears the row
    _same_state(e, t, mapping=False)
    assert (e.physical_to_logical.numpy()[1] == -1).all()
    with pytest.raises(AssertionError):
        e.reserve(ember.tensor([2]), ember.tensor([16 * 8]))


def test_assign_and_converted_block_mask_match_torch():
    e, t = _both(n_pages=12, page=16, bsz=2)
    lens = [37, 21]
    ember.manual_seed(0)
    kc, vc = ember.zeros(1, 2, 12 * 16, 8), ember.zeros(1, 2, 12 * 16, 8)
    tkc, tvc = torch.zeros(1, 2, 12 * 16, 8), torch.zeros(1, 2, 12 * 16, 8)
    for b, n in enumerate(lens):
        e.reserve(ember.tensor([b]), ember.tensor([n]))
        t.reserve(torch.tensor([b]), torch.tensor([n]))
        k, v = ember.randn(1, 2, n, 8), ember.randn(1, 2, n, 8)
        e.assign(ember.tensor([b]), ember.arange(n).unsqueeze(0), k, v, kc, vc)
        t.assign(torch.tensor([b]), torch.arange(n).unsqueeze(0), torch.from_numpy(k.numpy()),
                 torch.from_numpy(v.numpy()), tkc, tvc)
    np.testing.assert_array_equal(kc.numpy(), tkc.numpy())
    np.testing.assert_array_equal(vc.numpy(), tvc.numpy())
    e_pos, t_pos = ember.tensor(lens) - 1, torch.tensor(lens) - 1
    logical_e = efa.create_block_mask(lambda b, h, q, kv: kv <= e_pos[b], 2, None, 1, 12 * 16,
                                      BLOCK_SIZE=(1, 16))
    logical_t = tfa.create_block_mask(lambda b, h, q, kv: kv <= t_pos[b], 2, None, 1, 12 * 16,
                                      device="cpu", BLOCK_SIZE=(1, 16))
    bm = e.convert_logical_block_mask(logical_e, ember.arange(2), kv_len=e_pos + 1)
    tbm = t.convert_logical_block_mask(logical_t, torch.arange(2), kv_len=t_pos + 1)
    for f in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices"):
        np.testing.assert_array_equal(getattr(bm, f).numpy(), getattr(tbm, f).numpy(), f)
    assert bm.seq_lengths == tuple(tbm.seq_lengths)
    q = ember.randn(2, 2, 1, 8)
    tq = torch.from_numpy(q.numpy())
    sm = e.get_score_mod(lambda s, b, h, qi, kv: s + 0.01 * kv)
    tsm = t.get_score_mod(lambda s, b, h, qi, kv: s + 0.01 * kv)
    want = tfa.flex_attention(tq, tkc, tvc, score_mod=tsm, block_mask=tbm)
    got = efa.flex_attention(q, kc, vc, score_mod=sm, block_mask=bm)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    compiled = ember.compile(lambda q: efa.flex_attention(q, kc, vc, score_mod=sm,
                                                          block_mask=bm))
    ex = ember.compiler.explain(lambda q: efa.flex_attention(q, kc, vc, score_mod=sm,
                                                              block_mask=bm))(q)
    assert ex.extern_count == 0 and "flex_attention_fused" in str(ex)
    np.testing.assert_allclose(compiled(q).numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_assign_rejects_mismatched_shapes():
    e, _ = _both()
    e.reserve(ember.tensor([0]), ember.tensor([4]))
    kc = ember.zeros(1, 2, 128, 8)
    with pytest.raises(RuntimeError, match="same number of heads"):
        e.assign(ember.tensor([0]), ember.arange(4).unsqueeze(0), ember.zeros(1, 3, 4, 8),
                 ember.zeros(1, 3, 4, 8), kc, kc)


def test_flex_decode_example_paged_equals_unpaged():
    spec = importlib.util.spec_from_file_location("flex_decode", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    paged, plain = mod.main(["--steps", "6"])
    assert paged == plain
    assert len({len(s) for s in paged}) == 3  # batch entries of different lengths

"""Exporting the repository's real models (the demo's char GPT, the MiniLM-style BERT of
examples/minilm.py) with dynamic batch and sequence: the exported module matches the eager one
on new shapes, and the program survives save/load."""

import io
import sys
from pathlib import Path

import numpy as np

import ember
from ember.demo import CharGPT
from ember.export import Dim, export, load, save

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from minilm import BertConfig, BertModel  # noqa: E402


def _check(m, ep, inputs):
    loaded = load(_saved(ep))
    for args in inputs:
        want = m(*args).detach().numpy()
        np.testing.assert_allclose(ep.module()(*args).detach().numpy(), want, rtol=1e-5,
                                   atol=1e-5)
        np.testing.assert_allclose(loaded.module()(*args).detach().numpy(), want, rtol=1e-5,
                                   atol=1e-5)


def _saved(ep):
    buf = io.BytesIO()
    save(ep, buf)
    buf.seek(0)
    return buf


def test_char_gpt_dynamic_batch_and_sequence():
    ember.manual_seed(0)
    m = CharGPT(30, block=32, d=16, layers=2, heads=2).eval()
    t = Dim("t", max=32)
    ep = export(m, (ember.randint(0, 30, (2, 9)),),
                dynamic_shapes={"idx": {0: Dim("b"), 1: t}})
    (b, tt), = [tuple(n.meta["val"].shape) for n in ep.graph.nodes if n.name == "idx"]
    assert (str(b), str(tt)) == ("s0", "s1")
    assert [(int(v.lower), v.upper) for v in ep.range_constraints.values()] == [(0, float("inf")),
                                                                               (0, 32)]
    _check(m, ep, [(ember.randint(0, 30, (3, 17)),), (ember.randint(0, 30, (1, 32)),)])


def test_bert_dynamic_batch_and_sequence():
    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=24)
    ember.manual_seed(0)
    m = BertModel(cfg).eval()
    b, s = Dim("b"), Dim("s", max=24)
    ids, mask = ember.randint(1, 50, (2, 7)), ember.ones(2, 7, dtype=ember.int64)
    ep = export(m, (ids, mask), dynamic_shapes={"input_ids": {0: b, 1: s},
                                                "attention_mask": {0: b, 1: s}})
    mask2 = ember.ones(3, 11, dtype=ember.int64)
    mask2[0, 8:] = 0
    _check(m, ep, [(ember.randint(1, 50, (3, 11)), mask2),
                   (ember.randint(1, 50, (5, 24)), ember.ones(5, 24, dtype=ember.int64))])

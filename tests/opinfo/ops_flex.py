"""OpInfo entry for FlexAttention's fused primitives (``flex_attention_fused``, its backward and
``flex_load``): ember calls the fused path (the node ``ember.compile`` records; eagerly its
NumPy kernel, compiled its C kernel); torch runs its eager ``flex_attention`` for values and, for
gradients (torch's CPU flex has no backward), the same attention written densely with torch ops.
"""

from __future__ import annotations

import math

from tests.opinfo.core import OpInfo, Sample, make

MASKS = {
    "none": None,
    "causal": lambda b, h, q, kv: q >= kv,
    "window": lambda b, h, q, kv: (q - kv <= 6) & (kv - q <= 6),
    "late": lambda b, h, q, kv: (q >= kv) & (q >= 9),   # rows q < 9 keep nothing
}


def _score(t, kind, table, n):
    if kind == "rel":
        return lambda s, b, h, q, kv: s + (q - kv) * 0.05
    if kind == "softcap":
        return lambda s, b, h, q, kv: 2 * t.tanh(s / 2)
    if kind == "table":
        def bias(s, b, h, q, kv):
            i = q - kv + n
            return s + table[i if t.__name__ == "ember" else i.long()]
        return bias
    return None


def _dense(t, q, k, v, score_mod, mask_mod, gqa):
    k, v = k.repeat_interleave(gqa, dim=1), v.repeat_interleave(gqa, dim=1)
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    idx = [t.arange(n, dtype=t.int32).view(*[n if i == d else 1 for i in range(4)])
           for d, n in enumerate(s.shape)]
    if score_mod is not None:
        s = score_mod(s, *idx)
    if mask_mod is not None:
        s = t.where(mask_mod(*idx), s, -math.inf)
    lse = t.logsumexp(s, -1)
    p = t.where(t.isneginf(lse)[..., None], 0.0, t.exp(s - lse[..., None]))
    return p @ v


def _flex(t, q, k, v, table=None, *, score="none", mask="none"):
    gqa = q.shape[1] // k.shape[1]
    L, S = q.shape[-2], k.shape[-2]
    score_mod, mask_mod = _score(t, score, table, max(L, S)), MASKS[mask]
    if t.__name__ == "torch":
        if any(x is not None and x.requires_grad for x in (q, k, v, table)):
            return _dense(t, q, k, v, score_mod, mask_mod, gqa)
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        bm = None if mask_mod is None else create_block_mask(mask_mod, None, None, L, S,
                                                             device="cpu", BLOCK_SIZE=16)
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=bm, enable_gqa=gqa > 1)
    from ember.nn.attention._flex_fused import fused_forward
    from ember.nn.attention.flex_attention import create_block_mask
    bm = None if mask_mod is None else create_block_mask(mask_mod, None, None, L, S,
                                                         BLOCK_SIZE=16)
    out = fused_forward(q, k, v, (score_mod, bm, 1 / math.sqrt(q.shape[-1]), gqa > 1,
                                  {"BLOCK_M": 16, "BLOCK_N": 16}))
    assert out is not None, "the fused path declined this sample"
    return out[0]


def _samples(dtype, rng):
    def r(*s):
        return make(s, dtype, rng, -1.0, 1.0)

    yield Sample((r(1, 1, 6, 4), r(1, 1, 6, 4), r(1, 1, 6, 4)),
                 {"mask": "causal", "score": "softcap"}, desc="small (finite differences)")
    yield Sample((r(1, 2, 20, 8), r(1, 2, 20, 8), r(1, 2, 20, 8)), desc="no mask")
    yield Sample((r(2, 2, 37, 4), r(2, 2, 37, 4), r(2, 2, 37, 6)), {"mask": "causal"},
                 desc="causal, L not a multiple of the block, Ev != E")
    yield Sample((r(1, 2, 30, 4), r(1, 2, 30, 4), r(1, 2, 30, 4)),
                 {"mask": "window", "score": "rel"}, desc="sliding window, relative bias")
    yield Sample((r(1, 4, 24, 4), r(1, 2, 40, 4), r(1, 2, 40, 4)),
                 {"mask": "causal", "score": "softcap"}, desc="GQA, tanh soft-capping")
    yield Sample((r(1, 2, 20, 4), r(1, 2, 20, 4), r(1, 2, 20, 4)),
                 {"mask": "late"}, desc="fully masked rows give 0", grad=False)
    yield Sample((r(1, 2, 18, 4), r(1, 2, 18, 4), r(1, 2, 18, 4), r(36)),
                 {"mask": "causal", "score": "table"}, desc="captured bias table", grad=False)
    # (the table's gradient sums over many (query, key) pairs in another order compiled than
    # eager, beyond the conformance test's few ulps: tests/compiler/test_cbackend_flex.py
    # checks it against torch with a float tolerance)


OPINFOS = [
    OpInfo("flex_attention_fused", _flex, _samples, tols={"float32": (1e-5, 2e-6)}),
]

"""OpInfo entries for ``nn.functional.scaled_dot_product_attention``."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import FLOATS, ErrorCase, OpInfo, Sample, make

F32, F64 = np.float32, np.float64


def _sdpa(t, q, k, v, mask=None, **kw):
    return t.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)


def _bool_mask(shape, rng, full_row=None):
    m = rng.random(shape) < 0.7
    m[..., 0] = True  # every row keeps a position unless asked otherwise
    if full_row is not None:
        m[..., full_row, :] = False
    return m


def _samples(dtype, rng):
    def r(*s, **kw):
        return make(s, dtype, rng, -1.5, 1.5, **kw)

    yield Sample((r(2, 4, 8), r(2, 5, 8), r(2, 5, 6)), desc="3-d, L != S, Ev != E")
    yield Sample((r(2, 3, 4, 8), r(2, 3, 4, 8), r(2, 3, 4, 8)), desc="4-d self-attention shape")
    yield Sample((r(4, 8), r(5, 8), r(5, 3)), desc="2-d")
    yield Sample((r(2, 4, 8), r(2, 5, 8), r(2, 5, 6), _bool_mask((4, 5), rng)),
                 desc="bool mask (L, S) broadcast")
    yield Sample((r(2, 3, 4, 8), r(2, 3, 5, 8), r(2, 3, 5, 8), _bool_mask((2, 1, 4, 5), rng)),
                 desc="bool mask (B, 1, L, S)")
    yield Sample((r(2, 4, 8), r(2, 5, 8), r(2, 5, 6), r(4, 5)), desc="float mask (L, S)")
    yield Sample((r(2, 3, 4, 8), r(2, 3, 5, 8), r(2, 3, 5, 8), r(2, 3, 4, 5)),
                 desc="float mask full shape")
    yield Sample((r(2, 3, 4, 8), r(2, 3, 5, 8), r(2, 3, 5, 8), r(3, 1, 5)),
                 desc="float mask broadcast over L")
    yield Sample((r(2, 5, 8), r(2, 5, 8), r(2, 5, 4)), {"is_causal": True}, desc="causal L == S")
    yield Sample((r(2, 3, 8), r(2, 5, 8), r(2, 5, 4)), {"is_causal": True}, desc="causal L < S")
    yield Sample((r(1, 2, 6, 8), r(1, 2, 4, 8), r(1, 2, 4, 8)), {"is_causal": True},
                 desc="causal L > S (top-left)")
    yield Sample((r(2, 4, 8), r(2, 5, 8), r(2, 5, 6)), {"scale": 0.3}, desc="custom scale")
    yield Sample((r(1, 4, 3, 8), r(1, 2, 5, 8), r(1, 2, 5, 8)), {"enable_gqa": True},
                 desc="GQA 4 query heads, 2 kv heads")
    yield Sample((r(2, 6, 3, 4), r(2, 3, 5, 4), r(2, 1, 5, 4), _bool_mask((3, 5), rng)),
                 {"enable_gqa": True}, desc="GQA with mask, different k/v heads")
    yield Sample((r(2, 3, 4, 8), r(1, 3, 5, 8), r(1, 3, 5, 8)), desc="broadcast batch of k/v")
    yield Sample((r(2, 4, 8), r(2, 5, 8), r(2, 5, 6), _bool_mask((4, 5), rng, full_row=1)),
                 desc="a fully masked row gives zeros")
    yield Sample((r(1, 2, 4, 8), r(1, 2, 5, 8), r(1, 2, 5, 8),
                  _bool_mask((1, 2, 4, 5), rng, full_row=2)),
                 desc="4-d: a fully masked row gives zeros")
    full = r(4, 5)
    full[2] = -np.inf
    yield Sample((r(2, 4, 8), r(2, 5, 8), r(2, 5, 6), full), desc="-inf float mask row",
                 grad=False)
    yield Sample((r(2, 4, 8, noncontig=True), np.swapaxes(r(2, 8, 5), -1, -2),
                  r(2, 5, 6, noncontig=True)), desc="non-contiguous and transposed",
                 noncontig=True)
    yield Sample((r(2, 0, 8), r(2, 5, 8), r(2, 5, 6)), desc="L = 0")
    if dtype in ("float16", "bfloat16"):
        yield Sample((r(2, 4, 8), r(2, 5, 8), r(2, 5, 6), make((4, 5), "float32", rng)),
                     desc="float32 mask with low-precision query", grad=False)


def _errors():
    z = np.zeros
    q, k, v = z((2, 4, 8), F32), z((2, 5, 8), F32), z((2, 5, 3), F32)
    return [
        ErrorCase((q, k.astype(F64), v), exc=RuntimeError,
                  match=r"Expected query, key, and value to have the same dtype, but got "
                        r"query.dtype: float key.dtype: double and value.dtype: float"),
        ErrorCase((z((8,), F32), z((5, 8), F32), z((5, 3), F32)), exc=RuntimeError,
                  match=r"Expected query, key, and value to all be  at least 2 dimensional"),
        ErrorCase((q, k, v, z((4, 5), bool)), {"is_causal": True}, exc=RuntimeError,
                  match=r"Explicit attn_mask should not be set when is_causal=True"),
        ErrorCase((z((2, 4, 4, 8), F32), z((2, 3, 5, 8), F32), z((2, 3, 5, 8), F32)),
                  {"enable_gqa": True}, exc=RuntimeError,
                  match=r"Number of heads in key and value must divide the number of heads in"),
        ErrorCase((z((2, 4, 4, 8), F32), z((2, 2, 5, 8), F32), z((2, 2, 5, 8), F32)),
                  exc=RuntimeError, match=r"The size of tensor a \(4\) must match the size of "
                                          r"tensor b \(2\)"),
        ErrorCase((q, k, v, z((4, 5), np.int32)), exc=RuntimeError,
                  match=r"Expected attn_mask dtype to be bool or float or to match query dtype"),
        ErrorCase((q, k, v, z((4, 6), F32)), exc=RuntimeError,
                  match=r"scaled_dot_product_attention"),
        ErrorCase((q, z((2, 5, 7), F32), v), exc=RuntimeError,
                  match=r"query and key must have the same embedding dimension"),
        ErrorCase((q.astype(np.int64), k.astype(np.int64), v.astype(np.int64)),
                  exc=RuntimeError, match=r"expected scalar type Float but found Long"),
    ]


def _dropout_samples(dtype, rng):
    yield Sample((make((2, 4, 8), dtype, rng), make((2, 5, 8), dtype, rng),
                  make((2, 5, 6), dtype, rng)), {"dropout_p": 0.5}, desc="dropout_p=0.5",
                 grad=False)


OPINFOS = [
    OpInfo("scaled_dot_product_attention", _sdpa, _samples, dtypes=FLOATS, errors=_errors),
    OpInfo("scaled_dot_product_attention_dropout", _sdpa, _dropout_samples, dtypes=FLOATS,
           grad=False, random=True),
]

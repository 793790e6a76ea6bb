"""Flash-decoding for eager flex_attention: a short query (``L <= DECODE_MAX_L``) against a
long key sequence splits the keys into partitions of ``PARTITION_SIZE`` (a kernel option,
default 128), computes every partition's partial result (row max, exp-sum, weighted values)
in one batched product, and merges them by log-sum-exp:

    M = max_p m_p;  l = sum_p l_p exp(m_p - M);  out = sum_p acc_p exp(m_p - M) / l;
    lse = log(l) + M

Memory is O(L x S) for L <= 64 rows (never a square matrix).  The compiled path does the same
inside its C kernel (``compiler/c/lower/flex.py``: partitions as parallel work items).
"""

# ruff: noqa: N803, N806

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import dtypes as dt
from ember._frontend.creation import arange, from_numpy, zeros
from ember._frontend.movement import cat
from ember._frontend.pointwise_logic import isneginf, where
from ember._frontend.pointwise_math import exp, log
from ember.nn.attention._flex_block_mask import (
    _LARGE_SPARSE_BLOCK_SIZE,
    _ordered_to_dense_np,
    noop_mask,
)
from ember.tensor import Tensor

DECODE_MAX_L = 64
MIN_PARTITIONS = 4


def use_split(L: int, S: int, options: dict) -> bool:
    """Whether flash-decoding applies to a query of ``L`` rows over ``S`` keys."""
    part = int(options.get("PARTITION_SIZE", 128))
    return 0 < L <= DECODE_MAX_L and part > 0 and S >= MIN_PARTITIONS * part


def _column_status(bm: Any, L: int, S: int, padded: int) -> np.ndarray:
    """(Bm, Hm, L, padded) int8 per key: 0 absent, 1 partial (mask_mod), 2 full."""
    if bm is None or bm.BLOCK_SIZE == (_LARGE_SPARSE_BLOCK_SIZE,) * 2:
        st = np.full((1, 1, L, padded), 2, np.int8)
        st[..., S:] = 0
        return st
    qb, kb = bm.BLOCK_SIZE
    blk = _ordered_to_dense_np(bm.kv_num_blocks, bm.kv_indices,
                               bm.kv_indices.shape[-1]).astype(np.int8)
    if bm.full_kv_num_blocks is not None:
        full = _ordered_to_dense_np(bm.full_kv_num_blocks, bm.full_kv_indices,
                                    bm.full_kv_indices.shape[-1])
        blk = np.where(full > 0, 2, blk).astype(np.int8)
    rows = blk[:, :, np.arange(L) // qb]
    cols = np.arange(padded) // kb
    st = np.where(cols < rows.shape[-1], rows[..., np.minimum(cols, rows.shape[-1] - 1)], 0)
    st[..., S:] = 0
    return st.astype(np.int8)


def split_kv_run(query: Tensor, key: Tensor, value: Tensor, run_args: tuple) -> tuple:
    """(out, lse, max) of flex_attention by KV partitions merged by log-sum-exp."""
    score_mod, bm, scale, _gqa, options = run_args
    part = int(options.get("PARTITION_SIZE", 128))
    B, Hq, L, E = query.shape
    Bk, Hkv, S, Ev = value.shape[0], key.shape[1], key.shape[2], value.shape[-1]
    G, P = Hq // Hkv, -(-S // part)
    wdt = dt.float64 if query.dtype == dt.float64 else dt.float32
    q, k, v = (x.to(wdt) for x in (query, key, value))
    if P * part != S:
        k = cat([k, zeros((Bk, Hkv, P * part - S, E), dtype=wdt)], dim=2)
        v = cat([v, zeros((Bk, Hkv, P * part - S, Ev), dtype=wdt)], dim=2)
    kp = k.reshape(Bk, Hkv, 1, P, part, E)
    s = q.reshape(B, Hkv, G, 1, L, E) @ kp.transpose(-2, -1)
    s = s.reshape(B, Hq, P, L, part) * scale
    b_i = arange(B, dtype=dt.int32).view(B, 1, 1, 1, 1)
    h_i = arange(Hq, dtype=dt.int32).view(1, Hq, 1, 1, 1)
    q_i = arange(L, dtype=dt.int32).view(1, 1, 1, L, 1)
    kv_i = arange(P * part, dtype=dt.int32).view(1, 1, P, 1, part)
    if score_mod is not None:
        s = score_mod(s, b_i, h_i, q_i, kv_i).to(wdt).expand(*s.shape)
    st = _column_status(bm, L, S, P * part)
    st = np.ascontiguousarray(st.reshape(st.shape[:3] + (P, part)).transpose(0, 1, 3, 2, 4))
    keep = from_numpy(st == 2)
    mask_mod = bm.mask_mod if bm is not None else noop_mask
    if (st == 1).any():
        keep = keep | (from_numpy(st == 1) & mask_mod(b_i, h_i, q_i, kv_i).to(dt.bool))
    s = where(keep, s, zeros((), dtype=wdt) - math.inf)
    m = s.amax(-1, keepdim=True)                          # (B, Hq, P, L, 1)
    zero = zeros((), dtype=wdt)
    p = exp(s - where(isneginf(m), zero, m))
    l_p = p.sum(-1, keepdim=True)
    acc = (p.reshape(B, Hkv, G, P, L, part) @ v.reshape(Bk, Hkv, 1, P, part, Ev))
    acc = acc.reshape(B, Hq, P, L, Ev)
    big = m.amax(2, keepdim=True)
    big_safe = where(isneginf(big), zero, big)
    w = where(isneginf(m), zero, exp(m - big_safe))
    l_tot = (l_p * w).sum(2)                              # (B, Hq, L, 1)
    out = (acc * w).sum(2) / where(l_tot > 0, l_tot, zero + 1)
    lse = (log(l_tot) + big_safe.squeeze(2)).squeeze(-1)
    return out.to(query.dtype), lse, big.squeeze(2).squeeze(-1).detach()


__all__ = ["DECODE_MAX_L", "split_kv_run", "use_split"]

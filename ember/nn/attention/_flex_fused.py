"""The compiled path of flex_attention: one ``flex_attention_fused`` node (``ember/ops/flex.py``)
with the traced ``score_mod``/``mask_mod``, which the C backend lowers to one kernel.

Used while a compiled function records (``ember.compile``) when the mods trace
(``_flex_trace.py``), the dtypes are floating (float16/bfloat16 computed in float32, as eager)
and, where gradients are needed, the traced
``score_mod`` has reverse-mode rules (``ember.ops.flex.GRAD_RULES``); its backward is the node
``flex_attention_fused_backward`` (dq, dk, dv, captured tensors' gradients).  Otherwise
flex_attention records its blockwise loop of ordinary ops.
"""

# ruff: noqa: N803, N806

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes as dt
from ember._frontend.creation import from_numpy
from ember.autograd import grad_mode
from ember.nn.attention._flex_block_mask import _LARGE_SPARSE_BLOCK_SIZE, noop_mask
from ember.nn.attention._flex_trace import trace_mod
from ember.ops.flex import FLEX_ATTENTION_FUSED, FlexTiles, grad_reason
from ember.ops.registry import bind
from ember.tensor import Tensor

DEFAULT_BLOCK = 128


def _full_mask_tensors(L: int, S: int, qb: int, kb: int) -> tuple:
    """BlockMask tensors for "no block_mask": every block full."""
    nq, nkv = -(-L // qb), -(-S // kb)
    num = np.zeros((1, 1, nq), np.int32)
    idx = np.zeros((1, 1, nq, max(nkv, 1)), np.int32)
    full_num = np.full((1, 1, nq), nkv, np.int32)
    full_idx = np.broadcast_to(np.arange(max(nkv, 1), dtype=np.int32), (1, 1, nq, max(nkv, 1)))
    return tuple(from_numpy(np.ascontiguousarray(a)) for a in (num, idx, full_num, full_idx))


def fused_forward(query: Tensor, key: Tensor, value: Tensor, run_args: tuple) -> Any:
    """(out, lse, max) from one fused node, or None when this call cannot use it."""
    score_mod, block_mask, scale, _gqa, options = run_args
    if 0 in tuple(query.shape) + tuple(key.shape):
        return None
    if query.dtype in (dt.float16, dt.bfloat16):
        # as eager: computed in float32, the output rounded once (lse/max stay float32)
        res = fused_forward(query.to(dt.float32), key.to(dt.float32), value.to(dt.float32),
                            run_args)
        return None if res is None else (res[0].to(query.dtype), res[1], res[2])
    if query.dtype not in (dt.float32, dt.float64):
        return None
    needs_grad = grad_mode.is_grad_enabled()
    captured: list = []
    score = None
    if score_mod is not None:
        score = trace_mod(score_mod, query.dtype, captured)
        if score is None:
            return None
    L, S = query.size(-2), key.size(-2)
    if block_mask is None or block_mask.BLOCK_SIZE == (_LARGE_SPARSE_BLOCK_SIZE,) * 2:
        qb = int(options.get("BLOCK_M", DEFAULT_BLOCK))
        kb = int(options.get("BLOCK_N", DEFAULT_BLOCK))
        mask_tensors = _full_mask_tensors(L, S, qb, kb)
        mask = None
    else:
        qb, kb = (int(x) for x in block_mask.BLOCK_SIZE)
        mask_tensors = (block_mask.kv_num_blocks, block_mask.kv_indices,
                        block_mask.full_kv_num_blocks, block_mask.full_kv_indices)
        mask = None
        if block_mask.mask_mod is not noop_mask:
            mask = trace_mod(block_mask.mask_mod, None, captured)
            if mask is None:
                return None
    if needs_grad and any(x.requires_grad for x in (query, key, value, *captured)):
        grad_caps = tuple(c for c, t in enumerate(captured) if t.requires_grad)
        if any(not captured[c].dtype.is_floating_point for c in grad_caps):
            return None
        if grad_reason(score, grad_caps) is not None:
            return None
    has_full = mask_tensors[2] is not None
    return bind(FLEX_ATTENTION_FUSED, query, key, value, *mask_tensors, *captured, score=score,
                mask=mask, scale=float(scale), has_full=has_full,
                block=FlexTiles(qb, kb, int(options.get("PARTITION_SIZE", 128))))


__all__ = ["fused_forward"]

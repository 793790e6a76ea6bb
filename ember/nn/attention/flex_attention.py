"""``ember.nn.attention.flex_attention``: PyTorch's FlexAttention API, eager and blockwise.

``flex_attention(q, k, v, score_mod, block_mask)`` computes
``softmax(score_mod(q @ k^T * scale) masked by block_mask) @ v`` one (q block, kv block) tile at a
time with an online softmax (running max and sum), visiting only the tiles the BlockMask lists:
partial tiles apply ``mask_mod``, full tiles skip it, absent tiles are never computed.  Memory is
O(tile) per step, never the L x S score matrix (without autograd; with autograd the tiles' saved
intermediates add up, see docs/flex_attention.md).  Everything is written with ember tensor ops,
so gradients reach q, k, v and the tensors ``score_mod`` captures (a learned bias table).

``score_mod(score, b, h, q_idx, kv_idx)`` and ``mask_mod(b, h, q_idx, kv_idx)`` are called once
per tile with broadcastable int32 index tensors ``b`` (B,1,1,1), ``h`` (1,H,1,1), ``q_idx``
(1,1,Lq,1), ``kv_idx`` (1,1,1,Lk) and ``score`` (B,H,Lq,Lk).  PyTorch calls them under ``vmap``
on 0-d tensors; for the elementwise functions they are written with (``torch.where``, arithmetic,
``tanh``, indexing a captured tensor with the index arguments) broadcasting gives the same values.
A result that does not broadcast to the tile raises a ShapeError.
"""

# PyTorch's API names (B, H, Q_LEN, BLOCK_SIZE) and shape letters are kept as they are.
# ruff: noqa: N803, N806

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, NamedTuple, TypedDict

import numpy as np

from ember import _lazy
from ember import dtypes as dt
from ember._frontend.creation import from_numpy, full, ones, tensor, zeros
from ember._frontend.movement import cat
from ember._frontend.pointwise_logic import isneginf, maximum, where
from ember._frontend.pointwise_math import exp, log
from ember.autograd import grad_mode
from ember.errors import DTypeError, EmberNotImplementedError, EmberRuntimeError, EmberValueError
from ember.nn.attention._flex_backward import FlexAttentionFunction, ScoreTile
from ember.nn.attention._flex_block_mask import (
    _DEFAULT_SPARSE_BLOCK_SIZE,
    _LARGE_SPARSE_BLOCK_SIZE,
    BlockMask,
    _eval_mod,
    _idx,
    _mask_mod_signature,
    _num_positional,
    _ordered_to_dense_np,
    _score_mod_signature,
    _sliced_mask_mod_error,
    and_masks,
    create_block_mask,
    create_mask,
    noop_mask,
    or_masks,
)
from ember.nn.attention._flex_decode import split_kv_run, use_split
from ember.nn.attention._flex_fused import fused_forward as _fused
from ember.tensor import Tensor

__all__ = ["BlockMask", "flex_attention", "AuxOutput", "AuxRequest", "FlexKernelOptions",
           "create_block_mask", "create_mask", "or_masks", "and_masks", "noop_mask"]

_ = (_score_mod_signature, _mask_mod_signature, _DEFAULT_SPARSE_BLOCK_SIZE)  # re-exported names
_OP = "flex_attention"
# consecutive tiles with the same status are merged into one product up to this many kv columns
_MAX_MERGED_KV = 1024


class FlexKernelOptions(TypedDict, total=False):
    """Kernel options.  The eager path reads ``BLOCK_M`` / ``BLOCK_N`` (tile sizes when no
    block_mask is given); the rest (Triton tuning keys, ``PARTITION_SIZE``) are accepted."""

    BLOCK_M: int
    BLOCK_N: int
    PARTITION_SIZE: int
    PRESCALE_QK: bool
    ROWS_GUARANTEED_SAFE: bool
    BLOCKS_ARE_CONTIGUOUS: bool
    WRITE_DQ: bool
    BACKEND: str


class AuxRequest(NamedTuple):
    """Which auxiliary outputs flex_attention should return."""

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """Auxiliary outputs of flex_attention (None where not requested)."""

    lse: Tensor | None = None
    max_scores: Tensor | None = None


def _identity(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
    return score


def _validate(query: Tensor, key: Tensor, value: Tensor, enable_gqa: bool,
              block_mask: BlockMask | None) -> None:
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise EmberNotImplementedError(
            f"[{_OP}] NYI: query, key, and value must be 4D tensors; got query "
            f"{tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}")
    if query.dtype != key.dtype or query.dtype != value.dtype:
        raise DTypeError(
            f"[{_OP}] Expected query, key, and value to have the same dtype, but got "
            f"query.dtype: {query.dtype}, key.dtype: {key.dtype}, and value.dtype: "
            f"{value.dtype} instead.")
    if not query.dtype.is_floating_point:
        raise DTypeError(f"[{_OP}] expected floating query/key/value; got {query.dtype}")
    if query.size(-1) != key.size(-1):
        raise EmberValueError(
            f"[{_OP}] Expect query and key/value to have the same embedding dimension but got "
            f"E={query.size(-1)} and E={key.size(-1)}.")
    if key.size(-2) != value.size(-2) or key.size(0) != value.size(0) \
            or key.size(1) != value.size(1):
        raise EmberValueError(
            f"[{_OP}] key {tuple(key.shape)} and value {tuple(value.shape)} must agree on "
            "batch, heads and sequence length")
    hq, hkv = query.size(1), key.size(1)
    if not enable_gqa and hq != hkv:
        raise EmberValueError(
            f"[{_OP}] Expect query and key/value to have the same number of heads but got "
            f"Hq={hq} and Hkv={hkv}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and hq % hkv != 0:
        raise EmberValueError(
            f"[{_OP}] Expect number of query heads to be a multiple of kv heads for GQA but "
            f"got Hq={hq} and Hkv={hkv}.")
    if query.size(0) != key.size(0):
        if block_mask is None:
            raise EmberValueError(
                f"[{_OP}] Expect query and key/value to have the same batch size, or non-none "
                f"block_mask, but got block_mask=None, Bq={query.size(0)}, and "
                f"Bkv={key.size(0)}.")
        if block_mask.kv_num_blocks.size(0) != query.size(0):
            raise EmberValueError(
                f"[{_OP}] Expect query and key/value to have the same batch size, or "
                f"block_mask and query to have the same batch size, but got "
                f"Bq={query.size(0)}, Bkv={key.size(0)}, "
                f"B_block_mask={block_mask.kv_num_blocks.size(0)}.")
        if key.size(0) != 1:
            raise EmberRuntimeError(
                f"[{_OP}] Bq and Bkv must broadcast. Got Bq={query.size(0)} and "
                f"Bkv={key.size(0)}")


def _check_block_mask(bm: BlockMask, query: Tensor, key: Tensor) -> None:
    if bm.mask_mod is _sliced_mask_mod_error:
        raise EmberRuntimeError(f"[{_OP}] Cannot use mask_mod from a sliced BlockMask")
    q_len, kv_len = bm.shape[-2], bm.shape[-1]
    L, S = query.size(-2), key.size(-2)
    if L > q_len or S > kv_len:
        raise EmberValueError(
            f"[{_OP}] block_mask was created for block_mask.shape={bm.shape} but got "
            f"q_len={L} and kv_len={S}. As the block mask was created for a smaller length "
            "than you're using it for, you likely need to create a new block mask.")
    if L != q_len or S != kv_len:
        raise EmberValueError(
            f"[{_OP}] block_mask was created for block_mask.shape={bm.shape} but got "
            f"q_len={L} and kv_len={S}. As the block mask was created for a larger length than "
            "you're using it for, you can either 1. create a new block mask with the correct "
            "length, or 2. 'adjust' the existing block mask to the correct length by calling "
            "block_mask._adjust(q_len, kv_len). This essentially 'crops' the block mask to the "
            "upper left corner, which does not work for all mask_mods!")
    bm_b, bm_h = bm.kv_num_blocks.size(0), bm.kv_num_blocks.size(1)
    if bm.kv_num_blocks.dim() != 3 or bm_b not in (1, query.size(0)) \
            or bm_h not in (1, query.size(1)):
        raise EmberValueError(
            f"[{_OP}] block_mask batch/heads {tuple(bm.kv_num_blocks.shape[:-1])} must be 1 or "
            f"match the query's (B={query.size(0)}, Hq={query.size(1)})")


class _Plan(NamedTuple):
    """Per q block: runs of kv blocks ``(k0, k1, status)`` where status is (Bm, Hm, 1, 1) int8:
    0 skipped, 1 partial (mask_mod), 2 full; ``None`` means full for every (b, h)."""

    q_block: int
    kv_block: int
    runs: list[list[tuple[int, int, np.ndarray | None]]]


def _plan(bm: BlockMask | None, L: int, S: int, kernel_options: dict) -> _Plan:
    if bm is None or bm.BLOCK_SIZE == (_LARGE_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE):
        qb = int(kernel_options.get("BLOCK_M", 128))
        kb = int(kernel_options.get("BLOCK_N", _MAX_MERGED_KV))
        runs = [[(k0, min(k0 + kb, S), None) for k0 in range(0, S, kb)]
                for _ in range(0, L, qb)]
        return _Plan(qb, kb, runs)
    qb, kb = bm.BLOCK_SIZE
    status = bm._dense_np().astype(np.int8)  # (Bm, Hm, nq, nkv): 1 where listed
    if bm.full_kv_num_blocks is not None:
        full_np = _ordered_to_dense_np(bm.full_kv_num_blocks, bm.full_kv_indices,
                                    bm.full_kv_indices.shape[-1])
        status = np.where(full_np > 0, 2, status).astype(np.int8)
    runs = []
    for i in range(status.shape[2]):
        row, cur = [], None
        for j in np.flatnonzero((status[:, :, i, :] > 0).any(axis=(0, 1))):
            st = status[:, :, i, j]
            k0, k1 = int(j) * kb, min((int(j) + 1) * kb, S)
            if k0 >= S:
                continue
            same = cur is not None and cur[1] == k0 and cur[1] - cur[0] < _MAX_MERGED_KV \
                and np.array_equal(cur[2], st)
            cur = (cur[0], k1, st) if same else (k0, k1, st)
            if same:
                row[-1] = cur
            else:
                row.append(cur)
        runs.append([(a, b, None if (s == 2).all() else s[:, :, None, None]) for a, b, s in row])
    return _Plan(qb, kb, runs)


def _tile_scores(q_blk: Tensor, k_t: Tensor, scale: float, groups: int) -> Tensor:
    """(B, Hq, lq, E) x (Bk, Hkv, E, lk) -> (B, Hq, lq, lk); GQA without copying K.  With equal
    batches the heads are flattened into one 3-d batch (one GEMM of G*lq rows per kv head,
    which ember's matmul spreads over its threads)."""
    B, Hq, lq, E = q_blk.shape
    Bk, Hkv, _, lk = k_t.shape
    if Bk == B:
        s = q_blk.reshape(B * Hkv, groups * lq, E) @ k_t.reshape(B * Hkv, E, lk)
    elif groups == 1:
        return (q_blk @ k_t) * scale
    else:
        s = q_blk.reshape(B, Hkv, groups, lq, E) @ k_t.unsqueeze(2)
    return s.reshape(B, Hq, lq, lk) * scale


def _tile_pv(p: Tensor, v_blk: Tensor, groups: int) -> Tensor:
    B, Hq, lq, lk = p.shape
    Bk, Hkv, _, Ev = v_blk.shape
    if Bk == B:
        o = p.reshape(B * Hkv, groups * lq, lk) @ v_blk.reshape(B * Hkv, lk, Ev)
    elif groups == 1:
        return p @ v_blk
    else:
        o = p.reshape(B, Hkv, groups, lq, lk) @ v_blk.unsqueeze(2)
    return o.reshape(B, Hq, lq, Ev)


def _masked(s: Tensor, status: np.ndarray | None, mask_mod: Callable, idx: tuple) -> Tensor:
    """Apply a run's status: full (b, h) keep all, partial apply mask_mod, absent drop."""
    if status is None:
        return s
    keep = from_numpy(np.ascontiguousarray(status == 2))
    if (status == 1).any():
        mm = _eval_mod(mask_mod, "flex_attention mask_mod", tuple(s.shape), idx)
        keep = keep | (from_numpy(np.ascontiguousarray(status == 1)) & mm.to(dt.bool))
    return where(keep, s, tensor(-math.inf, dtype=s.dtype))


def _q_block(qw: Tensor, k_t: Tensor, vw: Tensor, r0: int, r1: int, runs: list, plan_ctx: dict
             ) -> tuple[Tensor, Tensor, Tensor]:
    """Online softmax over one q block's kv runs -> (out, lse, max) for rows [r0, r1)."""
    score_mod, mask_mod, scale, groups = (plan_ctx[k] for k in ("sm", "mm", "scale", "g"))
    B, Hq = qw.shape[0], qw.shape[1]
    wdt = qw.dtype
    q_blk = qw[:, :, r0:r1]
    lq = r1 - r0
    m = full((B, Hq, lq, 1), -math.inf, dtype=wdt)
    l_sum = zeros((B, Hq, lq, 1), dtype=wdt)
    acc = zeros((B, Hq, lq, vw.shape[-1]), dtype=wdt)
    b_idx, h_idx, q_idx = _idx(0, B, 0), _idx(0, Hq, 1), _idx(r0, lq, 2)
    for k0, k1, status in runs:
        kv_idx = _idx(k0, k1 - k0, 3)
        s = _tile_scores(q_blk, k_t[..., k0:k1], scale, groups)
        if score_mod is not None:
            s = _eval_mod(score_mod, "flex_attention score_mod", tuple(s.shape),
                          (s, b_idx, h_idx, q_idx, kv_idx)).to(wdt).expand(*s.shape)
        s = _masked(s, status, mask_mod, (b_idx, h_idx, q_idx, kv_idx))
        # the stabilizer is a constant for autograd: the result does not depend on it
        m_new = maximum(m, s.detach().amax(-1, keepdim=True))
        m_safe = where(isneginf(m_new), zeros((), dtype=wdt), m_new)
        alpha = exp(m - m_safe)
        p = exp(s - m_safe)
        l_sum = l_sum * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + _tile_pv(p, vw[:, :, k0:k1], groups)
        m = m_new
    alive = l_sum > 0
    out = acc / where(alive, l_sum, ones((), dtype=wdt))
    m_safe = where(isneginf(m), zeros((), dtype=wdt), m)
    lse = log(l_sum) + m_safe  # log(0) = -inf for fully masked rows
    return out, lse.squeeze(-1), m.squeeze(-1)


def _run(query: Tensor, key: Tensor, value: Tensor, score_mod: Callable | None,
         block_mask: BlockMask | None, scale: float, enable_gqa: bool,
         kernel_options: dict) -> tuple[Tensor, Tensor, Tensor]:
    wdt = dt.float64 if query.dtype == dt.float64 else dt.float32
    qw, kw, vw = (x if x.dtype == wdt else x.to(wdt) for x in (query, key, value))
    L, S = query.size(-2), key.size(-2)
    plan = _plan(block_mask, L, S, kernel_options)
    mask_mod = block_mask.mask_mod if block_mask is not None else noop_mask
    ctx = {"sm": score_mod, "mm": mask_mod, "scale": scale,
           "g": query.size(1) // key.size(1)}
    k_t = kw.transpose(-2, -1)
    outs, lses, maxes = [], [], []
    for i, runs in enumerate(plan.runs):
        r0, r1 = i * plan.q_block, min((i + 1) * plan.q_block, L)
        if r0 >= L:
            break
        o, lse, mx = _q_block(qw, k_t, vw, r0, r1, runs, ctx)
        outs.append(o)
        lses.append(lse)
        maxes.append(mx)
    if not outs:  # L == 0
        shape = (query.size(0), query.size(1), 0)
        return (zeros(shape + (value.size(-1),), dtype=query.dtype),
                zeros(shape, dtype=dt.float32), zeros(shape, dtype=dt.float32))
    out = outs[0] if len(outs) == 1 else cat(outs, dim=2)
    lse = lses[0] if len(lses) == 1 else cat(lses, dim=2)
    mx = maxes[0] if len(maxes) == 1 else cat(maxes, dim=2)
    stat_dt = dt.float64 if wdt == dt.float64 else dt.float32
    return out.to(query.dtype), lse.to(stat_dt), mx.detach().to(stat_dt)


def _captures_grad(score_mod: Callable | None, wdt: Any) -> bool:
    """Whether score_mod reads a tensor that requires grad (a learned bias): probe one element."""
    if score_mod is None or not grad_mode.is_grad_enabled():
        return False
    probe = score_mod(zeros((1, 1, 1, 1), dtype=wdt), *(_idx(0, 1, d) for d in range(4)))
    return isinstance(probe, Tensor) and probe.requires_grad


_FNS = {
    "run": lambda q, k, v, *a: _run(q, k, v, *a),
    "plan": lambda bm, L, S, opts: _plan(bm, L, S, opts),
    "mask_mod": lambda bm: bm.mask_mod if bm is not None else noop_mask,
    "score_tile": lambda s, st, mm, sm, r0, k0: ScoreTile(s, st, mm, sm, r0, k0, _eval_mod,
                                                          _masked, _idx),
}


def _dispatch(query: Tensor, key: Tensor, value: Tensor, run_args: tuple) -> tuple:
    """No grad: the blockwise loop (flash-decoding for a short query over many keys).
    Grad of q/k/v only: the loop with the blockwise
    flash backward (O(tile) memory).  score_mod captures a tensor needing grad: autograd
    through the loop (exact; saves every tile's intermediates)."""
    needs = grad_mode.is_grad_enabled() and any(x.requires_grad for x in (query, key, value))
    wdt = dt.float64 if query.dtype == dt.float64 else dt.float32
    if _captures_grad(run_args[0], wdt):
        return _run(query, key, value, *run_args)
    if needs:
        return FlexAttentionFunction.apply(query, key, value, run_args, _FNS)
    if use_split(query.size(-2), key.size(-2), run_args[4]):
        return split_kv_run(query, key, value, run_args)  # flash-decoding
    return _run(query, key, value, *run_args)


def flex_attention(query: Tensor, key: Tensor, value: Tensor,
                   score_mod: _score_mod_signature | None = None,
                   block_mask: BlockMask | None = None, scale: float | None = None,
                   enable_gqa: bool = False, return_lse: bool = False,
                   kernel_options: FlexKernelOptions | None = None, *,
                   return_aux: AuxRequest | None = None) -> Any:
    """Attention with a user ``score_mod`` and a block-sparse ``block_mask`` (PyTorch's API).

    query ``(B, Hq, L, E)``, key ``(B|1, Hkv, S, E)``, value ``(B|1, Hkv, S, Ev)`` ->
    ``(B, Hq, L, Ev)``; with ``return_aux=AuxRequest(lse=True, max_scores=True)`` also an
    ``AuxOutput`` with the natural-log log-sum-exp and the row max of the modified scores
    ``(B, Hq, L)``.  Fully masked rows give output 0 and lse -inf.

    Example::

        from ember.nn.attention.flex_attention import flex_attention, create_block_mask
        bm = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 256, 256)
        out = flex_attention(q, k, v, block_mask=bm)
    """
    _validate(query, key, value, enable_gqa, block_mask)
    if score_mod is not None and _num_positional(score_mod) != 5:
        raise EmberValueError(
            f"[{_OP}] score_mod must take 5 positional args (score, b, h, q_idx, kv_idx); "
            f"{getattr(score_mod, '__name__', score_mod)} takes {_num_positional(score_mod)}")
    if block_mask is not None:
        if block_mask.BLOCK_SIZE != (_LARGE_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE):
            _check_block_mask(block_mask, query, key)
        elif block_mask.mask_mod is _sliced_mask_mod_error:
            raise EmberRuntimeError(f"[{_OP}] Cannot use mask_mod from a sliced BlockMask")
    if return_lse and return_aux is not None:
        raise EmberValueError(
            f"[{_OP}] Cannot specify both return_lse and return_aux. return_lse is deprecated, "
            "please use return_aux=AuxRequest(lse=True) instead.")
    if return_lse:
        warnings.warn("return_lse is deprecated and will be removed in v2.10. Please use "
                      "return_aux=AuxRequest(lse=True) instead.", FutureWarning, stacklevel=2)
    if scale is None:
        scale = 1.0 / math.sqrt(query.size(-1))
    run_args = (score_mod, block_mask, float(scale), enable_gqa, dict(kernel_options or {}))
    fused = _fused(query, key, value, run_args) if _lazy.tracing() else None
    out, lse, mx = fused if fused is not None else _dispatch(query, key, value, run_args)
    if return_aux is not None:
        return out, AuxOutput(lse=lse if return_aux.lse else None,
                              max_scores=mx if return_aux.max_scores else None)
    if return_lse:
        return out, lse
    return out

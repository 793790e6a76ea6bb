"""FlexAttention as one primitive: ``flex_attention_fused`` (the compiled path's node).

Under ``ember.compile``, ``flex_attention`` traces ``score_mod`` and ``mask_mod`` into small
expression graphs (``FlexExpr``: pointwise ops of the registry over the index variables and the
tensors the mods capture) and records ONE node of this op; the C backend lowers it to one
attention kernel (``compiler/c/lower/flex.py``).  This module's eager kernel is the reference for
that node (and what runs when the node stays an extern): per block of query rows, the scores
against every key, the traced ``score_mod``, the BlockMask's block status (absent blocks dropped,
partial blocks through the traced ``mask_mod``, full blocks kept), a safe softmax and ``p @ v``.
Memory is O(rows x keys) per block, never L x S.

Inputs: ``q (B, Hq, L, E)``, ``k (Bk, Hkv, S, E)``, ``v (Bk, Hkv, S, Ev)``, ``kv_num_blocks``,
``kv_indices``, ``full_kv_num_blocks``, ``full_kv_indices`` (int32, ``(Bm, Hm, nq[, nkv])``; the
full pair may be absent, then ``has_full`` is False), then the captured tensors in the order the
expressions number them.  Outputs: ``out (B, Hq, L, Ev)``, ``lse`` and ``max`` ``(B, Hq, L)``
(float32; float64 for float64 inputs).
"""

# shape letters (B, Hq, L, S, E) as in the attention literature
# ruff: noqa: N806

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ember import dtypes as dt
from ember.errors import ShapeError
from ember.ops.registry import REGISTRY, OpDef, register

# mod inputs: score_mod(score, b, h, q_idx, kv_idx) numbers them 0..4; mask_mod(b, h, q, kv)
# uses 1..4 (the same numbering, without the score)
MOD_INPUTS = ("score", "b", "h", "q_idx", "kv_idx")


@dataclass(frozen=True)
class FlexExpr:
    """A traced ``score_mod``/``mask_mod``: ``nodes[j] = (op name, args, params, out dtype)``.

    An arg is ``("x", k)`` (mod input ``MOD_INPUTS[k]``), ``("c", k)`` (captured tensor ``k``),
    ``("v", j)`` (node ``j``'s value) or a Python number.  The op ``"flex_load"`` reads a
    captured tensor at integer index values: ``args = (("c", k), index, ...)``.  ``out`` is
    the result (a ref as above); ``str`` prints it as C-like text.
    """

    nodes: tuple
    out: Any

    def __str__(self) -> str:
        lines = [f"v{j} = {op}({', '.join(map(_fmt, args))}{_fmt_params(params)})"
                 for j, (op, args, params, _) in enumerate(self.nodes)]
        return "; ".join(lines + [f"return {_fmt(self.out)}"])


def _fmt(a: Any) -> str:
    if type(a) is tuple and len(a) == 2 and a[0] in ("x", "c", "v"):
        return MOD_INPUTS[a[1]] if a[0] == "x" else f"{'cap' if a[0] == 'c' else 'v'}{a[1]}"
    return repr(a)


def _fmt_params(params: tuple) -> str:
    return "".join(f", {k}={v}" for k, v in params)


def eval_expr(expr: FlexExpr, inputs: tuple, captured: list) -> np.ndarray:
    """Evaluate ``expr`` with NumPy over broadcastable ``inputs`` (index arrays, scores)."""
    vals: list = []

    def get(a: Any) -> Any:
        if type(a) is tuple and len(a) == 2 and a[0] in ("x", "c", "v"):
            return inputs[a[1]] if a[0] == "x" else (captured[a[1]] if a[0] == "c"
                                                     else vals[a[1]])
        return a

    with np.errstate(all="ignore"):
        for op, args, params, _ in expr.nodes:
            if op == "flex_load":
                table = get(args[0])
                idx = np.broadcast_arrays(*(np.asarray(get(a)).astype(np.int64)
                                            for a in args[1:]))
                vals.append(table[tuple(idx)])
            else:
                vals.append(np.asarray(REGISTRY[op].eager(*(get(a) for a in args),
                                                          **dict(params))))
        return np.asarray(get(expr.out))


def _dense_status(num: np.ndarray, idx: np.ndarray, nkv: int) -> np.ndarray:
    """(Bm, Hm, nq, nkv) bool: block (i, j) listed in the first ``num`` entries of ``idx``."""
    out = np.zeros(num.shape + (nkv,), bool)
    cols = np.arange(idx.shape[-1])
    listed = cols < num[..., None]
    ii = np.nonzero(listed)
    j = idx[ii]
    ok = j < nkv
    out[ii[0][ok], ii[1][ok], ii[2][ok], j[ok]] = True
    return out


def _meta(q, k, v, kv_num, kv_idx, full_num, full_idx, *captured, score, mask, scale,  # noqa: ANN001
          block, has_full, partition=0) -> tuple:
    B, Hq, L, E = q.shape
    if k.shape[-1] != E or k.shape[-2] != v.shape[-2] or k.shape[1] == 0 or Hq % k.shape[1]:
        raise ShapeError(f"[flex_attention_fused] q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)} do not agree")
    sdt = dt.float64 if q.dtype == dt.float64 else dt.float32
    return ((B, Hq, L, v.shape[-1]), q.dtype), ((B, Hq, L), sdt), ((B, Hq, L), sdt)


def block_status(kv_num: np.ndarray, kv_idx: np.ndarray, full_num: Any, full_idx: Any,
                 nkv: int) -> np.ndarray:
    """(Bm, Hm, nq, nkv) int8: 0 absent, 1 partial (mask_mod), 2 full."""
    st = _dense_status(np.asarray(kv_num), np.asarray(kv_idx), nkv).astype(np.int8)
    if full_num is not None:
        st[_dense_status(np.asarray(full_num), np.asarray(full_idx), nkv)] = 2
    return st


def _eager(q, k, v, kv_num, kv_idx, full_num, full_idx, *captured, score, mask, scale,  # noqa: ANN001
           block, has_full, partition=0) -> tuple:
    wdt = np.float64 if q.dtype == np.float64 else np.float32
    q, k, v = (np.asarray(x, dtype=wdt) for x in (q, k, v))
    B, Hq, L, _ = q.shape
    Bk, Hkv, S, _ = k.shape
    G = Hq // Hkv
    qb, kb = block
    nkv = -(-S // kb)
    status = block_status(kv_num, kv_idx, full_num if has_full else None,
                          full_idx if has_full else None, nkv)
    cap = [np.asarray(c) for c in captured]
    out = np.zeros((B, Hq, L, v.shape[-1]), wdt)
    lse = np.full((B, Hq, L), -np.inf, wdt)
    mx = np.full((B, Hq, L), -np.inf, wdt)
    kk = np.broadcast_to(k, (B, Hkv, S, k.shape[-1]))
    vv = np.broadcast_to(v, (B, Hkv, S, v.shape[-1]))
    kv_i = np.arange(S, dtype=np.int32)[None, None, None, :]
    b_i = np.arange(B, dtype=np.int32)[:, None, None, None]
    h_i = np.arange(Hq, dtype=np.int32)[None, :, None, None]
    with np.errstate(all="ignore"):
        for r0 in range(0, L, qb):
            r1 = min(r0 + qb, L)
            qg = q[:, :, r0:r1].reshape(B, Hkv, G, r1 - r0, -1)
            s = (qg @ np.swapaxes(kk, -1, -2)[:, :, None]).reshape(B, Hq, r1 - r0, S) * wdt(scale)
            q_i = np.arange(r0, r1, dtype=np.int32)[None, None, :, None]
            if score is not None:
                s = np.broadcast_to(eval_expr(score, (s, b_i, h_i, q_i, kv_i), cap),
                                    s.shape).astype(wdt)
            st = np.repeat(status[:, :, r0 // qb], kb, axis=-1)[..., :S][:, :, None, :]
            keep = st == 2
            if (st == 1).any():
                mm = np.ones((1, 1, 1, 1), bool) if mask is None else \
                    eval_expr(mask, (None, b_i, h_i, q_i, kv_i), cap).astype(bool)
                keep = keep | ((st == 1) & mm)
            s = np.where(keep, s, -np.inf)
            m = s.max(-1)
            m_safe = np.where(np.isneginf(m), 0, m)
            p = np.exp(s - m_safe[..., None])
            den = p.sum(-1)
            o = (p.reshape(B, Hkv, G, r1 - r0, S) @ vv[:, :, None]).reshape(B, Hq, r1 - r0, -1)
            out[:, :, r0:r1] = np.where(den[..., None] > 0, o / np.where(den > 0, den, 1)[..., None],
                                        0)
            lse[:, :, r0:r1] = np.log(den) + m_safe
            mx[:, :, r0:r1] = m
    return out, lse, mx


FLEX_ATTENTION_FUSED = register(OpDef(
    "flex_attention_fused", "composite", _meta, _eager, None, num_outputs=3,
    tags=frozenset({"multi_output"}),
    doc="FlexAttention forward with traced score_mod/mask_mod (compiled path; inference).",
))

__all__ = ["FLEX_ATTENTION_FUSED", "FlexExpr", "MOD_INPUTS", "block_status", "eval_expr"]


def _load_meta(table, *index) -> tuple:  # noqa: ANN001
    if len(index) > len(table.shape) or not index:
        raise ShapeError(f"[flex_load] {len(index)} indices into a {len(table.shape)}-d tensor")
    shape = np.broadcast_shapes(*(tuple(i.shape) for i in index)) + tuple(table.shape[len(index):])
    return shape, table.dtype


def _load_eager(table, *index) -> np.ndarray:  # noqa: ANN001
    idx = np.broadcast_arrays(*(np.asarray(i).astype(np.int64) for i in index))
    return np.asarray(table)[tuple(idx)]


FLEX_LOAD = register(OpDef(
    "flex_load", "composite", _load_meta, _load_eager, None,
    doc="A captured tensor read at integer index tensors inside a traced score_mod/mask_mod.",
))
__all__ += ["FLEX_LOAD"]

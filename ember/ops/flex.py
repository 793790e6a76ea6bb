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
from typing import Any, NamedTuple

import numpy as np

from ember import dtypes as dt
from ember.errors import EmberNotImplementedError, ShapeError
from ember.ops.registry import REGISTRY, OpDef, bind, register

# mod inputs: score_mod(score, b, h, q_idx, kv_idx) numbers them 0..4; mask_mod(b, h, q, kv)
# uses 1..4 (the same numbering, without the score)
MOD_INPUTS = ("score", "b", "h", "q_idx", "kv_idx")


class FlexTiles(NamedTuple):
    """Tile sizes of the fused kernel: query rows and keys per block, keys per flash-decoding
    partition.  (A NamedTuple, not a tuple: the graph key keeps it as structure instead of
    lifting its numbers to runtime scalars.)"""

    q_block: int
    kv_block: int
    partition: int = 128


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


def eval_nodes(expr: FlexExpr, inputs: tuple, captured: list) -> tuple:
    """(node values, ``get(arg)``) of ``expr`` evaluated with NumPy over broadcastable
    ``inputs`` (scores, index arrays)."""
    vals: list = []

    def get(a: Any) -> Any:
        if type(a) is tuple and len(a) == 2 and a[0] in ("x", "c", "v"):
            return inputs[a[1]] if a[0] == "x" else (captured[a[1]] if a[0] == "c"
                                                     else vals[a[1]])
        return a

    with np.errstate(all="ignore"):
        for op, args, params, _ in expr.nodes:
            if op == "flex_load":
                vals.append(_load_eager(get(args[0]), *(get(a) for a in args[1:])))
            else:
                vals.append(np.asarray(REGISTRY[op].eager(*(get(a) for a in args),
                                                          **dict(params))))
    return vals, get


def eval_expr(expr: FlexExpr, inputs: tuple, captured: list) -> np.ndarray:
    """Evaluate ``expr`` with NumPy over broadcastable ``inputs`` (index arrays, scores)."""
    _, get = eval_nodes(expr, inputs, captured)
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
          block, has_full) -> tuple:
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
           block, has_full) -> tuple:
    wdt = np.float64 if q.dtype == np.float64 else np.float32
    q, k, v = (np.asarray(x, dtype=wdt) for x in (q, k, v))
    B, Hq, L, _ = q.shape
    Bk, Hkv, S, _ = k.shape
    G = Hq // Hkv
    qb, kb = block[0], block[1]
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
            safe = np.where(den > 0, den, 1)[..., None]
            out[:, :, r0:r1] = np.where(den[..., None] > 0, o / safe, 0)
            lse[:, :, r0:r1] = np.log(den) + m_safe
            mx[:, :, r0:r1] = m
    return out, lse, mx


__all__ = ["FLEX_ATTENTION_FUSED", "FlexExpr", "FlexTiles", "MOD_INPUTS", "block_status",
           "eval_expr"]


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
    tags=frozenset({"nondifferentiable"}),
    doc="A captured tensor read at integer index tensors inside a traced score_mod/mask_mod.",
))
__all__ += ["FLEX_LOAD"]


# ------------------------------------------------------------------------------- backward
# Reverse-mode rules of the ops a traced score_mod may use: ``rule(g, args, v, sel)`` gives the
# adjoint of each argument (None: not differentiable), written once for NumPy arrays and for
# C text (``CText`` overloads the operators; ``sel(c, x, y)`` is ``where``/``?:``).
def _where_rule(g, a, v, sel):  # noqa: ANN001, ANN202
    return (None, sel(a[0], g, 0), sel(a[0], 0, g))


GRAD_RULES: dict = {
    "add": lambda g, a, v, sel: (g, g),
    "sub": lambda g, a, v, sel: (g, -g),
    "mul": lambda g, a, v, sel: (g * a[1], g * a[0]),
    "div": lambda g, a, v, sel: (g / a[1], -(g * a[0]) / (a[1] * a[1])),
    "neg": lambda g, a, v, sel: (-g,),
    "tanh": lambda g, a, v, sel: (g * (1 - v * v),),
    "exp": lambda g, a, v, sel: (g * v,),
    "log": lambda g, a, v, sel: (g / a[0],),
    "sqrt": lambda g, a, v, sel: (g / (2 * v),),
    "sigmoid": lambda g, a, v, sel: (g * (v * (1 - v)),),
    "where": _where_rule,
    "convert_element_type": lambda g, a, v, sel: (g,),
}


def active_nodes(expr: FlexExpr, grad_caps: tuple) -> list:
    """Per node: whether its value depends on the score or on a captured tensor in
    ``grad_caps`` through float values (the nodes reverse mode visits)."""
    act: list = []

    def on(a: Any) -> bool:
        return type(a) is tuple and len(a) == 2 and (
            (a[0] == "x" and a[1] == 0) or (a[0] == "v" and act[a[1]]))

    for op, args, _, out_name in expr.nodes:
        floating = out_name in ("float32", "float64")
        if op == "flex_load":
            act.append(floating and args[0][1] in grad_caps)
        else:
            act.append(floating and any(on(a) for a in args))
    return act


def grad_reason(expr: FlexExpr | None, grad_caps: tuple) -> str | None:
    """Why reverse mode cannot differentiate ``expr`` (None when it can)."""
    if expr is None:
        return None
    act = active_nodes(expr, grad_caps)
    for (op, args, _, _), a in zip(expr.nodes, act):
        if a and op != "flex_load" and op not in GRAD_RULES:
            return f"no gradient rule for {op} in a traced score_mod"
        if a and op == "flex_load" and any(
                type(x) is tuple and x[0] == "v" and act[x[1]] for x in args[1:]):
            return "a captured tensor indexed by a differentiated value"
    return None


def reverse(expr: FlexExpr, g: Any, vals: list, get: Any, grad_caps: tuple, sel: Any,
            zero: Any, let: Any = None) -> tuple:
    """(adjoint of the score, [(captured k, index args, adjoint)] per flex_load of a grad
    capture) of ``expr`` at seed ``g``; ``vals`` are the nodes' forward values, ``get`` maps
    an arg to its value; ``let(x)`` (optional) names an adjoint.  Works on NumPy arrays
    and on C text (``compiler/c/codegen/flex.py``)."""
    act = active_nodes(expr, grad_caps)
    adj: dict = {}
    out = expr.out
    d_score = None
    if type(out) is tuple and out[0] == "v" and act[out[1]]:
        adj[out[1]] = g
    elif out == ("x", 0):
        return g, []
    loads = []
    for j in range(len(expr.nodes) - 1, -1, -1):
        if j not in adj:
            continue
        op, args, _, _ = expr.nodes[j]
        gj = adj.pop(j)
        if let is not None:  # C: the adjoint as a named statement (no repeated subterms)
            gj = let(gj)
        if op == "flex_load":
            loads.append((args[0][1], args[1:], gj))
            continue
        parts = GRAD_RULES[op](gj, [get(a) for a in args], vals[j], sel)
        for a, ga in zip(args, parts):
            if ga is None or type(a) is not tuple:
                continue
            if a == ("x", 0):
                d_score = ga if d_score is None else d_score + ga
            elif a[0] == "v" and act[a[1]]:
                adj[a[1]] = ga if a[1] not in adj else adj[a[1]] + ga
    return (zero if d_score is None else d_score), loads


__all__ += ["GRAD_RULES", "active_nodes", "grad_reason", "reverse"]


def _bwd_meta(q, k, v, out, lse, g_out, g_lse, kv_num, kv_idx, full_num, full_idx,  # noqa: ANN001
              *captured, score, mask, scale, block, has_full, grad_caps) -> tuple:
    specs = [(tuple(q.shape), q.dtype), (tuple(k.shape), k.dtype), (tuple(v.shape), v.dtype)]
    return tuple(specs + [(tuple(captured[c].shape), captured[c].dtype) for c in grad_caps])


def _bwd_tile(ctx: dict, r0: int, r1: int) -> None:
    """Gradients of the rows [r0, r1) into ctx's accumulators (dense over the keys)."""
    q, kk, vv, do, o, lse, glse = (ctx[x] for x in ("q", "k", "v", "do", "o", "lse", "glse"))
    B, Hq, _, _ = q.shape
    Hkv, S = kk.shape[1], kk.shape[2]
    G, lq, wdt = Hq // Hkv, r1 - r0, q.dtype.type
    score, cap, scale = ctx["score"], ctx["cap"], ctx["scale"]
    qg = q[:, :, r0:r1].reshape(B, Hkv, G, lq, -1)
    s = (qg @ np.swapaxes(kk, -1, -2)[:, :, None]).reshape(B, Hq, lq, S) * wdt(scale)
    idx = (ctx["b"], ctx["h"], np.arange(r0, r1, dtype=np.int32)[None, None, :, None], ctx["kv"])
    vals, get = [], None
    res = s
    if score is not None:
        vals, get = eval_nodes(score, (s, *idx), cap)
        res = np.broadcast_to(np.asarray(get(score.out)), s.shape).astype(wdt)
    keep = ctx["keep"](r0, r1, idx)
    ls = lse[:, :, r0:r1, None]
    p = np.where(keep & np.isfinite(ls), np.exp(res - np.where(np.isfinite(ls), ls, 0)), 0)
    dog = do[:, :, r0:r1]
    dp = (dog.reshape(B, Hkv, G, lq, -1) @ np.swapaxes(vv, -1, -2)[:, :, None]
          ).reshape(B, Hq, lq, S)
    delta = (dog * o[:, :, r0:r1]).sum(-1, keepdims=True)
    ds = p * (dp - delta + (0 if glse is None else glse[:, :, r0:r1, None]))
    if score is not None:
        ds, loads = reverse(score, ds, vals, get, ctx["grad_caps"], np.where, 0)
        ds = np.broadcast_to(ds, s.shape)
        for c, iargs, adj in loads:
            ix = np.broadcast_arrays(*(np.asarray(get(a)).astype(np.int64) for a in iargs),
                                     adj)
            np.add.at(ctx["dcap"][c], tuple(ix[:-1]), ix[-1])
    ctx["dq"][:, :, r0:r1] = ((ds.reshape(B, Hkv, G, lq, S) @ kk[:, :, None]).reshape(
        B, Hq, lq, -1) * scale)
    dsg = np.swapaxes(ds, -1, -2).reshape(B, Hkv, G, S, lq)
    ctx["dk"] += (dsg @ q[:, :, r0:r1].reshape(B, Hkv, G, lq, -1)).sum(2) * scale
    ctx["dv"] += (np.swapaxes(p, -1, -2).reshape(B, Hkv, G, S, lq)
                  @ dog.reshape(B, Hkv, G, lq, -1)).sum(2)


def _bwd_eager(q, k, v, out, lse, g_out, g_lse, kv_num, kv_idx, full_num, full_idx,  # noqa: ANN001
               *captured, score, mask, scale, block, has_full, grad_caps) -> tuple:
    wdt = np.float64 if q.dtype == np.float64 else np.float32
    q, k, v, out, lse, g_out = (np.asarray(x, dtype=wdt) for x in (q, k, v, out, lse, g_out))
    B, Hq, L, _ = q.shape
    Bk, Hkv, S, _ = k.shape
    qb, kb = block[0], block[1]
    status = block_status(kv_num, kv_idx, full_num if has_full else None,
                          full_idx if has_full else None, -(-S // kb))
    cap = [np.asarray(c) for c in captured]

    def keep(r0: int, r1: int, idx: tuple) -> np.ndarray:
        st = np.repeat(status[:, :, r0 // qb], kb, axis=-1)[..., :S][:, :, None, :]
        k2 = st == 2
        if mask is not None and (st == 1).any():
            k2 = k2 | ((st == 1) & eval_expr(mask, (None, *idx), cap).astype(bool))
        elif mask is None:
            k2 = k2 | (st == 1)
        return k2

    ctx = dict(q=q, k=np.broadcast_to(k, (B,) + k.shape[1:]),
               v=np.broadcast_to(v, (B,) + v.shape[1:]), do=g_out, o=out, lse=lse,
               glse=None if g_lse is None else np.asarray(g_lse, wdt), score=score, cap=cap,
               scale=scale, keep=keep, grad_caps=tuple(grad_caps),
               b=np.arange(B, dtype=np.int32)[:, None, None, None],
               h=np.arange(Hq, dtype=np.int32)[None, :, None, None],
               kv=np.arange(S, dtype=np.int32)[None, None, None, :],
               dq=np.zeros_like(q), dk=np.zeros((B, Hkv, S, k.shape[-1]), wdt),
               dv=np.zeros((B, Hkv, S, v.shape[-1]), wdt),
               dcap={c: np.zeros(cap[c].shape, np.float64) for c in grad_caps})
    with np.errstate(all="ignore"):
        for r0 in range(0, L, qb):
            _bwd_tile(ctx, r0, min(r0 + qb, L))
    dk, dv = ctx["dk"], ctx["dv"]
    if Bk == 1 and B > 1:
        dk, dv = dk.sum(0, keepdims=True), dv.sum(0, keepdims=True)
    res = [ctx["dq"].astype(wdt), dk.astype(wdt), dv.astype(wdt)]
    return tuple(res + [ctx["dcap"][c].astype(cap[c].dtype) for c in grad_caps])


FLEX_ATTENTION_FUSED_BACKWARD = register(OpDef(
    "flex_attention_fused_backward", "composite", _bwd_meta, _bwd_eager, None, num_outputs=0,
    tags=frozenset({"multi_output", "nondifferentiable"}),
    doc="Gradients of flex_attention_fused: dq, dk, dv and the captured tensors' (grad_caps).",
))


def _fused_vjp(ctx, g_out, g_lse=None, g_max=None):  # noqa: ANN001, ARG001
    if ctx.create_graph:
        raise EmberNotImplementedError(
            "[flex_attention] double backward through the fused (compiled) flex_attention is "
            "not supported; call it outside ember.compile for higher-order gradients")
    q, k, v, kvn, kvi, fkn, fki, *captured = ctx.inputs
    out, lse, _ = ctx.outputs
    p = ctx.params
    needs = ctx.needs_input_grad
    grad_caps = tuple(c for c in range(len(captured)) if needs[7 + c])
    if g_out is None:
        g_out = out * 0
    grads = bind(FLEX_ATTENTION_FUSED_BACKWARD, q, k, v, out, lse, g_out, g_lse, kvn, kvi, fkn,
                 fki, *captured, score=p["score"], mask=p["mask"], scale=p["scale"],
                 block=p["block"], has_full=p["has_full"], grad_caps=grad_caps)
    dcap = dict(zip(grad_caps, grads[3:]))
    res = [grads[0] if needs[0] else None, grads[1] if needs[1] else None,
           grads[2] if needs[2] else None, None, None, None, None]
    return tuple(res + [dcap.get(c) for c in range(len(captured))])


__all__ += ["FLEX_ATTENTION_FUSED_BACKWARD"]


FLEX_ATTENTION_FUSED = register(OpDef(
    "flex_attention_fused", "composite", _meta, _eager, _fused_vjp, num_outputs=3,
    tags=frozenset({"multi_output"}), save=tuple(range(64)), save_output=(0, 1),
    doc="FlexAttention forward with traced score_mod/mask_mod (the compiled path's node).",
))

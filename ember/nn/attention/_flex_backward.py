"""The blockwise (flash-attention) backward of eager ``flex_attention``.

The forward saves only q, k, v, the output and the log-sum-exp.  The backward walks the same
tiles as the forward and recomputes each tile's probabilities from the saved lse
(``p = exp(score_mod(s) - lse)``), so training also runs in O(tile) memory:

    dV += p^T dO;  dP = dO V^T;  dS = p * (dP - rowsum(dO * O) + dlse)
    dS <- dS through score_mod (autograd on the tile);  dQ += dS K * scale;  dK += dS^T Q * scale

This path is used when no tensor captured by ``score_mod`` requires grad; otherwise flex_attention
differentiates its forward loop with autograd (exact, more memory), which also gives the captured
tensors' gradients.  A backward that must build a graph (double backward) also recomputes the
forward with autograd and differentiates that.
"""

# shape letters (B, Hq, E) as in the attention literature
# ruff: noqa: N806

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember._frontend.creation import from_numpy
from ember.autograd import grad_mode
from ember.autograd.engine import grad as autograd_grad
from ember.autograd.function import Function
from ember.ops import _parallel


def _gqa_scores(a: np.ndarray, b_t: np.ndarray, groups: int) -> np.ndarray:
    """(B, Hq, m, E) @ (Bk, Hkv, E, n) -> (B, Hq, m, n) without repeating b's heads; equal
    batches run as one 3-d product (G*m rows per kv head) on ember's threads."""
    B, Hq, m, E = a.shape
    Bk, Hkv, _, n = b_t.shape
    if Bk == B:
        a3 = np.ascontiguousarray(a).reshape(B * Hkv, groups * m, E)
        return _parallel.matmul(a3, b_t.reshape(B * Hkv, E, n)).reshape(B, Hq, m, n)
    if groups == 1:
        return a @ b_t
    out = a.reshape(B, Hq // groups, groups, m, E) @ b_t[:, :, None]
    return out.reshape(B, Hq, m, n)


def _bmm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-(batch, head) product of two (B, H, ., .) arrays on ember's threads."""
    B, H = a.shape[:2]
    a3 = np.ascontiguousarray(a).reshape(B * H, *a.shape[2:])
    return _parallel.matmul(a3, np.ascontiguousarray(b).reshape(B * H, *b.shape[2:])
                            ).reshape(B, H, a.shape[2], b.shape[3])


def _reduce_heads(x: np.ndarray, groups: int, batch_k: int) -> np.ndarray:
    """Sum per-query-head gradients (B, Hq, n, E) onto the kv heads and kv batch."""
    B, Hq, n, E = x.shape
    if groups > 1:
        x = x.reshape(B, Hq // groups, groups, n, E).sum(2)
    if batch_k == 1 and B > 1:
        x = x.sum(0, keepdims=True)
    return x


def flex_backward(saved: tuple, grads: tuple, run_args: tuple, tile_fns: dict
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dq, dk, dv (NumPy, working precision) of the blockwise forward; see module docstring."""
    q, k, v, out, lse = (x.detach().numpy() for x in saved)
    score_mod, block_mask, scale, _gqa, options = run_args
    wdt = np.float64 if q.dtype == np.float64 else np.float32
    q, k, v = (x.astype(wdt, copy=False) for x in (q, k, v))
    g_out, g_lse = grads
    do = (np.zeros(out.shape, wdt) if g_out is None
          else g_out.detach().numpy().astype(wdt, copy=False))
    gl = None if g_lse is None else g_lse.detach().numpy().astype(wdt, copy=False)[..., None]
    lse = lse.astype(wdt, copy=False)[..., None]
    dead = np.isneginf(lse)
    lse_safe = np.where(dead, 0, lse)
    delta = (do * out.astype(wdt, copy=False)).sum(-1, keepdims=True)
    groups = q.shape[1] // k.shape[1]
    L, S = q.shape[2], k.shape[2]
    plan = tile_fns["plan"](block_mask, L, S, options)
    mask_mod = tile_fns["mask_mod"](block_mask)
    k_t, v_t = np.swapaxes(k, -2, -1), np.swapaxes(v, -2, -1)
    dq = np.zeros_like(q)
    dk_h = np.zeros(q.shape[:2] + k.shape[2:], wdt)
    dv_h = np.zeros(q.shape[:2] + v.shape[2:], wdt)
    for i, runs in enumerate(plan.runs):
        r0, r1 = i * plan.q_block, min((i + 1) * plan.q_block, L)
        if r0 >= L:
            break
        q_blk, rows = q[:, :, r0:r1], slice(r0, r1)
        for k0, k1, status in runs:
            s = _gqa_scores(q_blk, k_t[..., k0:k1], groups) * scale
            ds_fn = tile_fns["score_tile"](s, status, mask_mod, score_mod, r0, k0)
            p = np.where(dead[:, :, rows], 0, np.exp(ds_fn.scores - lse_safe[:, :, rows]))
            dv_h[:, :, k0:k1] += _bmm(np.swapaxes(p, -2, -1), do[:, :, rows])
            dp = _gqa_scores(do[:, :, rows], v_t[..., k0:k1], groups)
            ds = dp - delta[:, :, rows]
            if gl is not None:
                ds = ds + gl[:, :, rows]
            ds = ds_fn.backward(p * ds) * scale
            dq[:, :, rows] += _gqa_scores(ds, k[:, :, k0:k1], groups)
            dk_h[:, :, k0:k1] += _bmm(np.swapaxes(ds, -2, -1), q_blk)
    return dq, _reduce_heads(dk_h, groups, k.shape[0]), _reduce_heads(dv_h, groups, k.shape[0])


class ScoreTile:
    """One recomputed tile: masked modified scores and the vjp of score_mod on the tile."""

    def __init__(self, s: np.ndarray, status: Any, mask_mod: Callable, score_mod: Callable | None,
                 r0: int, k0: int, eval_mod: Callable, masked: Callable, idx: Callable) -> None:
        B, H, m, n = s.shape
        index = (idx(0, B, 0), idx(0, H, 1), idx(r0, m, 2), idx(k0, n, 3))
        self._leaf = self._mod = None
        st = from_numpy(np.ascontiguousarray(s))
        if score_mod is not None:
            self._leaf = st.requires_grad_(True)
            with grad_mode.enable_grad():
                self._mod = eval_mod(score_mod, "flex_attention score_mod", s.shape,
                                     (self._leaf, *index)).to(st.dtype).expand(*s.shape)
            st = self._mod.detach()
        self.scores = masked(st, status, mask_mod, index).numpy()

    def backward(self, ds: np.ndarray) -> np.ndarray:
        if self._mod is None or not self._mod.requires_grad:
            return ds if self._mod is None else np.zeros_like(ds)
        (g,) = autograd_grad(self._mod, self._leaf, from_numpy(np.ascontiguousarray(ds)),
                             allow_unused=True)
        return np.zeros_like(ds) if g is None else g.numpy()


class FlexAttentionFunction(Function):
    """out, lse, max of the blockwise forward with the blockwise backward above."""

    @staticmethod
    def forward(ctx, query, key, value, run_args, fns):  # noqa: ANN001, ANN205
        out, lse, mx = fns["run"](query, key, value, *run_args)
        ctx.run_args, ctx.fns = run_args, fns
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.mark_non_differentiable(mx)
        return out, lse, mx

    @staticmethod
    def backward(ctx, g_out, g_lse, g_max):  # noqa: ANN001, ANN205
        query, key, value, out, lse = ctx.saved_tensors
        if grad_mode.is_grad_enabled():  # double backward: differentiate the forward loop
            o2, l2, _ = ctx.fns["run"](query, key, value, *ctx.run_args)
            pairs = [(o, g) for o, g in ((o2, g_out), (l2, g_lse)) if g is not None]
            return (*autograd_grad([o for o, _ in pairs], [query, key, value],
                                   [g for _, g in pairs], create_graph=True,
                                   allow_unused=True), None, None)
        dq, dk, dv = flex_backward((query, key, value, out, lse), (g_out, g_lse), ctx.run_args,
                                   ctx.fns)
        cast = [from_numpy(np.ascontiguousarray(d)).to(x.dtype)
                for d, x in ((dq, query), (dk, key), (dv, value))]
        return (*cast, None, None)

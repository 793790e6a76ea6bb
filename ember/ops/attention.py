"""Scaled dot-product attention: one fused eager kernel with a closed-form gradient.

``sdpa(q, k, v[, mask], scale=...)`` computes ``safe_softmax(q @ k^T * scale + mask) @ v`` over
equal batch dims (the frontend broadcasts, repeats GQA heads, and turns bool/causal masks into
additive float masks).  A fully masked row gives zeros, as PyTorch's ``_safe_softmax`` does.
float16/bfloat16 are computed in float32 and rounded once.
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.errors import DTypeError, EmberNotImplementedError, ShapeError
from ember.ops import _half_c, _parallel
from ember.ops._util import lowp
from ember.ops.linalg import MATMUL, mT
from ember.ops.registry import OpDef, bind, register


def _softmax_rows(s: np.ndarray, out: np.ndarray, safe: bool = True) -> None:
    """Softmax of the rows of 2-d ``s`` into ``out`` (which may be ``s``).  ``safe``: a row
    that is entirely -inf gives zeros (attention); otherwise NaN, as ``torch.softmax``."""
    m = np.max(s, axis=-1, keepdims=True)
    if safe and not np.isfinite(m).all():
        m = np.where(np.isfinite(m), m, 0)
    np.subtract(s, m, out=out)
    np.exp(out, out=out)
    den = np.add.reduce(out, axis=-1, keepdims=True)
    if safe:
        # a fully masked row has exp(-inf) = 0 everywhere already: leave it at zero
        np.divide(out, den, out=out, where=den > 0)
    else:
        np.divide(out, den, out=out)


def _safe_softmax_np(s: np.ndarray, inplace: bool = False, safe: bool = True) -> np.ndarray:
    """Softmax over the last dim; rows that are entirely -inf give zeros, not NaN (unless
    ``safe`` is False).  ``inplace`` reuses ``s`` (a temporary of the caller) for the result.
    Large inputs are done in blocks of rows that fit in cache (max, exp, sum and divide in one
    sweep per block instead of four over memory), spread over ember's threads."""
    if s.shape[-1] == 0:
        return np.zeros_like(s)
    n = s.shape[-1]
    out = s if inplace and s.flags.c_contiguous else np.empty(s.shape, s.dtype)
    rows_in = s.reshape(-1, n)
    rows_out = out.reshape(-1, n)
    per = max(1, _parallel.BLOCK // n)
    blocks = [(lo, min(lo + per, rows_in.shape[0])) for lo in range(0, rows_in.shape[0], per)]
    threads = min(_parallel.get_num_threads(), len(blocks))
    if s.size < _parallel.MIN_ELEMENTS or threads < 2:
        for lo, hi in blocks:
            _softmax_rows(rows_in[lo:hi], rows_out[lo:hi], safe)
        return out

    todo = iter(blocks)  # shared: blocks go to whichever thread is free

    def work(k: int) -> None:
        with np.errstate(invalid="ignore", over="ignore", under="ignore", divide="ignore"):
            for lo, hi in todo:
                _softmax_rows(rows_in[lo:hi], rows_out[lo:hi], safe)

    _parallel._run([lambda k=k: work(k) for k in range(threads)])
    return out


# ---------------------------------------------------------------------------------- softmax
def _softmax_meta(x) -> tuple:  # noqa: ANN001
    if not x.dtype.is_floating_point:
        raise DTypeError(f"[_safe_softmax] expected a floating dtype; got {x.dtype.name}")
    return tuple(x.shape), x.dtype


def _softmax_vjp(ctx, g):  # noqa: ANN001
    y = ctx.outputs[0]
    return (y * (g - (g * y).sum(-1, keepdim=True)),)


def _safe_softmax_decomp(x):  # noqa: ANN001, ANN202
    """_safe_softmax with ember ops (the C backend's decomposition): softmax over the last dim,
    then zeros on the rows whose max is -inf (every entry masked)."""
    from ember.ops.scan import SOFTMAX
    last = max(len(x.shape) - 1, 0)
    y = bind(SOFTMAX, x, dim=last)
    if not x.shape or x.shape[-1] == 0:
        return y
    return y.masked_fill(x.amax(-1, keepdim=True) == float("-inf"), 0.0)


SAFE_SOFTMAX = register(OpDef(
    "_safe_softmax", "composite", _softmax_meta, lowp(_safe_softmax_np), _softmax_vjp,
    save_output=True, tags=frozenset({"lowp_upcast"}), decomp=_safe_softmax_decomp,
    doc="Softmax over the last dim whose fully -inf rows give 0 (used by attention).",
))


# ---------------------------------------------------------------------------------- sdpa
def _sdpa_meta(q, k, v, mask=None, *, scale: float, flash: bool = False) -> tuple:  # noqa: ANN001
    sq, sk, sv = tuple(q.shape), tuple(k.shape), tuple(v.shape)
    if (len(sq) < 2 or not len(sq) == len(sk) == len(sv) or not sq[:-2] == sk[:-2] == sv[:-2]
            or sq[-1] != sk[-1] or sk[-2] != sv[-2]):
        raise ShapeError(f"[scaled_dot_product_attention] primitive expects (..., L, E), "
                         f"(..., S, E), (..., S, Ev) with equal batch dims; got {sq}, {sk}, {sv}")
    if not q.dtype is k.dtype is v.dtype or not q.dtype.is_floating_point:
        raise DTypeError(f"[scaled_dot_product_attention] expected one floating dtype; got "
                         f"{q.dtype.name}, {k.dtype.name}, {v.dtype.name}")
    if mask is not None:
        if tuple(mask.shape) != sq[:-1] + sk[-2:-1]:
            raise ShapeError(f"[scaled_dot_product_attention] primitive expects a mask of shape "
                             f"{sq[:-1] + sk[-2:-1]}; got {tuple(mask.shape)}")
        if mask.dtype is not q.dtype and mask.dtype is not dt.float32:
            raise DTypeError(f"[scaled_dot_product_attention] mask dtype {mask.dtype.name} is "
                             f"neither {q.dtype.name} nor float32")
    return sq[:-1] + sv[-1:], q.dtype


def _per_head(fn, count: int, flops: int) -> None:  # noqa: ANN001
    """Run ``fn(i)`` for each head ``i < count``: spread over ember's threads with
    single-threaded BLAS when the work is large (each head's scores stay in cache)."""
    threads = min(_parallel.get_num_threads(), count)
    setter = _parallel._blas_setter()
    if threads < 2 or setter is None or flops < _parallel.MATMUL_MIN_FLOPS:
        for i in range(count):
            fn(i)
        return

    todo = iter(range(count))  # shared: heads go to whichever thread is free

    def work(k: int) -> None:
        with np.errstate(invalid="ignore", over="ignore", under="ignore", divide="ignore"):
            for i in todo:
                fn(i)

    setter(1)
    try:
        _parallel._run([lambda k=k: work(k) for k in range(threads)])
    finally:
        setter(_parallel.get_num_threads())


def _heads(*arrays: np.ndarray | None) -> tuple:
    """Index lists over the batch dims of (..., L, E) arrays: ``a[idx[i]]`` is head i."""
    batch = arrays[0].shape[:-2]
    return list(np.ndindex(*batch)) if batch else [()]


def _scores(q: np.ndarray, k: np.ndarray, mask: np.ndarray | None, scale: float,
            i: tuple) -> np.ndarray:
    """Softmax probabilities of one head, in a fresh (L, S) array."""
    s = np.matmul(q[i], k[i].T)
    s *= np.asarray(scale, dtype=s.dtype)
    if mask is not None:
        s += mask[i]
    if s.shape[-1]:
        _softmax_rows(s, s)
    return s


def _sdpa_eager(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None, *,
                scale: float, flash: bool = False) -> np.ndarray:
    if q.ndim > 2 and q.shape[-2] and k.shape[-2] and v.dtype == q.dtype:
        # one head at a time: scores, softmax and the product with v while they are in cache
        idx = _heads(q)
        out = np.empty(q.shape[:-1] + v.shape[-1:], q.dtype)

        def head(j: int) -> None:
            i = idx[j]
            np.matmul(_scores(q, k, mask, scale, i), v[i], out=out[i])

        _per_head(head, len(idx), 4 * q.size * k.shape[-2])
        return out
    s = _parallel.matmul(q, np.swapaxes(k, -1, -2))
    s *= np.asarray(scale, dtype=s.dtype)
    if mask is not None:
        s += mask
    return _parallel.matmul(_safe_softmax_np(s, inplace=True), v)


def _sdpa_lowp(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None, *,
               scale: float, flash: bool = False) -> np.ndarray:
    """``flash``: round like PyTorch's CPU flash kernel, which it picks for 4-d inputs with
    equal head dims and a 2-d or 4-d mask (the frontend decides; only float16/bfloat16
    results depend on it)."""
    if q.dtype.itemsize >= 4:
        return _sdpa_eager(q, k, v, mask, scale=scale)
    f = np.float32
    m = None if mask is None else _half_c.widen(mask)
    q32, k32, v32 = _half_c.widen(q), _half_c.widen(k), _half_c.widen(v)
    if not flash:
        return _half_c.narrow(_sdpa_eager(q32, k32, v32, m, scale=scale), q.dtype)
    # PyTorch's CPU flash kernel: float scores and softmax sums, but the unnormalized
    # probabilities are rounded to the input dtype before the product with v
    s = np.matmul(q32, np.swapaxes(k32, -1, -2))
    s *= f(scale)
    if m is not None:
        s += m
    if s.shape[-1] == 0:
        return np.zeros(q.shape[:-1] + v.shape[-1:], q.dtype)
    mx = np.max(s, axis=-1, keepdims=True)
    e = np.exp(np.subtract(s, np.where(np.isfinite(mx), mx, 0), out=s), out=s)
    den = np.sum(e, axis=-1, keepdims=True)
    num = np.matmul(_half_c.widen(_half_c.narrow(e, q.dtype)), v32)
    return _half_c.narrow(np.divide(num, den, out=num, where=den > 0), q.dtype)


def _sdpa_bwd_meta(g, q, k, v, mask=None, *, scale: float) -> tuple:  # noqa: ANN001
    return ((tuple(q.shape), q.dtype), (tuple(k.shape), k.dtype), (tuple(v.shape), v.dtype),
            (tuple(q.shape[:-1]) + tuple(k.shape[-2:-1]), q.dtype))


def _sdpa_bwd_eager(g: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                    mask: np.ndarray | None = None, *, scale: float) -> tuple:
    """First-order gradients (q, k, v, mask) one head at a time: the scores are recomputed
    and every (L, S) temporary of a head stays in cache."""
    idx = _heads(q)
    gq, gk, gv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    gm = np.empty(q.shape[:-1] + k.shape[-2:-1], q.dtype) if mask is not None else None
    sc = np.asarray(scale, dtype=q.dtype)

    def head(j: int) -> None:
        i = idx[j]
        p = _scores(q, k, mask, scale, i)
        np.matmul(p.T, g[i], out=gv[i])
        gs = np.matmul(g[i], v[i].T)                          # gp
        gs -= np.add.reduce(gs * p, axis=-1, keepdims=True)   # gp - rowsum(gp * p)
        gs *= p
        if gm is not None:
            gm[i] = gs
        np.matmul(gs, k[i], out=gq[i])
        gq[i] *= sc
        np.matmul(gs.T, q[i], out=gk[i])
        gk[i] *= sc

    _per_head(head, len(idx), 8 * q.size * k.shape[-2])
    if gm is None:
        gm = np.zeros(q.shape[:-1] + k.shape[-2:-1], q.dtype)
    return gq, gk, gv, gm


def _sdpa_bwd_lowp(g: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                   mask: np.ndarray | None = None, *, scale: float) -> tuple:
    """float16/bfloat16: the float32 backward on exactly widened operands, each gradient
    rounded once to the input dtype (PyTorch's CPU math backward: float math, half results)."""
    if q.dtype.itemsize >= 4:
        return _sdpa_bwd_eager(g, q, k, v, mask, scale=scale)
    w = _half_c.widen
    grads = _sdpa_bwd_eager(w(g), w(q), w(k), w(v), None if mask is None else w(mask),
                            scale=scale)
    return tuple(_half_c.narrow(t, q.dtype) for t in grads)


def _sdpa_bwd_vjp(ctx, *grads):  # noqa: ANN001
    raise EmberNotImplementedError(
        "[scaled_dot_product_attention] the fused backward serves first-order gradients only; "
        "a backward with create_graph=True uses the differentiable formula")


SDPA_BACKWARD = register(OpDef(
    "scaled_dot_product_attention_backward", "composite", _sdpa_bwd_meta, _sdpa_bwd_lowp,
    _sdpa_bwd_vjp, num_outputs=4, tags=frozenset({"multi_output", "lowp_upcast"}),
    doc="First-order gradients of scaled_dot_product_attention (float16/bfloat16 computed in "
        "float32 and rounded once, float32, float64), fused.",
))


def _sdpa_fused_ok(ctx, q, k, v, rest) -> bool:  # noqa: ANN001
    """A first-order backward (``ctx.create_graph`` is false) of float heads with equal
    dtypes (float16/bfloat16 too: computed in float32, rounded once, as the formula below)."""
    if ctx.create_graph:
        return False
    d = ctx.input_dtypes[0]
    if d.name not in ("float16", "bfloat16", "float32", "float64") or len(q.shape) < 3:
        return False
    if any(t.dtype is not d for t in (k, v, *rest)):
        return False
    return bool(q.shape[-2]) and bool(k.shape[-2])


def _sdpa_vjp(ctx, g):  # noqa: ANN001
    """dV = P^T dO; dS = P * (dO V^T - rowsum(.)); dQ = scale dS K; dK = scale dS^T Q."""
    q, k, v, *rest = ctx.inputs
    scale = ctx.params["scale"]
    d = ctx.input_dtypes[0]
    if _sdpa_fused_ok(ctx, q, k, v, rest):
        gq, gk, gv, gm = bind(SDPA_BACKWARD, g, q, k, v, *rest, scale=scale)
        needs = ctx.needs_input_grad
        out = [gq if needs[0] else None, gk if needs[1] else None, gv if needs[2] else None]
        return tuple(out + ([gm if needs[3] else None] if len(needs) > 3 else []))
    if d.itemsize < 4:  # recompute in float32 like the forward
        q, k, v, g = (t.to(dt.float32) for t in (q, k, v, g))
        rest = [m.to(dt.float32) for m in rest]
    s = bind(MATMUL, q, mT(k)) * scale
    if rest:
        s = s + rest[0]
    p = bind(SAFE_SOFTMAX, s)
    needs = ctx.needs_input_grad
    gv = bind(MATMUL, mT(p), g) if needs[2] else None
    gq = gk = gm = None
    if needs[0] or needs[1] or (len(needs) > 3 and needs[3]):
        gp = bind(MATMUL, g, mT(v))
        gs = p * (gp - (gp * p).sum(-1, keepdim=True))
        if needs[0]:
            gq = bind(MATMUL, gs, k) * scale
        if needs[1]:
            gk = bind(MATMUL, mT(gs), q) * scale
        if len(needs) > 3 and needs[3]:
            gm = gs
    out = [gq, gk, gv] + ([gm] if len(needs) > 3 else [])
    return tuple(None if t is None else t.to(dd) for t, dd in zip(out, ctx.input_dtypes))


SDPA = register(OpDef(
    "scaled_dot_product_attention", "composite", _sdpa_meta, _sdpa_lowp, _sdpa_vjp,
    save=(0, 1, 2, 3), tags=frozenset({"lowp_upcast"}),
    grad_name="ScaledDotProductAttentionBackward0",
    doc="softmax(q k^T * scale + mask) v with equal batch dims (fused; safe softmax).",
))

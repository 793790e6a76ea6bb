"""Classification losses: ``nll_loss`` and ``cross_entropy`` (class-index and probability
targets) as fused composite OpDefs with closed-form gradients.

Layout: the class dim is dim 1 (dim 0 for an unbatched ``(C,)`` input).  Kernels move it last,
so an input ``(N, C, d1, ...)`` is handled as rows ``(N, d1, ..., C)`` and the target as
``(N, d1, ...)``.  The frontend (``ember/nn/functional/loss.py``) validates shapes and dtypes
and fills defaults; kernels check target values (PyTorch's ``Target 5 is out of bounds.``).

Mean reduction follows PyTorch: class-index targets divide by the summed weight of the
non-ignored targets (``nan`` when there is none); probability targets divide by the number of
rows.  Label smoothing ``e`` mixes the target with the uniform distribution: per row
``(1 - e) * w[t] * -logp[t] + e / C * sum_c w[c] * -logp[c]``.

float16/bfloat16 compute in float32; ``log_softmax`` is rounded to the storage dtype first, as
PyTorch's composite rounds its intermediate result, and a 2-d input's batch sum/mean follows
PyTorch's half cascade (``ember/ops/_half_sum.py``) bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.errors import EmberIndexError, EmberNotImplementedError
from ember.ops._half_sum import nll_reduce
from ember.ops.registry import OpDef, bind, register

_LOWP = ("float16", "bfloat16")


def _class_last(x: np.ndarray) -> np.ndarray:
    """(N, C, d...) -> (N, d..., C); (C,) -> (1, C); (N, C) unchanged."""
    if x.ndim == 1:
        return x[None, :]
    return np.moveaxis(x, 1, -1) if x.ndim > 2 else x


def _class_back(y: np.ndarray, ndim: int) -> np.ndarray:
    if ndim == 1:
        return y[0]
    return np.moveaxis(y, -1, 1) if ndim > 2 else y


def _rows_target(t: np.ndarray, ndim: int) -> np.ndarray:
    return t.reshape(1) if ndim == 1 else t


def _log_softmax(x: np.ndarray, src: np.dtype) -> np.ndarray:
    """Along the last axis, in float32/float64; rounded through ``src`` when that is half."""
    half = src.name in _LOWP

    def r(a: np.ndarray) -> np.ndarray:
        # PyTorch's half kernel stores the row sum and its log in the storage dtype
        return a.astype(src).astype(np.float32) if half else a

    with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
        m = np.max(x, axis=-1, keepdims=True) if x.shape[-1] else x[..., :0]
        m = np.where(np.isfinite(m), m, 0)
        sh = x - m
        out = sh - r(np.log(r(np.sum(np.exp(sh), axis=-1, keepdims=True))))
    return r(out)


def _check_targets(t: np.ndarray, n_classes: int, ignore_index: int, op: str) -> None:
    bad = ((t < 0) | (t >= n_classes)) & (t != ignore_index)
    if bad.any():
        raise EmberIndexError(f"[{op}] Target {int(t[bad].flat[0])} is out of bounds. Expected "
                              f"class indices in [0, {n_classes - 1}] (or ignore_index "
                              f"{ignore_index}).")


def _picked(t: np.ndarray, w: np.ndarray | None, ignore_index: int, n_classes: int,
            dtype: np.dtype, op: str = "nll_loss") -> tuple:
    """(safe target indices, per-element weight w[t] with 0 at ignored targets, mask)."""
    _check_targets(t, n_classes, ignore_index, op)
    mask = t != ignore_index
    safe = np.where(mask, t, 0).astype(np.int64)
    wt = mask.astype(dtype) if w is None else np.where(mask, w.astype(dtype)[safe], 0)
    return safe, wt, mask


def _reduce(loss: np.ndarray, reduction: str, denom: Any, out_shape: tuple) -> np.ndarray:
    if reduction == "none":
        return loss.reshape(out_shape)
    total = np.sum(loss, dtype=loss.dtype)
    if reduction == "sum":
        return np.asarray(total)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(total / denom, dtype=loss.dtype)


def _scale(g: np.ndarray, reduction: str, denom: Any, rows_shape: tuple) -> np.ndarray:
    """The output gradient as one factor per row (N, d...)."""
    g = g.astype(np.float64 if g.dtype == np.float64 else np.float32)
    if reduction == "none":
        return g.reshape(rows_shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.broadcast_to(g / denom if reduction == "mean" else g, rows_shape)


def _loss_meta(name: str):  # noqa: ANN202
    def meta(input, target, *rest, reduction: str, **params: Any) -> tuple:  # noqa: ANN001
        if reduction != "none":
            return (), input.dtype
        if len(input.shape) == 1:
            return (), input.dtype
        return tuple(target.shape), input.dtype
    meta.__name__ = f"{name}_meta"
    return meta


def _grad_meta(g, input, *rest, **params: Any) -> tuple:  # noqa: ANN001
    return tuple(input.shape), input.dtype


def _sum_over_classes(t: Any, reduction: str, ndim: int) -> Any:
    """Adjoint of the per-row scale: a tensor shaped like the input summed to ``g``'s shape."""
    if reduction != "none":
        return t.sum()
    return t.sum(dim=0 if ndim == 1 else 1)


# ------------------------------------------------------------------------------ nll_loss
def _nll_eager(x: np.ndarray, t: np.ndarray, w: np.ndarray | None, *, ignore_index: int,
               reduction: str) -> np.ndarray:
    src = x.dtype
    xr = _class_last(x.astype(np.float32) if src.name in _LOWP else x)
    tr = _rows_target(t, x.ndim)
    safe, wt, mask = _picked(tr, w, ignore_index, xr.shape[-1], xr.dtype)
    vals = np.take_along_axis(xr, safe[..., None], -1)[..., 0]
    if src.name in _LOWP and x.ndim == 2 and reduction != "none":  # PyTorch's half cascade
        return nll_reduce(vals, mask, None if w is None else wt, reduction, src)
    loss = np.where(wt != 0, -wt * vals, 0).astype(xr.dtype)
    out_shape = () if x.ndim == 1 else t.shape
    return _reduce(loss, reduction, np.sum(wt), out_shape).astype(src)


def _nll_vjp(ctx: Any, g: Any) -> tuple:
    _, t, w = ctx.inputs
    return (bind(NLL_LOSS_BACKWARD, g, t, w, shape=tuple(ctx.input_shapes[0]), **ctx.params),
            None, None)


def _nll_bwd_eager(g: np.ndarray, t: np.ndarray, w: np.ndarray | None, *, shape: tuple,
                   ignore_index: int, reduction: str) -> np.ndarray:
    ndim = len(shape)
    rows_shape = (1,) if ndim == 1 else ((shape[0],) + tuple(shape[2:]))
    n_classes = shape[0] if ndim == 1 else shape[1]
    tr = _rows_target(t, ndim)
    ct = np.float64 if g.dtype == np.float64 else np.float32
    safe, wt, _ = _picked(tr, w, ignore_index, n_classes, ct)
    coef = -wt * _scale(g, reduction, np.sum(wt), rows_shape)
    out = np.zeros(rows_shape + (n_classes,), dtype=ct)
    if out.size:
        np.put_along_axis(out, safe[..., None], coef[..., None].astype(ct), -1)
    return _class_back(out, ndim).astype(g.dtype)


def _nll_bwd_meta(g, t, w, *, shape: tuple, **params: Any) -> tuple:  # noqa: ANN001
    return tuple(shape), g.dtype


def _nll_bwd_vjp(ctx: Any, gg: Any) -> tuple:
    # the backward is linear in g and its adjoint is the loss itself
    _, t, w = ctx.inputs
    p = dict(ctx.params)
    p.pop("shape")
    return (bind(NLL_LOSS, gg, t, w, **p), None, None)


# A loss's ignore_index and label_smoothing are constants of the user's code: another value is
# another graph (as dynamo specializes them), never a lifted runtime number.
_LOSS_STATIC = frozenset({"ignore_index", "label_smoothing", "reduction"})

NLL_LOSS = register(OpDef(
    "nll_loss", "composite", _loss_meta("nll_loss"), _nll_eager, _nll_vjp, save=(1, 2),
    doc="Negative log likelihood of class-index targets.",
    static_params=_LOSS_STATIC,
))
NLL_LOSS_BACKWARD = register(OpDef(
    "nll_loss_backward", "composite", _nll_bwd_meta, _nll_bwd_eager, _nll_bwd_vjp, save=(1, 2),
    doc="Gradient of nll_loss with respect to its input.",
    static_params=_LOSS_STATIC,
))


# ------------------------------------------------------------------------------ cross_entropy
def _ce_parts(x: np.ndarray, t: np.ndarray, w: np.ndarray | None, ignore_index: int) -> tuple:
    """(logp rows, safe targets, w[t] masked, float class weights or None) in float32/64."""
    src = x.dtype
    xr = _class_last(x.astype(np.float32) if src.name in _LOWP else x)
    logp = _log_softmax(xr, src)
    safe, wt, _ = _picked(_rows_target(t, x.ndim), w, ignore_index, xr.shape[-1], xr.dtype,
                          "cross_entropy")
    wc = None if w is None else w.astype(xr.dtype)
    return logp, safe, wt, wc


def _ce_eager(x: np.ndarray, t: np.ndarray, w: np.ndarray | None, *, ignore_index: int,
              reduction: str, label_smoothing: float) -> np.ndarray:
    logp, safe, wt, wc = _ce_parts(x, t, w, ignore_index)
    eps = label_smoothing
    n_classes = logp.shape[-1]
    if eps and x.dtype.name in _LOWP:
        return _ce_smoothing_lowp(x, t, logp, safe, wt, wc, ignore_index, reduction, eps)
    with np.errstate(invalid="ignore"):
        picked = np.take_along_axis(logp, safe[..., None], -1)[..., 0]
        if x.dtype.name in _LOWP and x.ndim == 2 and reduction != "none" and not eps:
            # nll_loss(log_softmax(x)) as PyTorch: the half batch cascade (ember/ops/_half_sum)
            mask = _rows_target(t, x.ndim) != ignore_index
            return nll_reduce(picked, mask, None if w is None else wt, reduction, x.dtype)
        loss = np.where(wt != 0, -wt * picked, 0) * (1.0 - eps)
        if eps:
            smooth = -(logp.sum(-1) if wc is None else (logp * wc).sum(-1))
            loss = loss + np.where(_rows_target(t, x.ndim) != ignore_index, smooth, 0) * (
                eps / n_classes)
    out_shape = () if x.ndim == 1 else t.shape
    return _reduce(loss.astype(logp.dtype), reduction, np.sum(wt), out_shape).astype(x.dtype)


def _ce_smoothing_lowp(x: np.ndarray, t: np.ndarray, logp: np.ndarray, safe: np.ndarray,
                       wt: np.ndarray, wc: np.ndarray | None, ignore_index: int, reduction: str,
                       eps: float) -> np.ndarray:
    """Label smoothing in float16/bfloat16, rounded where PyTorch's composite rounds
    (``(1 - e) * nll + e / C * smooth``, each op's result in the storage dtype)."""
    src = x.dtype

    def r(a: Any) -> np.ndarray:
        return np.asarray(a, np.float32).astype(src).astype(np.float32)

    mask = _rows_target(t, x.ndim) != ignore_index
    picked = np.take_along_axis(logp, safe[..., None], -1)[..., 0]
    nll = r(np.where(wt != 0, -wt * picked, 0))
    smooth = np.where(mask, r(-(logp if wc is None else r(logp * wc)).sum(-1)), 0)
    if reduction == "none":
        out_shape = () if x.ndim == 1 else t.shape
        nll, smooth = nll.reshape(out_shape), smooth.reshape(out_shape)
    elif reduction == "sum":
        nll, smooth = r(nll.sum()), r(smooth.sum())
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            denom = r(np.sum(wt)) if wc is not None else np.sum(mask)
            nll, smooth = r(nll.sum() / np.sum(wt)), r(r(smooth.sum()) / denom)
    n_classes = logp.shape[-1]
    return (r(r((1.0 - eps) * nll) + r(smooth * (eps / n_classes)))).astype(src)


def _ce_coefs(x: np.ndarray, t: np.ndarray, w: np.ndarray | None, g: np.ndarray,
              ignore_index: int, reduction: str, eps: float) -> tuple:
    """softmax rows p, per-row factor a (times p) and the constant part b of the gradient:
    grad_rows = gs * (a * p - b)."""
    logp, safe, wt, wc = _ce_parts(x, t, w, ignore_index)
    n_classes = logp.shape[-1]
    p = np.exp(logp)
    rows_shape = logp.shape[:-1]
    gs = _scale(g, reduction, np.sum(wt), rows_shape) * (_rows_target(t, x.ndim) != ignore_index)
    wsum = n_classes if wc is None else np.sum(wc)
    a = (1.0 - eps) * wt + eps / n_classes * wsum
    b = np.zeros_like(p)
    if b.size:
        np.put_along_axis(b, safe[..., None], ((1.0 - eps) * wt)[..., None].astype(b.dtype), -1)
    if eps:
        b = b + eps / n_classes * (1.0 if wc is None else wc)
    return p, gs, a, b


def _ce_bwd_eager(g: np.ndarray, x: np.ndarray, t: np.ndarray, w: np.ndarray | None, *,
                  ignore_index: int, reduction: str, label_smoothing: float) -> np.ndarray:
    p, gs, a, b = _ce_coefs(x, t, w, g, ignore_index, reduction, label_smoothing)
    grad = gs[..., None] * (a[..., None] * p - b)
    return _class_back(grad, x.ndim).astype(x.dtype)


def _ce_hvp_eager(v: np.ndarray, g: np.ndarray, x: np.ndarray, t: np.ndarray,
                  w: np.ndarray | None, *, ignore_index: int, reduction: str,
                  label_smoothing: float) -> np.ndarray:
    """d/dx <v, grad(x)>: the log-softmax Hessian applied to v, row by row."""
    p, gs, a, _ = _ce_coefs(x, t, w, g, ignore_index, reduction, label_smoothing)
    vr = _class_last(v.astype(p.dtype))
    pv = p * vr
    out = (gs * a)[..., None] * (pv - p * pv.sum(-1, keepdims=True))
    return _class_back(out, x.ndim).astype(x.dtype)


def _ce_vjp(ctx: Any, g: Any) -> tuple:
    x, t, w = ctx.inputs
    return (bind(CROSS_ENTROPY_BACKWARD, g, x, t, w, **ctx.params), None, None)


def _ce_bwd_vjp(ctx: Any, gg: Any) -> tuple:
    g, x, t, w = ctx.inputs
    ng, nx = ctx.needs_input_grad[:2]
    dg = dx = None
    if ng:
        unit = bind(CROSS_ENTROPY_BACKWARD, g.new_ones(tuple(g.shape)), x, t, w, **ctx.params)
        dg = _sum_over_classes(gg * unit, ctx.params["reduction"], len(x.shape))
    if nx:
        dx = bind(CROSS_ENTROPY_HVP, gg, g, x, t, w, **ctx.params)
    return (dg, dx, None, None)


def _ce_hvp_vjp(ctx: Any, *grads: Any) -> tuple:
    raise EmberNotImplementedError(
        "[cross_entropy] derivatives of order 3 and above are not implemented")


def _ce_hvp_meta(v, g, x, *rest, **params: Any) -> tuple:  # noqa: ANN001
    return tuple(x.shape), x.dtype


CROSS_ENTROPY = register(OpDef(
    "cross_entropy", "composite", _loss_meta("cross_entropy"), _ce_eager, _ce_vjp, save=(0, 1, 2),
    grad_name="NllLossBackward0",
    doc="log_softmax + nll_loss of class-index targets in one kernel (label smoothing).",
    static_params=_LOSS_STATIC,
))
CROSS_ENTROPY_BACKWARD = register(OpDef(
    "cross_entropy_backward", "composite", _grad_meta, _ce_bwd_eager, _ce_bwd_vjp,
    save=(0, 1, 2, 3), doc="(softmax - smoothed one-hot) * weights / normaliser.",
    static_params=_LOSS_STATIC,
))
CROSS_ENTROPY_HVP = register(OpDef(
    "cross_entropy_hvp", "composite", _ce_hvp_meta, _ce_hvp_eager, _ce_hvp_vjp,
    doc="Second derivative of cross_entropy applied to a vector.",
    static_params=_LOSS_STATIC,
))


# ------------------------------------------------------------------ probability targets
def _soft_parts(x: np.ndarray, y: np.ndarray, w: np.ndarray | None, eps: float) -> tuple:
    src = x.dtype
    ct = np.float64 if src == np.float64 else np.float32
    logp = _log_softmax(_class_last(x.astype(ct)), src)
    yr = _class_last(y.astype(ct))
    n_classes = logp.shape[-1]
    if eps:
        yr = yr * (1.0 - eps) + eps / n_classes
    wy = yr if w is None else yr * w.astype(ct)
    return logp, yr, wy


def _soft_eager(x: np.ndarray, y: np.ndarray, w: np.ndarray | None, *, reduction: str,
                label_smoothing: float) -> np.ndarray:
    logp, _, wy = _soft_parts(x, y, w, label_smoothing)
    with np.errstate(invalid="ignore"):
        loss = -(logp * wy).sum(-1)
    rows = loss.size
    out_shape = loss.shape if x.ndim > 1 else ()
    return _reduce(loss, reduction, rows if rows else np.nan, out_shape).astype(x.dtype)


def _soft_bwd_eager(g: np.ndarray, x: np.ndarray, y: np.ndarray, w: np.ndarray | None, *,
                    reduction: str, label_smoothing: float) -> tuple:
    logp, _, wy = _soft_parts(x, y, w, label_smoothing)
    rows_shape = logp.shape[:-1]
    gs = _scale(g, reduction, max(int(np.prod(rows_shape)), 1), rows_shape)[..., None]
    gx = gs * (np.exp(logp) * wy.sum(-1, keepdims=True) - wy)
    gy = -gs * (1.0 - label_smoothing) * (logp if w is None else logp * w.astype(logp.dtype))
    return (_class_back(gx, x.ndim).astype(x.dtype), _class_back(gy, x.ndim).astype(y.dtype))


def _soft_vjp(ctx: Any, g: Any) -> tuple:
    x, y, w = ctx.inputs
    gx, gy = bind(CROSS_ENTROPY_SOFT_BACKWARD, g, x, y, w, **ctx.params)
    nx, ny = ctx.needs_input_grad[:2]
    return (gx if nx else None, gy if ny else None, None)


def _soft_bwd_vjp(ctx: Any, ggx: Any, ggy: Any) -> tuple:
    g, x, y, w = ctx.inputs
    if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
        raise EmberNotImplementedError(
            "[cross_entropy] the second derivative with probability targets is not implemented")
    ux, uy = bind(CROSS_ENTROPY_SOFT_BACKWARD, g.new_ones(tuple(g.shape)), x, y, w, **ctx.params)
    dg = _sum_over_classes(ggx * ux + ggy * uy, ctx.params["reduction"], len(x.shape))
    return (dg, None, None, None)


def _soft_bwd_meta(g, x, y, *rest, **params: Any) -> tuple:  # noqa: ANN001
    return (tuple(x.shape), x.dtype), (tuple(y.shape), y.dtype)


def _soft_meta(x, y, w, *, reduction: str, **params: Any) -> tuple:  # noqa: ANN001
    if reduction != "none" or len(x.shape) == 1:
        return (), x.dtype
    return (x.shape[0],) + tuple(x.shape[2:]), x.dtype


# the C backend's decompositions (ember ops, the same steps and roundings as the kernels above)
def _class_last_t(x: Any) -> Any:
    if len(x.shape) == 1:
        return x.unsqueeze(0)
    return x.movedim(1, -1) if len(x.shape) > 2 else x


def _class_back_t(y: Any, ndim: int) -> Any:
    if ndim == 1:
        return y.squeeze(0)
    return y.movedim(-1, 1) if ndim > 2 else y


def _soft_parts_t(x: Any, y: Any, w: Any, eps: float) -> tuple:
    """``_soft_parts`` with ember ops: (log-probabilities, weighted targets), class dim last."""
    src = x.dtype
    half = src.name in ("float16", "bfloat16")
    f64 = src.name == "float64"

    def ct(a: Any) -> Any:
        return a.double() if f64 else a.float()

    xr = _class_last_t(ct(x))

    def r(a: Any) -> Any:
        return a.to(src).float() if half else a

    logp = xr
    if xr.shape[-1]:
        m = xr.amax(-1, keepdim=True)
        m = m.masked_fill(~m.isfinite(), 0.0)
        sh = xr - m
        logp = r(sh - r(r(sh.exp().sum(-1, keepdim=True)).log()))
    yr = _class_last_t(ct(y))
    if eps:
        yr = yr * (1.0 - eps) + eps / xr.shape[-1]
    return logp, yr if w is None else yr * ct(w)


def _soft_decomp(x: Any, y: Any, w: Any, *, reduction: str, label_smoothing: float) -> Any:
    logp, wy = _soft_parts_t(x, y, w, label_smoothing)
    loss = -(logp * wy).sum(-1)
    rows = 1
    for n in loss.shape:
        rows *= n
    if reduction == "none":
        out = loss.reshape(tuple(loss.shape) if len(x.shape) > 1 else ())
    elif reduction == "sum":
        out = loss.sum()
    else:
        out = loss.sum() / (rows if rows else float("nan"))
    return out.to(x.dtype)


def _soft_bwd_decomp(g: Any, x: Any, y: Any, w: Any, *, reduction: str,
                     label_smoothing: float) -> tuple:
    logp, wy = _soft_parts_t(x, y, w, label_smoothing)
    rows_shape = tuple(logp.shape[:-1])
    rows = 1
    for n in rows_shape:
        rows *= n
    gs = g.double() if g.dtype.name == "float64" else g.float()
    if reduction == "none":
        gs = gs.reshape(rows_shape)
    else:
        gs = (gs / max(rows, 1) if reduction == "mean" else gs).expand(rows_shape)
    gs = gs.unsqueeze(-1)
    gx = gs * (logp.exp() * wy.sum(-1, keepdim=True) - wy)
    gy = -gs * (1.0 - label_smoothing) * (logp if w is None else logp * w.to(logp.dtype))
    nd = len(x.shape)
    return _class_back_t(gx, nd).to(x.dtype), _class_back_t(gy, nd).to(y.dtype)


CROSS_ENTROPY_SOFT = register(OpDef(
    "cross_entropy_soft", "composite", _soft_meta, _soft_eager, _soft_vjp, save=(0, 1, 2),
    decomp=_soft_decomp,
    doc="Cross entropy against class probabilities (label smoothing, class weights).",
    static_params=_LOSS_STATIC,
))
CROSS_ENTROPY_SOFT_BACKWARD = register(OpDef(
    "cross_entropy_soft_backward", "composite", _soft_bwd_meta, _soft_bwd_eager, _soft_bwd_vjp,
    num_outputs=2, save=(0, 1, 2, 3), tags=frozenset({"multi_output"}), decomp=_soft_bwd_decomp,
    doc="Gradients of cross_entropy_soft with respect to input and target.",
    static_params=_LOSS_STATIC,
))

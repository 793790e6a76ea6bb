"""Elementwise losses (mse, l1, smooth_l1, huber, binary_cross_entropy[_with_logits]) as fused
composite OpDefs: one kernel computes the elementwise loss and reduces it.

Each loss is declared once as an ``_Loss``: its elementwise NumPy kernel and the kernel of its
partial derivatives in input and target.  ``_register`` builds

* ``loss(x, y, w, pw, *, reduction, **params)``: inputs share one shape (the frontend
  broadcasts); ``w``/``pw`` are optional weight tensors (``None`` when absent);
* ``loss_backward(g, x, y, w, pw)`` -> ``(grad_x, grad_y)``: ``g`` spread over the elements
  (divided by their count for ``mean``) times the partial derivatives.  It is linear in ``g``,
  so its own vjp in ``g`` re-binds it with a unit ``g``; second derivatives in ``x``/``y`` are
  given where they are simple (mse: constant; l1: zero almost everywhere).

float16/bfloat16 compute in float32: the elementwise loss is rounded to the storage dtype
before the reduction, as PyTorch's elementwise kernel then ``mean``/``sum`` do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ember.errors import EmberNotImplementedError, EmberRuntimeError
from ember.ops.registry import OpDef, bind, register

Kernel = Callable[..., Any]
_HALF = ("float16", "bfloat16")


@dataclass(frozen=True)
class _Loss:
    name: str
    elem: Kernel      # (x, y, w, pw, **params) -> elementwise loss
    grads: Kernel     # (x, y, w, pw, **params) -> (dloss/dx, dloss/dy)
    hess: str = ""    # "zero": second derivatives vanish a.e.; "mse": constant (ember ops)
    second: Kernel | None = None  # (x, y, w, pw, **params) -> (d2/dx2, d2/dxdy, d2/dy2)
    check: Kernel | None = None  # (x, y) -> None, raises on bad values
    # (x, y, w, pw, **params) -> elementwise loss written with ember tensor ops (the compiler's
    # decomposition, ``OpDef.decomp``); None where eager raises on values (bce's range check)
    decomp: Kernel | None = None
    # (x, y, w, pw, **params) -> (dloss/dx, dloss/dy) with ember tensor ops (the backward's)
    grad_decomp: Kernel | None = None


def _compute(arrs: tuple) -> tuple:
    """Arrays in their compute dtype (float32 for half types)."""
    return tuple(None if a is None else (a.astype(np.float32) if a.dtype.name in _HALF else a)
                 for a in arrs)


def _unit_scale(g: np.ndarray, reduction: str, shape: tuple, ct: Any) -> np.ndarray:
    g = g.astype(ct)
    if reduction == "none":
        return g
    if reduction == "mean":
        n = int(np.prod(shape))
        g = g / n if n else g * np.nan
    return np.broadcast_to(g, shape)


def _decomposer(spec: _Loss) -> Kernel | None:
    """``OpDef.decomp`` of a loss: ``spec.decomp`` in the compute dtype, rounded to the storage
    dtype per element for float16/bfloat16, then reduced, as ``eager`` does."""
    if spec.decomp is None:
        return None

    def decomp(x: Any, y: Any, w: Any, pw: Any, *, reduction: str, **params: Any) -> Any:
        dt = x.dtype
        half = dt.name in _HALF
        up = [None if a is None else (a.float() if half else a) for a in (x, y, w, pw)]
        loss = spec.decomp(*up, **params)
        if half:
            loss = loss.to(dt).float()
        if reduction == "sum":
            loss = loss.sum()
        elif reduction == "mean":
            loss = loss.mean()
        return loss.to(dt)
    return decomp


def _bwd_decomposer(spec: _Loss) -> Kernel | None:
    """``OpDef.decomp`` of ``loss_backward``: the incoming gradient (divided by the count for
    ``mean``) times ``spec.grad_decomp``, in the compute dtype, rounded once, as ``bwd_eager``."""
    if spec.grad_decomp is None:
        return None

    def decomp(g: Any, x: Any, y: Any, w: Any, pw: Any, *, reduction: str,
               **params: Any) -> tuple:
        half = x.dtype.name in _HALF
        up = [None if a is None else (a.float() if half else a) for a in (g, x, y, w, pw)]
        gs = up[0]
        if reduction == "mean":
            n = x.numel()
            gs = gs / n if n else gs * float("nan")
        dx, dy = spec.grad_decomp(*up[1:], **params)
        return (gs * dx).to(x.dtype), (gs * dy).to(y.dtype)
    return decomp


def _register(spec: _Loss) -> OpDef:
    def meta(x, y, w, pw, *, reduction: str, **params: Any) -> tuple:  # noqa: ANN001
        return (tuple(x.shape) if reduction == "none" else ()), x.dtype

    def eager(x: np.ndarray, y: np.ndarray, w: Any, pw: Any, *, reduction: str,
              **params: Any) -> np.ndarray:
        if spec.check is not None:
            spec.check(x, y)
        cx, cy, cw, cpw = _compute((x, y, w, pw))
        with np.errstate(all="ignore"):
            loss = spec.elem(cx, cy, cw, cpw, **params).astype(cx.dtype, copy=False)
            if x.dtype.name in _HALF:
                loss = loss.astype(x.dtype).astype(np.float32)
            if reduction == "sum":
                loss = np.sum(loss, dtype=loss.dtype)
            elif reduction == "mean":
                loss = np.mean(loss, dtype=loss.dtype) if loss.size else np.asarray(np.nan)
        return np.asarray(loss).astype(x.dtype)

    def bwd_meta(g, x, y, w, pw, **params: Any) -> tuple:  # noqa: ANN001
        return (tuple(x.shape), x.dtype), (tuple(y.shape), y.dtype)

    def bwd_eager(g: np.ndarray, x: np.ndarray, y: np.ndarray, w: Any, pw: Any, *,
                  reduction: str, **params: Any) -> tuple:
        cx, cy, cw, cpw = _compute((x, y, w, pw))
        gs = _unit_scale(g, reduction, x.shape, cx.dtype)
        with np.errstate(all="ignore"):
            dx, dy = spec.grads(cx, cy, cw, cpw, **params)
            return (np.asarray(gs * dx).astype(x.dtype), np.asarray(gs * dy).astype(y.dtype))

    def vjp(ctx: Any, g: Any) -> tuple:
        x, y, w, pw = ctx.inputs
        gx, gy = bind(backward, g, x, y, w, pw, **ctx.params)
        nx, ny = ctx.needs_input_grad[:2]
        return (gx if nx else None, gy if ny else None, None, None)

    def bwd_vjp(ctx: Any, ggx: Any, ggy: Any) -> tuple:
        g, x, y, w, pw = ctx.inputs
        ng, nx, ny = ctx.needs_input_grad[:3]
        red = ctx.params["reduction"]
        dg = dx = dy = None
        if ng:
            ux, uy = bind(backward, g.new_ones(tuple(g.shape)), x, y, w, pw, **ctx.params)
            t = ggx * ux + ggy * uy
            dg = t if red == "none" else t.sum()
        if nx or ny:
            if spec.hess == "mse":
                n = max(int(np.prod(tuple(x.shape))), 1)
                gs = g if red == "none" else (g / n if red == "mean" else g)
                h = (ggx - ggy) * gs * 2.0
                dx, dy = (h if nx else None), (-h if ny else None)
            elif spec.second is not None:
                dx, dy = bind(double_backward, ggx, ggy, g, x, y, w, pw, **ctx.params)
                dx, dy = (dx if nx else None), (dy if ny else None)
            elif spec.hess != "zero":
                raise EmberNotImplementedError(
                    f"[{spec.name}] the second derivative in input/target is not implemented")
        return (dg, dx, dy, None, None)

    def dbl_meta(ggx, ggy, g, x, y, w, pw, **params: Any) -> tuple:  # noqa: ANN001
        return (tuple(x.shape), x.dtype), (tuple(y.shape), y.dtype)

    def dbl_eager(ggx: np.ndarray, ggy: np.ndarray, g: np.ndarray, x: np.ndarray,
                  y: np.ndarray, w: Any, pw: Any, *, reduction: str, **params: Any) -> tuple:
        cx, cy, cw, cpw = _compute((x, y, w, pw))
        vx, vy = _compute((ggx, ggy))
        gs = _unit_scale(g, reduction, x.shape, cx.dtype)
        with np.errstate(all="ignore"):
            hxx, hxy, hyy = spec.second(cx, cy, cw, cpw, **params)
            return (np.asarray(gs * (vx * hxx + vy * hxy)).astype(x.dtype),
                    np.asarray(gs * (vx * hxy + vy * hyy)).astype(y.dtype))

    def dbl_vjp(ctx: Any, *grads: Any) -> tuple:
        raise EmberNotImplementedError(
            f"[{spec.name}] derivatives of order 3 and above are not implemented")

    double_backward = None
    if spec.second is not None:
        double_backward = register(OpDef(
            f"{spec.name}_backward_backward", "composite", dbl_meta, dbl_eager, dbl_vjp,
            num_outputs=2, tags=frozenset({"multi_output"}),
            doc=f"Second derivatives of {spec.name} applied to the incoming gradients.",
        ))

    backward = register(OpDef(
        f"{spec.name}_backward", "composite", bwd_meta, bwd_eager, bwd_vjp, num_outputs=2,
        save=(0, 1, 2, 3, 4), tags=frozenset({"multi_output"}), decomp=_bwd_decomposer(spec),
        doc=f"Gradients of {spec.name} in input and target.",
    ))
    return register(OpDef(
        spec.name, "composite", meta, eager, vjp, save=(0, 1, 2, 3), decomp=_decomposer(spec),
        doc=f"The {spec.name} loss, reduced in the same kernel.",
    ))


# ------------------------------------------------------------------------------ kernels
def _mse_grads(x, y, w, pw):  # noqa: ANN001, ANN202
    d = 2.0 * (x - y)
    return d, -d


def _l1_grads(x, y, w, pw):  # noqa: ANN001, ANN202
    s = np.sign(x - y)
    return s, -s


def _smooth_l1(x, y, w, pw, *, beta: float):  # noqa: ANN001, ANN202
    d = np.abs(x - y)
    return np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)


def _smooth_l1_grads(x, y, w, pw, *, beta: float):  # noqa: ANN001, ANN202
    d = x - y
    g = np.where(d < -beta, -1.0, np.where(d > beta, 1.0, d / beta))
    return g, -g


def _huber(x, y, w, pw, *, delta: float):  # noqa: ANN001, ANN202
    d = np.abs(x - y)
    return np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))


def _huber_grads(x, y, w, pw, *, delta: float):  # noqa: ANN001, ANN202
    d = x - y
    g = np.where(d < -delta, -delta, np.where(d > delta, delta, d))
    return g, -g


def _bce_check(x: np.ndarray, y: np.ndarray) -> None:
    if not np.all((x >= 0) & (x <= 1)):
        raise EmberRuntimeError(
            "[binary_cross_entropy] all elements of input should be between 0 and 1")
    if not np.all((y >= 0) & (y <= 1)):
        raise EmberRuntimeError(
            "[binary_cross_entropy] all elements of target should be between 0 and 1")


def _bce(x, y, w, pw):  # noqa: ANN001, ANN202
    # PyTorch clamps each log at -100 so that x = 0 or 1 gives a finite loss
    loss = (y - 1) * np.maximum(np.log1p(-x), -100.0) - y * np.maximum(np.log(x), -100.0)
    return loss if w is None else loss * w


def _bce_grads(x, y, w, pw):  # noqa: ANN001, ANN202
    dx = (x - y) / np.maximum((1 - x) * x, 1e-12)
    dy = -np.log(x / (1 - x))
    return (dx, dy) if w is None else (dx * w, dy * w)


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _bce_logits(x, y, w, pw):  # noqa: ANN001, ANN202
    ls = _log_sigmoid(x)
    if pw is not None:
        ls = ls * ((pw - 1) * y + 1)
    loss = (1 - y) * x - ls
    return loss if w is None else loss * w


def _bce_logits_grads(x, y, w, pw):  # noqa: ANN001, ANN202
    if pw is None:
        dx = _sigmoid(x) - y
        dy = -x
    else:
        t = pw * y
        dx = (t + 1 - y) * _sigmoid(x) - t
        dy = _log_sigmoid(-x) - pw * _log_sigmoid(x)
    return (dx, dy) if w is None else (dx * w, dy * w)


def _kl_div(x, y, w, pw, *, log_target: bool):  # noqa: ANN001, ANN202
    if log_target:
        return np.exp(y) * (y - x)
    # xlogy(y, y): 0 where y == 0
    return np.where(y == 0, 0.0, y * np.log(np.where(y == 0, 1.0, y))) - y * x


def _kl_div_grads(x, y, w, pw, *, log_target: bool):  # noqa: ANN001, ANN202
    if log_target:
        e = np.exp(y)
        return -e, e * (y - x + 1.0)
    # PyTorch's xlogy(y, y) backward gives 0/0 = nan at y == 0
    return -y, np.where(y == 0, np.nan, np.log(np.where(y == 0, 1.0, y)) + 1.0) - x


def _quadratic_zone(x, y, width: float, curvature: float):  # noqa: ANN001, ANN202
    h = np.where(np.abs(x - y) < width, curvature, 0.0)
    return h, -h, h


def _bce_second(x, y, w, pw):  # noqa: ANN001, ANN202
    v = (1 - x) * x
    hxx = (v - (x - y) * (1 - 2 * x)) / (v * v)
    hxy = -1.0 / v
    hyy = np.zeros_like(x)
    return (hxx, hxy, hyy) if w is None else (hxx * w, hxy * w, hyy)


def _bce_logits_second(x, y, w, pw):  # noqa: ANN001, ANN202
    s = _sigmoid(x)
    if pw is None:
        hxx, hxy = s * (1 - s), -np.ones_like(x)
    else:
        hxx = (pw * y + 1 - y) * s * (1 - s)
        hxy = (pw - 1) * s - pw
    hyy = np.zeros_like(x)
    return (hxx, hxy, hyy) if w is None else (hxx * w, hxy * w, hyy)


def _kl_div_second(x, y, w, pw, *, log_target: bool):  # noqa: ANN001, ANN202
    if log_target:
        e = np.exp(y)
        return np.zeros_like(x), -e, e * (y - x + 2.0)
    return np.zeros_like(x), -np.ones_like(x), 1.0 / y


# ------------------------------------------------------------------------ decompositions
# The elementwise losses with ember tensor ops, in eager's order of operations (the compiler
# lowers these where the op has no C rule; ``_decomposer`` adds the rounding and reduction).
def _smooth_l1_d(x, y, w, pw, *, beta: float):  # noqa: ANN001, ANN202
    d = (x - y).abs()
    return (d * 0.5 * d / beta).where(d < beta, d - 0.5 * beta)


def _huber_d(x, y, w, pw, *, delta: float):  # noqa: ANN001, ANN202
    d = (x - y).abs()
    return (d * 0.5 * d).where(d < delta, (d - 0.5 * delta) * delta)


def _bce_logits_d(x, y, w, pw):  # noqa: ANN001, ANN202
    ls = x.clamp(max=0.0) - (-x.abs()).exp().log1p()
    if pw is not None:
        ls = ls * ((pw - 1) * y + 1)
    loss = (1 - y) * x - ls
    return loss if w is None else loss * w


def _kl_div_d(x, y, w, pw, *, log_target: bool):  # noqa: ANN001, ANN202
    if log_target:
        return y.exp() * (y - x)
    nz = y != 0
    return (y * y.where(nz, 1.0).log()).where(nz, 0.0) - y * x


def _mse_d(x, y, w, pw):  # noqa: ANN001, ANN202
    d = x - y
    return d * d


def _not(c):  # noqa: ANN001, ANN202
    return c.logical_not()


def _mse_gd(x, y, w, pw):  # noqa: ANN001, ANN202
    d = (x - y) * 2.0
    return d, -d


def _l1_gd(x, y, w, pw):  # noqa: ANN001, ANN202
    d = x - y
    s = d.sign().where(d == d, d)   # NaN stays NaN, as np.sign
    return s, -s


def _clip_gd(d, bound: float, out: float, inner):  # noqa: ANN001, ANN202
    """where(d < -bound, -out, where(d > bound, out, inner)) (NaN keeps ``inner``, as eager)"""
    g = inner.where(_not(d > bound), out).where(_not(d < -bound), -out)
    return g, -g


def _smooth_l1_gd(x, y, w, pw, *, beta: float):  # noqa: ANN001, ANN202
    d = x - y
    return _clip_gd(d, beta, 1.0, d / beta)


def _huber_gd(x, y, w, pw, *, delta: float):  # noqa: ANN001, ANN202
    d = x - y
    return _clip_gd(d, delta, delta, d)


def _bce_gd(x, y, w, pw):  # noqa: ANN001, ANN202
    dx = (x - y) / ((1 - x) * x).clamp(min=1e-12)
    dy = -(x / (1 - x)).log()
    return (dx, dy) if w is None else (dx * w, dy * w)


def _sigmoid_d(x):  # noqa: ANN001, ANN202
    e = (-x.abs()).exp()
    return (1.0 / (e + 1.0)).where(x >= 0, e / (e + 1.0))


def _log_sigmoid_d(x):  # noqa: ANN001, ANN202
    return x.clamp(max=0.0) - (-x.abs()).exp().log1p()


def _bce_logits_gd(x, y, w, pw):  # noqa: ANN001, ANN202
    if pw is None:
        dx, dy = _sigmoid_d(x) - y, -x
    else:
        t = pw * y
        dx = (t + 1 - y) * _sigmoid_d(x) - t
        dy = _log_sigmoid_d(-x) - pw * _log_sigmoid_d(x)
    return (dx, dy) if w is None else (dx * w, dy * w)


def _kl_div_gd(x, y, w, pw, *, log_target: bool):  # noqa: ANN001, ANN202
    if log_target:
        e = y.exp()
        return -e, e * (y - x + 1.0)
    nz = y != 0
    return -y, (y.where(nz, 1.0).log() + 1.0).where(nz, float("nan")) - x


MSE_LOSS = _register(_Loss("mse_loss", lambda x, y, w, pw: np.square(x - y), _mse_grads,
                           hess="mse", decomp=_mse_d, grad_decomp=_mse_gd))
L1_LOSS = _register(_Loss("l1_loss", lambda x, y, w, pw: np.abs(x - y), _l1_grads, hess="zero",
                          decomp=lambda x, y, w, pw: (x - y).abs(), grad_decomp=_l1_gd))
SMOOTH_L1_LOSS = _register(_Loss(
    "smooth_l1_loss", _smooth_l1, _smooth_l1_grads,
    second=lambda x, y, w, pw, *, beta: _quadratic_zone(x, y, beta, 1.0 / beta),
    decomp=_smooth_l1_d, grad_decomp=_smooth_l1_gd))
HUBER_LOSS = _register(_Loss(
    "huber_loss", _huber, _huber_grads,
    second=lambda x, y, w, pw, *, delta: _quadratic_zone(x, y, delta, 1.0), decomp=_huber_d,
    grad_decomp=_huber_gd))
BINARY_CROSS_ENTROPY = _register(_Loss("binary_cross_entropy", _bce, _bce_grads,
                                       check=_bce_check, second=_bce_second,
                                       grad_decomp=_bce_gd))
BINARY_CROSS_ENTROPY_WITH_LOGITS = _register(_Loss(
    "binary_cross_entropy_with_logits", _bce_logits, _bce_logits_grads,
    second=_bce_logits_second, decomp=_bce_logits_d, grad_decomp=_bce_logits_gd))
KL_DIV = _register(_Loss("kl_div", _kl_div, _kl_div_grads, second=_kl_div_second,
                         decomp=_kl_div_d, grad_decomp=_kl_div_gd))

"""Fused normalization primitives (kind ``composite``): layer_norm and rms_norm.

Both normalize over ``dims`` (sorted, non-negative); an optional weight/bias broadcasts against
the input (layer_norm passes ``normalized_shape``-shaped ones, batch_norm ``(C, 1, ...)`` ones),
so one kernel serves layer, batch, group and instance norm.  They return the statistics too
(``mean``/``rstd`` with the reduced dims kept), as PyTorch's ``native_layer_norm`` does: the
vjp reads them, and because they are outputs of the same node, double backward reaches the
statistics' own gradient terms.  Half/bfloat16 compute in float32 (``lowp``).
"""

from __future__ import annotations

import numpy as np

from ember.errors import DTypeError, ShapeError
from ember.ops._util import lowp, pointwise_meta
from ember.ops.reduction import reduced_shape
from ember.ops.registry import OpDef, register


def _check(name: str, x, *params) -> tuple:  # noqa: ANN001
    if not x.dtype.is_floating_point:
        raise DTypeError(f"[{name}] expected a floating input; got {x.dtype.name}")
    shape = tuple(x.shape)
    for p in params:
        if p is None:
            continue
        if p.dtype is not x.dtype:
            raise DTypeError(f"[{name}] weight/bias dtype {p.dtype.name} differs from input "
                             f"dtype {x.dtype.name}")
        ps = tuple(p.shape)
        if len(ps) > len(shape) or any(a != 1 and a != b for a, b in
                                       zip(ps[::-1], shape[::-1])):
            raise ShapeError(f"[{name}] weight/bias shape {ps} does not broadcast to {shape}")
    return shape


def _numel(shape: tuple, dims: tuple) -> int:
    n = 1
    for d in dims:
        n *= shape[d]
    return n


# ---------------------------------------------------------------------------------- layer_norm
def _ln_meta(x, w, b, *, dims: tuple, eps: float) -> tuple:  # noqa: ANN001
    shape = _check("layer_norm", x, w, b)
    stat = reduced_shape(shape, dims, True)
    return (shape, x.dtype), (stat, x.dtype), (stat, x.dtype)


def _rows(x: np.ndarray, dims: tuple) -> np.ndarray | None:
    """``x`` as (rows, normalized) when ``dims`` are its trailing dims and it is contiguous:
    then the statistics are one ``einsum`` pass each (no temporaries, ~5x faster than
    ``np.mean(x * x)``)."""
    nd = x.ndim
    if x.size and dims == tuple(range(nd - len(dims), nd)) and x.flags.c_contiguous:
        return x.reshape(-1, _numel(x.shape, dims))
    return None


def _ln_eager(x: np.ndarray, w, b, *, dims: tuple, eps: float) -> tuple:  # noqa: ANN001
    stat = reduced_shape(x.shape, dims, True)
    rows = _rows(x, dims)
    if rows is not None:
        n = x.dtype.type(rows.shape[1])
        mean = (np.einsum("ij->i", rows) / n).reshape(stat)
        xc = x - mean
        xr = xc.reshape(rows.shape)
        var = (np.einsum("ij,ij->i", xr, xr) / n).reshape(stat)
    else:
        mean = np.mean(x, axis=dims, keepdims=True)
        xc = x - mean
        var = np.mean(xc * xc, axis=dims, keepdims=True)
    rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))
    y = np.multiply(xc, rstd, out=xc)
    if w is not None:
        y *= w
    if b is not None:
        y += b
    return y, mean, rstd


def _ln_vjp(ctx, gy, gmean, grstd):  # noqa: ANN001
    x, w, _b = ctx.inputs
    _y, mean, rstd = ctx.outputs
    dims = ctx.params["dims"]
    n = _numel(ctx.input_shapes[0], dims)
    xhat = (x - mean) * rstd
    gx = gw = gb = None
    if ctx.needs_input_grad[0]:
        gxh = gy * w if w is not None else gy
        m1 = gxh.sum(dims, keepdim=True) / n
        m2 = (gxh * xhat).sum(dims, keepdim=True) / n
        # the mean/rstd terms are zero in a first backward; they carry double backward
        c1 = rstd * m2 + grstd * rstd * rstd / n
        c0 = rstd * m1 - gmean / n
        gx = rstd * gxh - xhat * c1 - c0
    if ctx.needs_input_grad[1]:
        gw = (gy * xhat).sum_to_size(ctx.input_shapes[1])
    if ctx.needs_input_grad[2]:
        gb = gy.sum_to_size(ctx.input_shapes[2])
    return gx, gw, gb


LAYER_NORM = register(OpDef(
    "layer_norm", "composite", _ln_meta, lowp(_ln_eager), _ln_vjp, num_outputs=3,
    save=(0, 1), save_output=True, tags=frozenset({"multi_output", "lowp_upcast"}),
    doc="(x - mean) * rstd * weight + bias over ``dims``; returns (y, mean, rstd).",
    grad_name="NativeLayerNormBackward0",
))


# ---------------------------------------------------------------------------------- rms_norm
def _rms_meta(x, w, *, dims: tuple, eps: float) -> tuple:  # noqa: ANN001
    shape = _check("rms_norm", x, w)
    return (shape, x.dtype), (reduced_shape(shape, dims, True), x.dtype)


def _rms_eager(x: np.ndarray, w, *, dims: tuple, eps: float) -> tuple:  # noqa: ANN001
    rows = _rows(x, dims)
    if rows is not None:
        ms = (np.einsum("ij,ij->i", rows, rows) / x.dtype.type(rows.shape[1]))
        ms = ms.reshape(reduced_shape(x.shape, dims, True))
    else:
        ms = np.mean(x * x, axis=dims, keepdims=True)
    rstd = 1.0 / np.sqrt(ms + x.dtype.type(eps))
    y = x * rstd
    if w is not None:
        y *= w
    return y, rstd


def _rms_vjp(ctx, gy, grstd):  # noqa: ANN001
    x, w = ctx.inputs
    _y, rstd = ctx.outputs
    dims = ctx.params["dims"]
    n = _numel(ctx.input_shapes[0], dims)
    xhat = x * rstd
    gx = gw = None
    if ctx.needs_input_grad[0]:
        gxh = gy * w if w is not None else gy
        m2 = (gxh * xhat).sum(dims, keepdim=True) / n
        gx = rstd * gxh - xhat * (rstd * m2 + grstd * rstd * rstd / n)
    if ctx.needs_input_grad[1]:
        gw = (gy * xhat).sum_to_size(ctx.input_shapes[1])
    return gx, gw


RMS_NORM = register(OpDef(
    "rms_norm", "composite", _rms_meta, lowp(_rms_eager), _rms_vjp, num_outputs=2,
    save=(0, 1), save_output=True, tags=frozenset({"multi_output", "lowp_upcast"}),
    doc="x * rsqrt(mean(x^2) + eps) * weight over ``dims``; returns (y, rstd).",
    grad_name="RmsNormBackward0",
))


# ---------------------------------------------------------------------------------- rsqrt(x+eps)
def _rsqrt_eps_vjp(ctx, g):  # noqa: ANN001
    (r,) = ctx.outputs
    return (g * r * r * r * -0.5,)


RSQRT_EPS = register(OpDef(
    "rsqrt_eps", "pointwise", pointwise_meta("rsqrt_eps"),
    lowp(lambda x, *, eps: 1.0 / np.sqrt(x + x.dtype.type(eps))), _rsqrt_eps_vjp,
    save_output=True, c_expr="(1 / ember_sqrt({0} + ember_like({0}, {eps})))",
    doc="1 / sqrt(x + eps): the inverse standard deviation of batch_norm's running variance.",
))

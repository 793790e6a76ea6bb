"""Fused normalization primitives (kind ``composite``): layer_norm and rms_norm.

Both normalize over ``dims`` (sorted, non-negative); an optional weight/bias broadcasts against
the input (layer_norm passes ``normalized_shape``-shaped ones, batch_norm ``(C, 1, ...)`` ones),
so one kernel serves layer, batch, group and instance norm.  They return the statistics too
(``mean``/``rstd`` with the reduced dims kept), as PyTorch's ``native_layer_norm`` does: the
vjp reads them, and because they are outputs of the same node, double backward reaches the
statistics' own gradient terms.  The vjp reads the input and the statistics, never the
normalized output (``save_output`` lists only the statistics), as PyTorch's batch and layer norm
do, so ``BatchNorm2d -> ReLU(inplace=True)`` may overwrite the output.  Half/bfloat16 compute
in float32 (``lowp``).
"""

from __future__ import annotations

import numpy as np

from ember.errors import DTypeError, EmberNotImplementedError, ShapeError
from ember.ops import _parallel
from ember.ops._util import lowp, pointwise_meta
from ember.ops.reduction import reduced_shape
from ember.ops.registry import OpDef, bind, register


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


def _ln_rows(x: np.ndarray, w, b, eps, y: np.ndarray, mean: np.ndarray,  # noqa: ANN001
             rstd: np.ndarray) -> None:
    """layer_norm of a block of rows (R, N) into ``y``, ``mean`` and ``rstd`` (R,)."""
    n = x.dtype.type(x.shape[1])
    np.divide(np.einsum("ij->i", x), n, out=mean)
    np.subtract(x, mean[:, None], out=y)
    var = np.einsum("ij,ij->i", y, y)
    var /= n
    var += eps
    np.sqrt(var, out=var)
    np.divide(1.0, var, out=rstd)
    y *= rstd[:, None]
    if w is not None:
        y *= w
    if b is not None:
        y += b


def _ln_blocked(x: np.ndarray, w, b, dims: tuple, eps: float) -> tuple:  # noqa: ANN001
    """Large trailing-dim layer_norm in cache-sized row blocks over ember's threads (the
    statistics, centring and scaling of a block while it is in cache)."""
    stat = reduced_shape(x.shape, dims, True)
    n = _numel(x.shape, dims)
    rows = x.size // n
    x2 = x.reshape(rows, n)
    y = np.empty((rows, n), x.dtype)
    mean = np.empty(rows, x.dtype)
    rstd = np.empty(rows, x.dtype)
    w2 = None if w is None else w.reshape(n)
    b2 = None if b is None else b.reshape(n)
    e = x.dtype.type(eps)
    per = max(1, _parallel.BLOCK // n)
    blocks = [(lo, min(lo + per, rows)) for lo in range(0, rows, per)]
    threads = min(_parallel.get_num_threads(), len(blocks))

    todo = iter(blocks)  # shared: blocks go to whichever thread is free

    def work(k: int) -> None:
        for lo, hi in todo:
            _ln_rows(x2[lo:hi], w2, b2, e, y[lo:hi], mean[lo:hi], rstd[lo:hi])

    _parallel._run([lambda k=k: work(k) for k in range(threads)])
    return y.reshape(x.shape), mean.reshape(stat), rstd.reshape(stat)


def _ln_eager(x: np.ndarray, w, b, *, dims: tuple, eps: float) -> tuple:  # noqa: ANN001
    stat = reduced_shape(x.shape, dims, True)
    rows = _rows(x, dims)
    norm = x.shape[x.ndim - len(dims):]
    if (rows is not None and x.size >= _parallel.MIN_ELEMENTS and _parallel.get_num_threads() > 1
            and all(p is None or p.shape == norm for p in (w, b))
            and x.dtype in (np.float32, np.float64)):
        return _ln_blocked(x, w, b, dims, eps)
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


def _ln_fused_ok(ctx, gy, w, b) -> bool:  # noqa: ANN001
    """The fused NumPy backward serves a first-order backward (no graph of the backward is
    recorded: ``ctx.create_graph`` is false) of float32/float64 inputs normalized over
    trailing dims with weight/bias of the normalized shape; a backward that is itself
    differentiated takes the op-by-op formula below."""
    if ctx.create_graph or gy is None:
        return False
    shape, dims = tuple(ctx.input_shapes[0]), ctx.params["dims"]
    k = len(dims)
    if (not k or dims != tuple(range(len(shape) - k, len(shape)))
            or ctx.input_dtypes[0].name not in ("float32", "float64")):
        return False
    return all(p is None or tuple(p.shape) == shape[-k:] for p in (w, b))


def _ln_vjp(ctx, gy, gmean, grstd):  # noqa: ANN001
    x, w, _b = ctx.inputs
    _y, mean, rstd = ctx.outputs
    dims = ctx.params["dims"]
    if _ln_fused_ok(ctx, gy, w, _b):
        gx, gw, gb = bind(LAYER_NORM_BACKWARD, gy, x, w, mean, rstd, gmean, grstd, dims=dims)
        needs = ctx.needs_input_grad
        return (gx if needs[0] else None, gw if needs[1] else None,
                gb if needs[2] else None)
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
    save=(0, 1), save_output=(1, 2), tags=frozenset({"multi_output", "lowp_upcast"}),
    doc="(x - mean) * rstd * weight + bias over ``dims``; returns (y, mean, rstd).",
    grad_name="NativeLayerNormBackward0",
))


def _ln_bwd_meta(gy, x, w, mean, rstd, gmean, grstd, *, dims: tuple) -> tuple:  # noqa: ANN001
    shape = tuple(x.shape)
    norm = shape[len(shape) - len(dims):]
    return (shape, x.dtype), (norm, x.dtype), (norm, x.dtype)


def _ln_bwd_rows(gy: np.ndarray, x: np.ndarray, w, mean: np.ndarray, rstd: np.ndarray,  # noqa: ANN001
                 gmean, grstd, inv_n: float) -> tuple:  # noqa: ANN001
    """One block of rows (R, N): (gx, partial gw, partial gb), in the op order of the
    composite formula."""
    xhat = np.subtract(x, mean)
    xhat *= rstd
    gxh = gy * w if w is not None else gy
    m1 = np.add.reduce(gxh, axis=-1, keepdims=True)
    m1 *= inv_n
    t = gxh * xhat
    m2 = np.add.reduce(t, axis=-1, keepdims=True)
    m2 *= inv_n
    c1 = rstd * m2
    if grstd is not None:
        c1 += grstd * rstd * rstd * inv_n
    c0 = rstd * m1
    if gmean is not None:
        c0 -= gmean * inv_n
    gx = np.multiply(gxh, rstd, out=t)
    xhat_c1 = np.multiply(xhat, c1)
    gx -= xhat_c1
    gx -= c0
    np.multiply(gy, xhat, out=xhat_c1)
    return gx, np.add.reduce(xhat_c1, axis=0), np.add.reduce(gy, axis=0)


def _ln_bwd_eager(gy: np.ndarray, x: np.ndarray, w, mean: np.ndarray, rstd: np.ndarray,  # noqa: ANN001
                  gmean, grstd, *, dims: tuple) -> tuple:  # noqa: ANN001
    """Fused first-order layer_norm backward over row blocks that fit in cache, spread over
    ember's threads (the op-by-op formula makes ~12 passes over memory)."""
    n = _numel(x.shape, dims)
    norm = x.shape[x.ndim - len(dims):]
    rows = x.size // n if n else 0
    dt = x.dtype
    if rows == 0 or n == 0:
        return (np.zeros(x.shape, dt), np.zeros(norm, dt), np.zeros(norm, dt))
    g2, x2 = gy.reshape(rows, n), x.reshape(rows, n)
    m2, r2 = mean.reshape(rows, 1), rstd.reshape(rows, 1)
    gm2 = None if gmean is None else gmean.reshape(rows, 1)
    gr2 = None if grstd is None else grstd.reshape(rows, 1)
    w2 = None if w is None else w.reshape(n)
    inv_n = 1.0 / n
    gx = np.empty((rows, n), dt)
    per = max(1, _parallel.BLOCK // n)
    blocks = [(lo, min(lo + per, rows)) for lo in range(0, rows, per)]
    threads = min(_parallel.get_num_threads(), len(blocks))
    if x.size < _parallel.MIN_ELEMENTS:
        threads = 1

    partial: list = [None] * len(blocks)
    todo = iter(range(len(blocks)))  # shared: blocks go to whichever thread is free

    def work(k: int) -> None:
        for j in todo:
            sl = slice(*blocks[j])
            gx[sl], pw, pb = _ln_bwd_rows(
                g2[sl], x2[sl], w2, m2[sl], r2[sl], None if gm2 is None else gm2[sl],
                None if gr2 is None else gr2[sl], inv_n)
            partial[j] = (pw, pb)

    if threads > 1:
        _parallel._run([lambda k=k: work(k) for k in range(threads)])
    else:
        work(0)
    # summed in block order, whichever thread did a block: the same bits on every run
    gw = np.zeros(n, dt)
    gb = np.zeros(n, dt)
    for pw, pb in partial:
        gw += pw
        gb += pb
    return gx.reshape(x.shape), gw.reshape(norm), gb.reshape(norm)


def _ln_bwd_vjp(ctx, *grads):  # noqa: ANN001
    raise EmberNotImplementedError(
        "[layer_norm] the fused backward serves first-order gradients only; a backward with "
        "create_graph=True uses the differentiable formula")


LAYER_NORM_BACKWARD = register(OpDef(
    "layer_norm_backward", "composite", _ln_bwd_meta, _ln_bwd_eager, _ln_bwd_vjp,
    num_outputs=3, tags=frozenset({"multi_output"}),
    doc="First-order gradients (x, weight, bias) of layer_norm over trailing dims, fused.",
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
    save=(0, 1), save_output=(1,), tags=frozenset({"multi_output", "lowp_upcast"}),
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

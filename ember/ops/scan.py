"""Scans (cumsum, cumprod) and the fused softmax family.

``dim`` is non-negative (the frontend wraps it); a 0-d input is one element.  softmax and
log_softmax are single fused kernels (kind ``composite``): max-subtracted, in float32 for
float16/bfloat16, with closed-form vjps on the saved output.
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.ops import _act_c, _parallel
from ember.ops._util import lowp
from ember.ops.registry import OpDef, bind, register

_NODIFF = frozenset({"nondifferentiable"})
_LOWP = (np.dtype(np.float16), dt.bfloat16.np)


def _same_meta(x, **_: object) -> tuple:  # noqa: ANN001
    return tuple(x.shape), x.dtype


# ---------------------------------------------------------------------------- cumsum / cumprod
def _cumsum_eager(x: np.ndarray, *, dim: int, reverse: bool) -> np.ndarray:
    if x.ndim == 0:
        return x.copy()
    if reverse:
        return np.asarray(np.flip(np.cumsum(np.flip(x, dim), dim, dtype=x.dtype), dim),
                          order="C")
    return np.cumsum(x, dim, dtype=x.dtype)


def _cumsum_vjp(ctx, g):  # noqa: ANN001
    p = ctx.params
    return (bind(CUMSUM, g, dim=p["dim"], reverse=not p["reverse"]),)


CUMSUM = register(OpDef("cumsum", "scan", _same_meta, lowp(_cumsum_eager), _cumsum_vjp,
                        doc="Cumulative sum along dim (from the end when reverse)."))


def _cumprod_eager(x: np.ndarray, *, dim: int) -> np.ndarray:
    if x.ndim == 0:
        return x.copy()
    return np.cumprod(x, dim, dtype=x.dtype)


def _cumprod_grad_eager(x: np.ndarray, g: np.ndarray, *, dim: int) -> np.ndarray:
    """d/dx_i of sum_j g_j * prod_{k<=j} x_k, exact with zeros (no division):
    sum_{j>=i} g_j * prod_{k<i} x_k * prod_{i<k<=j} x_k."""
    if x.ndim == 0:
        return g.copy()
    xm = np.moveaxis(x, dim, -1)
    gm = np.moveaxis(g, dim, -1)
    n = xm.shape[-1]
    one = np.ones(xm.shape[:-1] + (1,), x.dtype)
    excl = np.cumprod(np.concatenate([one, xm[..., :-1]], -1), -1)
    upper = np.triu(np.ones((n, n), bool), 1)           # [i, j]: j > i
    t = np.where(upper, xm[..., None, :], x.dtype.type(1))
    span = np.cumprod(t, -1) * np.triu(np.ones((n, n), x.dtype))  # j >= i
    out = excl * np.einsum("...ij,...j->...i", span, gm)
    return np.asarray(np.moveaxis(out, -1, dim).astype(x.dtype), order="C")


CUMPROD_GRAD = register(OpDef(
    "_scan_cumprod_grad", "scan", lambda x, g, *, dim: (tuple(x.shape), x.dtype),
    lowp(_cumprod_grad_eager), None, tags=_NODIFF,
    doc="cumprod's input gradient when the input has zeros (first order only).",
))


def _cumprod_vjp(ctx, g):  # noqa: ANN001
    (x,) = ctx.inputs
    (out,) = ctx.outputs
    dim = ctx.params["dim"]
    from ember.ops.reduction import has_zero
    if not has_zero(x):
        # no zeros: the closed form, differentiable again
        return (bind(CUMSUM, g * out, dim=dim, reverse=True) / x,)
    return (bind(CUMPROD_GRAD, x, g, dim=dim),)


CUMPROD = register(OpDef("cumprod", "scan", _same_meta, lowp(_cumprod_eager), _cumprod_vjp,
                         save=(0,), save_output=True))


# ---------------------------------------------------------------------------- cummax / cummin
def _cumext_eager(ufunc):  # noqa: ANN001, ANN202
    def kernel(x: np.ndarray, *, dim: int) -> tuple:
        """Running extreme and the index of its latest occurrence (ties and NaN update the
        index, as PyTorch's ``x >= out`` / ``isnan(x)`` rule)."""
        if x.ndim == 0:
            return x.copy(), np.zeros((), np.int64)
        keys = x.astype(np.float32) if x.dtype in _LOWP else x
        vals = ufunc.accumulate(keys, axis=dim)
        hit = keys == vals
        if keys.dtype.kind == "f":
            hit |= np.isnan(keys)
        shape = [1] * x.ndim
        shape[dim] = x.shape[dim]
        pos = np.where(hit, np.arange(x.shape[dim]).reshape(shape), 0)
        idx = np.maximum.accumulate(pos, axis=dim).astype(np.int64)
        return vals.astype(x.dtype), idx
    return kernel


def _cumext_vjp(ctx, g, _gi=None):  # noqa: ANN001
    from ember.ops.sort import scatter_to
    (_v, idx) = ctx.outputs
    shape = ctx.input_shapes[0]
    if len(shape) == 0:
        return (g,)
    return (scatter_to(g, idx.detach(), ctx.params["dim"], shape),)


def _cumext_meta(x, *, dim: int) -> tuple:  # noqa: ANN001
    return (tuple(x.shape), x.dtype), (tuple(x.shape), dt.int64)


CUMMAX = register(OpDef("cummax", "scan", _cumext_meta, _cumext_eager(np.maximum), _cumext_vjp,
                        num_outputs=2, save_output=True, tags=frozenset({"multi_output"})))
CUMMIN = register(OpDef("cummin", "scan", _cumext_meta, _cumext_eager(np.minimum), _cumext_vjp,
                        num_outputs=2, save_output=True, tags=frozenset({"multi_output"})))


# ---------------------------------------------------------------------------- softmax family
def _max_keep(x: np.ndarray, dim: int) -> np.ndarray:
    """``np.max(x, axis=dim, keepdims=True)`` for an ndarray: the reduce ``np.max`` calls,
    without its ~1 us Python wrapper (the same for ``np.add.reduce`` and ``np.sum`` below)."""
    return np.maximum.reduce(x, axis=dim, keepdims=True)


def _softmax_eager(x: np.ndarray, *, dim: int) -> np.ndarray:
    if x.size == 0:
        return x.copy()
    if x.ndim == 0:
        return _softmax_eager(x.reshape(1), dim=0).reshape(())
    if dim == x.ndim - 1 and x.size >= _parallel.MIN_ELEMENTS and x.dtype.kind == "f":
        from ember.ops.attention import _safe_softmax_np  # row blocks over threads
        return _safe_softmax_np(x, safe=False)
    e = np.subtract(x, _max_keep(x, dim))
    np.exp(e, out=e)
    if dim == x.ndim - 1 and e.flags.c_contiguous:
        e /= _parallel.last_dim_sum(e)  # BLAS row sums: 2-3x faster than np.sum
    else:
        e /= np.add.reduce(e, axis=dim, keepdims=True)
    return e


_softmax_lowp = lowp(_softmax_eager)


def _softmax_kernel(x: np.ndarray, *, dim: int) -> np.ndarray:
    """Last-dim rows of float32/float16/bfloat16 in one C pass (float32 math, half rounded
    once: ``_act_c``); otherwise NumPy in float32 (``lowp``)."""
    if dim == x.ndim - 1:
        out = _act_c.softmax_last(x)
        if out is not None:
            return out
    return _softmax_lowp(x, dim=dim)


def _log_softmax_eager(x: np.ndarray, *, dim: int) -> np.ndarray:
    if x.size == 0:
        return x.copy()
    if x.ndim == 0:
        return _log_softmax_eager(x.reshape(1), dim=0).reshape(())
    if dim == x.ndim - 1:  # float32/float16/bfloat16 rows in one C pass (``_act_c``)
        out = _act_c.log_softmax_last(x)
        if out is not None:
            return out
    src = x.dtype
    lowp_in = src in _LOWP
    if lowp_in:
        x = x.astype(np.float32)
    s = np.subtract(x, _max_keep(x, dim))
    total = np.add.reduce(np.exp(s), axis=dim, keepdims=True)
    if lowp_in and dim == x.ndim - 1:
        # PyTorch's last-dim CPU kernel keeps the row sum and its log in the input dtype
        total = total.astype(src).astype(np.float32)
        s -= np.log(total).astype(src).astype(np.float32)
    else:
        s -= np.log(total)
    return s.astype(src) if lowp_in else s


def _sum_keep(t, dim: int):  # noqa: ANN001, ANN202
    from ember.ops.reduction import SUM
    return bind(SUM, t, dims=(dim,) if t.ndim else (), keepdim=True)


def _softmax_vjp(ctx, g):  # noqa: ANN001
    (y,) = ctx.outputs
    gy = g * y
    return (gy - y * _sum_keep(gy, ctx.params["dim"]),)


def _log_softmax_vjp(ctx, g):  # noqa: ANN001
    (y,) = ctx.outputs
    return (g - y.exp() * _sum_keep(g, ctx.params["dim"]),)


SOFTMAX = register(OpDef(
    "softmax", "composite", _same_meta, _softmax_kernel, _softmax_vjp, save_output=True,
    grad_name="SoftmaxBackward0", doc="exp(x - max) / sum(exp(x - max)) along dim.",
))
LOG_SOFTMAX = register(OpDef(
    "log_softmax", "composite", _same_meta, _log_softmax_eager, _log_softmax_vjp,
    save_output=True, grad_name="LogSoftmaxBackward0",
    doc="(x - max) - log(sum(exp(x - max))) along dim.",
))

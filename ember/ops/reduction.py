"""Reduction primitives.  ``dims`` is a sorted tuple of non-negative dims (the frontend
normalizes; an empty tuple on a 0-d input), ``keepdim`` a bool; output dtypes are decided by the
frontend (e.g. integer sums cast to int64 before binding).

Gradients are written with ember ops.  A few small private primitives (``_red_*``) give the
vjps the masks, signs and powers they need without depending on the pointwise families.
"""

from __future__ import annotations

import math

import numpy as np

from ember import dtypes as dt
from ember.errors import DTypeError
from ember.ops import _parallel
from ember.ops._util import lowp, pointwise_meta
from ember.ops.registry import OpDef, bind, register

_NODIFF = frozenset({"nondifferentiable"})
_LOWP = (np.dtype(np.float16), dt.bfloat16.np)


_FULL = tuple(tuple(range(n)) for n in range(17))


def reduced_shape(shape: tuple, dims: tuple, keepdim: bool) -> tuple:
    """``shape`` reduced over ``dims``, the reduced dims kept with size 1 or dropped."""
    n = len(shape)
    if not keepdim and n < len(_FULL) and dims == _FULL[n]:  # a full reduction
        return ()
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _reduce_meta(x, *, dims: tuple, keepdim: bool, **_: object) -> tuple:  # noqa: ANN001
    return reduced_shape(tuple(x.shape), dims, keepdim), x.dtype


def _reduce_meta_to(out: dt.dtype):  # noqa: ANN202
    def meta(x, *, dims: tuple, keepdim: bool, **_: object) -> tuple:  # noqa: ANN001
        return reduced_shape(tuple(x.shape), dims, keepdim), out
    return meta


def _float_reduce_meta(x, *, dims: tuple, keepdim: bool, **_: object) -> tuple:  # noqa: ANN001
    if not x.dtype.is_floating_point:
        raise DTypeError(f"[reduction] this primitive needs a floating input, got "
                         f"{x.dtype.name} (the frontend casts or rejects integers)")
    return reduced_shape(tuple(x.shape), dims, keepdim), x.dtype


def expand_reduced(g, shape: tuple, dims: tuple, keepdim: bool):  # noqa: ANN001, ANN201
    """Broadcast a reduced gradient back to ``shape``."""
    if not keepdim and tuple(dims) != tuple(range(len(dims))):
        # reduced leading dims (a full reduction: SumBackward0's ``grad.expand(sizes)``) come
        # back by expand alone; others need their size-1 dims first
        g = g.reshape(reduced_shape(shape, dims, True))
    return g.expand(shape)


def unsqueeze_reduced(g, shape: tuple, dims: tuple, keepdim: bool):  # noqa: ANN001, ANN201
    """A reduced tensor with the reduced dims restored as size 1 (no expansion)."""
    return g if keepdim else g.reshape(reduced_shape(shape, dims, True))


def _count(shape: tuple, dims: tuple) -> int:
    n = 1
    for d in dims:
        n *= shape[d]
    return n


# ---------------------------------------------------------------------------- private helpers
def _eq_mask_eager(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # NaN matches NaN: the gradient of a NaN maximum flows to the NaN entries, as in PyTorch
    return ((x == y) | (np.isnan(x) & np.isnan(y))).astype(x.dtype)


EQ_MASK = register(OpDef(
    "_red_eq_mask", "pointwise", pointwise_meta("_red_eq_mask"), _eq_mask_eager, None,
    tags=_NODIFF, c_expr="((({0} == {1}) | (({0} != {0}) & ({1} != {1}))) ? 1 : 0)",
    doc="1 where x == y (NaN == NaN), else 0, in x's float dtype (vjp masks).",
))


def _sign_eager(x: np.ndarray) -> np.ndarray:
    return np.sign(x).astype(x.dtype)


SIGN = register(OpDef(
    "_red_sign", "pointwise", pointwise_meta("_red_sign"), _sign_eager, None, tags=_NODIFF,
    c_expr="ember_np_sign({0})",
    doc="sign(x) in x's dtype; piecewise constant, so it has no gradient.",
))


def _pow_vjp(ctx, g):  # noqa: ANN001
    (x,) = ctx.inputs
    e = ctx.params["exponent"]
    return (g * e * bind(POW, x, exponent=e - 1.0),)


POW = register(OpDef(
    "_red_pow", "pointwise", pointwise_meta("_red_pow"),
    lowp(lambda x, *, exponent: np.power(x, x.dtype.type(exponent))), _pow_vjp, save=(0,),
    c_expr="ember_pow_scalar({0}, ember_as({0}, {exponent}))",
    doc="x ** exponent for a Python float exponent (norm kernels and their vjps).",
))


def _safe_div_eager(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(b == 0, a.dtype.type(0), a / np.where(b == 0, a.dtype.type(1), b))


def _safe_div_vjp(ctx, g):  # noqa: ANN001
    a, b = ctx.inputs
    n0, n1 = ctx.needs_input_grad
    ga = bind(SAFE_DIV, g, b) if n0 else None
    gb = -bind(SAFE_DIV, g * a, b * b) if n1 else None
    return (ga, gb)


SAFE_DIV = register(OpDef(
    "_red_safe_div", "pointwise", pointwise_meta("_red_safe_div"), lowp(_safe_div_eager),
    _safe_div_vjp, save=(0, 1), c_expr="ember_where({1} == 0, ember_like({0}, 0), {0} / {1})",
    doc="a / b where b != 0, else 0 (PyTorch's masked_fill_).",
))


def _others_eager(x: np.ndarray, *, dims: tuple) -> np.ndarray:
    """Product of the other elements of each reduced group (no division, so zeros work)."""
    rest = [i for i in range(x.ndim) if i not in dims]
    perm = rest + list(dims)
    xt = np.transpose(x, perm)
    lead = xt.shape[:len(rest)]
    flat = xt.reshape(lead + (-1,))
    one = np.ones(lead + (1,), x.dtype)
    left = np.cumprod(np.concatenate([one, flat[..., :-1]], -1), -1, dtype=x.dtype)
    right = np.cumprod(np.concatenate([one, flat[..., :0:-1]], -1), -1, dtype=x.dtype)[..., ::-1]
    out = (left * right).reshape(xt.shape)
    return np.asarray(np.transpose(out, np.argsort(perm)), order="C")


def _others_decomp(x, *, dims: tuple):  # noqa: ANN001, ANN202
    """``_red_prod_others`` with ember ops (the compiler's decomposition): eager's exclusive
    cumulative products from the left and from the right (float16/bfloat16 in float32)."""
    from ember.ops.movement import CAT, FLIP
    low = x.dtype in (dt.float16, dt.bfloat16)
    src = x.float() if low else x
    rest = [i for i in range(x.ndim) if i not in dims]
    perm = rest + list(dims)
    xt = src.permute(perm)
    flat = xt.reshape(tuple(xt.shape[:len(rest)]) + (-1,))
    last = flat.ndim - 1
    one = flat[..., :1] ** 0  # ones (NaN ** 0 is 1), traced rather than a constant tensor
    left = bind(CAT, one, flat[..., :-1], dim=last).cumprod(last)
    back = bind(FLIP, flat, dims=(last,))[..., :-1]
    right = bind(FLIP, bind(CAT, one, back, dim=last).cumprod(last), dims=(last,))
    inv = [perm.index(d) for d in range(x.ndim)]
    out = (left * right).reshape(tuple(xt.shape)).permute(inv)
    return out.to(x.dtype) if low else out


PROD_OTHERS = register(OpDef(
    "_red_prod_others", "reduction", lambda x, *, dims: (tuple(x.shape), x.dtype),
    lowp(_others_eager), None, tags=_NODIFF, decomp=_others_decomp,
    doc="prod of the group without each element: prod's gradient when the input has zeros.",
))


def has_zero(x) -> bool:  # noqa: ANN001
    """Whether ``x`` holds a zero (a data-dependent choice of gradient formula, as PyTorch's
    prod/cumprod backward makes)."""
    n = bind(COUNT_NONZERO, x.detach(), dims=tuple(range(x.ndim)), keepdim=False)
    return int(n) != x.numel()


# ---------------------------------------------------------------------------- sum / mean / prod
def _sum_eager(x: np.ndarray, *, dims: tuple, keepdim: bool) -> np.ndarray:
    out = _parallel.reduce_sum(x, dims, keepdim, x.dtype)
    if out is not None:
        return out
    # np.sum's own Python wrapper costs ~1.3 us a call; for an ndarray it is this reduce
    return np.add.reduce(x, axis=dims, dtype=x.dtype, keepdims=keepdim)


def _sum_vjp(ctx, g):  # noqa: ANN001
    p = ctx.params
    return (expand_reduced(g, ctx.input_shapes[0], p["dims"], p["keepdim"]),)


SUM = register(OpDef("sum", "reduction", _reduce_meta, lowp(_sum_eager), _sum_vjp))


def _mean_eager(x: np.ndarray, *, dims: tuple, keepdim: bool) -> np.ndarray:
    n = _count(x.shape, dims)
    s = _sum_eager(x, dims=dims, keepdim=keepdim)
    return np.asarray(s / x.dtype.type(n) if n else np.full_like(s, np.nan))


def _mean_vjp(ctx, g):  # noqa: ANN001
    p, shape = ctx.params, ctx.input_shapes[0]
    return (expand_reduced(g, shape, p["dims"], p["keepdim"]) / _count(shape, p["dims"]),)


MEAN = register(OpDef("mean", "reduction", _float_reduce_meta, lowp(_mean_eager), _mean_vjp))


def _prod_eager(x: np.ndarray, *, dims: tuple, keepdim: bool) -> np.ndarray:
    return np.prod(x, axis=dims, keepdims=keepdim, dtype=x.dtype)


def _prod_vjp(ctx, g):  # noqa: ANN001
    (x,) = ctx.inputs
    (out,) = ctx.outputs
    p, shape = ctx.params, ctx.input_shapes[0]
    ge = expand_reduced(g, shape, p["dims"], p["keepdim"])
    if not has_zero(x):
        # no zeros: the closed form, which stays differentiable for double backward
        return (ge * expand_reduced(out, shape, p["dims"], p["keepdim"]) / x,)
    return (ge * bind(PROD_OTHERS, x, dims=p["dims"]),)


PROD = register(OpDef("prod", "reduction", _reduce_meta, lowp(_prod_eager), _prod_vjp,
                      save=(0,), save_output=True))


def _nansum_eager(x: np.ndarray, *, dims: tuple, keepdim: bool) -> np.ndarray:
    return np.asarray(np.nansum(x, axis=dims, keepdims=keepdim, dtype=x.dtype), x.dtype)


def _nansum_vjp(ctx, g):  # noqa: ANN001
    (x,) = ctx.inputs
    p = ctx.params
    ge = expand_reduced(g, ctx.input_shapes[0], p["dims"], p["keepdim"])
    return (ge * bind(NOTNAN, x.detach()).to(x.dtype),)


NOTNAN = register(OpDef(
    "_red_notnan", "pointwise", pointwise_meta("_red_notnan", dt.bool),
    lambda x: ~np.isnan(x.astype(np.float32) if x.dtype in _LOWP else x), None, tags=_NODIFF,
    c_expr="({0} == {0})",
    doc="True where x is not NaN (nansum's gradient mask, nanmean's count).",
))
NANSUM = register(OpDef("nansum", "reduction", _reduce_meta, lowp(_nansum_eager), _nansum_vjp,
                        save=(0,)))


# ---------------------------------------------------------------------------- amax / amin
def _extreme_vjp(ctx, g):  # noqa: ANN001
    """Gradient of amax/amin (and full max/min/median): split evenly among the ties."""
    (x,) = ctx.inputs
    (out,) = ctx.outputs
    p, shape = ctx.params, ctx.input_shapes[0]
    dims, keepdim = p["dims"], p["keepdim"]
    mask = bind(EQ_MASK, x.detach(), expand_reduced(out.detach(), shape, dims, keepdim))
    count = bind(SUM, mask, dims=dims, keepdim=True)
    return (expand_reduced(unsqueeze_reduced(g, shape, dims, keepdim) / count, shape, dims, True)
            * mask,)


def _amax_eager(x: np.ndarray, *, dims: tuple, keepdim: bool) -> np.ndarray:
    out = _parallel.reduce_split(np.max, np.maximum, x, dims, keepdim)
    return np.max(x, axis=dims, keepdims=keepdim) if out is None else out


def _amin_eager(x: np.ndarray, *, dims: tuple, keepdim: bool) -> np.ndarray:
    out = _parallel.reduce_split(np.min, np.minimum, x, dims, keepdim)
    return np.min(x, axis=dims, keepdims=keepdim) if out is None else out


AMAX = register(OpDef("amax", "reduction", _reduce_meta, _amax_eager, _extreme_vjp,
                      save=(0,), save_output=True))
AMIN = register(OpDef("amin", "reduction", _reduce_meta, _amin_eager, _extreme_vjp,
                      save=(0,), save_output=True))


# ---------------------------------------------------------------------------- arg / (values, idx)
def _arg_meta(x, *, dim: int | None, keepdim: bool) -> tuple:  # noqa: ANN001
    shape = tuple(x.shape)
    if dim is None:
        return ((1,) * len(shape) if keepdim else ()), dt.int64
    return reduced_shape(shape, (dim,), keepdim), dt.int64


def _arg_eager(fn):  # noqa: ANN001, ANN202
    def kernel(x: np.ndarray, *, dim: int | None, keepdim: bool) -> np.ndarray:
        if dim is None:
            r = np.asarray(fn(x.reshape(-1)), np.int64)
            return r.reshape((1,) * x.ndim) if keepdim else r
        if x.ndim == 0:
            return np.zeros((), np.int64)
        return np.asarray(fn(x, axis=dim, keepdims=keepdim), np.int64)
    return kernel


ARGMAX = register(OpDef("argmax", "reduction", _arg_meta, _arg_eager(np.argmax), None,
                        tags=_NODIFF))
ARGMIN = register(OpDef("argmin", "reduction", _arg_meta, _arg_eager(np.argmin), None,
                        tags=_NODIFF))


def _vi_meta(x, *, dim: int, keepdim: bool) -> tuple:  # noqa: ANN001
    shape = reduced_shape(tuple(x.shape), (dim,), keepdim) if len(x.shape) else ()
    return (shape, x.dtype), (shape, dt.int64)


def _vi_eager(fn):  # noqa: ANN001, ANN202
    def kernel(x: np.ndarray, *, dim: int, keepdim: bool) -> tuple:
        if x.ndim == 0:
            return x.copy(), np.zeros((), np.int64)
        idx = np.expand_dims(fn(x, axis=dim), dim)
        vals = np.take_along_axis(x, idx, dim)
        if not keepdim:
            vals, idx = vals.squeeze(dim), idx.squeeze(dim)
        return np.asarray(vals, order="C"), np.asarray(idx, np.int64, order="C")
    return kernel


def index_vjp(ctx, g, _gi=None):  # noqa: ANN001
    """Gradient of a (values, indices) reduction along ``dim``: g goes to the chosen index."""
    from ember.ops.sort import scatter_to
    p, shape = ctx.params, ctx.input_shapes[0]
    (_v, idx) = ctx.outputs
    if len(shape) == 0:
        return (g,)
    dim = p["dim"]
    g = unsqueeze_reduced(g, shape, (dim,), p["keepdim"])
    idx = unsqueeze_reduced(idx.detach(), shape, (dim,), p["keepdim"])
    return (scatter_to(g, idx, dim, shape),)


MAX_DIM = register(OpDef("max_dim", "reduction", _vi_meta, _vi_eager(np.argmax), index_vjp,
                         num_outputs=2, save_output=True, tags=frozenset({"multi_output"}),
                         grad_name="MaxBackward0"))
MIN_DIM = register(OpDef("min_dim", "reduction", _vi_meta, _vi_eager(np.argmin), index_vjp,
                         num_outputs=2, save_output=True, tags=frozenset({"multi_output"}),
                         grad_name="MinBackward0"))


# ---------------------------------------------------------------------------- var / std
def _var_eager(x: np.ndarray, *, dims: tuple, keepdim: bool, correction: float) -> np.ndarray:
    n = _count(x.shape, dims)
    mean = np.mean(x, axis=dims, keepdims=True) if n else np.zeros(())
    ss = np.sum(np.square(x - mean), axis=dims, keepdims=keepdim, dtype=x.dtype)
    denom = max(n - correction, 0)
    with np.errstate(all="ignore"):
        return np.asarray(ss / x.dtype.type(denom), x.dtype)


def _std_eager(x: np.ndarray, **params: object) -> np.ndarray:
    return np.sqrt(_var_eager(x, **params))


def _var_grad(x, g, p: dict, shape: tuple):  # noqa: ANN001, ANN202
    dims = p["dims"]
    denom = _count(shape, dims) - p["correction"]
    scale = 2.0 / denom if denom > 0 else (math.inf if denom == 0 else 2.0 / denom)
    gk = expand_reduced(g, shape, dims, p["keepdim"])
    return scale * gk * (x - bind(MEAN, x, dims=dims, keepdim=True))


def _var_vjp(ctx, g):  # noqa: ANN001
    return (_var_grad(ctx.inputs[0], g, ctx.params, ctx.input_shapes[0]),)


def _std_vjp(ctx, g):  # noqa: ANN001
    (out,) = ctx.outputs
    return (_var_grad(ctx.inputs[0], bind(SAFE_DIV, g, out * 2), ctx.params,
                      ctx.input_shapes[0]),)


VAR = register(OpDef("var", "reduction", _float_reduce_meta, lowp(_var_eager), _var_vjp,
                     save=(0,)))
STD = register(OpDef("std", "reduction", _float_reduce_meta, lowp(_std_eager), _std_vjp,
                     save=(0,), save_output=True))


# ---------------------------------------------------------------------------- norms
def _norm_eager(x: np.ndarray, *, ord: float, dims: tuple, keepdim: bool) -> np.ndarray:
    a = np.abs(x)
    kw = {"axis": dims, "keepdims": keepdim}
    if ord == 2:
        r = np.sqrt(np.sum(a * a, dtype=x.dtype, **kw))
    elif ord == 1:
        r = np.sum(a, dtype=x.dtype, **kw)
    elif ord == math.inf:
        r = np.max(a, **kw)
    elif ord == -math.inf:
        r = np.min(a, **kw)
    elif ord == 0:
        r = np.sum(a != 0, dtype=x.dtype, **kw)
    else:
        t = x.dtype.type
        r = np.power(np.sum(np.power(a, t(ord)), dtype=x.dtype, **kw), t(1.0 / ord))
    return np.asarray(r, x.dtype)


def _norm_vjp(ctx, g):  # noqa: ANN001
    """PyTorch's norm_backward: subgradient 0 where the norm (or the entry) is 0."""
    (x,) = ctx.inputs
    (norm,) = ctx.outputs
    p, shape = ctx.params, ctx.input_shapes[0]
    dims, keepdim, o = p["dims"], p["keepdim"], p["ord"]
    ge = expand_reduced(g, shape, dims, keepdim)
    ne = expand_reduced(norm, shape, dims, keepdim)
    if o == 0:
        return (None,)  # PyTorch's undefined (all-zero) gradient
    sgn = bind(SIGN, x.detach())
    if o == 1:
        return (sgn * ge,)
    if o == 2:
        return (ge * bind(SAFE_DIV, x, ne),)
    absx = x * sgn
    if math.isinf(o):
        mask = bind(EQ_MASK, absx.detach(), ne.detach())
        count = bind(SUM, mask, dims=dims, keepdim=True)
        gk = unsqueeze_reduced(g, shape, dims, keepdim) / count
        return (sgn * expand_reduced(gk, shape, dims, True) * mask,)
    if o < 1:
        scaled = bind(SAFE_DIV, sgn, bind(POW, absx, exponent=1.0 - o))
        return (scaled * ge * bind(POW, ne, exponent=1.0 - o),)
    if o < 2:
        scaled = sgn * bind(POW, absx, exponent=o - 1.0)
    else:
        scaled = x * bind(POW, absx, exponent=o - 2.0)
    return (scaled * bind(SAFE_DIV, ge, bind(POW, ne, exponent=o - 1.0)),)


NORM = register(OpDef("vector_norm", "reduction", _float_reduce_meta, lowp(_norm_eager),
                      _norm_vjp, save=(0,), save_output=True,
                      grad_name="LinalgVectorNormBackward0"))


# ---------------------------------------------------------------------------- logsumexp
def _lse_eager(x: np.ndarray, *, dims: tuple, keepdim: bool) -> np.ndarray:
    if x.size == 0:
        return np.full(reduced_shape(x.shape, dims, keepdim), -np.inf, x.dtype)
    src = x.dtype
    low = src in _LOWP
    if low:
        # PyTorch composes logsumexp from ops that each round to the input dtype
        x = x.astype(np.float32)

        def r(v: np.ndarray) -> np.ndarray:
            return v.astype(src).astype(np.float32)
    else:
        def r(v: np.ndarray) -> np.ndarray:
            return v
    m = np.max(x, axis=dims, keepdims=True)
    m = np.where(np.isfinite(m), m, x.dtype.type(0))
    s = r(np.log(r(np.sum(r(np.exp(r(x - m))), axis=dims, keepdims=True)))) + m
    if not keepdim:
        s = np.squeeze(s, dims)
    return np.asarray(s, src)


def _lse_vjp(ctx, g):  # noqa: ANN001
    (x,) = ctx.inputs
    (out,) = ctx.outputs
    p, shape = ctx.params, ctx.input_shapes[0]
    ge = expand_reduced(g, shape, p["dims"], p["keepdim"])
    return (ge * (x - expand_reduced(out, shape, p["dims"], p["keepdim"])).exp(),)


LOGSUMEXP = register(OpDef("logsumexp", "reduction", _float_reduce_meta, _lse_eager,
                           _lse_vjp, save=(0,), save_output=True))


# ---------------------------------------------------------------------------- boolean reductions
def _bool_meta(x, *, dims: tuple, keepdim: bool) -> tuple:  # noqa: ANN001
    out = dt.uint8 if x.dtype is dt.uint8 else dt.bool
    return reduced_shape(tuple(x.shape), dims, keepdim), out


def _bool_eager(fn):  # noqa: ANN001, ANN202
    def kernel(x: np.ndarray, *, dims: tuple, keepdim: bool) -> np.ndarray:
        r = np.asarray(fn(x, axis=dims, keepdims=keepdim))
        return r.astype(np.uint8) if x.dtype == np.uint8 else r
    return kernel


ALL = register(OpDef("all", "reduction", _bool_meta, _bool_eager(np.all), None, tags=_NODIFF))
ANY = register(OpDef("any", "reduction", _bool_meta, _bool_eager(np.any), None, tags=_NODIFF))


def _count_nonzero_decomp(x, *, dims: tuple, keepdim: bool):  # noqa: ANN001, ANN202
    """count_nonzero as ``sum(int64(x != 0))`` (the compiler's decomposition; NaN counts)."""
    return bind(SUM, (x != 0).to(dt.int64), dims=dims, keepdim=keepdim)


COUNT_NONZERO = register(OpDef(
    "count_nonzero", "reduction", _reduce_meta_to(dt.int64),
    lambda x, *, dims, keepdim: np.asarray(
        np.count_nonzero(x, axis=dims, keepdims=keepdim), np.int64),
    None, tags=_NODIFF, decomp=_count_nonzero_decomp,
))

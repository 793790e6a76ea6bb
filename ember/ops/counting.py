"""Counting, bucketing and exponent primitives: bincount, histc, searchsorted, isin,
heaviside, frexp, logcumsumexp.

The frontend (``ember/_frontend/counting.py``) checks arguments and promotes; these are strict.
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.errors import EmberRuntimeError
from ember.ops.registry import OpDef, bind, register
from ember.sym import unbacked_size

_ND = frozenset({"nondifferentiable"})
_LOWP = (np.dtype(np.float16), dt.bfloat16.np)


# ---------------------------------------------------------------------------- bincount
def _bincount_meta(x, weights=None, *, minlength: int) -> tuple:  # noqa: ANN001
    # the length is max(x) + 1 (at least minlength): known only from the data (None in eager,
    # an unbacked SymInt when the input's shape is symbolic)
    n = unbacked_size(x.shape, min=minlength)
    if weights is None:
        return (n,), dt.int64
    return (n,), (dt.float32 if weights.dtype is dt.float32 else dt.float64)


def _bincount_eager(x: np.ndarray, weights: np.ndarray | None = None, *,
                    minlength: int) -> np.ndarray:
    if x.size and int(x.min()) < 0:
        raise EmberRuntimeError(
            "[bincount] bincount only supports 1-d non-negative integral inputs.")
    xi = x.astype(np.int64)
    if weights is None:
        return np.bincount(xi, minlength=minlength).astype(np.int64)
    if weights.dtype == np.float32:
        # PyTorch sums float32 weights in float32, in input order (np.add.at is sequential)
        n = int(xi.max()) + 1 if xi.size else 0
        out = np.zeros(n if n > minlength else minlength, np.float32)
        np.add.at(out, xi, weights)
        return out
    return np.bincount(xi, weights.astype(np.float64), minlength=minlength)


BINCOUNT = register(OpDef(
    "bincount", "extern", _bincount_meta, _bincount_eager, None,
    tags=frozenset({"nondifferentiable", "data_dependent"}),
    doc="Counts (or summed weights) of each non-negative integer value; params minlength.",
))


# ---------------------------------------------------------------------------- histc
def _histc_eager(x: np.ndarray, *, bins: int, min: float, max: float) -> np.ndarray:
    # PyTorch: edges are the range rounded to the input dtype; the bin is
    # int((x - lo) * bins / (hi - lo)) in the input dtype (float16/bfloat16 round after every
    # operation), the top edge falls in the last bin, values outside [lo, hi] (and NaN) are
    # dropped
    src = x.dtype
    cdt = np.float32 if src in _LOWP else src

    def r(a):  # noqa: ANN001, ANN202 - round to the input dtype, compute in cdt
        return np.asarray(a).astype(src).astype(cdt)

    lo, hi = r(min), r(max)
    v = x.reshape(-1).astype(cdt)
    v = v[(v >= lo) & (v <= hi)]
    with np.errstate(over="ignore", invalid="ignore"):
        q = r(r(r(v - lo) * r(bins)) / r(hi - lo))
    # float16 can overflow to inf here; PyTorch's cast then gives INT64_MIN, clamped to bin 0
    pos = np.where(np.isfinite(q), q, 0).astype(np.int64)
    pos = np.clip(pos, 0, bins - 1)
    return np.bincount(pos, minlength=bins).astype(src)


HISTC = register(OpDef(
    "histc", "extern", lambda x, *, bins, min, max: ((bins,), x.dtype), _histc_eager, None,
    tags=_ND, doc="Histogram of all elements in ``bins`` equal bins over [min, max].",
))


# ---------------------------------------------------------------------------- searchsorted
def _searchsorted_meta(seq, values, sorter=None, *, right: bool,  # noqa: ANN001
                       out_int32: bool) -> tuple:
    return tuple(values.shape), (dt.int32 if out_int32 else dt.int64)


def _plain_sorted(seq: np.ndarray, vals: np.ndarray) -> bool:
    if seq.dtype.kind == "f" and (np.isnan(seq).any() or np.isnan(vals).any()):
        return False
    return bool((seq[1:] >= seq[:-1]).all())


def _searchsorted_eager(seq: np.ndarray, values: np.ndarray, sorter: np.ndarray | None = None,
                        *, right: bool, out_int32: bool) -> np.ndarray:
    """PyTorch's binary search, run for all values at once (log2(n) vectorised steps), with
    its exact comparisons so NaN and unsorted rows give the same answers."""
    n = seq.shape[-1]
    odt = np.int32 if out_int32 else np.int64
    b = int(np.prod(seq.shape[:-1]))
    rows = seq.reshape(b, n)
    vals = values.reshape(b, values.size // b if b else 0)
    srt = None if sorter is None else sorter.reshape(b, n)
    if srt is not None and srt.size and (srt.min() < 0 or srt.max() >= n):
        raise EmberRuntimeError("[searchsorted] torch.searchsorted(): sorter index out of range")
    if rows.dtype in _LOWP:
        rows, vals = rows.astype(np.float32), vals.astype(np.float32)
    if srt is not None:
        rows = np.take_along_axis(rows, srt, 1)
    if b == 1 and n and _plain_sorted(rows[0], vals):
        # sorted without NaN: NumPy's search gives PyTorch's answer directly
        res = np.searchsorted(rows[0], vals[0], side="right" if right else "left")
        return res.astype(odt).reshape(values.shape)
    start = np.zeros(vals.shape, np.int64)
    end = np.full(vals.shape, n, np.int64)
    r = np.arange(vals.shape[0])[:, None]
    live = start < end
    while live.any():
        mid = start + ((end - start) >> 1)
        mv = rows[r, np.minimum(mid, max(n - 1, 0))] if n else vals
        go_right = ~(mv > vals) if right else ~(mv >= vals)
        start = np.where(live & go_right, mid + 1, start)
        end = np.where(live & ~go_right, mid, end)
        live = start < end
    return start.astype(odt).reshape(values.shape)


SEARCHSORTED = register(OpDef(
    "searchsorted", "extern", _searchsorted_meta, _searchsorted_eager, None, tags=_ND,
    doc="Insertion indices of values in (rows of) a sorted sequence; optional sorter input.",
))


# ---------------------------------------------------------------------------- isin
def _isin_eager(x: np.ndarray, test: np.ndarray, *, invert: bool) -> np.ndarray:
    if x.dtype in _LOWP:
        x, test = x.astype(np.float32), test.astype(np.float32)
    return np.isin(x, test.reshape(-1), invert=invert)


ISIN = register(OpDef(
    "isin", "extern", lambda x, test, *, invert: (tuple(x.shape), dt.bool), _isin_eager, None,
    tags=_ND, doc="Whether each element of x occurs in test (same dtype); params invert.",
))


# ---------------------------------------------------------------------------- heaviside
def _heaviside_eager(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    return np.where(x == 0, values, (x > 0).astype(x.dtype)).astype(x.dtype)


HEAVISIDE = register(OpDef(
    "heaviside", "pointwise", lambda x, v: (tuple(x.shape), x.dtype), _heaviside_eager, None,
    tags=_ND, c_expr="(({0} == 0) ? {1} : (({0} > 0) ? 1 : 0))",  # NaN: 0, as eager
))


# ---------------------------------------------------------------------------- frexp
def _frexp_eager(x: np.ndarray) -> tuple:
    src = x.dtype
    xs = x.astype(np.float32) if src == dt.bfloat16.np else x
    m, e = np.frexp(xs)
    return np.asarray(m.astype(src)), np.asarray(e, np.int32)


def _frexp_vjp(ctx, gm, ge=None):  # noqa: ANN001
    (_m, e) = ctx.outputs
    return (gm / e.detach().to(gm.dtype).exp2(),)


FREXP = register(OpDef(
    "frexp", "extern",
    lambda x: ((tuple(x.shape), x.dtype), (tuple(x.shape), dt.int32)),
    _frexp_eager, _frexp_vjp, num_outputs=2, save_output=True,
    tags=frozenset({"multi_output"}),
))


# ---------------------------------------------------------------------------- logcumsumexp
def _logcumsumexp_eager(x: np.ndarray, *, dim: int) -> np.ndarray:
    # PyTorch accumulates float32 (and half/bfloat16) in double on CPU
    if x.ndim == 0 or x.size == 0:
        return x.copy()
    acc = np.logaddexp.accumulate(x.astype(np.float64), axis=dim)
    return np.asarray(acc.astype(x.dtype), order="C")


_LOWEST = {"float16": -65504.0, "float32": float(np.finfo(np.float32).min),
           "float64": float(np.finfo(np.float64).min)}


def _logcumsumexp_vjp(ctx, g):  # noqa: ANN001
    """PyTorch's formula: positive and negative parts of g carried in log space."""
    if g.ndim == 0 or g.numel() == 0:
        return (g,)
    (x,) = ctx.inputs
    (out,) = ctx.outputs
    d = ctx.params["dim"]
    from ember.ops.pointwise import where_
    low = _LOWEST.get(g.dtype.name, -3.3895313892515355e38)

    def rev(t):  # noqa: ANN001, ANN202
        return bind(LOGCUMSUMEXP, t.flip(d), dim=d).flip(d)

    la = g.abs().log()
    pos = (rev(where_(g > 0, la, low) - out) + x).exp()
    neg = (rev(where_(g < 0, la, low) - out) + x).exp()
    return (pos - neg,)


LOGCUMSUMEXP = register(OpDef(
    "logcumsumexp", "scan", lambda x, *, dim: (tuple(x.shape), x.dtype),
    _logcumsumexp_eager, _logcumsumexp_vjp, save=(0,), save_output=True,
))


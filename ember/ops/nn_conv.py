"""Primitives of ``ember.nn.functional``: convolution, padding, pooling, embedding, one_hot.

Convolutions are N-d over the trailing spatial dims of an ``(N, C, *spatial)`` input and run
as im2col (a strided window view) plus one batched BLAS matmul.  ``padding`` is a tuple of
``(low, high)`` pairs per spatial dim, so ``padding='same'`` with an even kernel and the extra
right padding of ``ceil_mode`` pooling need no extra copy.

The gradient primitives close under differentiation, so double backward works:
``convolution`` -> (``conv_input_grad``, ``conv_weight_grad``), and each of those has vjps
made of the three; likewise the padding, pooling and embedding primitives come in adjoint pairs.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ember import dtypes as dt
from ember.errors import DTypeError, EmberIndexError, ShapeError
from ember.ops._util import lowp
from ember.ops.registry import OpDef, bind, register


# ---------------------------------------------------------------------------------- helpers
def conv_out_size(size: int, k: int, s: int, pad: tuple, dil: int) -> int:
    """Output length of a window sweep (floor mode)."""
    return (size + pad[0] + pad[1] - dil * (k - 1) - 1) // s + 1


def _pad_array(x: np.ndarray, padding: tuple, value: float = 0) -> np.ndarray:
    if not any(lo or hi for lo, hi in padding):
        return x
    return np.pad(x, ((0, 0), (0, 0)) + tuple(padding), constant_values=value)


def _windows(xp: np.ndarray, kernel: tuple, stride: tuple, dilation: tuple,
             out: tuple) -> np.ndarray:
    """A view ``(N, C, *out, *kernel)`` of the padded input's sliding windows."""
    d = len(kernel)
    eff = tuple((k - 1) * dl + 1 for k, dl in zip(kernel, dilation))
    v = sliding_window_view(xp, eff, axis=tuple(range(2, 2 + d)))
    sl = ((slice(None),) * 2 + tuple(slice(None, o * s, s) for o, s in zip(out, stride))
          + tuple(slice(None, None, dl) for dl in dilation))
    return v[sl]


def _cols(x: np.ndarray, kernel: tuple, p: dict, out: tuple) -> np.ndarray:
    """im2col: ``(N, G, Cg*prod(kernel), prod(out))`` (output pixels innermost, so the copy
    reads input rows contiguously and the matmul output is already NCHW)."""
    n, c = x.shape[:2]
    g, d = p["groups"], len(kernel)
    win = _windows(_pad_array(x, p["padding"]), kernel, p["stride"], p["dilation"], out)
    perm = (0, 1) + tuple(range(2 + d, 2 + 2 * d)) + tuple(range(2, 2 + d))
    return win.transpose(perm).reshape(n, g, (c // g) * math.prod(kernel), math.prod(out))


def _float_or_int(name: str, *ts) -> None:  # noqa: ANN002
    d = ts[0].dtype
    for t in ts[1:]:
        if t.dtype is not d:
            raise DTypeError(f"[{name}] primitive inputs must share a dtype; got {d.name} and "
                             f"{t.dtype.name}")
    if d is dt.bool:
        raise DTypeError(f"[{name}] does not support bool inputs")


# ---------------------------------------------------------------------------------- convolution
# a window's numbers are structure under dynamic=True (PyTorch specializes them; the C kernels'
# loops are built from them); sizes derived from the input (``out``, ``input_shape``) stay lifted
_WINDOW = frozenset({"kernel", "stride", "padding", "dilation", "groups"})


def _conv_params(p: dict) -> tuple:
    return p["stride"], p["padding"], p["dilation"], p["groups"]


def _conv_meta(x, w, **p) -> tuple:  # noqa: ANN001
    stride, padding, dilation, groups = _conv_params(p)
    d = len(stride)
    if len(x.shape) != d + 2 or len(w.shape) != d + 2:
        raise ShapeError(f"[convolution] expected {d + 2}-d input and weight; got "
                         f"{tuple(x.shape)} and {tuple(w.shape)}")
    _float_or_int("convolution", x, w)
    if x.shape[1] != w.shape[1] * groups or w.shape[0] % groups:
        raise ShapeError(f"[convolution] weight {tuple(w.shape)} does not fit input "
                         f"{tuple(x.shape)} with groups={groups}")
    out = tuple(conv_out_size(x.shape[2 + i], w.shape[2 + i], stride[i], padding[i],
                              dilation[i]) for i in range(d))
    return (x.shape[0], w.shape[0]) + out, x.dtype


def _conv_eager(x: np.ndarray, w: np.ndarray, **p) -> np.ndarray:  # noqa: ANN003
    (n, o), out = _conv_meta_np(x, w, p)
    g = p["groups"]
    cols = _cols(x, w.shape[2:], p, out)                              # (N, G, Cg*K, P)
    wm = w.reshape(g, o // g, math.prod(w.shape[1:]))                 # (G, Og, Cg*K)
    return np.matmul(wm, cols).reshape((n, o) + out)                  # (N, G, Og, P)


def _conv_meta_np(x: np.ndarray, w: np.ndarray, p: dict) -> tuple:
    stride, padding, dilation, _g = _conv_params(p)
    out = tuple(conv_out_size(x.shape[2 + i], w.shape[2 + i], stride[i], padding[i],
                              dilation[i]) for i in range(len(stride)))
    return (x.shape[0], w.shape[0]), out


def _conv_vjp(ctx, g):  # noqa: ANN001
    x, w = ctx.inputs
    p = ctx.params
    gx = gw = None
    if ctx.needs_input_grad[0]:
        gx = bind(CONV_INPUT_GRAD, g, w, input_shape=tuple(ctx.input_shapes[0]), **p)
    if ctx.needs_input_grad[1]:
        gw = bind(CONV_WEIGHT_GRAD, x, g, weight_shape=tuple(ctx.input_shapes[1]), **p)
    return gx, gw


def _conv_cropped(x, w, shape: tuple, p: dict):  # noqa: ANN001, ANN202
    """``convolution(x, w)`` cut to ``shape``: a transposed convolution with output_padding
    has inputs a convolution does not fully reach, so its adjoint sees a larger output."""
    out = bind(CONV, x, w, **p)
    if tuple(out.shape) != tuple(shape):
        pads = tuple((0, t - n) for n, t in zip(out.shape, shape))
        out = bind(CONSTANT_PAD, out, pads=pads, value=0)
    return out


def _conv_input_grad_meta(g, w, *, input_shape, **p) -> tuple:  # noqa: ANN001
    _float_or_int("conv_input_grad", g, w)
    return tuple(input_shape), g.dtype


def _conv_input_grad_eager(g: np.ndarray, w: np.ndarray, *, input_shape: tuple,
                           **p) -> np.ndarray:  # noqa: ANN003
    stride, padding, dilation, groups = _conv_params(p)
    n, c = input_shape[:2]
    o, k = w.shape[0], w.shape[2:]
    out = g.shape[2:]
    gm = g.reshape(n, groups, o // groups, math.prod(out))             # (N, G, Og, P)
    wm = w.reshape(groups, o // groups, math.prod(w.shape[1:]))
    cols = np.matmul(wm.transpose(0, 2, 1), gm)                       # (N, G, Cg*K, P)
    cols = cols.reshape((n, groups, c // groups) + k + out)
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(input_shape[2:], padding))
    gp = np.zeros((n, groups, c // groups) + padded, dtype=g.dtype)
    # col2im: one strided add per kernel offset (not per output pixel)
    for idx in np.ndindex(*k):
        sl = (slice(None),) * 3 + tuple(
            slice(i * dl, i * dl + s * (m - 1) + 1, s)
            for i, dl, s, m in zip(idx, dilation, stride, out))
        gp[sl] += cols[(slice(None),) * 3 + idx]
    crop = (slice(None),) * 3 + tuple(slice(lo, lo + s) for s, (lo, _hi) in
                                      zip(input_shape[2:], padding))
    return np.ascontiguousarray(gp[crop]).reshape(input_shape)


def _conv_input_grad_vjp(ctx, gg):  # noqa: ANN001
    g, w = ctx.inputs
    p = dict(ctx.params)
    p.pop("input_shape")
    r_g = r_w = None
    if ctx.needs_input_grad[0]:
        r_g = _conv_cropped(gg, w, ctx.input_shapes[0], p)
    if ctx.needs_input_grad[1]:
        r_w = bind(CONV_WEIGHT_GRAD, gg, g, weight_shape=tuple(ctx.input_shapes[1]), **p)
    return r_g, r_w


def _conv_weight_grad_meta(x, g, *, weight_shape, **p) -> tuple:  # noqa: ANN001
    _float_or_int("conv_weight_grad", x, g)
    return tuple(weight_shape), x.dtype


def _conv_weight_grad_eager(x: np.ndarray, g: np.ndarray, *, weight_shape: tuple,
                            **p) -> np.ndarray:  # noqa: ANN003
    groups = p["groups"]
    n, o = g.shape[:2]
    out, k = g.shape[2:], tuple(weight_shape[2:])
    cols = _cols(x, k, p, out)                                        # (N, G, Cg*K, P)
    gm = g.reshape(n, groups, o // groups, math.prod(out))            # (N, G, Og, P)
    # one GEMM per sample against the transposed columns (a BLAS flag, no copy), then a small
    # sum over the batch
    gw = np.matmul(gm, cols.transpose(0, 1, 3, 2))                    # (N, G, Og, Cg*K)
    return gw.sum(axis=0).reshape(weight_shape) if n else np.zeros(weight_shape, g.dtype)


def _conv_weight_grad_vjp(ctx, gg):  # noqa: ANN001
    x, g = ctx.inputs
    p = dict(ctx.params)
    p.pop("weight_shape")
    r_x = r_g = None
    if ctx.needs_input_grad[0]:
        r_x = bind(CONV_INPUT_GRAD, g, gg, input_shape=tuple(ctx.input_shapes[0]), **p)
    if ctx.needs_input_grad[1]:
        r_g = _conv_cropped(x, gg, ctx.input_shapes[1], p)
    return r_x, r_g


# float16/bfloat16: the half GEMM kernels (ops/_hconv.py), else widen to float32 for BLAS
_HALF_NUMS = frozenset({np.dtype(np.float16).num, dt.bfloat16.np.num})
_conv_lowp, _input_grad_lowp, _weight_grad_lowp = (
    lowp(_conv_eager), lowp(_conv_input_grad_eager), lowp(_conv_weight_grad_eager))


def _conv_any(x: np.ndarray, w: np.ndarray, **p) -> np.ndarray:  # noqa: ANN003
    if x.dtype.num in _HALF_NUMS:
        from ember.ops import _hconv  # (it imports this module)

        out = _hconv.conv(x, w, p)
        if out is not None:
            return out
    return _conv_lowp(x, w, **p)


def _input_grad_any(g: np.ndarray, w: np.ndarray, *, input_shape: tuple,
                    **p) -> np.ndarray:  # noqa: ANN003
    if g.dtype.num in _HALF_NUMS:
        from ember.ops import _hconv  # (it imports this module)

        out = _hconv.input_grad(g, w, tuple(input_shape), p)
        if out is not None:
            return out
    return _input_grad_lowp(g, w, input_shape=input_shape, **p)


def _weight_grad_any(x: np.ndarray, g: np.ndarray, *, weight_shape: tuple,
                     **p) -> np.ndarray:  # noqa: ANN003
    if x.dtype.num in _HALF_NUMS:
        from ember.ops import _hconv  # (it imports this module)

        out = _hconv.weight_grad(x, g, tuple(weight_shape), p)
        if out is not None:
            return out
    return _weight_grad_lowp(x, g, weight_shape=weight_shape, **p)


CONV = register(OpDef(
    "convolution", "extern", _conv_meta, _conv_any, _conv_vjp,
    save_for={0: (1,), 1: (0,)}, tags=frozenset({"lowp_upcast"}), static_params=_WINDOW,
    doc="N-d cross-correlation of (N, C, *S) with (O, C/groups, *K).",
    grad_name="ConvolutionBackward0",
))
CONV_INPUT_GRAD = register(OpDef(
    "conv_input_grad", "extern", _conv_input_grad_meta, _input_grad_any,
    _conv_input_grad_vjp, save_for={0: (1,), 1: (0,)}, tags=frozenset({"lowp_upcast"}),
    static_params=_WINDOW,
    doc="Gradient of convolution w.r.t. its input (a transposed convolution).",
))
CONV_WEIGHT_GRAD = register(OpDef(
    "conv_weight_grad", "extern", _conv_weight_grad_meta, _weight_grad_any,
    _conv_weight_grad_vjp, save_for={0: (1,), 1: (0,)}, tags=frozenset({"lowp_upcast"}),
    static_params=_WINDOW | {"weight_shape"}, doc="Gradient of convolution w.r.t. its weight.",
))


# ---------------------------------------------------------------------------------- padding
def _constant_pad_meta(x, *, pads: tuple, value) -> tuple:  # noqa: ANN001
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pads))
    if len(pads) != len(x.shape) or any(s < 0 for s in shape):
        raise ShapeError(f"[constant_pad] pads {pads} do not fit shape {tuple(x.shape)}")
    return shape, x.dtype


def _constant_pad_eager(x: np.ndarray, *, pads: tuple, value) -> np.ndarray:  # noqa: ANN001
    crop = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi) in zip(x.shape, pads))
    x = x[crop]
    pos = tuple((max(lo, 0), max(hi, 0)) for lo, hi in pads)
    if not any(lo or hi for lo, hi in pos):
        return np.array(x, copy=True)
    return np.pad(x, pos, constant_values=np.array(value).astype(x.dtype)[()])


def _constant_pad_vjp(ctx, g):  # noqa: ANN001
    # cropping is the adjoint of zero padding and vice versa: negate the pads
    neg = tuple((-lo, -hi) for lo, hi in ctx.params["pads"])
    return (bind(CONSTANT_PAD, g, pads=neg, value=0),)


CONSTANT_PAD = register(OpDef(
    "constant_pad", "movement", _constant_pad_meta, _constant_pad_eager, _constant_pad_vjp,
    doc="Pad (positive) or crop (negative) every dim with a constant.",
    grad_name="ConstantPadNdBackward0",
))


def pad_index(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    """Source index of each output position along one dim for a non-constant pad mode.

    reflect/replicate follow PyTorch's kernels, which take negative pads natively (they
    reflect about the original borders); circular pads are non-negative here (the frontend
    crops first, as PyTorch does)."""
    j = np.arange(n + lo + hi)
    shift = max(-lo, 0) - max(lo, 0)
    if mode == "circular":
        return (j - lo) % n
    if mode == "reflect":
        ix = np.where(j < lo, 2 * lo - j, np.where(j < n + lo, j, 2 * (n + lo - 1) - j))
    else:
        ix = np.where(j < lo, lo, np.where(j < n + lo, j, n + lo - 1))
    return ix + shift


def _index_pad_meta(x, *, pads: tuple, mode: str) -> tuple:  # noqa: ANN001
    lead = len(x.shape) - len(pads)
    shape = tuple(x.shape[:lead]) + tuple(
        n + lo + hi for n, (lo, hi) in zip(x.shape[lead:], pads))
    return shape, x.dtype


def _index_pad_eager(x: np.ndarray, *, pads: tuple, mode: str) -> np.ndarray:
    lead = x.ndim - len(pads)
    for a, (lo, hi) in enumerate(pads):
        x = np.take(x, pad_index(x.shape[lead + a], lo, hi, mode), axis=lead + a)
    return x


def _index_pad_vjp(ctx, g):  # noqa: ANN001
    return (bind(INDEX_PAD_BACKWARD, g, input_shape=tuple(ctx.input_shapes[0]), **ctx.params),)


def _index_pad_bw_meta(g, *, input_shape: tuple, pads: tuple, mode: str) -> tuple:  # noqa: ANN001
    return tuple(input_shape), g.dtype


def _index_pad_bw_eager(g: np.ndarray, *, input_shape: tuple, pads: tuple,
                        mode: str) -> np.ndarray:
    lead = g.ndim - len(pads)
    for a in reversed(range(len(pads))):
        axis = lead + a
        n = input_shape[axis]
        lo, hi = pads[a]
        # scatter-add of a gather along one axis = multiply by the 0/1 selection matrix
        sel = np.zeros((n + lo + hi, n), dtype=g.dtype)
        sel[np.arange(n + lo + hi), pad_index(n, lo, hi, mode)] = 1
        g = np.moveaxis(np.moveaxis(g, axis, -1) @ sel, -1, axis)
    return np.ascontiguousarray(g)


def _index_pad_bw_vjp(ctx, gg):  # noqa: ANN001
    p = dict(ctx.params)
    p.pop("input_shape")
    return (bind(INDEX_PAD, gg, **p),)


INDEX_PAD = register(OpDef(
    "index_pad", "index", _index_pad_meta, _index_pad_eager, _index_pad_vjp,
    static_params=frozenset({"pads"}),
    doc="reflect / replicate / circular padding of the trailing dims.",
))
INDEX_PAD_BACKWARD = register(OpDef(
    "index_pad_backward", "index", _index_pad_bw_meta, lowp(_index_pad_bw_eager),
    _index_pad_bw_vjp, static_params=frozenset({"pads"}),
    doc="Adjoint of index_pad (scatter-add of the padded gradient).",
))


# ---------------------------------------------------------------------------------- max pool
def _max_pool_meta(x, *, kernel, stride, padding, dilation, out) -> tuple:  # noqa: ANN001
    shape = tuple(x.shape[:2]) + tuple(out)
    return (shape, x.dtype), (shape, dt.int64)


def _max_pool_eager(x: np.ndarray, *, kernel, stride, padding, dilation,
                    out) -> tuple:  # noqa: ANN001
    d = len(kernel)
    spatial = x.shape[2:]
    # high padding so ceil_mode's last window fits; windows beyond ``out`` are cut off
    pads = tuple((lo, max((o - 1) * s + (k - 1) * dl + 1 - n - lo, 0))
                 for n, k, s, lo, dl, o in zip(spatial, kernel, stride, padding, dilation, out))
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    win = _windows(_pad_array(x, pads, fill), kernel, stride, dilation, out)
    flat = win.reshape(x.shape[:2] + tuple(out) + (-1,))
    am = np.argmax(flat, axis=-1)  # ties: the first maximum, as PyTorch
    if flat.dtype.kind == "f":
        nan = np.isnan(flat)
        if nan.any():  # PyTorch's scan lets every NaN replace the max: the last NaN wins
            last = flat.shape[-1] - 1 - np.argmax(nan[..., ::-1], axis=-1)
            am = np.where(nan.any(axis=-1), last, am)
    vals = np.take_along_axis(flat, am[..., None], -1)[..., 0]
    koff = np.unravel_index(am, kernel)
    index = np.zeros(am.shape, dtype=np.int64)
    for i in range(d):
        ax = [1] * am.ndim
        ax[2 + i] = out[i]
        start = (np.arange(out[i]) * stride[i] - padding[i]).reshape(ax)
        index = index * spatial[i] + start + koff[i] * dilation[i]
    return vals, index


def _max_pool_vjp(ctx, g, _gi):  # noqa: ANN001
    idx = ctx.outputs[1]
    return (bind(POOL_SCATTER, g, idx, input_shape=tuple(ctx.input_shapes[0])),)


def _pool_scatter_meta(g, idx, *, input_shape) -> tuple:  # noqa: ANN001
    return tuple(input_shape), g.dtype


def _pool_scatter_eager(g: np.ndarray, idx: np.ndarray, *, input_shape) -> np.ndarray:  # noqa: ANN001
    rows = math.prod(input_shape[:2])
    size = math.prod(input_shape[2:])
    idx = idx.reshape(rows, -1)
    w = g.reshape(rows, -1).astype(np.float64)
    bad = (idx < 0) | (idx >= size)
    if bad.any():  # a window wholly in the padding (tiny dilated inputs) has no input element
        idx, w = np.where(bad, 0, idx), np.where(bad, 0.0, w)
    flat = idx + (np.arange(rows) * size)[:, None]
    out = np.bincount(flat.ravel(), weights=w.ravel(), minlength=rows * size)
    return out.astype(g.dtype).reshape(input_shape)


def _pool_scatter_vjp(ctx, gg):  # noqa: ANN001
    _g, idx = ctx.inputs
    return bind(POOL_GATHER, gg, idx), None


def _pool_gather_meta(x, idx) -> tuple:  # noqa: ANN001
    return tuple(idx.shape), x.dtype


def _pool_gather_eager(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    lead = x.shape[:2]
    size = math.prod(x.shape[2:])
    src = x.reshape(lead + (size,))
    flat = idx.reshape(lead + (-1,))
    bad = (flat < 0) | (flat >= size)
    out = np.take_along_axis(src, np.where(bad, 0, flat), -1)
    if bad.any():
        out = np.where(bad, out.dtype.type(0), out)
    return out.reshape(idx.shape)


def _pool_gather_vjp(ctx, g):  # noqa: ANN001
    _x, idx = ctx.inputs
    return bind(POOL_SCATTER, g, idx, input_shape=tuple(ctx.input_shapes[0])), None


MAX_POOL = register(OpDef(
    "max_pool", "reduction", _max_pool_meta, lowp(_max_pool_eager), _max_pool_vjp,
    num_outputs=2, save_output=True, tags=frozenset({"multi_output"}), static_params=_WINDOW,
    doc="N-d max pooling: (values, flat spatial indices of the first maximum).",
    grad_name="MaxPool2DWithIndicesBackward0",
))
POOL_SCATTER = register(OpDef(
    "pool_scatter", "index", _pool_scatter_meta, _pool_scatter_eager, _pool_scatter_vjp,
    save=(1,), doc="Scatter-add values to flat spatial indices (max pool backward).",
))
POOL_GATHER = register(OpDef(
    "pool_gather", "index", _pool_gather_meta, _pool_gather_eager, _pool_gather_vjp,
    save=(1,), doc="Gather values at flat spatial indices (adjoint of pool_scatter).",
))


# ---------------------------------------------------------------------------------- adaptive
def adaptive_matrix(n: int, o: int) -> np.ndarray:
    """(o, n) averaging matrix: row i averages [floor(i*n/o), ceil((i+1)*n/o))."""
    i = np.arange(o)
    start = (i * n) // o
    end = -((-(i + 1) * n) // o)
    j = np.arange(n)
    mask = (j >= start[:, None]) & (j < end[:, None])
    return mask / (end - start)[:, None]


def _adaptive_meta(x, *, in_size: tuple, out_size: tuple, transpose: bool) -> tuple:  # noqa: ANN001
    d = len(in_size)
    src, dst = (out_size, in_size) if transpose else (in_size, out_size)
    if tuple(x.shape[-d:]) != tuple(src):
        raise ShapeError(f"[adaptive_avg_pool] input {tuple(x.shape)} does not end in {src}")
    return tuple(x.shape[:-d]) + tuple(dst), x.dtype


def _adaptive_eager(x: np.ndarray, *, in_size: tuple, out_size: tuple,
                    transpose: bool) -> np.ndarray:
    d = len(in_size)
    for a in range(d):
        m = adaptive_matrix(in_size[a], out_size[a]).astype(x.dtype)
        axis = x.ndim - d + a
        x = np.moveaxis(np.moveaxis(x, axis, -1) @ (m if transpose else m.T), -1, axis)
    return np.ascontiguousarray(x)


def _adaptive_vjp(ctx, g):  # noqa: ANN001
    p = ctx.params
    return (bind(ADAPTIVE_AVG_POOL, g, in_size=p["in_size"], out_size=p["out_size"],
                 transpose=not p["transpose"]),)


ADAPTIVE_AVG_POOL = register(OpDef(
    "adaptive_avg_pool", "reduction", _adaptive_meta, lowp(_adaptive_eager), _adaptive_vjp,
    static_params=frozenset({"in_size", "out_size"}),
    doc="Adaptive average pooling of the trailing dims (transpose=True is its adjoint).",
    grad_name="AdaptiveAvgPool2DBackward0",
))


# ---------------------------------------------------------------------------------- embedding
def _embedding_meta(w, idx, *, padding_idx, scale_grad_by_freq, masked) -> tuple:  # noqa: ANN001
    if len(w.shape) != 2:
        raise ShapeError(f"[embedding] weight must be 2-D; got {tuple(w.shape)}")
    return tuple(idx.shape) + (w.shape[1],), w.dtype


def _grad_scale(idx: np.ndarray, n: int, padding_idx, scale: bool) -> np.ndarray | None:  # noqa: ANN001
    """Per-index factor of the embedding gradient (0 at padding_idx, 1/count if scaled)."""
    if padding_idx is None and not scale:
        return None
    f = np.ones(idx.shape, dtype=np.float64)
    if scale:
        f = f / np.bincount(idx.ravel(), minlength=n)[idx]
    if padding_idx is not None:
        f = np.where(idx == padding_idx, 0.0, f)
    return f


def _embedding_eager(w: np.ndarray, idx: np.ndarray, *, padding_idx, scale_grad_by_freq,
                     masked) -> np.ndarray:  # noqa: ANN001
    n = w.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise EmberIndexError("[embedding] index out of range in self")
    out = np.take(w, idx, axis=0)
    if masked:
        f = _grad_scale(idx, n, padding_idx, scale_grad_by_freq)
        if f is not None:
            out = (out * f[..., None]).astype(w.dtype)
    return out


def _embedding_vjp(ctx, g):  # noqa: ANN001
    _w, idx = ctx.inputs
    p = dict(ctx.params)
    p.pop("masked")
    return bind(EMBEDDING_BACKWARD, g, idx, num_weights=ctx.input_shapes[0][0], **p), None


def _embedding_bw_meta(g, idx, *, num_weights, padding_idx, scale_grad_by_freq) -> tuple:  # noqa: ANN001
    return (num_weights, g.shape[-1]), g.dtype


def _embedding_bw_eager(g: np.ndarray, idx: np.ndarray, *, num_weights, padding_idx,
                        scale_grad_by_freq) -> np.ndarray:  # noqa: ANN001
    dim = g.shape[-1]
    rows = g.reshape(-1, dim)
    flat = idx.ravel()
    f = _grad_scale(flat, num_weights, padding_idx, scale_grad_by_freq)
    if f is not None:
        rows = rows * f.astype(rows.dtype)[:, None]
    # same-dtype add.at is ~6x faster than accumulating in a wider dtype (a cast per element);
    # half/bfloat16 accumulate in float32
    acc = np.float32 if g.dtype.kind == "V" or g.dtype == np.float16 else g.dtype
    out = np.zeros((num_weights, dim), dtype=acc)
    np.add.at(out, flat, rows.astype(acc, copy=False))
    return out.astype(g.dtype, copy=False)


def _embedding_bw_vjp(ctx, gg):  # noqa: ANN001
    _g, idx = ctx.inputs
    p = dict(ctx.params)
    p.pop("num_weights")
    return bind(EMBEDDING, gg, idx, masked=True, **p), None


EMBEDDING = register(OpDef(
    "embedding", "index", _embedding_meta, _embedding_eager, _embedding_vjp, save=(1,),
    doc="Rows of weight at integer indices (masked=True: the adjoint of embedding_backward).",
))
EMBEDDING_BACKWARD = register(OpDef(
    "embedding_backward", "index", _embedding_bw_meta, _embedding_bw_eager, _embedding_bw_vjp,
    save=(1,), doc="Scatter-add of embedding gradients into weight rows.",
    grad_name="EmbeddingBackwardBackward0",
))


# ---------------------------------------------------------------------------------- one_hot
ONE_HOT = register(OpDef(
    "one_hot", "index",
    lambda x, *, num_classes: (tuple(x.shape) + (num_classes,), dt.int64),
    lambda x, *, num_classes: (x[..., None] == np.arange(num_classes)).astype(np.int64),
    tags=frozenset({"nondifferentiable"}), doc="int64 one-hot encoding of class indices.",
))

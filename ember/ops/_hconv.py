"""Eager float16/bfloat16 convolutions on the half GEMM kernels (``_hgemm_c.gemm3``): im2col
in the half dtype (a strided window copy of 2-byte values; none for a 1x1, stride-1,
unpadded convolution, whose input is its own column matrix), then one half product with
float32 accumulation and one rounding, instead of widening input and weight to float32 for
BLAS (``lowp``).  bfloat16 runs on the AMX tiles where the CPU has them.

- forward: ``W (G, Og, Cg*K) @ cols (N, G, Cg*K, P)``, the weight shared by every sample
  (a batch stride of 0);
- input gradient: the convolution it is, split by the stride into residue classes of the
  input pixels (a polyphase split; stride 1: one class): each class is a stride-1
  convolution of ``g`` (padded or cropped) with the weight's taps that reach it, flipped,
  in and out channels swapped per group: one dot product a pixel, rounded once, no col2im.
  With at most SMALL_M input channels a group: ``W^T @ g`` per sample, then col2im, where
  the columns stay float32 when windows overlap (a pixel sums several entries in float32,
  rounded once) and are rounded directly when they cannot (kernel <= stride);
- weight gradient: one product over the batch and the pixels together, ``cols (G, Cg*K, N*P)
  @ g^T (G, N*P, Og)`` (the batch sum is part of the float32 accumulation: one rounding),
  transposed to the weight's layout.

Each function returns None where it does not apply (another dtype, a product of at most
``SMALL_M`` rows such as a depthwise convolution, empty sizes, no C compiler,
``EMBER_EAGER_C=0``); the caller keeps the widen + BLAS path, whose results are the float32
sums rounded once (so the two agree within the rounding of float32 summation order: one ulp
of the half dtype).

>>> import numpy as np
>>> x = np.ones((1, 8, 3, 3), np.float16)
>>> w = np.ones((8, 8, 1, 1), np.float16)
>>> p = dict(stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1)
>>> y = conv(x, w, p)
>>> y is None or float(y.max()) == 8.0
True
"""

from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np

from ember.ops import _half_c, _hgemm_c
from ember.ops.nn_conv import _pad_array, _windows, conv_out_size

_HALF = frozenset({np.dtype(np.float16).num, np.dtype(ml_dtypes.bfloat16).num})


def _applies(*arrays: np.ndarray) -> bool:
    d = arrays[0].dtype
    return d.num in _HALF and all(a.dtype == d for a in arrays) and \
        all(a.size for a in arrays)


def _plain(p: dict, kernel: tuple) -> bool:
    """A 1x1 convolution with unit stride and no padding (its input is its column matrix)."""
    return all(k == 1 for k in kernel) and all(s == 1 for s in p["stride"]) and \
        not any(lo or hi for lo, hi in p["padding"])


def _cols(x: np.ndarray, kernel: tuple, p: dict, out: tuple, batch_inner: bool) -> np.ndarray:
    """im2col in x's dtype: ``(N, G, Cg*K, P)``, or with ``batch_inner`` ``(G, Cg*K, N*P)``
    (the weight gradient's layout: the batch joins the pixels)."""
    n, c = x.shape[:2]
    g, d = p["groups"], len(kernel)
    win = _windows(_pad_array(x, p["padding"]), kernel, p["stride"], p["dilation"], out)
    ks, os_ = tuple(range(2 + d, 2 + 2 * d)), tuple(range(2, 2 + d))
    cgk = (c // g) * math.prod(kernel)
    if batch_inner:
        return win.transpose((1,) + ks + (0,) + os_).reshape(g, cgk, n * math.prod(out))
    return win.transpose((0, 1) + ks + os_).reshape(n, g, cgk, math.prod(out))


def _shared(a: np.ndarray, n: int) -> np.ndarray:
    """2-d ``a`` as a (n, rows, cols) batch that shares its memory (batch stride 0)."""
    return np.lib.stride_tricks.as_strided(a, (n,) + a.shape, (0,) + a.strides,
                                           writeable=False)


def _products(a: np.ndarray, b: np.ndarray, res: np.ndarray) -> bool:
    """``res[i, j] = a[j] @ b[i, j]`` for a (G, m, k) shared by all i, b (N, G, k, n), into a
    C-contiguous res (N, G, m, n): one call with the weight shared for G == 1, else one per
    sample."""
    n, g = b.shape[:2]
    if g == 1:
        return _hgemm_c.gemm3(_shared(a[0], n), b[:, 0], res[:, 0])
    return all(_hgemm_c.gemm3(a, b[i], res[i]) for i in range(n))


def conv(x: np.ndarray, w: np.ndarray, p: dict) -> np.ndarray | None:
    """``convolution(x, w)`` for float16/bfloat16 x, w: one rounding of float32 sums."""
    if not _applies(x, w):
        return None
    g, kernel = p["groups"], w.shape[2:]
    n, o = x.shape[0], w.shape[0]
    out = tuple(conv_out_size(x.shape[2 + i], kernel[i], p["stride"][i], p["padding"][i],
                              p["dilation"][i]) for i in range(len(kernel)))
    pix = math.prod(out)
    if o // g <= _hgemm_c.SMALL_M or pix <= 0:
        return None
    cols = _cols(x, kernel, p, out, False)
    res = np.empty((n, g, o // g, pix), x.dtype)
    if not _products(w.reshape(g, o // g, -1), cols, res):
        return None
    return res.reshape((n, o) + out)


def input_grad(g: np.ndarray, w: np.ndarray, input_shape: tuple, p: dict) -> np.ndarray | None:
    """``conv_input_grad(g, w)`` (a transposed convolution) for float16/bfloat16 g, w."""
    groups, kernel = p["groups"], w.shape[2:]
    n, c = input_shape[:2]
    o, out = w.shape[0], g.shape[2:]
    cgk = (c // groups) * math.prod(kernel)
    if not _applies(g, w) or cgk <= _hgemm_c.SMALL_M or 0 in input_shape:
        return None
    gm = g.reshape(n, groups, o // groups, math.prod(out))
    wt = w.reshape(groups, o // groups, cgk).transpose(0, 2, 1)       # (G, Cg*K, Og)
    if _plain(p, kernel) and tuple(out) == tuple(input_shape[2:]):
        res = np.empty((n, groups, cgk, math.prod(out)), g.dtype)
        return res.reshape(input_shape) if _products(wt, gm, res) else None
    res = _input_grad_phases(g, w, input_shape, p)
    if res is not None:
        return res
    # a pixel takes one column entry where windows cannot overlap: round the product directly
    single = all(k == 1 or (dl == 1 and k <= s)
                 for k, dl, s in zip(kernel, p["dilation"], p["stride"]))
    cols = np.empty((n, groups, cgk, math.prod(out)), g.dtype if single else np.float32)
    if not _products(wt, gm, cols):
        return None
    cols = cols.reshape((n, groups, c // groups) + tuple(kernel) + tuple(out))
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(input_shape[2:], p["padding"]))
    gp = np.zeros((n, groups, c // groups) + padded, dtype=cols.dtype)
    for idx in np.ndindex(*kernel):
        sl = (slice(None),) * 3 + tuple(
            slice(i * dl, i * dl + s * (m - 1) + 1, s)
            for i, dl, s, m in zip(idx, p["dilation"], p["stride"], out))
        if single:
            gp[sl] = cols[(slice(None),) * 3 + idx]
        else:
            gp[sl] += cols[(slice(None),) * 3 + idx]
    crop = (slice(None),) * 3 + tuple(slice(lo, lo + s) for s, (lo, _hi) in
                                      zip(input_shape[2:], p["padding"]))
    res = np.ascontiguousarray(gp[crop]).reshape(input_shape)
    return res if single else _half_c.narrow(res, g.dtype)


def _phase(n_in: int, n_out: int, k: int, s: int, dl: int, lo: int, rho: int) -> tuple | None:
    """One residue class ``rho`` (of the padded coordinate, mod the stride) of one dim of an
    input gradient: (taps, first input pixel, pixel count, (pad low, pad high) of g, the
    sub-kernel's dilation), or None when no input pixel is in the class."""
    t0, t1 = -((rho - lo) // s), (lo + n_in - 1 - rho) // s
    if t1 < t0:
        return None
    taps = [i for i in range(k) if (i * dl - rho) % s == 0]
    if not taps:
        return [], rho + s * t0 - lo, t1 - t0 + 1, (0, 0), 1
    q = [(i * dl - rho) // s for i in taps]
    dq = q[1] - q[0] if len(q) > 1 else 1
    pad_lo = q[-1] - t0
    pad_hi = (t0 - q[-1] + (t1 - t0) + (len(taps) - 1) * dq) - (n_out - 1)
    return taps, rho + s * t0 - lo, t1 - t0 + 1, (pad_lo, pad_hi), dq


def _input_grad_phases(g: np.ndarray, w: np.ndarray, input_shape: tuple,
                       p: dict) -> np.ndarray | None:
    """The input gradient as stride-1 convolutions, one per residue class of the input pixels
    mod the stride (a polyphase split; with stride 1 a single one): for each class, ``g``
    against the weight's taps that reach it, flipped, in and out channels swapped per group.
    Each pixel is one dot product (one rounding; no float32 columns, no col2im).  None where
    a class's product has at most SMALL_M rows (C/groups input channels)."""
    groups, kernel = p["groups"], tuple(w.shape[2:])
    o, cg = w.shape[:2]
    if cg <= _hgemm_c.SMALL_M:
        return None
    d = len(kernel)
    wg = w.reshape((groups, o // groups, cg) + kernel).swapaxes(1, 2)   # (G, Cg, Og, *K)
    res = np.zeros(input_shape, g.dtype)
    dims = [[ph for rho in range(s) if (ph := _phase(input_shape[2 + i], g.shape[2 + i],
                                                     kernel[i], s, p["dilation"][i],
                                                     p["padding"][i][0], rho)) is not None]
            for i, s in enumerate(p["stride"])]
    for combo in itertools.product(*dims):
        if any(not taps for taps, *_ in combo):
            continue                                   # no tap reaches these pixels: zeros
        sub = wg
        for i, (taps, *_r) in enumerate(combo):
            sub = np.take(sub, taps[::-1], axis=3 + i)
        wt = np.ascontiguousarray(sub).reshape((groups * cg, o // groups)
                                               + tuple(len(t) for t, *_ in combo))
        crop = (slice(None),) * 2 + tuple(slice(max(-lo, 0), g.shape[2 + i] - max(-hi, 0))
                                          for i, (*_a, (lo, hi), _dq) in enumerate(combo))
        pads = tuple((max(lo, 0), max(hi, 0)) for *_a, (lo, hi), _dq in combo)
        part = conv(g[crop], wt,
                    dict(stride=(1,) * d, padding=pads, groups=groups,
                         dilation=tuple(dq for *_a, dq in combo)))
        if part is None or part.shape[2:] != tuple(cnt for _t, _f, cnt, *_b in combo):
            return None
        dst = (slice(None),) * 2 + tuple(slice(f, f + s * (cnt - 1) + 1, s) for (
            _t, f, cnt, *_b), s in zip(combo, p["stride"]))
        res[dst] = part
    return res


def weight_grad(x: np.ndarray, g: np.ndarray, weight_shape: tuple,
                p: dict) -> np.ndarray | None:
    """``conv_weight_grad(x, g)`` for float16/bfloat16 x, g: the batch and pixel sums in one
    float32 accumulation, rounded once.  Computed transposed, ``cols (G, Cg*K, N*P) @ g^T``,
    then the small result transposed (measured: the weight's Cg*K rows feed the kernels
    better than its Og rows, float16 ~1.3x)."""
    groups = p["groups"]
    n, o = g.shape[:2]
    out, kernel = g.shape[2:], tuple(weight_shape[2:])
    og, pix = o // groups, math.prod(g.shape[2:])
    cgk = math.prod(weight_shape[1:])
    if not _applies(x, g) or cgk <= _hgemm_c.SMALL_M or 0 in weight_shape:
        return None
    cols = _cols(x, kernel, p, out, True)                              # (G, Cg*K, N*P)
    gt = g.reshape(n, groups, og, pix).transpose(1, 2, 0, 3).reshape(groups, og, n * pix)
    res = np.empty((groups, cgk, og), x.dtype)
    if not _hgemm_c.gemm3(cols, gt.transpose(0, 2, 1), res):
        return None
    return np.ascontiguousarray(res.transpose(0, 2, 1)).reshape(weight_shape)


__all__ = ["conv", "input_grad", "weight_grad"]

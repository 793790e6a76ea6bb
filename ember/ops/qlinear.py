"""``qlinear_dynamic``: the int8 dynamic-quantized Linear (PyTorch's x86 / fbgemm
``quantized::linear_dynamic``) as ONE op, so that ``ember.compile`` records it in the graph
and the C backend lowers it (``ember/compiler/c/lower/qlinear.py``) instead of breaking there.

``qlinear_dynamic(x, wdata, colsum, wscale, bias, m=, k=, per_row=, reduce_range=,
has_bias=)``: ``x`` (..., K) float32 (its leading dims are the N rows); ``wdata`` the int8
weight packed once at quantize time (``ember/ops/_qlinear_c.pack_weight``: (Mp/16, Kp/4,
16, 4)); ``colsum`` (Mp,) int32 the weight rows' code sums; ``wscale`` and ``bias`` (Mp,)
float32 (padded; ``bias`` is ignored unless ``has_bias``).  Per call: the input's min/max
(whole input, or per row with ``per_row``) give uint8 scales and zero points by ATen's
``ChooseQuantizationParams`` (``reduce_range``: codes in [0, 127]);
``out = fma(float(sum_k (xq - zx) * wq), sx * sw, bias)``, (..., M) float32.  The eager
kernel is ``_qlinear_c`` (C, packed, VNNI) or, without a C compiler, exact float32 BLAS over
1024-wide slices of K (see ``ember.ao.quantization``).
Not differentiable (PyTorch's dynamic quantized Linear is inference only).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import dtypes as dt
from ember.errors import DTypeError, ShapeError
from ember.ops import _qlinear_c
from ember.ops._fma import fma
from ember.ops.registry import OpDef, register

K_BLOCK = 1024                # 1024 * 127 * 128 < 2**24: float32 sums of a block are exact
SMALL_SCALE = np.float32(6.1e-5)


def quantize_array(x: np.ndarray, scale: Any, zero_point: Any, qmin: int, qmax: int,
                   np_dtype: Any) -> np.ndarray:
    """float32 ``x`` to integer codes (fbgemm's legacy rounding: zero point added before
    rounding); ``scale``/``zero_point`` scalars or arrays broadcasting against ``x``."""
    x = np.asarray(x, np.float32)
    inv = np.float32(1.0) / np.asarray(scale, dtype=np.float32)
    zp = np.asarray(zero_point, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.rint(fma(x, np.broadcast_to(inv, x.shape), np.broadcast_to(zp, x.shape)))
    return np.clip(v, qmin, qmax).astype(np_dtype)


def choose_qparams(mn: float, mx: float, qmin: int, qmax: int,
                   reduce_range: bool) -> tuple[np.float32, int]:
    """ATen's ``ChooseQuantizationParams`` (no sparsity preservation, no power-of-two); the C
    lowering's ``ember_q8_qparams`` (codegen/csrc/qlinear_graph.h) repeats these steps."""
    if reduce_range:
        qmin, qmax = qmin // 2, qmax // 2
    mn, mx = np.float32(min(mn, 0.0)), np.float32(max(mx, 0.0))
    scale = (float(mx) - float(mn)) / (qmax - qmin)
    with np.errstate(divide="ignore", over="ignore"):
        if np.float32(scale) == 0 or math.isinf(np.float32(1) / np.float32(scale)):
            scale = 0.1
    if scale < SMALL_SCALE:
        org = np.float32(scale)
        scale = float(SMALL_SCALE)
        if mn == 0:
            mx = np.float32(SMALL_SCALE * np.float32(qmax - qmin))
        elif mx == 0:
            mn = np.float32(-SMALL_SCALE * np.float32(qmax - qmin))
        else:
            amp = np.float32(SMALL_SCALE / org)
            mn, mx = np.float32(mn * amp), np.float32(mx * amp)
    z_min, z_max = qmin - float(mn) / scale, qmax - float(mx) / scale
    e_min = abs(qmin) - abs(float(mn) / scale)
    e_max = abs(qmax) - abs(float(mx) / scale)
    z0 = z_min if e_min < e_max else z_max
    zp = qmin if z0 < qmin else qmax if z0 > qmax else int(np.rint(z0))
    return np.float32(scale), zp


def choose_qparams_rows(mn: np.ndarray, mx: np.ndarray, qmin: int, qmax: int,
                        reduce_range: bool) -> tuple[np.ndarray, np.ndarray]:
    """``choose_qparams`` of every row at once (the same float64/float32 steps, vectorized):
    float32 scales and int64 zero points of shape ``mn.shape``."""
    if reduce_range:
        qmin, qmax = qmin // 2, qmax // 2
    mn = np.minimum(mn.astype(np.float32), np.float32(0))
    mx = np.maximum(mx.astype(np.float32), np.float32(0))
    scale = (mx.astype(np.float64) - mn.astype(np.float64)) / (qmax - qmin)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        s32 = scale.astype(np.float32)
        scale = np.where((s32 == 0) | np.isinf(np.float32(1) / s32), 0.1, scale)
        small = scale < SMALL_SCALE
        if small.any():
            org = scale.astype(np.float32)
            lim = np.float32(SMALL_SCALE * np.float32(qmax - qmin))
            amp = (SMALL_SCALE / org).astype(np.float32)
            mn2 = np.where(mx == 0, -lim, np.where(mn == 0, mn, (mn * amp).astype(np.float32)))
            mx2 = np.where(mn == 0, lim, np.where(mx == 0, mx, (mx * amp).astype(np.float32)))
            mn, mx = np.where(small, mn2, mn), np.where(small, mx2, mx)
            scale = np.where(small, float(SMALL_SCALE), scale)
        fmn, fmx = mn.astype(np.float64) / scale, mx.astype(np.float64) / scale
        z_min, z_max = qmin - fmn, qmax - fmx
        e_min, e_max = abs(qmin) - np.abs(fmn), abs(qmax) - np.abs(fmx)
        z0 = np.where(e_min < e_max, z_min, z_max)
        zp = np.where(z0 < qmin, qmin, np.where(z0 > qmax, qmax, np.rint(z0)))
    return scale.astype(np.float32), zp.astype(np.int64)


def int_matmul(xc: np.ndarray, w_t: np.ndarray) -> np.ndarray:
    """Exact ``xc @ w_t`` of small integers held in float32, rounded once to float32."""
    k = xc.shape[1]
    if k <= K_BLOCK:
        return xc @ w_t
    acc = np.zeros((xc.shape[0], w_t.shape[1]), np.float64)
    for k0 in range(0, k, K_BLOCK):
        acc += xc[:, k0:k0 + K_BLOCK] @ w_t[k0:k0 + K_BLOCK]
    return acc.astype(np.float32)


def input_qparams(x: np.ndarray, per_row: bool, reduce_range: bool) -> tuple[Any, Any]:
    """The input's scale(s) and zero point(s): one pair (PyTorch) or one per row."""
    if per_row:
        if x.shape[1] == 0:
            lo = hi = np.zeros(x.shape[0], np.float32)
        else:
            mm = _qlinear_c.minmax_rows(x)
            lo, hi = (x.min(axis=1), x.max(axis=1)) if mm is None else mm
        return choose_qparams_rows(lo, hi, 0, 255, reduce_range)
    if x.size == 0:
        mn = mx = 0.0
    else:
        mm = _qlinear_c.minmax(x)
        mn, mx = (float(x.min()), float(x.max())) if mm is None else mm
    return choose_qparams(mn, mx, 0, 255, reduce_range)


def linear_packed(x: np.ndarray, w: _qlinear_c.Packed, wscale: Any, bias: np.ndarray | None,
                  reduce_range: bool = True, per_row: bool = False,
                  w_t: Any = None) -> np.ndarray:
    """``x`` (N, K) float32 times the packed int8 weight ``w`` (scale ``wscale``: scalar or
    (M,)), plus ``bias`` (M,) or None: (N, M) float32.  ``w_t``: a callable giving the codes
    transposed as float32 (K, M) for the NumPy path (unpacked from ``w`` when None)."""
    x = np.ascontiguousarray(x, np.float32)
    qmax = 127 if reduce_range else 255
    sx, zx = input_qparams(x, per_row, reduce_range)
    if x.shape[0] > 0:
        out = _qlinear_c.run(x, sx, zx, qmax, w, wscale, bias)
        if out is not None:
            return out
    sxc, zxc = (sx[:, None], zx[:, None]) if per_row else (sx, zx)
    mult = np.asarray(np.float32(sxc) * np.asarray(wscale, np.float32), np.float32)
    xc = quantize_array(x, sxc, zxc, 0, qmax, np.float32)
    xc -= np.asarray(zxc, np.float32)
    wt = _qlinear_c.unpack_weight(w).T.astype(np.float32) if w_t is None else w_t()
    acc = np.ascontiguousarray(int_matmul(xc, wt), dtype=np.float32)
    if bias is None:
        return acc * mult
    return fma(acc, np.broadcast_to(mult, acc.shape), np.broadcast_to(
        np.asarray(bias, np.float32), acc.shape), out=acc)


def _meta(x, wdata, colsum, wscale, bias, *, m: int, k: int, per_row: bool,  # noqa: ANN001
          reduce_range: bool, has_bias: bool) -> tuple:
    """(..., m) float32 from x (..., k) float32 and the packed weight's tensors."""
    if x.dtype is not dt.float32 or wdata.dtype is not dt.int8 or colsum.dtype is not dt.int32 \
            or wscale.dtype is not dt.float32 or bias.dtype is not dt.float32:
        raise DTypeError(f"[qlinear_dynamic] expected float32 x, int8 wdata, int32 colsum, "
                         f"float32 wscale and bias; got {x.dtype}, {wdata.dtype}, "
                         f"{colsum.dtype}, {wscale.dtype}, {bias.dtype}")
    if len(x.shape) < 1 or x.shape[-1] != k or len(wdata.shape) != 4:
        raise ShapeError(f"[qlinear_dynamic] expected x (..., {k}) and a packed 4-D weight, got "
                         f"{tuple(x.shape)} and {tuple(wdata.shape)}")
    mp = wdata.shape[0] * _qlinear_c.BLOCK
    if mp < m or any(tuple(t.shape) != (mp,) for t in (colsum, wscale, bias)):
        raise ShapeError(f"[qlinear_dynamic] colsum, wscale and bias must have shape ({mp},) "
                         f"for a packed weight of {m} columns")
    return tuple(x.shape[:-1]) + (m,), dt.float32


def _eager(x: np.ndarray, wdata: np.ndarray, colsum: np.ndarray, wscale: np.ndarray,
           bias: np.ndarray, *, m: int, k: int, per_row: bool, reduce_range: bool,
           has_bias: bool) -> np.ndarray:
    w = _qlinear_c.Packed(np.ascontiguousarray(wdata), np.ascontiguousarray(colsum), m, k)
    out = linear_packed(x.reshape(math.prod(x.shape[:-1]), k), w, wscale[:m],
                        bias[:m] if has_bias else None, reduce_range, per_row)
    return out.reshape(x.shape[:-1] + (m,))


QLINEAR_DYNAMIC = register(OpDef(
    "qlinear_dynamic", "extern", _meta, _eager, None,
    tags=frozenset({"nondifferentiable"}),
    static_params=frozenset({"m", "k"}),
    doc="int8 dynamic-quantized linear on a packed weight (PyTorch's quantized::"
        "linear_dynamic): input quantized per call (per tensor or per row), int32 sums, "
        "fma(sum, sx * sw, bias) in float32.",
))

__all__ = ["QLINEAR_DYNAMIC", "choose_qparams", "choose_qparams_rows", "input_qparams",
           "int_matmul", "linear_packed", "quantize_array"]

"""The eager kernel of int8 dynamic linear, bit for bit PyTorch's x86 (fbgemm) one.

PyTorch (``quantized::linear_dynamic``, ``reduce_range=True`` on x86) per call: the input's
min/max (widened to contain 0) give a uint8 scale and zero point by ATen's
``ChooseQuantizationParams`` over [0, 127]; the input is quantized with fbgemm's rounding
(``nearbyint(fma(x, 1/scale, zero_point))``);
``raw = sum_k (xq - zx) * wq`` in int32; the output is ``float(raw) * (sx * sw) + bias`` with
one rounding (the AVX2 requantization's ``fmadd``).

ember runs ``ember/ops/_qlinear_c`` (a fixed C kernel on a weight packed once: AVX512-VNNI /
AVX-VNNI ``vpdpbusd`` or AVX-512BW / AVX2 ``vpmaddubsw``/``vpmaddwd``, the fbgemm instructions,
input quantization fused) when it could be built.  Otherwise it gets the same int32 sums from
float32 BLAS: every ``|xq - zx| <= 127`` and ``|wq| <= 128``, so a block of 1024 products
sums below 2**24 and each float32 GEMM over a 1024-wide slice of K is exact; slices are added
in float64 (exact) and rounded to float32 once, as fbgemm's int32-to-float conversion does.
The epilogue uses ``ember.ops._fma``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember.ao.quantization.qtensor import quantize_array
from ember.ops import _qlinear_c
from ember.ops._fma import fma

K_BLOCK = 1024                # 1024 * 127 * 128 < 2**24: float32 sums of a block are exact
_SMALL_SCALE = np.float32(6.1e-5)


def choose_qparams(mn: float, mx: float, qmin: int, qmax: int,
                   reduce_range: bool) -> tuple[np.float32, int]:
    """ATen's ``ChooseQuantizationParams`` (no sparsity preservation, no power-of-two)."""
    if reduce_range:
        qmin, qmax = qmin // 2, qmax // 2
    mn, mx = np.float32(min(mn, 0.0)), np.float32(max(mx, 0.0))
    scale = (float(mx) - float(mn)) / (qmax - qmin)
    with np.errstate(divide="ignore", over="ignore"):
        if np.float32(scale) == 0 or math.isinf(np.float32(1) / np.float32(scale)):
            scale = 0.1
    if scale < _SMALL_SCALE:
        org = np.float32(scale)
        scale = float(_SMALL_SCALE)
        if mn == 0:
            mx = np.float32(_SMALL_SCALE * np.float32(qmax - qmin))
        elif mx == 0:
            mn = np.float32(-_SMALL_SCALE * np.float32(qmax - qmin))
        else:
            amp = np.float32(_SMALL_SCALE / org)
            mn, mx = np.float32(mn * amp), np.float32(mx * amp)
    z_min, z_max = qmin - float(mn) / scale, qmax - float(mx) / scale
    e_min = abs(qmin) - abs(float(mn) / scale)
    e_max = abs(qmax) - abs(float(mx) / scale)
    z0 = z_min if e_min < e_max else z_max
    zp = qmin if z0 < qmin else qmax if z0 > qmax else int(np.rint(z0))
    return np.float32(scale), zp


def int_matmul(xc: np.ndarray, w_t: np.ndarray) -> np.ndarray:
    """Exact ``xc @ w_t`` of small integers held in float32, rounded once to float32."""
    k = xc.shape[1]
    if k <= K_BLOCK:
        return xc @ w_t
    acc = np.zeros((xc.shape[0], w_t.shape[1]), np.float64)
    for k0 in range(0, k, K_BLOCK):
        acc += xc[:, k0:k0 + K_BLOCK] @ w_t[k0:k0 + K_BLOCK]
    return acc.astype(np.float32)


class PackedWeight:
    """A weight prepared once: int8 codes (M, K), float32 scale (scalar or (M,)), the codes'
    row sums (int32, for the activation zero point), and for the NumPy path the codes transposed
    as float32 (made on first use only)."""

    def __init__(self, codes: np.ndarray, scale: Any) -> None:
        self.codes = np.ascontiguousarray(codes, dtype=np.int8)
        self.scale = scale
        self.colsum = self.codes.sum(axis=1, dtype=np.int64).astype(np.int32)
        self.packed = _qlinear_c.pack_weight(self.codes)      # the C kernel's layout, once
        self._w_t: np.ndarray | None = None

    def w_t(self) -> np.ndarray:
        if self._w_t is None:
            self._w_t = np.ascontiguousarray(self.codes.T, dtype=np.float32)
        return self._w_t


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
        small = scale < _SMALL_SCALE
        if small.any():
            org = scale.astype(np.float32)
            lim = np.float32(_SMALL_SCALE * np.float32(qmax - qmin))
            amp = (_SMALL_SCALE / org).astype(np.float32)
            mn2 = np.where(mx == 0, -lim, np.where(mn == 0, mn, (mn * amp).astype(np.float32)))
            mx2 = np.where(mn == 0, lim, np.where(mx == 0, mx, (mx * amp).astype(np.float32)))
            mn, mx = np.where(small, mn2, mn), np.where(small, mx2, mx)
            scale = np.where(small, float(_SMALL_SCALE), scale)
        fmn, fmx = mn.astype(np.float64) / scale, mx.astype(np.float64) / scale
        z_min, z_max = qmin - fmn, qmax - fmx
        e_min, e_max = abs(qmin) - np.abs(fmn), abs(qmax) - np.abs(fmx)
        z0 = np.where(e_min < e_max, z_min, z_max)
        zp = np.where(z0 < qmin, qmin, np.where(z0 > qmax, qmax, np.rint(z0)))
    return scale.astype(np.float32), zp.astype(np.int64)


def linear_dynamic(x: np.ndarray, w: PackedWeight, bias: np.ndarray | None,
                   reduce_range: bool = True, per_row: bool = False) -> np.ndarray:
    """``x`` (N, K) float32 times the packed int8 weight, plus ``bias`` float32 (M,) or None.
    ``per_row``: each row of ``x`` gets its own scale and zero point (per token) instead of
    PyTorch's one pair for the whole input.  Returns (N, M) float32."""
    x = np.ascontiguousarray(x, np.float32)
    qmax = 127 if reduce_range else 255
    if per_row:
        if x.shape[1] == 0:
            lo = hi = np.zeros(x.shape[0], np.float32)
        else:
            mm = _qlinear_c.minmax_rows(x)
            lo, hi = (x.min(axis=1), x.max(axis=1)) if mm is None else mm
        sx, zx = choose_qparams_rows(lo, hi, 0, 255, reduce_range)
        sxc, zxc = sx[:, None], zx[:, None]
    else:
        if x.size == 0:
            mn = mx = 0.0
        else:
            mm = _qlinear_c.minmax(x)
            mn, mx = (float(x.min()), float(x.max())) if mm is None else mm
        sx, zx = choose_qparams(mn, mx, 0, 255, reduce_range)
        sxc, zxc = sx, zx
    if x.shape[0] > 0:
        out = _qlinear_c.run(x, sx, zx, qmax, w.packed, w.scale, bias)
        if out is not None:
            return out
    mult = np.asarray(np.float32(sxc) * np.asarray(w.scale, np.float32), np.float32)
    xc = quantize_array(x, sxc, zxc, 0, qmax, np.float32)
    xc -= np.asarray(zxc, np.float32)
    acc = np.ascontiguousarray(int_matmul(xc, w.w_t()), dtype=np.float32)
    if bias is None:
        return acc * mult
    return fma(acc, np.broadcast_to(mult, acc.shape), np.broadcast_to(
        np.asarray(bias, np.float32), acc.shape), out=acc)

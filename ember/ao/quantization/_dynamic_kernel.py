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

from typing import Any

import numpy as np

from ember.ops import _qlinear_c
from ember.ops.qlinear import (  # noqa: F401  (the numeric core lives with the op)
    K_BLOCK,
    choose_qparams,
    choose_qparams_rows,
    int_matmul,
    linear_packed,
)


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


def linear_dynamic(x: np.ndarray, w: PackedWeight, bias: np.ndarray | None,
                   reduce_range: bool = True, per_row: bool = False) -> np.ndarray:
    """``x`` (N, K) float32 times the packed int8 weight, plus ``bias`` float32 (M,) or None.
    ``per_row``: each row of ``x`` gets its own scale and zero point (per token) instead of
    PyTorch's one pair for the whole input.  Returns (N, M) float32."""
    return linear_packed(x, w.packed, w.scale, bias, reduce_range, per_row, w.w_t)

"""Ops that are separable gathers with weights -> the ``ResampleKernel`` of ``lower/resample.py``.

* ``adaptive_avg_pool`` (``F.adaptive_avg_pool1d/2d``) and its adjoint (``transpose=True``,
  the backward): per pooled dim, output ``o`` sums the inputs of its window
  ``[floor(o*n/m), ceil((o+1)*n/m))`` times ``1/size`` (eager's averaging matrix, whose rows
  are these taps); the adjoint gathers, for each input, the outputs whose window holds it, in
  increasing order.  Dims run in eager's order (first pooled dim first).
* ``index_pad`` (``F.pad`` with ``reflect``/``replicate``/``circular``): a gather per padded
  dim of eager's ``pad_index`` table; ``index_pad_backward`` gathers, for each input position,
  the padded positions that copied it (in increasing order, weight 1), last dim first as eager.
  A gather, not a scatter: deterministic and thread-safe.

Both run float32 for float32/float16/bfloat16 (rounded once) and float64 for float64, as
eager's ``lowp`` kernels.  Eager multiplies by the 0/1 or averaging matrix with BLAS, so the
sums may differ from eager in the last bit (the weights and terms are the same).  Pooled or
padded dims must be static; the leading (batch, channel) dims may be runtime sizes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.compiler.c.lower.context import LoweringContext, has_sym
from ember.compiler.c.lower.registry import lowering
from ember.compiler.c.lower.resample import _compute_name, emit_tap_kernel, tap_operand
from ember.ops import OPS
from ember.ops import nn_resize as R
from ember.ops.nn_conv import pad_index


@lowering(OPS.adaptive_avg_pool)
def lower_adaptive_avg_pool(lw: LoweringContext, i: int, n: Any) -> str | None:
    """``adaptive_avg_pool`` (either direction) as one ``ResampleKernel``."""
    p = n.params
    nd = len(p["in_size"])
    if has_sym(p["in_size"]) or has_sym(p["out_size"]):
        return "runtime pooled sizes"
    src, dst = (p["out_size"], p["in_size"]) if p["transpose"] else (p["in_size"], p["out_size"])
    got = tap_operand(lw, n, nd, tuple(src), tuple(dst))
    if isinstance(got, str):
        return got
    x, out_shape, dt = got
    if not dt.is_floating_point:
        return f"dtype {dt.name}"
    cname = _compute_name(dt)
    table = R.transposed_taps if p["transpose"] else R.taps
    passes = [(a,) + table("area", p["in_size"][a], p["out_size"][a], False, None, cname)
              for a in range(nd)]
    return emit_tap_kernel(lw, i, n, x, nd, out_shape, passes, bool(p["transpose"]))


@lowering(OPS.index_pad, backward=False)
@lowering(OPS.index_pad_backward, backward=True)
def lower_index_pad(lw: LoweringContext, i: int, n: Any, backward: bool) -> str | None:
    """``index_pad`` as one gathering ``ResampleKernel``; its backward as a weighted one."""
    p = n.params
    pads, nd = tuple(p["pads"]), len(p["pads"])
    if has_sym(pads):
        return "runtime pads"
    got = tap_operand(lw, n, nd)
    if isinstance(got, str):
        return got
    x, out_shape, dt = got
    if backward and not dt.is_floating_point:
        return f"dtype {dt.name}"
    sizes = out_shape[len(out_shape) - nd:] if backward else tuple(x.geom.shape)[-nd:]
    cname = _compute_name(dt)
    passes = []
    for a in (reversed(range(nd)) if backward else range(nd)):
        lo, hi = pads[a]
        idx = pad_index(sizes[a], lo, hi, p["mode"])[None, :].astype(np.intp)
        if backward:
            passes.append((a,) + R.transpose_table(idx, None, sizes[a], cname))
        else:
            passes.append((a, idx, None))
    return emit_tap_kernel(lw, i, n, x, nd, out_shape, passes, backward)


__all__ = ["lower_adaptive_avg_pool", "lower_index_pad"]

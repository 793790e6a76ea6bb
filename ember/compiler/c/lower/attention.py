"""``scaled_dot_product_attention`` and its fused backward -> ONE ``AttentionKernel`` each.

The kernel runs the eager formulas (``ember/ops/attention.py``) one (batch, head) at a time,
spread over ``ember_num_threads`` pthreads (single-threaded BLAS inside, as eager's per-head
split does), in blocks of ``codegen.attention.BLOCK_ROWS`` query rows:

* forward: ``s = (q k^T) * scale + mask``; safe softmax per row (a row max that is not finite
  becomes 0, a row whose exp-sum is 0 stays 0); ``out = p v``;
* backward (first-order, ``scaled_dot_product_attention_backward``): ``p`` recomputed,
  ``gv += p^T g``; ``gp = g v^T``; ``gs = (gp - rowsum(gp * p)) * p``; ``gq = scale gs k``;
  ``gk += scale gs^T q``; the mask's gradient is ``gs`` (zeros without a mask), written only
  when the graph uses it.

Products are BLAS sgemm/dgemm calls (NumPy's OpenBLAS, ``build/blas.py``; a plain loop without
BLAS).  The kernel is data (``ir/kernels.py``), its C is ``codegen/attention.py``.
Key columns whose mask is ``-inf`` to the end of every row of a block are not computed (their
probabilities are exactly 0): a causal mask costs about half the products.  Differences from
eager: row sums are accumulated in double (eager: NumPy's pairwise float sums), blocks of rows
sum ``gk``/``gv`` in pieces, and non-finite ``q``/``k``/``v`` values at skipped (fully masked)
key positions do not reach the result (in eager ``0 * inf`` gives NaN there).

Lowered: float32/float64 (float16/bfloat16 on operands widened to float32, each result
rounded once, ``_lower_half``) with static or runtime sizes (the job's sizes and strides are C
expressions over the entry's runtime ints), ``q``/``k``/``v`` (and the mask, of ``q``'s dtype)
read through their strides (a strided operand that BLAS cannot take is copied per head).  An
allocation failure makes the entry return 1 and the graph reruns eagerly.
"""

from __future__ import annotations

from typing import Any

from ember import dtypes
from ember.compiler.c.ir.kernels import ATTENTION_MAX_BATCH_DIMS as MAX_BATCH_DIMS
from ember.compiler.c.ir.kernels import (
    AttentionKernel,
    MatOperand,
)
from ember.compiler.c.ir.loop_ir import (
    Geometry,
)
from ember.compiler.c.lower import gemm as _gemm
from ember.compiler.c.lower import half_operands
from ember.compiler.c.lower.context import LoweringContext, is_ref, log
from ember.compiler.c.lower.registry import lowering
from ember.ops import OPS

_FLOATS = ("float32", "float64")
_HALVES = ("float16", "bfloat16")


@lowering(OPS.scaled_dot_product_attention, backward=False)
@lowering(OPS.scaled_dot_product_attention_backward, backward=True)
def lower_attention(lw: LoweringContext, i: int, n: Any, backward: bool) -> str | None:
    """Lower node ``i`` (sdpa or its backward) into ``lw``'s open segment; None, or why not."""
    args = list(n.args)
    if any(a is not None and not is_ref(a) for a in args):
        return "a non-tensor operand"
    refs = [a for a in args if a is not None]
    if "ember_exp" not in lw.helpers:
        return "C helper ember_exp not in the prelude"
    dt = lw.dtype_of(refs[0])
    if any(lw.dtype_of(r) != dt for r in refs):
        return "operands of several dtypes"
    if dt.np.name in _HALVES:
        return _lower_half(lw, i, n, refs, dt, backward)
    if dt.np.name not in _FLOATS:
        return "not float16/bfloat16/float32/float64 operands"
    if any(s[1] != dt for s in n.specs):
        return "mixed dtypes"
    scale = n.params.get("scale")
    if type(scale) not in (int, float):
        return "symbolic scale"
    mats = [lw.in_memory(r) for r in refs]
    if any(m is None for m in mats):
        return "an operand is not in memory"
    return _emit(lw, i, n, mats, dt, backward)


def _lower_half(lw: LoweringContext, i: int, n: Any, refs: list, dt: Any,
                backward: bool) -> str | None:
    """float16/bfloat16 as eager's ``_sdpa_lowp`` / ``_sdpa_bwd_lowp``: operands widened to
    float32 (exact), the float32 kernel (forward: rounding the unnormalized probabilities to
    ``dt`` before ``p v`` when the op takes PyTorch's flash path), each result rounded once to
    ``dt``."""
    if any(s[1] != dt for s in n.specs):
        return "mixed dtypes"
    if type(n.params.get("scale")) not in (int, float):
        return "symbolic scale"
    mats = [lw.in_memory(r) for r in refs]
    if any(m is None for m in mats):
        return "an operand is not in memory"
    lw.close_group()
    seg = lw.open_segment()
    before = len(seg.kernels)
    # forward: q, k, v read as they are (each head widened in the kernel's scratch, no float32
    # copies); the mask and the backward's operands through float32 copies
    mats = [_gemm._to_float32(lw, m) if backward or j >= 3 else m for j, m in enumerate(mats)]
    flash = bool(n.params.get("flash", False)) and not backward
    why = _emit(lw, i, n, mats, dtypes.float32, backward,
                round_p=(2 if dt.np.name == "float16" else 1) if flash else 0)
    if why is None:
        for j in range(4 if backward else 1):
            if ("n", i, j) in lw.vals:      # (the mask's gradient only when it is read)
                half_operands.round_to_group(lw, i, dt, f"to_{dt.np.name}", j)
    else:   # an extern after all: drop the conversions
        lw.stats.kernels -= len(seg.kernels) - before
        del seg.kernels[before:]
    return why


def _emit(lw: LoweringContext, i: int, n: Any, mats: list, dt: Any, backward: bool,
          round_p: int = 0) -> str | None:
    """The AttentionKernel of node ``i`` over the in-memory operands ``mats``; None, or why
    not."""
    scale = n.params.get("scale")
    if backward:
        g, q, k, v, *rest = mats
    else:
        q, k, v, *rest = mats
        g = None
    mask = rest[0] if rest else None
    qs, ks, vs = q.geom.shape, k.geom.shape, v.geom.shape
    batch = tuple(qs[:-2])
    if len(batch) > MAX_BATCH_DIMS:
        return f"more than {MAX_BATCH_DIMS} batch dims"
    if len(qs) < 2 or tuple(ks[:-2]) != batch or tuple(vs[:-2]) != batch:
        return "unequal batch dims"
    n_l, n_e, n_s, n_ev = qs[-2], qs[-1], ks[-2], vs[-1]
    if g is not None and tuple(g.geom.shape) != batch + (n_l, n_ev):
        return "gradient shape"
    if mask is not None and tuple(mask.geom.shape) != batch + (n_l, n_s):
        return "mask shape"

    def operand(m: Any) -> MatOperand:
        st = tuple(m.geom.strides)
        return MatOperand(m.buf, m.geom.offset, st[:-2], st[-2], st[-1])

    lw.close_group()
    lw.open_segment()
    kname = lw.kernel_name()
    shapes = [batch + (n_l, n_e), batch + (n_s, n_e), batch + (n_s, n_ev),
              batch + (n_l, n_s)] if backward else [batch + (n_l, n_ev)]
    outs: list = []
    for j, shape in enumerate(shapes):
        ref = ("n", i, j)
        if backward and j == 3 and ref not in lw.outputs and ref not in lw.uses:
            outs.append(None)  # the mask's gradient nobody reads
            continue
        b = lw.buffer(dt, shape, "temp")
        outs.append(b)
        lw.bind(i, j, b, Geometry.contiguous(shape), dt)
    ak = AttentionKernel(kname, backward, operand(q), operand(k), operand(v),
                         None if mask is None else operand(mask),
                         None if g is None else operand(g), outs, batch, n_l, n_s, n_e, n_ev,
                         float(scale), [n.op.name], round_p=round_p)
    lw.add_kernel(ak)
    log("fusion", f"{kname}: {n.op.name} as one attention kernel, batch {list(batch)}, "
           f"L={n_l} S={n_s} E={n_e} Ev={n_ev}", 3)
    return None


__all__ = ["lower_attention"]

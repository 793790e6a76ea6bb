"""``flex_attention_fused`` (``ember/ops/flex.py``) -> ONE ``FlexAttentionKernel``.

The node carries the traced ``score_mod``/``mask_mod`` (``FlexExpr``s of registry ops with a
``c_expr``, plus ``flex_load`` reads of captured tensors); they are inlined as C statements into
the attention template (``codegen/flex.py``, ``csrc/flex_attention.c.in``): q-block x kv-block
tiles following the BlockMask's ``kv_num_blocks``/``kv_indices`` (partial blocks through
``mask_mod``) and ``full_kv_num_blocks``/``full_kv_indices`` (no ``mask_mod``), online softmax,
GQA by indexing (key head ``h // G``, no copies), captured tensors read in place, OpenMP over
batch x heads x q-blocks (x key partitions).

Flash-decoding: when the query is short (``L <= DECODE_MAX_L``) and there are few work items
(``B * HQ * ceil(L / QB) < DECODE_MAX_ITEMS``), the listed kv blocks of each row block are split
into partitions of about ``PARTITION_SIZE`` keys (a kernel option, default 128) computed in
parallel and merged by log-sum-exp.

Lowered: float32/float64 q/k/v of one dtype with static sizes, int32 BlockMask tensors,
captured tensors of a C dtype.  Anything else stays an extern (the node's eager kernel).
"""

# ruff: noqa: N803, N806

from __future__ import annotations

import re
from typing import Any

from ember.compiler.c.ir.kernels import FlexAttentionKernel, FlexOperand
from ember.compiler.c.ir.loop_ir import CTYPES, Geometry
from ember.compiler.c.lower.context import LoweringContext, is_ref, log
from ember.compiler.c.lower.registry import lowering
from ember.ops import OPS
from ember.ops.registry import REGISTRY

DECODE_MAX_L = 64
DECODE_MAX_ITEMS = 64
MAX_SPLITS = 256


def _operand(m: Any, ndim: int) -> FlexOperand | None:
    g = m.geom
    vals = tuple(g.shape) + tuple(g.strides) + (g.offset,)
    if len(g.shape) != ndim or any(type(x) is not int for x in vals):
        return None
    strides = tuple(0 if n == 1 else st for n, st in zip(g.shape, g.strides))
    return FlexOperand(m.buf, g.offset, strides, tuple(g.shape))


def _params_reason(lw: Any, p: dict) -> str | None:
    """Why the forward or backward node's parameters keep it out of C (a symbolic scale or
    tile size, a mod C cannot express), else None."""
    if type(p["scale"]) is not float:
        return "symbolic scale"
    if any(type(x) is not int for x in p["block"]):
        return "symbolic tile sizes"
    for expr in (p["score"], p["mask"]):
        why = _mod_reason(lw, expr)
        if why:
            return why
    return None


def _mod_reason(lw: LoweringContext, expr: Any) -> str | None:
    if expr is None:
        return None
    for op, _args, params, out_name in expr.nodes:
        if out_name not in ("float32", "float64", "int32", "int64", "bool"):
            return f"a traced mod computes {out_name}"
        if op == "flex_load":
            continue
        tmpl = REGISTRY[op].c_template(dict(params))
        if tmpl is None:
            return f"traced mod op {op} has no C expression"
        missing = set(re.findall(r"\b(ember_\w+)\s*\(", tmpl)) - lw.helpers
        if missing:
            return f"C helper {', '.join(sorted(missing))} not in the prelude"
        if any(type(v) not in (int, float, bool) and k != "dtype" for k, v in params):
            return f"traced mod op {op} has a non-number parameter"
    return None


def _splits(B: int, HQ: int, L: int, S: int, QB: int, KB: int, partition: int) -> int:
    nq = -(-L // QB)
    if L > DECODE_MAX_L or B * HQ * nq >= DECODE_MAX_ITEMS:
        return 1
    keys = max(int(partition), KB)
    return max(1, min(MAX_SPLITS, -(-S // keys)))


@lowering(OPS.flex_attention_fused)
def lower_flex(lw: LoweringContext, i: int, n: Any) -> str | None:
    """Lower node ``i`` into one FlexAttentionKernel; None, or why not."""
    p = n.params
    args = list(n.args)
    if any(a is not None and not is_ref(a) for a in args):
        return "a non-tensor operand"
    if "ember_exp" not in lw.helpers or "ember_log" not in lw.helpers:
        return "C helpers ember_exp/ember_log not in the prelude"
    dt = lw.dtype_of(args[0])
    if dt.np.name not in ("float32", "float64") or any(lw.dtype_of(a) != dt for a in args[:3]):
        return "not float32/float64 q/k/v of one dtype"
    if any(a is not None and lw.dtype_of(a).np.name != "int32" for a in args[3:7]):
        return "BlockMask tensors that are not int32"
    if any(lw.dtype_of(a).np.name not in CTYPES for a in args[7:]):
        return "a captured tensor without a C type"
    why = _params_reason(lw, p)
    if why:
        return why
    mats = [None if a is None else lw.in_memory(a) for a in args]
    if any(m is None for a, m in zip(args, mats) if a is not None):
        return "an operand is not in memory"
    ndims = [4, 4, 4, 3, 4, 3, 4] + [None] * (len(args) - 7)
    ops = []
    for m, nd in zip(mats, ndims):
        if m is None:
            ops.append(None)
            continue
        o = _operand(m, nd if nd is not None else len(m.geom.shape))
        if o is None:
            return "dynamic sizes or an unexpected rank"
        ops.append(o)
    q, k, v = ops[:3]
    B, HQ, L, E = q.shape
    _, HKV, S, EV = v.shape
    QB, KB = int(p["block"][0]), int(p["block"][1])
    splits = _splits(B, HQ, L, S, QB, KB, getattr(p["block"], "partition", 128))
    lw.close_group()
    lw.open_segment()
    outs = []
    for j, (shape, odt) in enumerate(n.specs):
        b = lw.buffer(odt, tuple(shape), "temp")
        outs.append(b)
        lw.bind(i, j, b, Geometry.contiguous(tuple(shape)), odt)
    kname = lw.kernel_name()
    blocks = tuple(ops[3:7]) if p["has_full"] else (ops[3], ops[4], None, None)
    fk = FlexAttentionKernel(kname, q, k, v, blocks, tuple(ops[7:]), outs, B, HQ, HKV, L, S, E,
                             EV, QB, KB, float(p["scale"]), p["score"], p["mask"], splits,
                             [n.op.name])
    lw.add_kernel(fk)
    log("fusion", f"{kname}: flex_attention as one kernel, B={B} HQ={HQ} HKV={HKV} L={L} "
           f"S={S} E={E} tiles {QB}x{KB} splits={splits}", 3)
    return None





@lowering(OPS.flex_attention_fused_backward)
def lower_flex_backward(lw: LoweringContext, i: int, n: Any) -> str | None:
    """Lower the backward node ``i`` into one backward FlexAttentionKernel; None, or why not."""
    from ember.ops.flex import grad_reason

    p = n.params
    args = list(n.args)
    if any(a is not None and not is_ref(a) for a in args):
        return "a non-tensor operand"
    if "ember_exp" not in lw.helpers:
        return "C helper ember_exp not in the prelude"
    dt = lw.dtype_of(args[0])
    if dt.np.name not in ("float32", "float64") or any(
            a is not None and lw.dtype_of(a) != dt for a in args[:7]):
        return "not float32/float64 operands of one dtype"
    if any(a is not None and lw.dtype_of(a).np.name != "int32" for a in args[7:11]):
        return "BlockMask tensors that are not int32"
    caps = args[11:]
    if any(lw.dtype_of(a).np.name not in CTYPES for a in caps):
        return "a captured tensor without a C type"
    if any(lw.dtype_of(caps[c]) != dt for c in p["grad_caps"]):
        return "a captured tensor needing a gradient in another dtype than q"
    why = _params_reason(lw, p)
    if why:
        return why
    why = grad_reason(p["score"], tuple(p["grad_caps"]))
    if why:
        return why
    mats = [None if a is None else lw.in_memory(a) for a in args]
    if any(m is None for a, m in zip(args, mats) if a is not None):
        return "an operand is not in memory"
    ndims = [4, 4, 4, 4, 3, 4, 3, 3, 4, 3, 4] + [None] * len(caps)
    ops: list = []
    for m, nd in zip(mats, ndims):
        o = None if m is None else _operand(m, nd if nd is not None else len(m.geom.shape))
        if m is not None and o is None:
            return "dynamic sizes or an unexpected rank"
        ops.append(o)
    q, k, v, out, lse, g_out, g_lse = ops[:7]
    B, HQ, L, E = q.shape
    _, HKV, S, EV = v.shape
    QB, KB = int(p["block"][0]), int(p["block"][1])
    lw.close_group()
    lw.open_segment()
    outs = []
    for j, (shape, odt) in enumerate(n.specs):
        b = lw.buffer(odt, tuple(shape), "temp")
        outs.append(b)
        lw.bind(i, j, b, Geometry.contiguous(tuple(shape)), odt)
    kname = lw.kernel_name()
    blocks = tuple(ops[7:11]) if p["has_full"] else (ops[7], ops[8], None, None)
    fk = FlexAttentionKernel(kname, q, k, v, blocks, tuple(ops[11:]), outs, B, HQ, HKV, L, S,
                             E, EV, QB, KB, float(p["scale"]), p["score"], p["mask"], 1,
                             [n.op.name], backward=True, grads=(out, lse, g_out, g_lse),
                             grad_caps=tuple(p["grad_caps"]))
    lw.add_kernel(fk)
    log("fusion", f"{kname}: flex_attention backward as one kernel, B={B} HQ={HQ} HKV={HKV} "
           f"L={L} S={S} E={E} tiles {QB}x{KB}", 3)
    return None
__all__ = ["DECODE_MAX_ITEMS", "DECODE_MAX_L", "lower_flex", "lower_flex_backward"]

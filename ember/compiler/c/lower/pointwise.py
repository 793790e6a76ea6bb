"""Pointwise ops -> the open fusion group (the rule for every op of kind ``pointwise``).

A pointwise op with a ``c_expr`` (its OpDef's; ``OpDef.c_template``) over supported dtypes joins
the open fusion group when it iterates the same shape; its value is a typed local (a register)
and is stored to a buffer only when something outside the group needs it.  float16/bfloat16
values are held in float inside the group and rounded where they leave their dtype.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ember.compiler.c.codegen.prelude import lowp_variants, pasted_helpers
from ember.compiler.c.ir.loop_ir import (
    COMPUTE_CTYPES,
    CTYPES,
    STORAGE_CTYPES,
    Const,
    Geometry,
    Index,
    Kernel,
    Let,
    Op,
    PointCheck,
    Store,
    contiguous_strides,
    is_lowp,
    order_strides,
    round_expr,
)
from ember.compiler.c.lower.context import (
    Group,
    LoweringContext,
    PointwiseValue,
    c_ordered,
    c_scalar,
    has_sym,
    is_ref,
)
from ember.compiler.c.lower.registry import OpSet, OpTable, lowering_for_kind
from ember.compiler.frontend.graph import Sym
from ember.config import config
from ember.ops import OPS

# integer division by zero raises in eager (data-dependent): for integer operands the kernel
# checks the divisor (a ``PointCheck``: the entry returns 1, the driver reruns the graph
# eagerly and eager raises its own error)
_INT_ZERO_RAISES = OpSet([OPS.div_trunc, OPS.div_floor, OPS.remainder, OPS.fmod])
# float classification of integer or bool inputs is constant (C's isnan rejects integers)
_INT_CLASSIFY = OpTable([(OPS.isnan, "0"), (OPS.isinf, "0"), (OPS.isfinite, "1"),
                         (OPS.isposinf, "0"), (OPS.isneginf, "0")])


def helpers_in(prelude: str) -> frozenset:
    """The ``ember_*`` names a prelude defines (functions or macros)."""
    return frozenset(re.findall(r"\b(ember_\w+)\s*\(", prelude)) | pasted_helpers(prelude)


@lowering_for_kind("pointwise")
def lower_pointwise(lw: LoweringContext, i: int, n: Any) -> str | None:
    """Node ``i`` as a local of the open group; None, or why it stays an extern."""
    reason = _pointwise_reason(lw, n)
    if reason is None:
        _pointwise(lw, i, n)
    return reason


def _pointwise_reason(lw: LoweringContext, n: Any) -> str | None:
    op = n.op
    tmpl = _template(lw, n)
    if tmpl is None:
        return "pointwise op without a c_expr"
    if len(n.specs) != 1:
        return "multi-output pointwise op"
    tensors = [a for a in n.args if is_ref(a)]
    if not tensors:
        return "no tensor input"
    for r in tensors:
        d = lw.dtype_of(r)
        if d.np.name not in STORAGE_CTYPES:
            return f"dtype {d.name} (no C storage type)"
    if n.specs[0][1].np.name not in STORAGE_CTYPES:
        return f"output dtype {n.specs[0][1].name}"
    missing = set(re.findall(r"\b(ember_\w+)\s*\(", tmpl)) - lw.helpers
    if missing:
        return f"C helper {', '.join(sorted(missing))} not in the prelude"
    fields = set(re.findall(r"\{([A-Za-z_]\w*)\}", tmpl))
    fields.discard("T")  # the compute C type, filled in by the lowering
    extra = set(n.params) - fields - {op.c_selector}
    if extra:
        return f"parameter {', '.join(sorted(extra))} not in its c_expr"
    for k in fields:
        v = n.params.get(k)
        if k != "dtype" and not (type(v) in (int, float, bool) or type(v) is Sym):
            return f"parameter {k}={v!r}"
    return None


def _template(lw: LoweringContext, n: Any) -> str | None:
    op = n.op
    tensors = [a for a in n.args if is_ref(a)]
    floating = bool(tensors) and lw.dtype_of(tensors[0]).is_floating_point
    if op in _INT_CLASSIFY and not floating:
        return _INT_CLASSIFY[op]
    if op is OPS.bitwise_not and n.specs[0][1].np.name == "bool":
        return "(!{0})"  # ~ on a C bool is never false
    tmpl = op.c_template(n.params)
    if tmpl is not None and tensors and is_lowp(lw.dtype_of(tensors[0])):
        tmpl = lowp_variants(tmpl, lw.dtype_of(tensors[0]).np.name)
    return tmpl


def _pointwise(lw: LoweringContext, i: int, n: Any) -> None:
    tensors = [a for a in n.args if is_ref(a)]
    shape = lw.shape_of(tensors[0])
    out_dt = n.specs[0][1]
    # scalars take the type of the value operands (where's cond is bool, its x/y are not)
    in_dt = next((lw.dtype_of(r) for r in tensors if lw.dtype_of(r) == out_dt),
                 lw.dtype_of(tensors[0]))
    g = lw.join_group(shape, tensors)
    ct = COMPUTE_CTYPES[in_dt.np.name]
    args = []
    for a in n.args:
        if is_ref(a):
            args.append(_lowp_operand(lw, g, a, out_dt))
        else:
            args.append(Const(c_scalar(a, ct)))
    params = [("T", ct)]
    for k, v in n.params.items():
        if k == "dtype":  # a cast to float16/bfloat16 rounds once, from double (below)
            params.append((k, "double" if is_lowp(v) else CTYPES[v.np.name]))
        elif k != n.op.c_selector:
            # a float kernel's params are doubles (as prelude.render_c_expr renders them):
            # the template converts them where eager does (ember_like / ember_as) and keeps
            # double where eager computes with the Python float
            params.append((k, c_scalar(v, "double" if ct in ("float", "double") else ct)))
    if n.op in _INT_ZERO_RAISES and not in_dt.is_floating_point:
        # eager raises on an integer zero divisor: the kernel reports it (the error word)
        g.body.append(PointCheck(Op("check", "({1} == 0)", tuple(args))))
    name = g.local()
    tmpl = _template(lw, n)
    injected = injected_bug(n.op.name)
    if injected == "compile_error":  # an undeclared name: gcc rejects the unit
        tmpl = "(ember_injected_compile_error_TESTING_ONLY + " + tmpl + ")"
    elif injected == "accuracy":  # off by one
        tmpl = "((" + tmpl + ") + ({T})1)"
    elif injected == "runtime_error":  # the kernel reports an error eager does not raise
        g.body.append(PointCheck(Op("check", "1", ())))
    expr: Any = Op(n.op.name, tmpl, tuple(args), tuple(params))
    if is_lowp(out_dt) and in_dt != out_dt:  # a cast to float16/bfloat16 rounds
        expr = Op("round", round_expr(out_dt, "{0}"), (expr,))
    g.body.append(Let(name, COMPUTE_CTYPES[out_dt.np.name], expr))
    lw.add_value(g, i, name, shape, out_dt, eager_layout(lw, n, shape, tensors), n.op.name)


def injected_bug(op_name: str) -> str | None:
    """TESTS ONLY (``config.inject_bug_testing_only``, EMBER_INJECT_BUG_TESTING_ONLY): the kind
    of deliberate miscompile (``compile_error``, ``runtime_error``, ``accuracy``) for ``op_name``,
    else None.  The minifier's tests use it (PyTorch's ``inject_relu_bug_TESTING_ONLY``)."""
    spec = config.inject_bug_testing_only
    if not spec:
        return None
    kind, _, op = spec.partition(":")
    return kind if (op or "relu") == op_name else None


def fill_outputs(lw: LoweringContext, i: int, n: Any, fill: str = "0") -> None:
    """Bind every output of node ``i`` to a fresh buffer that one kernel fills with the C
    constant ``fill`` (compute type).  For an empty result (a 0 in each output's static shape)
    the kernel runs no iteration: nothing is computed and the buffer is defined for the
    verifier and the memory plan.  Rules for ops whose empty result needs no work (``sort``,
    ``index``, ``cat``, ...) or whose result on an empty input is a constant (``median``: NaN)
    call it instead of their kernel."""
    lw.close_group()
    for j, (shape, dt) in enumerate(n.specs):
        shape = tuple(shape)
        buf = lw.buffer(dt, shape, "temp")
        loop_vars = [f"i{d}" for d in range(len(shape))]
        index = Index(0, tuple(zip(loop_vars, contiguous_strides(shape))))
        lw.add_kernel(Kernel(lw.kernel_name(), shape, [Store(buf, index, Const(fill))],
                             ops=[n.op.name]))
        lw.bind(i, j, buf, Geometry.contiguous(shape), dt)


def _lowp_operand(lw: LoweringContext, g: Group, r: tuple, out_dt: Any) -> Any:
    """The operand ``r``; a float16/bfloat16 value computed in the group is held in float
    without rounding (as torch.compile does; eager rounds after every op), and is rounded
    to its dtype where it leaves that dtype (a cast, a comparison), as eager sees it."""
    x = lw.operand(g, r)
    d = lw.dtype_of(r)
    if is_lowp(d) and d != out_dt and isinstance(lw.vals[r], PointwiseValue):
        return Op("round", round_expr(d, "{0}"), (x,))
    return x


def eager_layout(lw: LoweringContext, n: Any, shape: tuple, tensors: list) -> tuple:
    """Element strides of the node's output in eager's memory order (NumPy keeps its
    operands' order, as PyTorch does): contiguous unless an operand is permuted."""
    contig = contiguous_strides(shape)
    ops = []
    for r in tensors:
        v = lw.vals[r]
        ops.append(v.strides if isinstance(v, PointwiseValue) else v.geom.strides)
    if all(c_ordered(st, shape) for st in ops) or any(type(x) is not int for st in ops
                                                        for x in st + shape):
        return contig
    try:
        order = _probe_order(n, shape, ops, [lw.dtype_of(r) for r in tensors])
    except Exception:  # noqa: BLE001 - a kernel that rejects the stand-ins: C order
        return contig
    if order is None:
        return contig
    return order_strides(shape, order)


def _probe_order(n: Any, shape: tuple, strides: list, dtypes: list) -> list | None:
    """Dims from slowest to fastest of the output the node's eager kernel makes from small
    stand-ins laid out like its operands (2 per dim; broadcast dims stay stride 0)."""
    if has_sym(n.params) or any(type(a) is Sym for a in n.args):
        return None
    small = tuple(1 if m == 1 else 2 for m in shape)
    it = iter(zip(strides, dtypes))
    args = []
    for a in n.args:
        if not is_ref(a):
            args.append(a)
            continue
        st, dt = next(it)
        if dt.np.name not in STORAGE_CTYPES:
            return None
        npdt = np.dtype(dt.np)
        order = sorted(range(len(shape)), key=lambda d: -abs(st[d]))
        sst = [0] * len(shape)
        acc = 1
        for d in reversed(order):
            if st[d] != 0:
                sst[d] = acc
                acc *= small[d]
        base = np.ones(acc, npdt)
        args.append(np.lib.stride_tricks.as_strided(
            base, small, tuple(x * npdt.itemsize for x in sst)))
    with np.errstate(all="ignore"):
        out = n.op.eager(*args, **n.params)
    if not isinstance(out, np.ndarray) or out.shape != small:
        return None
    return sorted(range(len(shape)), key=lambda d: -out.strides[d])


__all__ = ["eager_layout", "fill_outputs", "helpers_in", "lower_pointwise"]

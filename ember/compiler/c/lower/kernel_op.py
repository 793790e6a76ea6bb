"""``kernel_launch`` nodes (``ember.kernel`` launches, e.g. inside a ``triton_op``) ->
``UserKernel``: the kernel's own C, compiled by ``ember.kernel``'s compiler for the launch's
types, placed inside the graph's translation unit and called from the entry (no extern).

Operands are read in place when they sit contiguously in their buffer (a value of the open
pointwise group is stored by the group first; another layout stays an extern, with that
reason).  Each tensor the kernel stores to gets a fresh output buffer that starts as a copy of
its input value, unless the launch recorded it as fresh (an ``empty``/``empty_like`` made by
the traced code: no input at all), so the graph's inputs are never written.  Scalar
arguments are concrete in a graph and become C literals; a lifted (symbolic) scalar or size
keeps the node an extern.
"""

from __future__ import annotations

from typing import Any

from ember.compiler.c.codegen.prelude import c_literal
from ember.compiler.c.ir.kernels import UserKernel
from ember.compiler.c.ir.loop_ir import Geometry
from ember.compiler.c.lower.context import LoweringContext, PointwiseValue, log
from ember.compiler.c.lower.registry import lowering
from ember.kernel._trace import KERNEL_LAUNCH, bound_of, full_operands


def _operand(lw: LoweringContext, r: Any) -> Any:
    """The operand's (buffer, offset), or the reason it cannot be passed in place."""
    if not (type(r) is tuple and r and r[0] in ("i", "n")) or r not in lw.vals:
        return "operand not lowered"
    lw.materialize([r])
    v = lw.vals[r]
    if isinstance(v, PointwiseValue):
        if v.group is not lw.group:
            return "operand in a reduction's prologue"
        lw.store_buffer(r, v)
        lw.close_group()
        v = lw.vals[r]
    elif lw.group is not None and id(v.buf) in lw.group.writes:
        lw.close_group()
    g = v.geom
    if not all(type(n) is int for n in tuple(g.shape) + tuple(g.strides)) or \
            type(g.offset) is not int:
        return "symbolic operand geometry"
    if g.strides != Geometry.contiguous(g.shape).strides and any(n > 1 for n in g.shape):
        return "non-contiguous operand"
    if v.buf.strides is not None and any(n > 1 for n in g.shape) and \
            v.buf.strides != Geometry.contiguous(v.buf.shape).strides:
        return "operand buffer in a permuted layout"
    return v.buf, g.offset


@lowering(KERNEL_LAUNCH)
def lower_kernel_launch(lw: LoweringContext, i: int, n: Any) -> str | None:
    """Lower launch node ``i`` to a ``UserKernel``; None, or why it stays an extern."""
    from ember.kernel._front import kernel_c
    p = n.params
    if any(k in ("int", "float") and type(v) not in (int, float) for _, k, v in p["args"]):
        return "symbolic scalar argument"
    if any(type(x) is not int for x in p["grid"]):
        return "symbolic grid"
    # the values of int arguments are this graph's: literals in the C (masks and strides fold)
    ints = {name: v for name, kind, v in p["args"] if kind == "int"}
    try:
        source, grid_fn, cparams, _ = kernel_c(p["kernel"], bound_of(p["args"]), ints=ints)
    except Exception as e:  # noqa: BLE001 - eager raises the same error when it runs
        return f"kernel does not compile ({type(e).__name__})"
    ins = []
    for r in n.args:
        got = _operand(lw, r)
        if isinstance(got, str):
            return got
        ins.append(got + (r,))
    # fresh (uninitialized) outputs are no inputs of the node: None here
    operands = full_operands(tuple(ins), p.get("fresh", ()), lambda shape, dt: None)
    lw.open_segment()
    outs, copies, by_param = [], [], {}
    for j, (k, (shape, dt)) in enumerate(zip(p["outs"], n.specs)):
        shape = tuple(shape)
        buf = lw.buffer(dt, shape, "temp")
        lw.bind(i, j, buf, Geometry.contiguous(shape), dt)
        outs.append(buf)
        by_param[k] = buf
        if operands[k] is not None:  # None: a fresh (uninitialized) tensor, nothing to copy
            copies.append((buf, operands[k][0], operands[k][1]))
    args, names, k = [], [], 0
    for name, kind, value in p["args"]:
        if kind != "constexpr":
            names.append(name)
        if kind == "tensor":
            args.append(("buf", by_param[k], 0) if k in by_param else
                        ("buf",) + tuple(operands[k][:2]))
            k += 1
        elif kind == "int":
            args.append(("lit", c_literal(int(value))))
        elif kind == "float":
            args.append(("lit", f"(float){c_literal(float(value))}"))
    kern = UserKernel(lw.kernel_name(), source, grid_fn, tuple(p["grid"]), args, outs, copies,
                      [f"kernel_launch({p['kernel'].__name__})"], names,
                      (p["kernel"], bound_of(p["args"]), ints))
    lw.add_kernel(kern)
    log("fusion", f"{kern.name}: ember.kernel {p['kernel'].__name__} grid {list(p['grid'])}",
        3)
    del cparams
    return None


__all__ = ["lower_kernel_launch"]

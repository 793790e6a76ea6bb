"""``kernel_launch`` nodes (``ember.kernel`` launches, e.g. inside a ``triton_op``) ->
``UserKernel``: the kernel's own C, compiled by ``ember.kernel``'s compiler for the launch's
types, placed inside the graph's translation unit and called from the entry (no extern).

Operands are read in place when they sit contiguously in their buffer (a value of the open
pointwise group is stored by the group first; another layout stays an extern, with that
reason).  Each tensor the kernel stores to gets a fresh output buffer that starts as a copy of
its input value, unless the launch recorded it as fresh (an ``empty``/``empty_like`` made by
the traced code: no input at all), so the graph's inputs are never written.

An int argument known when the graph is built becomes a C literal (masks such as
``cols < n`` and row strides fold: the static fast path).  A lifted one (a size under dynamic
shapes or in an exported program, a Python scalar that changed between calls) and a lifted
grid size are read from the entry's runtime ``ints``/``floats`` on every call, so one build
serves every size; operand offsets and buffer sizes may then be symbolic too.
"""

from __future__ import annotations

from typing import Any

from ember.compiler.c.codegen.prelude import c_literal
from ember.compiler.c.ir.kernels import UserKernel
from ember.compiler.c.ir.loop_ir import Geometry, contiguous_strides
from ember.compiler.c.lower.context import (
    LoweringContext,
    PointwiseValue,
    c_scalar,
    log,
    size_of,
)
from ember.compiler.c.lower.registry import lowering
from ember.compiler.frontend.graph import Sym
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
    # a size-1 dim's stride never matters; a symbolic size may be 1 at run time, so the
    # strides of a symbolic shape must be the contiguous ones exactly
    if any(s != c for s, c, m in zip(g.strides, contiguous_strides(g.shape), g.shape)
           if m != 1):
        return "non-contiguous operand"
    if v.buf.strides is not None and any(m != 1 for m in g.shape) and \
            v.buf.strides != contiguous_strides(v.buf.shape):
        return "operand buffer in a permuted layout"
    return v.buf, g.offset, tuple(g.shape)


def _scalar_text(v: Any, kind: str) -> str:
    """C text of an int/float argument or grid size: a literal, or the runtime value of a
    lifted one (``s<k>`` for an int, declared by the entry; ``floats[k]`` for a float)."""
    if kind == "int":
        return size_of(v) if type(v) is Sym else c_literal(int(v))
    return c_scalar(v, "float") if type(v) is Sym else f"(float){c_literal(float(v))}"


def _outputs(lw: LoweringContext, i: int, p: dict, operands: list) -> tuple:
    """A fresh buffer per stored tensor (its shape from the params or the operand: a dynamic
    graph's node specs hold one call's sizes), and the copies that fill the non-fresh ones."""
    from ember import dtypes as _dt
    specs = dict(zip(p["fresh"], p["fresh_specs"]))
    outs, copies, by_param = [], [], {}
    for j, k in enumerate(p["outs"]):
        if k in specs:
            shape, dt = tuple(size_of(d) for d in specs[k][0]), _dt.by_name(specs[k][1])
        else:
            shape, dt = operands[k][2], operands[k][3]
        buf = lw.buffer(dt, shape, "temp")
        lw.bind(i, j, buf, Geometry.contiguous(shape), dt)
        outs.append(buf)
        by_param[k] = buf
        if k not in specs:  # a fresh (uninitialized) tensor has nothing to copy
            copies.append((buf, operands[k][0], operands[k][1]))
    return outs, copies, by_param


@lowering(KERNEL_LAUNCH)
def lower_kernel_launch(lw: LoweringContext, i: int, n: Any) -> str | None:
    """Lower launch node ``i`` to a ``UserKernel``; None, or why it stays an extern."""
    from ember.kernel._front import kernel_c
    p = n.params
    bound = bound_of(p["args"], p["scalars"])
    # int arguments known now: literals in the C (masks and strides fold); lifted ones stay
    # parameters of the kernel, read at run time
    ints = {a.name: a.value for a in bound if a.kind == "int" and type(a.value) is int}
    try:
        source, grid_fn, _, _ = kernel_c(p["kernel"], bound, ints=ints)
    except Exception as e:  # noqa: BLE001 - eager raises the same error when it runs
        return f"kernel does not compile ({type(e).__name__})"
    ins = []
    for r in n.args:
        got = _operand(lw, r)
        if isinstance(got, str):
            return got
        ins.append(got + (lw.vals[r].dtype, r))
    # fresh (uninitialized) outputs are no inputs of the node: None here
    operands = full_operands(tuple(ins), p["fresh"], p["fresh_specs"], lambda shape, dt: None)
    lw.open_segment()
    outs, copies, by_param = _outputs(lw, i, p, operands)
    args, names, k = [], [], 0
    for a in bound:
        if a.kind != "constexpr":
            names.append(a.name)
        if a.kind == "tensor":
            args.append(("buf", by_param[k], 0) if k in by_param else
                        ("buf",) + tuple(operands[k][:2]))
            k += 1
        elif a.kind in ("int", "float"):
            args.append(("lit", _scalar_text(a.value, a.kind)))
    grid = tuple(size_of(g) for g in p["grid"])   # an int, or the runtime size s<k>
    kern = UserKernel(lw.kernel_name(), source, grid_fn, grid, args, outs, copies,
                      [f"kernel_launch({p['kernel'].__name__})"], names,
                      (p["kernel"], bound, ints))
    lw.add_kernel(kern)
    log("fusion", f"{kern.name}: ember.kernel {p['kernel'].__name__} grid {list(grid)}", 3)
    return None


__all__ = ["lower_kernel_launch"]

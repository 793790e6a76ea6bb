"""Pointwise primitives: arithmetic, casts, and math functions.

Each entry is one OpDef; tensor inputs share shape and dtype (the frontend broadcasts and
promotes first), Python scalars may stand for an input.  Gradients are written with tensor
methods.
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.ops._util import lowp, pointwise_meta
from ember.ops.registry import OpDef, register


def _is_float(d: dt.dtype) -> bool:
    return d.is_floating_point


# ---------------------------------------------------------------------------------- casts
def _convert_meta(x, *, dtype: dt.dtype) -> tuple:  # noqa: ANN001
    return x.shape, dtype


def _convert_eager(x: np.ndarray, *, dtype: dt.dtype) -> np.ndarray:
    if x.dtype == dtype.np:
        return x.copy()
    if dtype is dt.bool:
        return x != 0
    if x.dtype.kind == "f" and dtype.category == 1:
        # float -> int truncates toward zero; go through float64 so bf16/f16 sources work
        with np.errstate(invalid="ignore"):
            return np.trunc(x.astype(np.float64)).astype(dtype.np)
    return x.astype(dtype.np)


def _convert_vjp(ctx, g):  # noqa: ANN001
    return (g.to(ctx.input_dtypes[0]),)


CONVERT = register(OpDef(
    "convert_element_type", "pointwise", _convert_meta, _convert_eager, _convert_vjp,
    c_expr="(({dtype}){0})", doc="Cast to another dtype (a copy).", grad_name="ToCopyBackward0",
))


# ---------------------------------------------------------------------------------- binary
def _binary(name: str, fn, vjp, save=(0, 1), c_expr=None, accepts=None, accepts_doc="",
            out_dtype=None, tags=frozenset(), grad_name="", save_for=None):  # noqa: ANN001
    return register(OpDef(
        name, "pointwise", pointwise_meta(name, out_dtype, accepts, accepts_doc), fn, vjp,
        tags=tags, save=save, c_expr=c_expr, grad_name=grad_name, save_for=save_for,
    ))


def _add_vjp(ctx, g):  # noqa: ANN001
    n0, n1 = ctx.needs_input_grad
    return (g if n0 else None, g if n1 else None)


def _sub_vjp(ctx, g):  # noqa: ANN001
    n0, n1 = ctx.needs_input_grad
    return (g if n0 else None, -g if n1 else None)


def _mul_vjp(ctx, g):  # noqa: ANN001
    a, b = ctx.inputs
    n0, n1 = ctx.needs_input_grad
    return (g * b if n0 else None, g * a if n1 else None)


def _div_vjp(ctx, g):  # noqa: ANN001
    a, b = ctx.inputs
    n0, n1 = ctx.needs_input_grad
    ga = g / b if n0 else None
    gb = -g * a / (b * b) if n1 else None
    return (ga, gb)


ADD = _binary("add", lowp(np.add), _add_vjp, save=(), c_expr="({0} + {1})")
SUB = _binary("sub", lowp(np.subtract), _sub_vjp, save=(), c_expr="({0} - {1})")
MUL = _binary("mul", lowp(np.multiply), _mul_vjp, c_expr="({0} * {1})",
              save_for={0: (1,), 1: (0,)})
DIV = _binary("div", lowp(np.true_divide), _div_vjp, c_expr="({0} / {1})",
              save_for={0: (1,), 1: (0, 1)},
              accepts=_is_float, accepts_doc="a floating dtype (the frontend promotes integers)")


# ---------------------------------------------------------------------------------- unary
def _unary(name: str, fn, vjp, save=(0,), save_output=False, c_expr=None, accepts=None,
           accepts_doc="", out_dtype=None, tags=frozenset(), grad_name=""):  # noqa: ANN001
    return register(OpDef(
        name, "pointwise", pointwise_meta(name, out_dtype, accepts, accepts_doc), fn, vjp,
        tags=tags, save=save, save_output=save_output, c_expr=c_expr, grad_name=grad_name,
    ))


NEG = _unary("neg", lowp(np.negative), lambda ctx, g: (-g,), save=(), c_expr="(-{0})")
EXP = _unary("exp", lowp(np.exp), lambda ctx, g: (g * ctx.outputs[0],), save=(),
             save_output=True, c_expr="exp({0})", accepts=_is_float,
             accepts_doc="a floating dtype")

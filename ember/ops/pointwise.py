"""Pointwise primitives: casts, arithmetic, rounding, min/max, where and clamp.

Each entry is one OpDef; tensor inputs share shape and dtype (the frontend broadcasts and
promotes first), Python scalars may stand for an input.  Gradients are written with tensor
methods and primitives bound directly, so they trace and support double backward.
Transcendental functions live in ``pointwise_math.py``, comparisons and bit logic in
``pointwise_logic.py``.

``c_expr`` templates use ``{0}``, ``{1}``, ... for inputs and ``{name}`` for params; the
``ember_*`` functions they call (``ember_div_floor``, ``ember_remainder``, ``ember_maximum``
with NaN propagation, shifts with PyTorch's out-of-range rules, ...) belong to the C prelude
the compiler emits, each mirroring the eager kernel here.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember import dtypes as dt
from ember.errors import EmberNotImplementedError, EmberRuntimeError
from ember.ops import _half_c
from ember.ops._fma import fma
from ember.ops._util import lowp, pointwise_meta, tensor_inputs
from ember.ops.registry import OpDef, bind, register

# PyTorch's C++ names of dtypes, used in its error messages
TORCH_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half",
               "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "int16": "Short",
               "int8": "Char", "uint8": "Byte", "bool": "Bool"}

NOT_BOOL = frozenset({dt.bool})
FLOAT_ONLY = frozenset({dt.bool, *dt.INT_DTYPES})
INT_ONLY = frozenset(dt.FLOAT_DTYPES)


def _is_float(d: dt.dtype) -> bool:
    return d.is_floating_point


def meta(name: str, out_dtype: dt.dtype | None = None, reject: frozenset = frozenset(),
         kernel: str = "") -> Callable[..., tuple]:
    """Strict pointwise meta that raises PyTorch's ``NotImplementedError`` for dtypes the
    kernel does not support (``"abs_cpu" not implemented for 'Bool'``)."""
    base = pointwise_meta(name, out_dtype)
    kname = kernel or f"{name}_cpu"

    def check(*inputs: Any, **params: Any) -> tuple:
        shape, dtype = base(*inputs, **params)
        if reject:
            src = tensor_inputs(inputs)[0].dtype
            if src in reject:
                raise EmberNotImplementedError(
                    f'[{name}] "{kname}" not implemented for \'{TORCH_NAMES[src.name]}\'')
        return shape, dtype

    return check if reject else base


def unary(name: str, fn: Callable, vjp: Callable | None, *, save: tuple = (0,),
          save_output: bool = False, c_expr: str | None = None, reject: frozenset = frozenset(),
          out_dtype: dt.dtype | None = None, kernel: str = "", grad_name: str = "",
          doc: str = "") -> OpDef:
    tags = frozenset() if vjp is not None else frozenset({"nondifferentiable"})
    return register(OpDef(
        name, "pointwise", meta(name, out_dtype, reject, kernel), fn, vjp, tags=tags,
        save=save if vjp is not None else (), save_output=save_output, c_expr=c_expr,
        grad_name=grad_name, doc=doc,
    ))


def binary(name: str, fn: Callable, vjp: Callable | None, *, save: tuple = (0, 1),
           save_for: dict | None = None, save_output: bool = False, c_expr: str | None = None,
           reject: frozenset = frozenset(), out_dtype: dt.dtype | None = None, kernel: str = "",
           grad_name: str = "", doc: str = "") -> OpDef:
    tags = frozenset() if vjp is not None else frozenset({"nondifferentiable"})
    return register(OpDef(
        name, "pointwise", meta(name, out_dtype, reject, kernel), fn, vjp, tags=tags,
        save=save if vjp is not None else (), save_for=save_for, save_output=save_output,
        c_expr=c_expr, grad_name=grad_name, doc=doc,
    ))


def zeros_grad(g: Any) -> Any:
    return g.new_zeros(tuple(g.shape))


def where_(cond: Any, x: Any, y: Any) -> Any:
    """``where`` on same-shaped operands (scalars allowed for x/y), for gradient formulas."""
    return bind(WHERE, cond, x, y)


def check_int_divisor(b: Any, op: str) -> None:
    if isinstance(b, np.ndarray):
        if b.dtype.kind in "iub" and b.size and not b.all():
            raise EmberRuntimeError(f"[{op}] ZeroDivisionError")
    elif b == 0 and isinstance(b, (int, np.integer)):
        raise EmberRuntimeError(f"[{op}] ZeroDivisionError")


def _int_kernel(a: Any, b: Any) -> bool:
    src = a if isinstance(a, np.ndarray) else b
    return src.dtype.kind in "iub"


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
    # float32 <-> float16/bfloat16 in one C pass (autocast's casts of activations and weights;
    # NumPy's / ml_dtypes' casts are scalar loops, ~1-4 ns a value); same bits
    fast = (_half_c.from_float32(x, dtype.np) if x.dtype == np.float32 else
            _half_c.to_float32(x) if dtype is dt.float32 else None)
    return x.astype(dtype.np) if fast is None else fast


def _convert_vjp(ctx, g):  # noqa: ANN001
    return (g.to(ctx.input_dtypes[0]),)


CONVERT = register(OpDef(
    "convert_element_type", "pointwise", _convert_meta, _convert_eager, _convert_vjp,
    c_expr="(({dtype}){0})", doc="Cast to another dtype (a copy).", grad_name="ToCopyBackward0",
))


# ---------------------------------------------------------------------------------- arithmetic
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


ADD = binary("add", lowp(np.add), _add_vjp, save=(), c_expr="({0} + {1})")
SUB = binary("sub", lowp(np.subtract), _sub_vjp, save=(), c_expr="({0} - {1})",
             reject=NOT_BOOL)


def _add_scaled_vjp(ctx, g):  # noqa: ANN001
    n0, n1 = ctx.needs_input_grad
    return (g if n0 else None, g * ctx.params["alpha"] if n1 else None)


def _sub_scaled_vjp(ctx, g):  # noqa: ANN001
    n0, n1 = ctx.needs_input_grad
    return (g if n0 else None, g * -ctx.params["alpha"] if n1 else None)


# ``add(x, y, alpha=a)`` / ``sub`` on floats: one rounding, as PyTorch's kernels (an fma);
# ``alpha`` arrives rounded to the dtype (the frontend does it, as PyTorch casts the scalar)
ADD_SCALED = binary(
    "add_scaled", lowp(lambda x, y, *, alpha: fma(alpha, y, x)), _add_scaled_vjp, save=(),
    c_expr="ember_fma(ember_like({0}, {alpha}), {1}, {0})", reject=FLOAT_ONLY,
    grad_name="AddBackward0", doc="``x + alpha * y`` rounded once (``add(x, y, alpha=)``).")
SUB_SCALED = binary(
    "sub_scaled", lowp(lambda x, y, *, alpha: fma(-alpha, y, x)), _sub_scaled_vjp, save=(),
    c_expr="ember_fma(-ember_like({0}, {alpha}), {1}, {0})", reject=FLOAT_ONLY,
    grad_name="SubBackward0", doc="``x - alpha * y`` rounded once (``sub(x, y, alpha=)``).")
MUL = binary("mul", lowp(np.multiply), _mul_vjp, c_expr="({0} * {1})",
             save_for={0: (1,), 1: (0,)})
DIV = register(OpDef(
    "div", "pointwise",
    pointwise_meta("div", None, _is_float, "a floating dtype (the frontend promotes integers)"),
    lowp(np.true_divide), _div_vjp, save_for={0: (1,), 1: (0, 1)}, c_expr="({0} / {1})",
))


def _rounded_zero_vjp(ctx, g):  # noqa: ANN001
    # PyTorch: a rounded quotient is piecewise constant, so its gradient is zero
    return tuple(zeros_grad(g) if n else None for n in ctx.needs_input_grad)


def _div_trunc_eager(a: Any, b: Any) -> np.ndarray:
    if _int_kernel(a, b):
        check_int_divisor(b, "div")
        q = np.floor_divide(a, b)
        fix = (np.remainder(a, b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0))
        return (q + fix.astype(q.dtype)).astype(q.dtype)
    # PyTorch rounds the quotient to the tensor's dtype before truncating (matters for
    # float16/bfloat16, whose other kernels compute in float32)
    return np.trunc(lowp(np.true_divide)(a, b))


def _div_floor_float(a: Any, b: Any) -> np.ndarray:
    # c10::div_floor_floating: exact floor of the true quotient, a / b where b == 0
    mod = np.fmod(a, b)
    div = np.true_divide(np.subtract(a, mod), b)
    div = div - ((mod != 0) & ((np.asarray(b) < 0) != (mod < 0)))
    fl = np.floor(div)
    fl = fl + (div - fl > 0.5)
    fl = np.where(div == 0, np.copysign(np.zeros_like(div), np.true_divide(a, b)), fl)
    return np.where(np.asarray(b) == 0, np.true_divide(a, b), fl).astype(div.dtype)


def _div_floor_eager(a: Any, b: Any) -> np.ndarray:
    if _int_kernel(a, b):
        check_int_divisor(b, "div")
        return np.floor_divide(a, b)
    return _div_floor_float(a, b)


DIV_TRUNC = binary("div_trunc", _div_trunc_eager, _rounded_zero_vjp, save=(),
                   reject=NOT_BOOL, kernel="div_trunc_cpu", grad_name="DivBackward2",
                   c_expr="ember_div_trunc({0}, {1})")
DIV_FLOOR = binary("div_floor", lowp(_div_floor_eager), _rounded_zero_vjp, save=(),
                   reject=NOT_BOOL, kernel="div_floor_cpu", grad_name="DivBackward2",
                   c_expr="ember_div_floor({0}, {1})")


def _remainder_eager(a: Any, b: Any) -> np.ndarray:
    if _int_kernel(a, b):
        check_int_divisor(b, "remainder")
        return np.remainder(a, b)
    mod = np.fmod(a, b)
    fix = (mod != 0) & ((np.asarray(b) < 0) != (mod < 0))
    return np.where(fix, mod + b, mod).astype(mod.dtype)


def _fmod_eager(a: Any, b: Any) -> np.ndarray:
    if _int_kernel(a, b):
        check_int_divisor(b, "fmod")
    return np.fmod(a, b)


def _remainder_vjp(ctx, g):  # noqa: ANN001
    n0, n1 = ctx.needs_input_grad
    gb = -g * bind(DIV_FLOOR, *ctx.inputs) if n1 else None
    return (g if n0 else None, gb)


def _fmod_vjp(ctx, g):  # noqa: ANN001
    n0, n1 = ctx.needs_input_grad
    gb = -g * bind(DIV_TRUNC, *ctx.inputs) if n1 else None
    return (g if n0 else None, gb)


REMAINDER = binary("remainder", lowp(_remainder_eager), _remainder_vjp, reject=NOT_BOOL,
                   save_for={1: (0, 1)}, c_expr="ember_remainder({0}, {1})")
FMOD = binary("fmod", lowp(_fmod_eager), _fmod_vjp, reject=NOT_BOOL, save_for={1: (0, 1)},
              c_expr="ember_fmod({0}, {1})")


# ---------------------------------------------------------------------------------- pow
def _int_pow(a: Any, b: Any) -> np.ndarray:
    """Integer power with C wrap-around; negative exponents give 1, +-1 or 0 as PyTorch."""
    arr = a if isinstance(a, np.ndarray) else b
    a_ = np.asarray(a, dtype=arr.dtype)
    b_ = np.asarray(b, dtype=arr.dtype)
    out = np.power(a_, np.maximum(b_, 0) if arr.dtype.kind == "i" else b_)
    if arr.dtype.kind == "i" and (b_ < 0).any():
        odd = (b_ & 1) != 0
        neg = np.where(a_ == 1, 1, np.where(a_ == -1, np.where(odd, -1, 1), 0))
        out = np.where(b_ < 0, neg, out).astype(arr.dtype)
    return np.broadcast_to(out, arr.shape).astype(arr.dtype)


def _pow_eager(a: Any, b: Any) -> np.ndarray:
    if _int_kernel(a, b):
        return _int_pow(a, b)
    return np.power(a, b)


def _pow_vjp(ctx, g):  # noqa: ANN001
    a, b = ctx.inputs
    n0, n1 = ctx.needs_input_grad
    ga = gb = None
    if n0:
        if isinstance(b, (int, float)):
            ga = zeros_grad(g) if b == 0 else g * (b * a.pow(b - 1))
        else:
            ga = where_(b == 0, 0.0, g * (b * a.pow(b - 1)))
    if n1:
        res = ctx.outputs[0]
        if isinstance(a, (int, float)):
            if a == 0:
                gb = g * where_(b >= 0, 0.0, res * float(np.log(0.0)))
            else:
                gb = g * (res * float(np.log(a)))
        else:
            gb = g * where_((a == 0) & (b >= 0), 0.0, res * a.log())
    return (ga, gb)


POW = register(OpDef(
    "pow", "pointwise", meta("pow", reject=NOT_BOOL, kernel="pow"), lowp(_pow_eager), _pow_vjp,
    save=(0, 1), save_output=True, c_expr="ember_pow({0}, {1})",
))


# ---------------------------------------------------------------------------------- sign
def _abs_vjp(ctx, g):  # noqa: ANN001
    return (g * ctx.inputs[0].sign(),)


def _sign_eager(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.bool_:
        return x.copy()
    # (0 < x) - (x < 0): NaN gives 0, as in PyTorch
    return ((x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)).astype(x.dtype)


NEG = unary("neg", lowp(np.negative), lambda ctx, g: (-g,), save=(), c_expr="(-{0})",
            reject=NOT_BOOL)
ABS = unary("abs", lowp(np.abs), _abs_vjp, c_expr="ember_abs({0})", reject=NOT_BOOL)
SIGN = unary("sign", lowp(_sign_eager), lambda ctx, g: (zeros_grad(g),), save=(),
             c_expr="((0 < {0}) - ({0} < 0))")


# ---------------------------------------------------------------------------------- rounding
def _int_identity(fn: Callable) -> Callable:
    def kernel(x: np.ndarray, **params: Any) -> np.ndarray:
        if x.dtype.kind in "iu":
            return x.copy()
        return fn(x, **params)
    kernel.__name__ = getattr(fn, "__name__", "kernel")
    return kernel


def _round_eager(x: np.ndarray, *, decimals: int = 0) -> np.ndarray:
    if decimals == 0:
        return np.rint(x)
    ten = x.dtype.type(10.0 ** abs(decimals))
    if decimals > 0:
        return np.rint(x * ten) / ten
    return np.rint(x / ten) * ten


def _round_meta(x, *, decimals: int = 0) -> tuple:  # noqa: ANN001
    if x.dtype is dt.bool or (decimals != 0 and not x.dtype.is_floating_point):
        kern = "round_cpu" if decimals else "round_vml_cpu"
        raise EmberNotImplementedError(
            f'[round] "{kern}" not implemented for \'{TORCH_NAMES[x.dtype.name]}\'')
    return x.shape, x.dtype


def _zero_vjp(ctx, g):  # noqa: ANN001, ANN202
    return (zeros_grad(g),)


FLOOR = unary("floor", lowp(_int_identity(np.floor)), _zero_vjp, save=(), reject=NOT_BOOL,
              kernel="floor_vml_cpu", c_expr="ember_floor({0})")
CEIL = unary("ceil", lowp(_int_identity(np.ceil)), _zero_vjp, save=(), reject=NOT_BOOL,
             kernel="ceil_vml_cpu", c_expr="ember_ceil({0})")
TRUNC = unary("trunc", lowp(_int_identity(np.trunc)), _zero_vjp, save=(), reject=NOT_BOOL,
              kernel="trunc_vml_cpu", c_expr="ember_trunc({0})")
ROUND = register(OpDef(
    "round", "pointwise", _round_meta, lowp(_int_identity(_round_eager)), _zero_vjp,
    c_expr="ember_round({0}, {decimals})",
    doc="Round half to even, optionally to ``decimals`` places.",
))
FRAC = unary("frac", lowp(lambda x: x - np.trunc(x)), lambda ctx, g: (g,), save=(),
             reject=FLOAT_ONLY, c_expr="({0} - ember_trunc({0}))")


# ---------------------------------------------------------------------------------- min / max
def _maximum_vjp(ctx, g, lt: bool = True):  # noqa: ANN001
    a, b = ctx.inputs
    n0, n1 = ctx.needs_input_grad
    tie = where_(a == b, g / 2, g)
    lo_a, lo_b = (a < b, a > b) if lt else (a > b, a < b)
    return (where_(lo_a, 0.0, tie) if n0 else None, where_(lo_b, 0.0, tie) if n1 else None)


def _fmax_vjp(ctx, g, ge: bool = True):  # noqa: ANN001
    a, b = ctx.inputs
    n0, n1 = ctx.needs_input_grad
    keep_a = ((a >= b) if ge else (a <= b)) | b.isnan()
    return (where_(keep_a, g, 0.0) if n0 else None, where_(keep_a, 0.0, g) if n1 else None)


MAXIMUM = binary("maximum", lowp(np.maximum), _maximum_vjp, c_expr="ember_maximum({0}, {1})")
MINIMUM = binary("minimum", lowp(np.minimum), lambda ctx, g: _maximum_vjp(ctx, g, False),
                 c_expr="ember_minimum({0}, {1})")
FMAX = binary("fmax", lowp(np.fmax), _fmax_vjp, c_expr="ember_fmax({0}, {1})")
FMIN = binary("fmin", lowp(np.fmin), lambda ctx, g: _fmax_vjp(ctx, g, False),
              c_expr="ember_fmin({0}, {1})")


# ---------------------------------------------------------------------------------- where
def _where_meta(cond, x, y) -> tuple:  # noqa: ANN001
    if cond.dtype is not dt.bool:
        raise EmberRuntimeError(f"[where] expected condition to be a boolean tensor, but got a "
                                f"tensor with dtype {TORCH_NAMES[cond.dtype.name]}")
    shape, dtype = pointwise_meta("where")(x, y) if tensor_inputs((x, y)) else (None, None)
    assert dtype is not None, "[where] at least one of x, y must be a tensor"
    if tuple(shape) != tuple(cond.shape):
        from ember.errors import ShapeError
        raise ShapeError(f"[where] primitive inputs must share a shape; got "
                         f"{tuple(cond.shape)} and {tuple(shape)}")
    return shape, dtype


def _where_eager(cond: np.ndarray, x: Any, y: Any) -> np.ndarray:
    arr = x if isinstance(x, np.ndarray) else y
    out = np.where(cond, x, y)
    return out if out.dtype == arr.dtype else out.astype(arr.dtype)


def _where_vjp(ctx, g):  # noqa: ANN001
    cond = ctx.inputs[0]
    _, n1, n2 = ctx.needs_input_grad
    return (None, where_(cond, g, 0.0) if n1 else None, where_(cond, 0.0, g) if n2 else None)


WHERE = register(OpDef(
    "where", "pointwise", _where_meta, _where_eager, _where_vjp, save=(0,),
    c_expr="ember_where({0}, {1}, {2})", doc="Elementwise select: x where cond else y.",
))


# ---------------------------------------------------------------------------------- clamp
def _clamp_eager(x: np.ndarray, lo: Any, hi: Any) -> np.ndarray:
    return np.minimum(np.maximum(x, lo), hi).astype(x.dtype, copy=False)


def _clamp_vjp(ctx, g):  # noqa: ANN001
    x, lo, hi = ctx.inputs
    n0, n1, n2 = ctx.needs_input_grad
    gx = where_((x >= lo) & (x <= hi), g, 0.0) if n0 else None
    # PyTorch: the lower bound wins only where it is below the upper one; otherwise the upper
    glo = where_((x < lo) & (lo < hi), g, 0.0) if n1 else None
    ghi = where_((x > hi) | (hi < lo), g, 0.0) if n2 else None
    return (gx, glo, ghi)


CLAMP = register(OpDef(
    "clamp", "pointwise", pointwise_meta("clamp"),
    lowp(_clamp_eager), _clamp_vjp,
    save=(0, 1, 2), c_expr="ember_minimum(ember_maximum({0}, {1}), {2})",
    doc="min(max(x, lo), hi); the frontend fills a missing bound with the dtype's extreme.",
))

"""Comparison, logical, bitwise and classification primitives, and ``nan_to_num``.

Comparisons and logical ops return bool and have no gradient.  Bitwise ops and shifts work on
integers and bool (shifts on integers only), with PyTorch's shift semantics: shifting by a
negative amount or by at least the bit width gives 0 (left) or the sign fill (right).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes as dt
from ember.ops._util import lowp
from ember.ops.pointwise import INT_ONLY, binary, unary
from ember.ops.registry import OpDef, register

_B = dt.bool

EQ = binary("eq", np.equal, None, out_dtype=_B, c_expr="({0} == {1})")
NE = binary("ne", np.not_equal, None, out_dtype=_B, c_expr="({0} != {1})")
LT = binary("lt", np.less, None, out_dtype=_B, c_expr="({0} < {1})")
LE = binary("le", np.less_equal, None, out_dtype=_B, c_expr="({0} <= {1})")
GT = binary("gt", np.greater, None, out_dtype=_B, c_expr="({0} > {1})")
GE = binary("ge", np.greater_equal, None, out_dtype=_B, c_expr="({0} >= {1})")


def _truth(x: Any) -> Any:
    return x.astype(bool) if isinstance(x, np.ndarray) else bool(x)


LOGICAL_AND = binary("logical_and", lambda a, b: np.logical_and(_truth(a), _truth(b)), None,
                     out_dtype=_B, c_expr="(({0} != 0) && ({1} != 0))")
LOGICAL_OR = binary("logical_or", lambda a, b: np.logical_or(_truth(a), _truth(b)), None,
                    out_dtype=_B, c_expr="(({0} != 0) || ({1} != 0))")
LOGICAL_XOR = binary("logical_xor", lambda a, b: np.logical_xor(_truth(a), _truth(b)), None,
                     out_dtype=_B, c_expr="(({0} != 0) != ({1} != 0))")
LOGICAL_NOT = unary("logical_not", lambda x: np.logical_not(x), None, out_dtype=_B,
                    c_expr="(!{0})")

BITWISE_AND = binary("bitwise_and", np.bitwise_and, None, reject=INT_ONLY,
                     c_expr="({0} & {1})")
BITWISE_OR = binary("bitwise_or", np.bitwise_or, None, reject=INT_ONLY, c_expr="({0} | {1})")
BITWISE_XOR = binary("bitwise_xor", np.bitwise_xor, None, reject=INT_ONLY,
                     c_expr="({0} ^ {1})")
BITWISE_NOT = unary("bitwise_not", np.invert, None, reject=INT_ONLY,
                    c_expr="ember_bitwise_not({0})")


def _shift_operands(a: Any, b: Any) -> tuple:
    arr = a if isinstance(a, np.ndarray) else b
    return np.asarray(a, dtype=arr.dtype), np.asarray(b, dtype=arr.dtype), arr


def _lshift(a: Any, b: Any) -> np.ndarray:
    a, b, arr = _shift_operands(a, b)
    bits = arr.dtype.itemsize * 8
    # PyTorch reads the amount as signed (a uint8 amount of 200 is negative)
    sb = b.astype(np.int8).astype(np.int64) if arr.dtype == np.uint8 else b.astype(np.int64)
    bad = (sb < 0) | (sb >= bits)
    unsigned = np.dtype(f"u{arr.dtype.itemsize}")
    out = np.left_shift(a.astype(unsigned), np.where(bad, 0, sb).astype(unsigned))
    out = np.where(bad, 0, out).astype(unsigned).astype(arr.dtype)
    return np.broadcast_to(out, arr.shape).copy()


def _rshift(a: Any, b: Any) -> np.ndarray:
    a, b, arr = _shift_operands(a, b)
    max_shift = arr.dtype.itemsize * 8 - (1 if arr.dtype.kind == "i" else 0)
    sb = b.astype(np.int8).astype(np.int64) if arr.dtype == np.uint8 else b.astype(np.int64)
    amount = np.where((sb < 0) | (sb >= max_shift), max_shift, sb)
    if arr.dtype.kind == "u":
        # shifting an unsigned value by its full width is 0
        out = np.where(amount >= arr.dtype.itemsize * 8, 0,
                       np.right_shift(a, np.minimum(amount, arr.dtype.itemsize * 8 - 1)
                                      .astype(arr.dtype)))
    else:
        out = np.right_shift(a, amount.astype(arr.dtype))
    return np.broadcast_to(np.asarray(out).astype(arr.dtype), arr.shape).copy()


_SHIFT_REJECT = frozenset({dt.bool, *dt.FLOAT_DTYPES})
LEFT_SHIFT = binary("bitwise_left_shift", _lshift, None, reject=_SHIFT_REJECT,
                    kernel="lshift_cpu", c_expr="ember_lshift({0}, {1})")
RIGHT_SHIFT = binary("bitwise_right_shift", _rshift, None, reject=_SHIFT_REJECT,
                     kernel="rshift_cpu", c_expr="ember_rshift({0}, {1})")


# ---------------------------------------------------------------------------------- classify
def _floaty(fn, default: bool):  # noqa: ANN001, ANN202
    def kernel(x: np.ndarray) -> np.ndarray:
        if x.dtype.kind in "biu":
            return np.full(x.shape, default)
        return fn(x)
    return lowp(kernel)


ISNAN = unary("isnan", _floaty(np.isnan, False), None, out_dtype=_B, c_expr="ember_isnan({0})")
ISINF = unary("isinf", _floaty(np.isinf, False), None, out_dtype=_B, c_expr="ember_isinf({0})")
ISFINITE = unary("isfinite", _floaty(np.isfinite, True), None, out_dtype=_B,
                 c_expr="ember_isfinite({0})")
ISPOSINF = unary("isposinf", _floaty(lambda x: x == np.inf, False), None, out_dtype=_B,
                 c_expr="({0} == INFINITY)")
ISNEGINF = unary("isneginf", _floaty(lambda x: x == -np.inf, False), None, out_dtype=_B,
                 c_expr="({0} == -INFINITY)")


# ---------------------------------------------------------------------------------- nan_to_num
def _nan_to_num_meta(x, *, nan: float, posinf: float | None, neginf: float | None) -> tuple:  # noqa: ANN001
    return x.shape, x.dtype


def _nan_to_num_eager(x: np.ndarray, *, nan: float, posinf: float | None,
                      neginf: float | None) -> np.ndarray:
    if x.dtype.kind in "biu":
        return x.copy()
    d = dt.from_numpy_dtype(x.dtype)
    info = dt.finfo(d)
    # values are converted in the tensor's own dtype (1e10 becomes inf in float16)
    def cast(v: float) -> Any:
        return np.array(v, dtype=np.float64).astype(x.dtype)[()]

    hi = cast(info.max if posinf is None else posinf)
    lo = cast(info.min if neginf is None else neginf)
    out = np.where(np.isnan(x), cast(nan), x)
    out = np.where(x == np.inf, hi, out)
    out = np.where(x == -np.inf, lo, out)
    return out.astype(x.dtype, copy=False)


def _nan_to_num_vjp(ctx, g):  # noqa: ANN001
    return (g * ctx.inputs[0].isfinite(),)


NAN_TO_NUM = register(OpDef(
    "nan_to_num", "pointwise", _nan_to_num_meta, _nan_to_num_eager, _nan_to_num_vjp,
    save=(0,), c_expr="ember_nan_to_num({0}, {nan}, {posinf}, {neginf})",
))


"""Comparison, logical, bitwise, selection (where, clamp, maximum, ...) and classification
frontend, with the Tensor comparison and bit operators."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import dtypes as dt
from ember._frontend.core import (
    binary,
    broadcast_shapes,
    check_tensor,
    expand_to,
    is_scalar,
    prepare,
)
from ember.errors import EmberNotImplementedError, EmberRuntimeError, EmberTypeError
from ember.ops import pointwise as P
from ember.ops import pointwise_logic as L
from ember.ops.registry import OpDef, bind
from ember.tensor import Tensor, _wrap, tensor_method

__all__ = [
    "allclose", "bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "clamp", "clamp_max", "clamp_min", "clip", "eq",
    "equal", "fmax", "fmin", "ge", "greater", "greater_equal", "gt", "isclose", "isfinite",
    "isinf", "isnan", "isneginf", "isposinf", "le", "less", "less_equal", "logical_and",
    "logical_not", "logical_or", "logical_xor", "lt", "maximum", "minimum", "nan_to_num", "ne",
    "not_equal", "where",
]


def _binary_fn(op: OpDef, *names: str, doc: str, tensor_input: bool = True,  # noqa: ANN202
               tensor_other: bool = False):
    def fn(input: Any, other: Any) -> Tensor:
        if tensor_input:
            check_tensor(input, names[0])
        if tensor_other:
            check_tensor(other, names[0], "other")
        return binary(op, input, other)
    fn.__name__ = names[0]
    fn.__doc__ = doc
    return tensor_method(*names)(fn)


eq = _binary_fn(L.EQ, "eq", doc="``input == other`` elementwise (a bool tensor).")
ne = not_equal = _binary_fn(L.NE, "ne", "not_equal", doc="``input != other`` elementwise.")
lt = less = _binary_fn(L.LT, "lt", "less", doc="``input < other`` elementwise.")
le = less_equal = _binary_fn(L.LE, "le", "less_equal", doc="``input <= other`` elementwise.")
gt = greater = _binary_fn(L.GT, "gt", "greater", doc="``input > other`` elementwise.")
ge = greater_equal = _binary_fn(L.GE, "ge", "greater_equal",
                                doc="``input >= other`` elementwise.")
logical_and = _binary_fn(L.LOGICAL_AND, "logical_and", doc="Elementwise logical and (nonzero "
                         "is true); a bool tensor.", tensor_other=True)
logical_or = _binary_fn(L.LOGICAL_OR, "logical_or", doc="Elementwise logical or.",
                        tensor_other=True)
logical_xor = _binary_fn(L.LOGICAL_XOR, "logical_xor", doc="Elementwise logical xor.",
                         tensor_other=True)
# bit ops accept a number on either side (``6 & t``, ``torch.bitwise_left_shift(3, t)``)
bitwise_and = _binary_fn(L.BITWISE_AND, "bitwise_and", tensor_input=False,
                         doc="Bitwise and of integer or bool tensors.")
bitwise_or = _binary_fn(L.BITWISE_OR, "bitwise_or", tensor_input=False,
                        doc="Bitwise or of integer or bool tensors.")
bitwise_xor = _binary_fn(L.BITWISE_XOR, "bitwise_xor", tensor_input=False,
                         doc="Bitwise xor of integer or bool tensors.")
bitwise_left_shift = _binary_fn(L.LEFT_SHIFT, "bitwise_left_shift", tensor_input=False,
                                doc="``input << other`` on integers (0 past the bit width).")
bitwise_right_shift = _binary_fn(L.RIGHT_SHIFT, "bitwise_right_shift", tensor_input=False,
                                 doc="``input >> other`` on integers (arithmetic for signed).")


def _unary_fn(op: OpDef, name: str, doc: str):  # noqa: ANN202
    def fn(input: Tensor) -> Tensor:
        check_tensor(input, name)
        return bind(op, input)
    fn.__name__ = name
    fn.__doc__ = doc
    return tensor_method(name)(fn)


logical_not = _unary_fn(L.LOGICAL_NOT, "logical_not", "Elementwise ``not`` (a bool tensor).")
bitwise_not = _unary_fn(L.BITWISE_NOT, "bitwise_not", "Bitwise not (logical not for bool).")
isnan = _unary_fn(L.ISNAN, "isnan", "Where the elements are NaN.")
isinf = _unary_fn(L.ISINF, "isinf", "Where the elements are +-inf.")
isfinite = _unary_fn(L.ISFINITE, "isfinite", "Where the elements are neither inf nor NaN.")
isposinf = _unary_fn(L.ISPOSINF, "isposinf", "Where the elements are +inf.")
isneginf = _unary_fn(L.ISNEGINF, "isneginf", "Where the elements are -inf.")


@tensor_method("nan_to_num")
def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """Replace NaN, +inf and -inf (defaults: 0 and the dtype's largest/lowest value)."""
    check_tensor(input, "nan_to_num")
    return bind(L.NAN_TO_NUM, input, nan=float(nan),
                posinf=None if posinf is None else float(posinf),
                neginf=None if neginf is None else float(neginf))


# ------------------------------------------------------------------------------ min / max
def _tensor_binary(op: OpDef, name: str, doc: str):  # noqa: ANN202
    def fn(input: Tensor, other: Tensor) -> Tensor:
        check_tensor(input, name)
        check_tensor(other, name, "other")
        return binary(op, input, other)
    fn.__name__ = name
    fn.__doc__ = doc
    return tensor_method(name)(fn)


maximum = _tensor_binary(P.MAXIMUM, "maximum", "Elementwise maximum; NaN propagates.")
minimum = _tensor_binary(P.MINIMUM, "minimum", "Elementwise minimum; NaN propagates.")
fmax = _tensor_binary(P.FMAX, "fmax", "Elementwise maximum ignoring NaN.")
fmin = _tensor_binary(P.FMIN, "fmin", "Elementwise minimum ignoring NaN.")


# ------------------------------------------------------------------------------ where
def where(condition: Tensor, input: Any = None, other: Any = None) -> Any:
    """``input`` where ``condition`` else ``other``, broadcast and promoted (either may be a
    number); ``where(condition)`` is ``condition.nonzero(as_tuple=True)``."""
    check_tensor(condition, "where", "condition")
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)  # type: ignore[attr-defined]
    for nm, v in (("input", input), ("other", other)):
        if not isinstance(v, Tensor) and not is_scalar(v):
            raise EmberTypeError(f"[where] argument '{nm}' must be a Tensor or a number, not "
                                 f"{type(v).__name__}")
    compute = dt.result_type(input, other)
    shapes = [t._data.shape for t in (condition, input, other) if isinstance(t, Tensor)]
    shape = shapes[0] if all(s == shapes[0] for s in shapes) else broadcast_shapes(
        "where", *shapes)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        input = _wrap(np.full(shape, input, dtype=compute.np), compute)
    x, y = prepare("where", (input, other), compute)
    if isinstance(x, Tensor):
        x = expand_to(x, shape)
    if isinstance(y, Tensor):
        y = expand_to(y, shape)
    return bind(P.WHERE, expand_to(condition, shape), x, y)


def _where_method(self: Tensor, condition: Tensor, other: Any) -> Tensor:
    return where(condition, self, other)


Tensor.where = _where_method  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------ clamp
def _extreme(d: dt.dtype, high: bool) -> Any:
    if d.is_floating_point:
        return math.inf if high else -math.inf
    if d is dt.bool:
        return high
    info = np.iinfo(d.np)
    return int(info.max if high else info.min)


@tensor_method("clamp", "clip")
def clamp(input: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """Clamp into ``[min, max]`` (numbers or tensors; one may be None)."""
    check_tensor(input, "clamp")
    if min is None and max is None:
        raise EmberRuntimeError("[clamp] At least one of 'min' or 'max' must not be None")
    bounds = [b for b in (min, max) if b is not None]
    compute = dt.result_type(input, *bounds)
    if compute is dt.bool:
        _check_bool_clamp(min, max)
    lo = _extreme(compute, False) if min is None else min
    hi = _extreme(compute, True) if max is None else max
    x, lo, hi = prepare("clamp", (input, lo, hi), compute)
    return bind(P.CLAMP, x, lo, hi)


clip = clamp


def _check_bool_clamp(min: Any, max: Any) -> None:
    # PyTorch clamps bool only against a single tensor bound (clamp_min/clamp_max.Tensor)
    if isinstance(min, Tensor) != isinstance(max, Tensor) and (min is None or max is None):
        return
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        kernel = "clamp_cpu"
    else:
        kernel = ("clamp_scalar_cpu" if min is not None and max is not None else
                  "clamp_min_scalar_cpu" if min is not None else "clamp_max_scalar_cpu")
    raise EmberNotImplementedError(f'[clamp] "{kernel}" not implemented for \'Bool\'')


@tensor_method("clamp_min")
def clamp_min(input: Tensor, min: Any) -> Tensor:
    """``clamp(input, min=min)``."""
    return clamp(input, min, None)


@tensor_method("clamp_max")
def clamp_max(input: Tensor, max: Any) -> Tensor:
    """``clamp(input, max=max)``."""
    return clamp(input, None, max)


# ------------------------------------------------------------------------------ closeness
@tensor_method("isclose")
def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """``|input - other| <= atol + rtol * |other|`` elementwise (PyTorch's formula)."""
    check_tensor(input, "isclose")
    check_tensor(other, "isclose", "other")
    if input._dtype is not other._dtype:
        raise EmberRuntimeError(f"[isclose] {P.TORCH_NAMES[input._dtype.name]} did not match "
                                f"{P.TORCH_NAMES[other._dtype.name]}")
    if rtol < 0 or atol < 0:
        raise EmberRuntimeError(f"[isclose] rtol and atol must be non-negative; got rtol={rtol},"
                                f" atol={atol}")
    close = eq(input, other)
    if input._dtype is dt.bool:
        return close
    if equal_nan and input._dtype.is_floating_point:
        close = logical_or(close, logical_and(isnan(input), isnan(other)))
    if rtol == 0 and atol == 0:
        return close
    from ember._frontend.pointwise import abs, mul, sub
    cast = other
    if not other._dtype.is_floating_point:
        from ember._frontend.core import to_dtype
        cast = to_dtype(other, dt.get_default_dtype())
    allowed = abs(mul(cast, rtol)) + atol
    actual = abs(sub(input, other))
    return logical_or(close, logical_and(isfinite(actual), le(actual, allowed)))


@tensor_method("allclose")
def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """Whether every element is ``isclose`` (a Python bool)."""
    return bool(isclose(input, other, rtol, atol, equal_nan)._data.all())


@tensor_method("equal")
def equal(input: Tensor, other: Tensor) -> bool:
    """Whether the tensors have the same shape and equal values (a Python bool)."""
    check_tensor(input, "equal")
    check_tensor(other, "equal", "other")
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(eq(input.detach(), other.detach())._data.all())


# ------------------------------------------------------------------------------ operators
def _cmp_operator(fn):  # noqa: ANN001, ANN202
    # a non-number operand gives NotImplemented, so ``t == None`` is False as in PyTorch
    def op(self: Tensor, other: Any) -> Any:
        if isinstance(other, Tensor) or is_scalar(other):
            return fn(self, other)
        return NotImplemented
    return op


def _invert(self: Tensor) -> Tensor:
    if self._dtype.is_floating_point:
        raise EmberTypeError("[bitwise_not] ~ (operator.invert) is only implemented on integer "
                             "and Boolean-type tensors")
    return bitwise_not(self)


Tensor.__eq__ = _cmp_operator(eq)  # type: ignore[method-assign, assignment]
Tensor.__ne__ = _cmp_operator(ne)  # type: ignore[method-assign, assignment]
Tensor.__lt__ = _cmp_operator(lt)  # type: ignore[method-assign, operator]
Tensor.__le__ = _cmp_operator(le)  # type: ignore[method-assign, operator]
Tensor.__gt__ = _cmp_operator(gt)  # type: ignore[method-assign, operator]
Tensor.__ge__ = _cmp_operator(ge)  # type: ignore[method-assign, operator]
Tensor.__invert__ = _invert  # type: ignore[attr-defined]
Tensor.__and__ = bitwise_and  # type: ignore[attr-defined]
Tensor.__rand__ = lambda self, other: bitwise_and(other, self)  # type: ignore[attr-defined]
Tensor.__or__ = bitwise_or  # type: ignore[attr-defined]
Tensor.__ror__ = lambda self, other: bitwise_or(other, self)  # type: ignore[attr-defined]
Tensor.__xor__ = bitwise_xor  # type: ignore[attr-defined]
Tensor.__rxor__ = lambda self, other: bitwise_xor(other, self)  # type: ignore[attr-defined]
Tensor.__lshift__ = bitwise_left_shift  # type: ignore[attr-defined]
Tensor.__rlshift__ = lambda self, o: bitwise_left_shift(o, self)  # type: ignore[attr-defined]
Tensor.__rshift__ = bitwise_right_shift  # type: ignore[attr-defined]
Tensor.__rrshift__ = lambda self, o: bitwise_right_shift(o, self)  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------ in-place
from ember._frontend.inplace import inplace_method  # noqa: E402

# comparisons and bit logic have no gradient, so nothing needs the original self
for _fn in (eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor, logical_not,
            bitwise_and, bitwise_or, bitwise_xor, bitwise_not, bitwise_left_shift,
            bitwise_right_shift):
    inplace_method(_fn.__name__ + "_", _fn, "never")
for _alias, _fn in (("not_equal_", ne), ("less_", lt), ("less_equal_", le), ("greater_", gt),
                    ("greater_equal_", ge)):
    inplace_method(_alias, _fn, "never")
for _fn in (nan_to_num, clamp, clamp_min, clamp_max):
    inplace_method(_fn.__name__ + "_", _fn)
inplace_method("clip_", clamp)

Tensor.__iand__ = Tensor.bitwise_and_  # type: ignore[attr-defined]
Tensor.__ior__ = Tensor.bitwise_or_  # type: ignore[attr-defined]
Tensor.__ixor__ = Tensor.bitwise_xor_  # type: ignore[attr-defined]
Tensor.__ilshift__ = Tensor.bitwise_left_shift_  # type: ignore[attr-defined]
Tensor.__irshift__ = Tensor.bitwise_right_shift_  # type: ignore[attr-defined]

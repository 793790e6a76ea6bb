"""Pointwise frontend: arithmetic operators and math functions with promotion/broadcasting."""

from __future__ import annotations

from typing import Any

from ember import dtypes as dt
from ember._frontend.core import binary, check_tensor
from ember.errors import EmberRuntimeError
from ember.ops import pointwise as P
from ember.ops.registry import bind
from ember.tensor import Tensor, tensor_method

__all__ = ["add", "div", "divide", "exp", "mul", "multiply", "neg", "negative", "sub", "subtract", "true_divide"]


def _float_compute(a: Any, b: Any) -> dt.dtype:
    d = dt.result_type(a, b)
    return d if d.is_floating_point else dt.get_default_dtype()


@tensor_method("add")
def add(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``input + alpha * other`` with broadcasting and type promotion."""
    if alpha != 1:
        other = mul(other, alpha)
    return binary(P.ADD, input, other)


@tensor_method("sub", "subtract")
def sub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``input - alpha * other``."""
    if (isinstance(input, Tensor) and input.dtype is dt.bool and isinstance(other, Tensor)
            and other.dtype is dt.bool):
        raise EmberRuntimeError(
            "[sub] Subtraction, the `-` operator, with two bool tensors is not supported. If you "
            "are trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )
    if alpha != 1:
        other = mul(other, alpha)
    return binary(P.SUB, input, other)


subtract = sub


@tensor_method("mul", "multiply")
def mul(input: Any, other: Any) -> Tensor:
    return binary(P.MUL, input, other)


multiply = mul


@tensor_method("div", "divide", "true_divide")
def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """True division (integers give the default float dtype) or rounded division."""
    if rounding_mode is None:
        return binary(P.DIV, input, other, name="div", compute=_float_compute(input, other))
    if rounding_mode == "trunc":
        from ember._frontend import pointwise_math as M
        return M._rounded_div(input, other, "trunc")
    if rounding_mode == "floor":
        from ember._frontend import pointwise_math as M
        return M._rounded_div(input, other, "floor")
    raise EmberRuntimeError(
        f"[div] expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
        f"'{rounding_mode}'"
    )


divide = div
true_divide = div


@tensor_method("neg", "negative", "__neg__")
def neg(input: Tensor) -> Tensor:
    check_tensor(input, "neg")
    if input.dtype is dt.bool:
        raise EmberRuntimeError(
            "[neg] Negation, the `-` operator, on a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )
    return bind(P.NEG, input)


negative = neg


def _float_unary(op: Any, input: Tensor) -> Tensor:
    """Unary float op: integer/bool inputs are computed in the default float dtype."""
    check_tensor(input, op.name)
    if not input._dtype.is_floating_point:
        from ember._frontend.core import to_dtype
        input = to_dtype(input, dt.get_default_dtype())
    return bind(op, input)


@tensor_method("exp")
def exp(input: Tensor) -> Tensor:
    return _float_unary(P.EXP, input)


# ------------------------------------------------------------------------------ operators
Tensor.__add__ = lambda self, other: add(self, other)  # type: ignore[method-assign]
Tensor.__radd__ = lambda self, other: add(other, self)  # type: ignore[method-assign]
Tensor.__sub__ = lambda self, other: sub(self, other)  # type: ignore[method-assign]
Tensor.__rsub__ = lambda self, other: sub(other, self)  # type: ignore[method-assign]
Tensor.__mul__ = lambda self, other: mul(self, other)  # type: ignore[method-assign]
Tensor.__rmul__ = lambda self, other: mul(other, self)  # type: ignore[method-assign]
Tensor.__truediv__ = lambda self, other: div(self, other)  # type: ignore[method-assign]
Tensor.__rtruediv__ = lambda self, other: div(other, self)  # type: ignore[method-assign]
Tensor.__pos__ = lambda self: self  # type: ignore[method-assign]


# ------------------------------------------------------------------------------ in-place
from ember._frontend.inplace import inplace_method  # noqa: E402

for _name, _fn in (("add_", add), ("sub_", sub), ("subtract_", sub), ("mul_", mul),
                   ("multiply_", mul), ("div_", div), ("divide_", div), ("true_divide_", div),
                   ("neg_", neg), ("negative_", neg), ("exp_", exp)):
    inplace_method(_name, _fn)

Tensor.__iadd__ = Tensor.add_  # type: ignore[attr-defined]
Tensor.__isub__ = Tensor.sub_  # type: ignore[attr-defined]
Tensor.__imul__ = Tensor.mul_  # type: ignore[attr-defined]
Tensor.__itruediv__ = Tensor.div_  # type: ignore[attr-defined]

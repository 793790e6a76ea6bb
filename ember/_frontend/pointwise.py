"""Pointwise frontend: arithmetic with PyTorch's promotion/broadcasting, and the Python
operators of Tensor.  Math functions are in ``pointwise_math.py``, comparisons and bit logic in
``pointwise_logic.py``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes as dt
from ember._bind_fast import fast_operator
from ember._frontend.core import binary, check_tensor, is_scalar, prepare
from ember.errors import EmberRuntimeError, EmberTypeError
from ember.ops import pointwise as P
from ember.ops.registry import bind
from ember.tensor import Tensor, tensor_method

__all__ = ["abs", "absolute", "add", "div", "divide", "mul", "multiply", "neg", "negative",
           "positive", "pow", "rsub", "sgn", "sign", "square", "sub", "subtract", "true_divide"]


def _is_bool(x: Any) -> bool:
    return x._dtype is dt.bool if isinstance(x, Tensor) else isinstance(x, (bool, np.bool_))


def float_compute(a: Any, b: Any) -> dt.dtype:
    """The dtype of a float-valued binary op: integers and bools give the default float."""
    d = dt.result_type(a, b)
    return d if d.is_floating_point else dt.get_default_dtype()


def _check_alpha(op: str, input: Any, other: Any, alpha: Any) -> None:
    d = dt.result_type(input, other)
    if isinstance(alpha, (bool, np.bool_)):
        if d is not dt.bool:
            raise EmberRuntimeError(f"[{op}] Boolean alpha only supported for Boolean results.")
    elif isinstance(alpha, (float, np.floating)) and not d.is_floating_point:
        raise EmberRuntimeError(f"[{op}] For integral input tensors, argument alpha must not be "
                                f"a floating point number.")


def _scaled(op: Any, name: str, input: Any, other: Any, alpha: Any) -> Tensor:
    """``input +/- alpha * other``: in float32/float64 one op rounding once, as PyTorch (its
    kernels use an fma; ``alpha`` is cast to the result dtype first), else ``mul`` then the
    op: exact for integers, and for float16/bfloat16 what PyTorch's scalar loop does (its
    vector loop fmas in float instead: the result depends on the element's position)."""
    d = dt.result_type(input, other)
    if d in (dt.float32, dt.float64) and is_scalar(alpha) \
            and (isinstance(input, Tensor) or is_scalar(input)) \
            and (isinstance(other, Tensor) or is_scalar(other)):
        x, y = prepare(name, (input, other), d)
        a = float(np.asarray(float(alpha)).astype(d.np))
        return bind(op, x, y, alpha=a)
    other = mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    return binary(P.ADD if name == "add" else P.SUB, input, other)


@tensor_method("add")
def add(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``input + alpha * other`` with broadcasting and type promotion."""
    if alpha != 1 or type(alpha) is not int:
        _check_alpha("add", input, other, alpha)
        if alpha != 1:
            return _scaled(P.ADD_SCALED, "add", input, other, alpha)
    return binary(P.ADD, input, other)


@tensor_method("sub", "subtract")
def sub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``input - alpha * other``; bool operands are refused as in PyTorch."""
    if _is_bool(input) or _is_bool(other):
        if _is_bool(input) and _is_bool(other):
            raise EmberRuntimeError(
                "[sub] Subtraction, the `-` operator, with two bool tensors is not supported. "
                "Use the `^` or `logical_xor()` operator instead.")
        raise EmberRuntimeError(
            "[sub] Subtraction, the `-` operator, with a bool tensor is not supported. If you "
            "are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    if alpha != 1 or type(alpha) is not int:
        _check_alpha("sub", input, other, alpha)
        if alpha != 1:
            return _scaled(P.SUB_SCALED, "sub", input, other, alpha)
    return binary(P.SUB, input, other)


subtract = sub


@tensor_method("rsub")
def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``other - alpha * input``."""
    return sub(other, input, alpha=alpha)


@tensor_method("mul", "multiply")
def mul(input: Any, other: Any) -> Tensor:
    """``input * other`` (bools: logical and)."""
    return binary(P.MUL, input, other)


multiply = mul


@tensor_method("div", "divide", "true_divide")
def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """True division (integers give the default float dtype) or rounded division."""
    if rounding_mode is None:
        return binary(P.DIV, input, other, name="div", compute=float_compute(input, other))
    if rounding_mode in ("trunc", "floor"):
        from ember._frontend.pointwise_math import _rounded_div
        return _rounded_div(input, other, rounding_mode)
    raise EmberRuntimeError(
        f"[div] expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
        f"'{rounding_mode}'"
    )


divide = div
true_divide = div


@tensor_method("neg", "negative", "__neg__")
def neg(input: Tensor) -> Tensor:
    """``-input``; bool tensors are refused."""
    check_tensor(input, "neg")
    if input._dtype is dt.bool:
        raise EmberRuntimeError(
            "[neg] Negation, the `-` operator, on a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )
    return bind(P.NEG, input)


negative = neg


@tensor_method("positive")
def positive(input: Tensor) -> Tensor:
    """``+input``: the input itself; bool tensors are refused."""
    check_tensor(input, "positive")
    if input._dtype is dt.bool:
        raise EmberRuntimeError("[positive] The `+` operator, on a bool tensor is not supported.")
    return input


@tensor_method("abs", "absolute", "__abs__")
def abs(input: Tensor) -> Tensor:
    """``|input|`` (integers wrap: abs(-128) of int8 is -128)."""
    check_tensor(input, "abs")
    return bind(P.ABS, input)


absolute = abs


@tensor_method("sign", "sgn")
def sign(input: Tensor) -> Tensor:
    """-1, 0 or 1 by the sign of each element (0 for NaN)."""
    check_tensor(input, "sign")
    return bind(P.SIGN, input)


sgn = sign  # the same for real tensors


@tensor_method("pow")
def pow(input: Any, exponent: Any) -> Tensor:
    """``input ** exponent``: tensor**tensor, tensor**scalar or scalar**tensor."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise EmberTypeError("[pow] expected at least one Tensor argument")
    if isinstance(input, Tensor) and is_scalar(exponent):
        d = input._dtype
        if not d.is_floating_point and isinstance(exponent, (int, np.integer)) \
                and not isinstance(exponent, (bool, np.bool_)):
            if exponent < 0:
                raise EmberRuntimeError(
                    "[pow] Integers to negative integer powers are not allowed.")
            if d.category == 1 and exponent > np.iinfo(d.np).max:
                raise EmberRuntimeError(f"[pow] value cannot be converted to type {d.name}_t "
                                        f"without overflow")
        if d is dt.bool and isinstance(exponent, (bool, np.bool_)):
            # PyTorch: x ** True is x, x ** False is all True (bool stays bool)
            from ember._frontend.creation import ones_like
            from ember._frontend.shape import clone
            return clone(input) if exponent else ones_like(input)
    return binary(P.POW, input, exponent, name="pow")


@tensor_method("square")
def square(input: Tensor) -> Tensor:
    """``input ** 2`` (bool gives int64, as in PyTorch)."""
    return pow(input, 2)


# ------------------------------------------------------------------------------ operators
def _rdiv(self: Tensor, other: Any) -> Tensor:
    if not is_scalar(other):
        return div(other, self)
    from ember._frontend.pointwise_math import reciprocal
    return mul(reciprocal(self), other)



def _binop(fn):  # noqa: ANN001, ANN202
    """A reflected operator: ``other op self``."""
    return lambda self, other: fn(other, self)


_fast_operator = fast_operator  # ``Tensor.__add__`` and co. (``ember._bind_fast``)


Tensor.__add__ = _fast_operator(P.ADD, add)  # type: ignore[method-assign]
Tensor.__radd__ = _binop(add)  # type: ignore[method-assign]
Tensor.__sub__ = _fast_operator(P.SUB, sub, no_bool=True)  # type: ignore[method-assign]
Tensor.__rsub__ = _binop(sub)  # type: ignore[method-assign]
Tensor.__mul__ = _fast_operator(P.MUL, mul)  # type: ignore[method-assign]
Tensor.__rmul__ = _binop(mul)  # type: ignore[method-assign]
Tensor.__truediv__ = _fast_operator(  # type: ignore[method-assign]
    P.DIV, lambda self, other: div(self, other), floats_only=True)
# ``2.0 / t`` is ``reciprocal(t) * 2.0`` in PyTorch (Tensor.__rdiv__), not a division: the
# last bit differs for about a quarter of float32 values
Tensor.__rtruediv__ = lambda self, other: _rdiv(self, other)  # type: ignore[method-assign]
Tensor.__pow__ = pow  # type: ignore[method-assign]
Tensor.__rpow__ = _binop(pow)  # type: ignore[method-assign]
Tensor.__pos__ = positive  # type: ignore[method-assign]
# NumPy scalars and arrays defer to Tensor's reflected operators (``np.float64(2) * t`` is a
# Tensor), as in PyTorch
Tensor.__array_priority__ = 1000  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------ in-place
from ember._frontend.inplace import inplace_method  # noqa: E402

# which in-place ops must keep the original self for backward (see ``inplace_method``)
for _name, _fn, _saves in (
        ("add_", add, "never"), ("sub_", sub, "never"), ("subtract_", sub, "never"),
        ("mul_", mul, "if_other_grad"), ("multiply_", mul, "if_other_grad"),
        ("div_", div, "if_other_grad"), ("divide_", div, "if_other_grad"),
        ("true_divide_", div, "if_other_grad"), ("neg_", neg, "never"),
        ("negative_", neg, "never"), ("abs_", abs, "always"), ("absolute_", abs, "always"),
        ("sign_", sign, "never"), ("sgn_", sign, "never"), ("pow_", pow, "always"),
        ("square_", square, "always")):
    inplace_method(_name, _fn, _saves)

Tensor.__iadd__ = Tensor.add_  # type: ignore[attr-defined]
Tensor.__isub__ = Tensor.sub_  # type: ignore[attr-defined]
Tensor.__imul__ = Tensor.mul_  # type: ignore[attr-defined]
Tensor.__itruediv__ = Tensor.div_  # type: ignore[attr-defined]
Tensor.__ipow__ = Tensor.pow_  # type: ignore[attr-defined]

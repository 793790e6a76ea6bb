"""Math frontend: rounded division and remainders, float functions (integer and bool inputs
are computed in the default float dtype, as in PyTorch), rounding, and the float binary
functions atan2, hypot, xlogy, copysign and lerp."""

from __future__ import annotations

from typing import Any

from ember import dtypes as dt
from ember._frontend.core import (
    binary,
    broadcast_shapes,
    check_tensor,
    expand_to,
    is_scalar,
    prepare,
    scalar_for,
    to_dtype,
)
from ember._frontend.pointwise import float_compute
from ember.errors import EmberRuntimeError, EmberTypeError
from ember.ops import pointwise as P
from ember.ops import pointwise_math as M
from ember.ops import registry as _reg
from ember.ops.registry import OpDef, bind
from ember.tensor import Tensor, tensor_method

__all__ = [
    "acos", "acosh", "addcdiv", "addcmul", "arccos", "arccosh", "arcsin", "arcsinh", "arctan",
    "arctan2", "arctanh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "copysign",
    "cos", "cosh", "deg2rad", "erf", "erfc", "erfinv", "exp", "exp2", "expm1", "fix",
    "float_power", "floor", "floor_divide", "fmod", "frac", "hypot", "lerp", "log", "log10",
    "log1p", "log2", "logaddexp", "logit", "rad2deg", "reciprocal", "remainder", "round",
    "rsqrt", "sigmoid", "sin", "sinh", "sqrt", "tan", "tanh", "trunc", "xlogy",
]


# ------------------------------------------------------------------------------ division
def _rounded_div(input: Any, other: Any, mode: str) -> Tensor:
    """``div(input, other, rounding_mode=mode)``: integers stay integers."""
    op = P.DIV_TRUNC if mode == "trunc" else P.DIV_FLOOR
    return binary(op, input, other, name="div")


@tensor_method("floor_divide")
def floor_divide(input: Any, other: Any) -> Tensor:
    """``input // other``: the quotient rounded toward negative infinity."""
    return binary(P.DIV_FLOOR, input, other, name="floor_divide")


@tensor_method("remainder")
def remainder(input: Any, other: Any) -> Tensor:
    """Python-style modulus: the result has the sign of ``other``."""
    return binary(P.REMAINDER, input, other)


@tensor_method("fmod")
def fmod(input: Tensor, other: Any) -> Tensor:
    """C-style modulus: the result has the sign of ``input``."""
    check_tensor(input, "fmod")
    return binary(P.FMOD, input, other)


# ------------------------------------------------------------------------------ float unary
def float_unary(op: OpDef, input: Tensor, **params: Any) -> Tensor:
    """Unary float op: integer/bool inputs are computed in the default float dtype."""
    check_tensor(input, op.name)
    if not input._dtype.is_floating_point:
        input = to_dtype(input, dt.get_default_dtype())
    return bind(op, input, **params)


def _make_unary(op: OpDef, *names: str):  # noqa: ANN202
    def fn(input: Tensor) -> Tensor:
        if isinstance(input, Tensor) and input._dtype.category == 2:
            return _reg._binder(op, (input,), {})  # what float_unary binds for a floating tensor
        return float_unary(op, input)
    fn.__name__ = names[0]
    fn.__doc__ = f"Elementwise ``{op.name}`` (integers are computed in the default float dtype)."
    return tensor_method(*names)(fn)


exp = _make_unary(M.EXP, "exp")
exp2 = _make_unary(M.EXP2, "exp2")
expm1 = _make_unary(M.EXPM1, "expm1")
log = _make_unary(M.LOG, "log")
log2 = _make_unary(M.LOG2, "log2")
log10 = _make_unary(M.LOG10, "log10")
log1p = _make_unary(M.LOG1P, "log1p")
sqrt = _make_unary(M.SQRT, "sqrt")
rsqrt = _make_unary(M.RSQRT, "rsqrt")
reciprocal = _make_unary(M.RECIPROCAL, "reciprocal")
sin = _make_unary(M.SIN, "sin")
cos = _make_unary(M.COS, "cos")
tan = _make_unary(M.TAN, "tan")
asin = arcsin = _make_unary(M.ASIN, "asin", "arcsin")
acos = arccos = _make_unary(M.ACOS, "acos", "arccos")
atan = arctan = _make_unary(M.ATAN, "atan", "arctan")
sinh = _make_unary(M.SINH, "sinh")
cosh = _make_unary(M.COSH, "cosh")
tanh = _make_unary(M.TANH, "tanh")
sigmoid = _make_unary(M.SIGMOID, "sigmoid")
erf = _make_unary(M.ERF, "erf")
erfc = _make_unary(M.ERFC, "erfc")
erfinv = _make_unary(M.ERFINV, "erfinv")
asinh = arcsinh = _make_unary(M.ASINH, "asinh", "arcsinh")
acosh = arccosh = _make_unary(M.ACOSH, "acosh", "arccosh")
atanh = arctanh = _make_unary(M.ATANH, "atanh", "arctanh")
deg2rad = _make_unary(M.DEG2RAD, "deg2rad")
rad2deg = _make_unary(M.RAD2DEG, "rad2deg")


@tensor_method("logit")
def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when eps is given."""
    return float_unary(M.LOGIT, input, eps=None if eps is None else float(eps))


# ------------------------------------------------------------------------------ rounding
def _same_dtype_unary(op: OpDef, *names: str):  # noqa: ANN202
    def fn(input: Tensor) -> Tensor:
        check_tensor(input, op.name)
        return bind(op, input)
    fn.__name__ = names[0]
    fn.__doc__ = f"Elementwise ``{op.name}`` (integer inputs are returned unchanged)."
    return tensor_method(*names)(fn)


floor = _same_dtype_unary(P.FLOOR, "floor")
ceil = _same_dtype_unary(P.CEIL, "ceil")
trunc = fix = _same_dtype_unary(P.TRUNC, "trunc", "fix")
frac = _same_dtype_unary(P.FRAC, "frac")


@tensor_method("round")
def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """Round half to even, to ``decimals`` decimal places."""
    check_tensor(input, "round")
    return bind(P.ROUND, input, decimals=int(decimals))


# ------------------------------------------------------------------------------ float binary
def _float_binary(op: OpDef, input: Any, other: Any, tensors_only: bool = True) -> Tensor:
    if tensors_only:
        check_tensor(input, op.name)
        check_tensor(other, op.name, "other")
    return binary(op, input, other, compute=float_compute(input, other))


@tensor_method("atan2", "arctan2")
def atan2(input: Tensor, other: Tensor) -> Tensor:
    """The angle of the point ``(other, input)``."""
    return _float_binary(M.ATAN2, input, other)


arctan2 = atan2


@tensor_method("hypot")
def hypot(input: Tensor, other: Tensor) -> Tensor:
    """``sqrt(input**2 + other**2)`` without overflow (floating dtypes only)."""
    check_tensor(input, "hypot")
    check_tensor(other, "hypot", "other")
    return binary(M.HYPOT, input, other)


@tensor_method("logaddexp")
def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """``log(exp(input) + exp(other))`` without overflow (floating dtypes only)."""
    check_tensor(input, "logaddexp")
    check_tensor(other, "logaddexp", "other")
    return binary(M.LOGADDEXP, input, other)


@tensor_method("float_power")
def float_power(input: Any, exponent: Any) -> Tensor:
    """``input ** exponent`` computed in float64."""
    from ember._frontend.pointwise import pow as _pow
    if isinstance(input, Tensor):
        input = to_dtype(input, dt.float64)
    if isinstance(exponent, Tensor):
        exponent = to_dtype(exponent, dt.float64)
    elif not isinstance(input, Tensor):
        raise EmberTypeError("[float_power] expected at least one Tensor argument")
    elif isinstance(exponent, (int, bool)):
        exponent = float(exponent)
    if not isinstance(input, Tensor):
        input = float(input)
    return _pow(input, exponent)


@tensor_method("addcmul")
def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``input + value * tensor1 * tensor2``."""
    return _addc(M.ADDCMUL, input, tensor1, tensor2, value)


def _addc(op: OpDef, input: Tensor, t1: Tensor, t2: Tensor, value: Any) -> Tensor:
    for nm, t in (("input", input), ("tensor1", t1), ("tensor2", t2)):
        check_tensor(t, op.name, nm)
    compute = dt.result_type(input, t1, t2)
    # an integer result truncates a float ``value`` (PyTorch: addcmul(i, i, i, value=1.5))
    x, a, b = prepare(op.name, (input, t1, t2), compute)
    return bind(op, x, a, b, value=scalar_for(value, compute))


@tensor_method("addcdiv")
def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``input + value * tensor1 / tensor2`` (integer division is refused, as in PyTorch)."""
    if not tensor1._dtype.is_floating_point and not tensor2._dtype.is_floating_point:
        raise EmberRuntimeError(
            "[addcdiv] Integer division with addcdiv is no longer supported, and in a future "
            "release addcdiv will perform a true division of tensor1 and tensor2. The historic "
            "addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / "
            "tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
            "tensor2) for float inputs. The future addcdiv behavior is just the latter "
            "implementation: (input + value * tensor1 / tensor2), for all dtypes.")
    return _addc(M.ADDCDIV, input, tensor1, tensor2, value)


@tensor_method("xlogy")
def xlogy(input: Any, other: Any) -> Tensor:
    """``input * log(other)``, 0 where ``input == 0`` (NaN where ``other`` is NaN)."""
    return _float_binary(M.XLOGY, input, other, tensors_only=False)


@tensor_method("copysign")
def copysign(input: Tensor, other: Any) -> Tensor:
    """``|input|`` with the sign of ``other``."""
    check_tensor(input, "copysign")
    return _float_binary(M.COPYSIGN, input, other, tensors_only=False)


_CPP_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
              "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int",
              "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
              "bool": "bool"}


@tensor_method("lerp")
def lerp(input: Tensor, end: Tensor, weight: Any) -> Tensor:
    """``input + weight * (end - input)``; ``weight`` is a number or a tensor."""
    check_tensor(input, "lerp")
    check_tensor(end, "lerp", "end")
    for nm, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t._dtype is not input._dtype:
            raise EmberRuntimeError(
                f"[lerp] expected dtype {_CPP_NAMES[input._dtype.name]} for `{nm}` but got "
                f"dtype {_CPP_NAMES[t._dtype.name]}")
    if not is_scalar(weight) and not isinstance(weight, Tensor):
        raise EmberTypeError(f"[lerp] weight must be a Tensor or a number, not "
                             f"{type(weight).__name__}")
    shapes = [t._data.shape for t in (input, end, weight) if isinstance(t, Tensor)]
    shape = broadcast_shapes("lerp", *shapes)
    w = expand_to(weight, shape) if isinstance(weight, Tensor) else float(weight)
    return bind(M.LERP, expand_to(input, shape), expand_to(end, shape), w)


# ------------------------------------------------------------------------------ operators
Tensor.__floordiv__ = floor_divide  # type: ignore[attr-defined]
Tensor.__rfloordiv__ = lambda self, other: floor_divide(other, self)  # type: ignore[attr-defined]
Tensor.__mod__ = remainder  # type: ignore[attr-defined]
Tensor.__rmod__ = lambda self, other: remainder(other, self)  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------ in-place
from ember._frontend.inplace import inplace_method  # noqa: E402

# gradients that read only the output (or nothing) need no copy of the original self
_OUTPUT_ONLY = {exp, exp2, expm1, sqrt, rsqrt, reciprocal, tan, tanh, sigmoid, erfinv, deg2rad,
                rad2deg, floor, ceil, trunc, frac, round, floor_divide, addcmul, addcdiv}
for _fn in (exp, exp2, expm1, log, log2, log10, log1p, sqrt, rsqrt, reciprocal, sin, cos, tan,
            asin, acos, atan, sinh, cosh, tanh, asinh, acosh, atanh, sigmoid, erf, erfc, erfinv,
            deg2rad, rad2deg, addcmul, addcdiv,
            logit, floor, ceil, trunc, frac, round, atan2, hypot, xlogy, copysign, lerp,
            floor_divide, remainder, fmod):
    inplace_method(_fn.__name__ + "_", _fn, "never" if _fn in _OUTPUT_ONLY else "always")
for _alias, _fn in (("arcsin_", asin), ("arccos_", acos), ("arctan_", atan), ("fix_", trunc),
                    ("arctan2_", atan2), ("arcsinh_", asinh), ("arccosh_", acosh),
                    ("arctanh_", atanh)):
    inplace_method(_alias, _fn)

Tensor.__ifloordiv__ = Tensor.floor_divide_  # type: ignore[attr-defined]
Tensor.__imod__ = Tensor.remainder_  # type: ignore[attr-defined]

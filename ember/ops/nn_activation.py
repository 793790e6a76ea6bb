"""Activation primitives of ``ember.nn.functional``: one fused pointwise OpDef per activation,
plus its derivative chain.

Each activation ``f`` is declared once as an ``_Act`` (forward kernel and the NumPy kernels of
its first derivatives).  From that, ``_register`` builds

* ``f(x, **params)``: the forward; its vjp binds ``f_backward(g, x)``;
* ``f_backward(g, x)`` = ``g * f'(x)``: linear in ``g``, so its vjp in ``g`` is itself and its
  vjp in ``x`` is ``f_backward_backward(gg * g, x)`` = ``gg * g * f''(x)``;
* and so on down the listed derivatives.  Past the last one, piecewise-linear/quadratic
  activations have a zero derivative almost everywhere (vjp ``None``); the smooth ones raise,
  since third derivatives of activations are not implemented.

Kernels compute float16/bfloat16 in float32 and round once (``lowp``), like PyTorch's CPU
kernels.  The frontend (``ember/nn/functional/activation.py``) checks dtypes and fills defaults.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ember import dtypes as dt
from ember.errors import DTypeError, EmberNotImplementedError, ShapeError
from ember.ops import _act_c, _parallel
from ember.ops._special import erf_np, normal_cdf_f32
from ember.ops._util import lowp, tensor_inputs
from ember.ops.movement import CAT
from ember.ops.registry import OpDef, bind, register

Kernel = Callable[..., np.ndarray]


@dataclass(frozen=True)
class _Act:
    name: str
    forward: Kernel                  # f(x, **params)
    derivs: tuple[Kernel, ...]       # f'(x, **params), f''(x, **params), ...
    ints: bool = False               # integer inputs allowed (relu, hardtanh, threshold)
    smooth: bool = True              # False: the derivative after the last listed one is 0 a.e.
    # PyTorch builds it from several ops, each rounding to float16/bfloat16: ``forward`` takes
    # ``rnd`` (round to the storage dtype) and applies it where PyTorch's ops end
    rounds: bool = False
    grad_name: str = ""
    # optional fused ``g * f'(x)`` (saves the full-size temporary of f'(x) and one pass)
    grad: Kernel | None = None
    c_expr: Any = None               # the forward's C template (OpDef.c_expr)
    grad_c_expr: Any = None          # C template of ``g * f'(x)`` ({0} = g, {1} = x)
    grad2_c_expr: Any = None         # C template of ``g * f''(x)`` ({0} = g, {1} = x)
    # optional one-pass kernel for every float dtype (half rounded once): None = not handled
    fast: Kernel | None = None


def _meta(name: str, ints: bool) -> Callable[..., tuple]:
    def meta(*inputs: Any, **params: Any) -> tuple:
        ts = tensor_inputs(inputs)
        shape, dtype = ts[0].shape, ts[0].dtype
        for t in ts[1:]:
            if t.shape != shape or t.dtype is not dtype:
                raise ShapeError(f"[{name}] primitive inputs must share shape and dtype; got "
                                 f"{tuple(shape)} {dtype.name} and {tuple(t.shape)} "
                                 f"{t.dtype.name}")
        ok = dtype.is_floating_point or (ints and dtype is not dt.bool)
        if not ok:
            raise DTypeError(f"[{name}] does not support dtype {dtype.name}; expected a "
                             f"floating{' or integer' if ints else ''} dtype")
        return shape, dtype
    return meta


def _cast_params(x: np.ndarray, params: dict) -> dict:
    """Integer inputs see their scalar parameters converted to the input's type (as PyTorch's
    ``Scalar.to<scalar_t>()``), so the result keeps the integer dtype."""
    if x.dtype.kind in "iu":
        return {k: (np.array(v).astype(x.dtype)[()] if isinstance(v, (int, float)) else v)
                for k, v in params.items()}
    return params


def _no_round(a: np.ndarray) -> np.ndarray:
    return a


def _forward_kernel(f: Kernel, rounds: bool, fast: Kernel | None = None) -> Kernel:
    def kernel(x: np.ndarray, **params: Any) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            return np.asarray(f(x, **_cast_params(x, params))).astype(x.dtype, copy=False)
    if not rounds and fast is None:
        return lowp(kernel)
    if not rounds:
        slow = lowp(kernel)

        def fast_kernel(x: np.ndarray, **params: Any) -> np.ndarray:
            out = fast(x, **params)
            return slow(x, **params) if out is None else out
        return fast_kernel

    def rounding_kernel(x: np.ndarray) -> np.ndarray:
        src = x.dtype
        if src.kind == "f" and src.itemsize == 2:  # float16 / bfloat16
            def rnd(a: np.ndarray) -> np.ndarray:
                return a.astype(src).astype(np.float32)
            return f(x.astype(np.float32), rnd=rnd).astype(src)
        return f(x, rnd=_no_round).astype(src, copy=False)
    return rounding_kernel


def _deriv_kernel(d: Kernel, fused: Kernel | None = None) -> Kernel:
    def kernel(g: Any, x: np.ndarray, **params: Any) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            if fused is not None and isinstance(g, np.ndarray) and g.dtype == x.dtype:
                out = fused(g, x, **params)
                if out is not None:
                    return out
            return np.asarray(g * d(x, **params)).astype(x.dtype, copy=False)
    return lowp(kernel)


def _blocked(fn: Kernel, *arrays: np.ndarray) -> np.ndarray:
    """``fn(*arrays)`` for an elementwise ``fn`` of same-shape float arrays that makes several
    temporaries: computed on cache-sized blocks (its temporaries stay in cache), spread over
    ember's threads when large.  Each block runs under its own errstate (worker threads do
    not inherit the caller's)."""
    shape = arrays[0].shape
    flat = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    n = flat[0].shape[0]
    block = _parallel.BLOCK

    def run(lo: int, hi: int, out: np.ndarray) -> None:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            out[lo:hi] = fn(*(a[lo:hi] for a in flat))

    out = np.empty(n, dtype=arrays[0].dtype)
    blocks = [(lo, min(lo + block, n)) for lo in range(0, n, block)]
    threads = min(_parallel.get_num_threads(), len(blocks))
    if n < _parallel.MIN_ELEMENTS or threads < 2:
        for lo, hi in blocks:
            run(lo, hi, out)
        return out.reshape(shape)

    todo = iter(blocks)  # shared: a thread that is descheduled does not hold up the others

    def work(k: int) -> None:
        for lo, hi in todo:
            run(lo, hi, out)

    _parallel._run([lambda k=k: work(k) for k in range(threads)])
    return out.reshape(shape)


def _register(a: _Act) -> OpDef:
    """Register ``a``'s forward OpDef and its derivative chain; returns the forward."""
    chain: list[OpDef] = []

    def deriv_vjp(k: int) -> Callable[..., tuple]:
        def vjp(ctx: Any, gg: Any) -> tuple:
            g, x = ctx.inputs
            ng, nx = ctx.needs_input_grad
            gg_g = bind(chain[k], gg, x, **ctx.params) if ng else None
            gx = None
            if nx:
                if k + 1 < len(chain):
                    gx = bind(chain[k + 1], gg * g, x, **ctx.params)
                elif a.smooth:
                    raise EmberNotImplementedError(
                        f"[{a.name}] derivatives of order {k + 2} and above are not "
                        "implemented")
            return (gg_g, gx)
        return vjp

    for k, d in enumerate(a.derivs):
        name = a.name + "_backward" * (k + 1)
        chain.append(register(OpDef(
            name, "pointwise", _meta(name, False),
            _deriv_kernel(d, a.grad if k == 0 else None), deriv_vjp(k),
            save=(0, 1), save_for={0: (1,), 1: (0, 1)},
            c_expr=(a.grad_c_expr, a.grad2_c_expr)[k],
            doc=f"``g * f^({k + 1})(x)`` for f = {a.name}.",
        )))

    def vjp(ctx: Any, g: Any) -> tuple:
        (x,) = ctx.inputs
        return (bind(chain[0], g, x, **ctx.params),)

    return register(OpDef(
        a.name, "pointwise", _meta(a.name, a.ints),
        _forward_kernel(a.forward, a.rounds, a.fast), vjp,
        save=(0,), tags=frozenset({"lowp_upcast"}), grad_name=a.grad_name, c_expr=a.c_expr,
        doc=f"The {a.name} activation.",
    ))


# ------------------------------------------------------------------------------ kernels
def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp of a non-positive number only: no overflow
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _softplus_raw(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_BETA = math.sqrt(2.0 / math.pi)
_GELU_KAPPA = 0.044715


def _gelu_tanh_block(x: np.ndarray) -> np.ndarray:
    """0.5 * x * (1 + tanh(beta * (x + kappa * x^3))) in PyTorch's operation order, in place
    on one temporary."""
    t = np.multiply(x, x)
    t *= x
    t *= _GELU_KAPPA
    t += x
    t *= _GELU_BETA
    np.tanh(t, out=t)
    t += 1.0
    t *= np.multiply(x, 0.5)
    return t


def _gelu_tanh_grad_block(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """g * gelu_tanh'(x), PyTorch's formula: 0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa
    x^2) with t = tanh(beta (x + kappa x^3))."""
    xsq = np.multiply(x, x)
    t = np.multiply(xsq, x)
    t *= _GELU_KAPPA
    t += x
    t *= _GELU_BETA
    np.tanh(t, out=t)
    xsq *= 3.0 * _GELU_KAPPA           # inner derivative beta * (1 + 3 kappa x^2), in xsq
    xsq += 1.0
    xsq *= _GELU_BETA
    rd = np.multiply(t, t)             # right derivative 0.5 x (1 - t^2) * inner derivative
    np.subtract(1.0, rd, out=rd)
    rd *= np.multiply(x, 0.5)
    rd *= xsq
    t += 1.0                           # left derivative 0.5 (1 + t)
    t *= 0.5
    t += rd
    t *= g
    return t


_GELU_FLUSH = np.float32(-12.9)   # the prelude's EMBER_GELU_FLUSHF: -0 below (torch: below -5.5)


def _gelu_f32_block(x: np.ndarray) -> np.ndarray:
    """x * Phi(x) as the prelude's ember_gelu_erff (the NumPy path without a C compiler)."""
    xc = np.maximum(x, _GELU_FLUSH)      # NaN propagates
    out = normal_cdf_f32(xc)
    out *= xc
    deep = x < _GELU_FLUSH
    out[deep] = x[deep] * np.float32(0)   # -0 (NaN for -inf), as torch
    out[x == np.inf] = np.nan             # torch's float kernels: NaN for +inf
    return out


def _gelu_f32_grad_block(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """g * (Phi(x) + x * phi(x))."""
    pdf = np.multiply(x, x)
    pdf *= -0.5
    np.exp(pdf, out=pdf)
    pdf *= _INV_SQRT2PI
    pdf *= x
    pdf += normal_cdf_f32(x)
    pdf *= g
    return pdf


def _gelu(x: np.ndarray, *, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return _blocked(_gelu_tanh_block, x)
    if x.dtype == np.float32:  # float32 (and float16/bfloat16, computed in float32)
        return _blocked(_gelu_f32_block, x)
    return x * 0.5 * (1.0 + erf_np(x * _INV_SQRT2))


def _gelu_grad(g: np.ndarray, x: np.ndarray, *, approximate: str) -> np.ndarray | None:
    if approximate == "tanh":
        return _blocked(_gelu_tanh_grad_block, g, x)
    if x.dtype == np.float32:
        return _blocked(_gelu_f32_grad_block, g, x)
    return None


def _gelu_fast(x: np.ndarray, *, approximate: str) -> np.ndarray | None:
    """Exact GELU of a float32/float16/bfloat16 array in one C pass (``_act_c``), or None."""
    return _act_c.gelu(x) if approximate == "none" else None


def _gelu_tanh_parts(x: np.ndarray) -> tuple:
    t = np.tanh(_GELU_BETA * (x + _GELU_KAPPA * x * x * x))
    du = _GELU_BETA * (1.0 + 3.0 * _GELU_KAPPA * x * x)
    return t, du


def _gelu_d1(x: np.ndarray, *, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        t, du = _gelu_tanh_parts(x)
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
    cdf = 0.5 * (1.0 + erf_np(x * _INV_SQRT2))
    return cdf + x * _INV_SQRT2PI * np.exp(-0.5 * x * x)


def _gelu_d2(x: np.ndarray, *, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        t, du = _gelu_tanh_parts(x)
        d2u = 6.0 * _GELU_BETA * _GELU_KAPPA * x
        return (1.0 - t * t) * (du + 0.5 * x * (d2u - 2.0 * t * du * du))
    return _INV_SQRT2PI * np.exp(-0.5 * x * x) * (2.0 - x * x)


def _silu_d1(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def _silu_d2(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(x)
    return s * (1.0 - s) * (2.0 + x * (1.0 - 2.0 * s))


def _mish(x: np.ndarray) -> np.ndarray:
    return x * np.tanh(_softplus_raw(x))


def _mish_d1(x: np.ndarray) -> np.ndarray:
    t = np.tanh(_softplus_raw(x))
    return t + x * _sigmoid(x) * (1.0 - t * t)


def _mish_d2(x: np.ndarray) -> np.ndarray:
    t = np.tanh(_softplus_raw(x))
    s = _sigmoid(x)
    return (1.0 - t * t) * s * (2.0 + x * (1.0 - s) - 2.0 * x * s * t)


def _softplus(x: np.ndarray, *, beta: float, threshold: float) -> np.ndarray:
    bx = x * beta
    return np.where(bx > threshold, x, np.log1p(np.exp(bx)) / beta)


def _softplus_d1(x: np.ndarray, *, beta: float, threshold: float) -> np.ndarray:
    bx = x * beta
    return np.where(bx > threshold, 1.0, _sigmoid(bx))


def _softplus_d2(x: np.ndarray, *, beta: float, threshold: float) -> np.ndarray:
    bx = x * beta
    s = _sigmoid(bx)
    return np.where(bx > threshold, 0.0, beta * s * (1.0 - s))


def _elu(x: np.ndarray, *, alpha: float, scale: float, input_scale: float) -> np.ndarray:
    return np.where(x <= 0, np.expm1(x * input_scale) * (alpha * scale), x * scale)


def _elu_d1(x: np.ndarray, *, alpha: float, scale: float, input_scale: float) -> np.ndarray:
    return np.where(x <= 0, input_scale * alpha * scale * np.exp(x * input_scale), scale)


def _elu_d2(x: np.ndarray, *, alpha: float, scale: float, input_scale: float) -> np.ndarray:
    return np.where(x <= 0, input_scale * input_scale * alpha * scale * np.exp(x * input_scale),
                    0.0)


def _hardtanh(x: np.ndarray, *, min_val: Any, max_val: Any) -> np.ndarray:
    return np.minimum(np.maximum(x, min_val), max_val)


def _hardtanh_d1(x: np.ndarray, *, min_val: float, max_val: float) -> np.ndarray:
    return ((x > min_val) & (x < max_val)) | np.isnan(x)


def _leaky_relu(x: np.ndarray, *, negative_slope: float) -> np.ndarray:
    return np.where(x > 0, x, x * negative_slope)


def _threshold(x: np.ndarray, *, threshold: Any, value: Any) -> np.ndarray:
    return np.where(x <= threshold, value, x)


def _logsigmoid(x: np.ndarray) -> np.ndarray:
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


def _sig_d1(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(x)
    return s * (1.0 - s)


def _sig_d2(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(x)
    return s * (1.0 - s) * (1.0 - 2.0 * s)


def _tanh_d1(x: np.ndarray) -> np.ndarray:
    t = np.tanh(x)
    return 1.0 - t * t


def _tanh_d2(x: np.ndarray) -> np.ndarray:
    t = np.tanh(x)
    return -2.0 * t * (1.0 - t * t)


def _hardswish_d1(x: np.ndarray) -> np.ndarray:
    return np.where(x < -3.0, 0.0, np.where(x <= 3.0, x / 3.0 + 0.5, 1.0))


# C templates.  Both avoid the cancellation of 1 + erf / 1 + tanh for x < 0: the prelude's
# ember_normal_cdf is Phi(x) = erfc(-x / sqrt 2) / 2 (in float, eager's float32 formula), and
# 0.5 (1 + tanh(u)) = sigmoid(2u); both vectorize (libm's erf/tanh would not)
_GELU_C = {"approximate": {
    "none": "ember_gelu_erf({0})",     # x * Phi(x); -0 below -12.9 in float (as torch)
    "tanh": "({0} * ember_sigmoid(ember_like({0}, 2 * M_2_SQRTPI * M_SQRT1_2) * "
            "({0} + ember_like({0}, 0.044715) * {0} * {0} * {0})))",
}}

# g * gelu_tanh'(x) ({0} = g, {1} = x) in _gelu_tanh_grad_block's operation order; the erf
# form has no template (its backward stays eager)
_GELU_T = (f"ember_tanh(({{1}} * {{1}} * {{1}} * ember_like({{1}}, {_GELU_KAPPA!r}) + {{1}}) * "
           f"ember_like({{1}}, {_GELU_BETA!r}))")
_GELU_GRAD_C = {"approximate": {"tanh": (
    f"(((({_GELU_T} + ember_like({{1}}, 1)) * ember_like({{1}}, 0.5)) + "
    f"(ember_like({{1}}, 1) - {_GELU_T} * {_GELU_T}) * ({{1}} * ember_like({{1}}, 0.5)) * "
    f"(({{1}} * {{1}} * ember_like({{1}}, {3.0 * _GELU_KAPPA!r}) + ember_like({{1}}, 1)) * "
    f"ember_like({{1}}, {_GELU_BETA!r}))) * {{0}})")}}

# g * gelu'(x) of the erf form: the float32 path (and float16/bfloat16, computed in float32)
# is _gelu_f32_grad_block's Phi(x) + x phi(x) with ember_normal_cdf (eager's normal_cdf_f32), the
# float64 one _gelu_d1's 0.5 (1 + erf(x / sqrt 2)) + x phi(x)
_GELU_GRAD_C["approximate"]["none"] = (
    f"(ember_pick({{1}}, ember_exp({{1}} * {{1}} * ember_like({{1}}, -0.5)) * "
    f"ember_like({{1}}, {_INV_SQRT2PI!r}) * {{1}} + ember_normal_cdf({{1}}), "
    f"ember_like({{1}}, 0.5) * (ember_like({{1}}, 1) + ember_erf({{1}} * "
    f"ember_like({{1}}, {_INV_SQRT2!r}))) + {{1}} * ember_like({{1}}, {_INV_SQRT2PI!r}) * "
    f"ember_exp(ember_like({{1}}, -0.5) * {{1}} * {{1}})) * {{0}})")


def _c(text: str, x: str) -> str:
    """A C template from ``text`` written with ``@x`` for the input (``x``: ``{0}`` in a
    forward, ``{1}`` in a derivative), ``@g`` for the gradient (``{0}``) and ``@L(c)`` for the
    constant ``c`` in the input's type (``ember_like``)."""
    return text.replace("@L(", "ember_like(@x, ").replace("@x", x).replace("@g", "{0}")


def _fwd(text: str) -> str:
    return _c(text, "{0}")


def _bwd(text: str) -> str:
    return _c(text, "{1}")


# C templates of the rest, each the eager kernel's operations in its order and its types
# (NumPy 2: a Python float meets a float32 array as float32 -- ember_like / ember_as of the
# param, which arrives as a double --, while np.where(c, 1.0, p) of two Python floats is a float64
# array, so g * that is a double product rounded once).  The piecewise ones are bit-exact with
# eager; those calling exp/expm1/log1p/tanh/sigmoid/erf are within the prelude's ulp bounds of
# NumPy's functions.  ember_select computes both branches (they vectorize).
_SIGMOID_X = "ember_sigmoid(@x)"
_TANH_X = "ember_tanh(@x)"
_MISH_T = "ember_tanh(ember_logaddexp(@L(0), @x))"       # tanh(softplus(x)), as _mish
_SP_BX = "(@x * @L({beta}))"
_SIGN_X = "((@x > 0) ? 1 : ((@x < 0) ? -1 : ((@x != @x) ? @x : 0)))"   # np.sign: +0 at -0
_SHRINK_MASK = "((@x >= ember_like(@x, -({lambd}))) & (@x <= @L({lambd})))"

# hardtanh/threshold take integers too: their params in the input's type (ember_as)
_HARDTANH_C = ("ember_minimum(ember_maximum({0}, ember_as({0}, {min_val})), "
               "ember_as({0}, {max_val}))")
_HARDTANH_GRAD_C = _bwd("(@g * ((((@x > @L({min_val})) & (@x < @L({max_val}))) | (@x != @x)) "
                        "? 1 : 0))")
_LEAKY_C = _fwd("ember_select(@x > 0, @x, @x * @L({negative_slope}))")
_LEAKY_GRAD_C = _bwd("@L((double)@g * ((@x > 0) ? 1.0 : {negative_slope}))")
_THRESHOLD_C = "(({0} <= ember_as({0}, {threshold})) ? ember_as({0}, {value}) : {0})"
# value does not enter the gradient (void: the lowering wants every param in the template)
_THRESHOLD_GRAD_C = _bwd("((void)({value}), @g * ((@x <= @L({threshold})) ? 0 : 1))")
_SILU_GRAD_C = _bwd(f"(@g * ({_SIGMOID_X} * (@L(1) + @x * (@L(1) - {_SIGMOID_X}))))")
_SILU_GRAD2_C = _bwd(f"(@g * ({_SIGMOID_X} * (@L(1) - {_SIGMOID_X}) * "
                     f"(@L(2) + @x * (@L(1) - @L(2) * {_SIGMOID_X}))))")
_MISH_C = _fwd(f"(@x * {_MISH_T})")
_MISH_GRAD_C = _bwd(f"(@g * ({_MISH_T} + @x * {_SIGMOID_X} * (@L(1) - {_MISH_T} * {_MISH_T})))")
_MISH_GRAD2_C = _bwd(f"(@g * ((@L(1) - {_MISH_T} * {_MISH_T}) * {_SIGMOID_X} * "
                     f"(@L(2) + @x * (@L(1) - {_SIGMOID_X}) - @L(2) * @x * {_SIGMOID_X} * "
                     f"{_MISH_T})))")
_SOFTPLUS_C = _fwd(f"ember_select({_SP_BX} > @L({{threshold}}), @x, "
                   f"ember_log1p(ember_exp({_SP_BX})) / @L({{beta}}))")
_SOFTPLUS_GRAD_C = _bwd(f"(@g * ember_select({_SP_BX} > @L({{threshold}}), @L(1), "
                        f"ember_sigmoid({_SP_BX})))")
_SOFTPLUS_GRAD2_C = _bwd(f"(@g * ember_select({_SP_BX} > @L({{threshold}}), @L(0), "
                         f"@L({{beta}}) * ember_sigmoid({_SP_BX}) * "
                         f"(@L(1) - ember_sigmoid({_SP_BX}))))")
_ELU_C = _fwd("ember_select(@x <= 0, ember_expm1(@x * @L({input_scale})) * "
              "@L({alpha} * {scale}), @x * @L({scale}))")
_ELU_GRAD_C = _bwd("(@g * ember_select(@x <= 0, @L({input_scale} * {alpha} * {scale}) * "
                   "ember_exp(@x * @L({input_scale})), @L({scale})))")
_ELU_GRAD2_C = _bwd("(@g * ember_select(@x <= 0, "
                    "@L({input_scale} * {input_scale} * {alpha} * {scale}) * "
                    "ember_exp(@x * @L({input_scale})), @L(0)))")
_HARDSHRINK_C = _fwd(f"({_SHRINK_MASK} ? @L(0) : @x)")
_SHRINK_GRAD_C = _bwd(f"(@g * ({_SHRINK_MASK} ? 0 : 1))")
_SOFTSHRINK_C = _fwd("ember_select(@x > @L({lambd}), @x - @L({lambd}), "
                     "ember_select(@x < ember_like(@x, -({lambd})), @x + @L({lambd}), "
                     "@x * @L(0)))")
_RELU6_X = "ember_minimum(ember_maximum(@x + @L(3), @L(0)), @L(6))"
_HARDSIGMOID_C = _fwd(f"({_RELU6_X} / @L(6))")
_HARDSIGMOID_GRAD_C = _bwd("@L((double)@g * (((@x > -3.0) & (@x < 3.0)) ? 1.0 / 6.0 : 0.0))")
_HARDSWISH_C = _fwd(f"(@x * {_RELU6_X} / @L(6))")
_HARDSWISH_GRAD_C = _bwd("(@g * ember_select(@x < @L(-3), @L(0), "
                         "ember_select(@x <= @L(3), @x / @L(3) + @L(0.5), @L(1))))")
_HARDSWISH_GRAD2_C = _bwd("@L((double)@g * (((@x > -3.0) & (@x < 3.0)) ? 1.0 / 3.0 : 0.0))")
_LOGSIGMOID_C = _fwd("(ember_minimum(@x, @L(0)) - ember_log1p(ember_exp(-ember_abs(@x))))")
_LOGSIGMOID_GRAD_C = _bwd("(@g * ember_sigmoid(-@x))")
_LOGSIGMOID_GRAD2_C = _bwd(f"(@g * -({_SIGMOID_X} * (@L(1) - {_SIGMOID_X})))")
# softsign/tanhshrink: PyTorch rounds 1 + |x| / tanh(x) to float16/bfloat16 (eager's rnd)
_SOFTSIGN_C = _fwd("(@x / ember_dtype_round(@L(1) + ember_abs(@x)))")
_SOFTSIGN_GRAD_C = _bwd("(@g * (@L(1) / ((@L(1) + ember_abs(@x)) * (@L(1) + ember_abs(@x)))))")
_SOFTSIGN_GRAD2_C = _bwd(f"(@g * (@L(-2) * {_SIGN_X} / "
                         "ember_pow(@L(1) + ember_abs(@x), @L(3))))")
_TANHSHRINK_C = _fwd("(@x - ember_dtype_round(ember_tanh(@x)))")
_TANHSHRINK_GRAD_C = _bwd(f"(@g * ({_TANH_X} * {_TANH_X}))")
_TANHSHRINK_GRAD2_C = _bwd(f"(@g * -(@L(-2) * {_TANH_X} * (@L(1) - {_TANH_X} * {_TANH_X})))")

# g * gelu''(x): _gelu_d2 (not fused; the same formula in every dtype)
_GT = f"ember_tanh(@L({_GELU_BETA!r}) * (@x + @L({_GELU_KAPPA!r}) * @x * @x * @x))"
_GDU = f"(@L({_GELU_BETA!r}) * (@L(1) + @L({3.0 * _GELU_KAPPA!r}) * @x * @x))"
_GELU_GRAD2_C = {"approximate": {
    "none": _bwd(f"(@g * (@L({_INV_SQRT2PI!r}) * ember_exp(@L(-0.5) * @x * @x) * "
                 "(@L(2) - @x * @x)))"),
    "tanh": _bwd(f"(@g * ((@L(1) - {_GT} * {_GT}) * ({_GDU} + @L(0.5) * @x * "
                 f"(@L({6.0 * _GELU_BETA * _GELU_KAPPA!r}) * @x - @L(2) * {_GT} * {_GDU} * "
                 f"{_GDU}))))"),
}}

_ACTS = (
    _Act("relu", lambda x: np.maximum(x, 0), (lambda x: (x > 0) | np.isnan(x),), ints=True,
         smooth=False, c_expr="(({0} > 0 || {0} != {0}) ? {0} : 0)",  # NaN propagates
         # eager: g * ((x > 0) | isnan(x)): a product with 0 or 1 (-0, NaN for g = inf kept)
         grad_c_expr="({0} * (({1} > 0 || {1} != {1}) ? 1 : 0))"),
    _Act("hardtanh", _hardtanh, (_hardtanh_d1,), ints=True, smooth=False, c_expr=_HARDTANH_C,
         grad_c_expr=_HARDTANH_GRAD_C),
    _Act("leaky_relu", _leaky_relu,
         (lambda x, *, negative_slope: np.where(x > 0, 1.0, negative_slope),), smooth=False,
         c_expr=_LEAKY_C, grad_c_expr=_LEAKY_GRAD_C),
    _Act("threshold", _threshold,
         (lambda x, *, threshold, value: ~(x <= threshold),), ints=True, smooth=False,
         c_expr=_THRESHOLD_C, grad_c_expr=_THRESHOLD_GRAD_C),
    _Act("gelu", _gelu, (_gelu_d1, _gelu_d2), grad=_gelu_grad, c_expr=_GELU_C,
         grad_c_expr=_GELU_GRAD_C, grad2_c_expr=_GELU_GRAD2_C, fast=_gelu_fast),
    _Act("silu", lambda x: x * _sigmoid(x), (_silu_d1, _silu_d2),
         c_expr="({0} * ember_sigmoid({0}))", grad_c_expr=_SILU_GRAD_C,
         grad2_c_expr=_SILU_GRAD2_C),
    _Act("mish", _mish, (_mish_d1, _mish_d2), c_expr=_MISH_C, grad_c_expr=_MISH_GRAD_C,
         grad2_c_expr=_MISH_GRAD2_C),
    _Act("softplus", _softplus, (_softplus_d1, _softplus_d2), c_expr=_SOFTPLUS_C,
         grad_c_expr=_SOFTPLUS_GRAD_C, grad2_c_expr=_SOFTPLUS_GRAD2_C),
    _Act("elu", _elu, (_elu_d1, _elu_d2), c_expr=_ELU_C, grad_c_expr=_ELU_GRAD_C,
         grad2_c_expr=_ELU_GRAD2_C),
    _Act("hardshrink", lambda x, *, lambd: np.where((x >= -lambd) & (x <= lambd), 0.0, x),
         (lambda x, *, lambd: ~((x >= -lambd) & (x <= lambd)),), smooth=False,
         c_expr=_HARDSHRINK_C, grad_c_expr=_SHRINK_GRAD_C),
    _Act("softshrink",
         lambda x, *, lambd: np.where(x > lambd, x - lambd, np.where(x < -lambd, x + lambd,
                                                                       x * 0)),
         (lambda x, *, lambd: ~((x >= -lambd) & (x <= lambd)),), smooth=False,
         c_expr=_SOFTSHRINK_C, grad_c_expr=_SHRINK_GRAD_C),
    _Act("hardsigmoid", lambda x: np.minimum(np.maximum(x + 3.0, 0.0), 6.0) / 6.0,
         (lambda x: np.where((x > -3.0) & (x < 3.0), 1.0 / 6.0, 0.0),), smooth=False,
         c_expr=_HARDSIGMOID_C, grad_c_expr=_HARDSIGMOID_GRAD_C),
    _Act("hardswish", lambda x: x * np.minimum(np.maximum(x + 3.0, 0.0), 6.0) / 6.0,
         (_hardswish_d1, lambda x: np.where((x > -3.0) & (x < 3.0), 1.0 / 3.0, 0.0)),
         smooth=False, c_expr=_HARDSWISH_C, grad_c_expr=_HARDSWISH_GRAD_C,
         grad2_c_expr=_HARDSWISH_GRAD2_C),
    _Act("log_sigmoid", _logsigmoid, (lambda x: _sigmoid(-x), lambda x: -_sig_d1(x)),
         grad_name="LogSigmoidBackward0", c_expr=_LOGSIGMOID_C, grad_c_expr=_LOGSIGMOID_GRAD_C,
         grad2_c_expr=_LOGSIGMOID_GRAD2_C),
    _Act("softsign", lambda x, rnd: x / rnd(1.0 + np.abs(x)),
         (lambda x: 1.0 / np.square(1.0 + np.abs(x)),
          lambda x: -2.0 * np.sign(x) / (1.0 + np.abs(x)) ** 3), rounds=True,
         c_expr=_SOFTSIGN_C, grad_c_expr=_SOFTSIGN_GRAD_C, grad2_c_expr=_SOFTSIGN_GRAD2_C),
    _Act("tanhshrink", lambda x, rnd: x - rnd(np.tanh(x)),
         (lambda x: np.square(np.tanh(x)), lambda x: -_tanh_d2(x)), rounds=True,
         c_expr=_TANHSHRINK_C, grad_c_expr=_TANHSHRINK_GRAD_C,
         grad2_c_expr=_TANHSHRINK_GRAD2_C),
)

ACTIVATIONS: dict[str, OpDef] = {a.name: _register(a) for a in _ACTS}


def _relu_small(x: np.ndarray) -> np.ndarray:
    """relu's kernel for the binder's small-array path (``_bind_fast._eager_unary``): what the
    general kernel computes (``np.maximum`` raises no floating-point warning, keeps the dtype
    and propagates NaN), without its ``errstate`` context and parameter handling."""
    return np.maximum(x, 0)


object.__setattr__(ACTIVATIONS["relu"], "_ufunc", _relu_small)


# ------------------------------------------------------------------------------ glu
def _glu_meta(x, *, dim: int) -> tuple:  # noqa: ANN001
    shape = list(x.shape)
    shape[dim] //= 2
    return tuple(shape), x.dtype


def _glu_eager(x: np.ndarray, *, dim: int) -> np.ndarray:
    a, b = np.split(x, 2, axis=dim)
    with np.errstate(over="ignore", under="ignore"):
        return (a * _sigmoid(b)).astype(x.dtype, copy=False)


def _glu_bwd_meta(g, x, *, dim: int) -> tuple:  # noqa: ANN001
    return tuple(x.shape), x.dtype


def _glu_bwd_eager(g: np.ndarray, x: np.ndarray, *, dim: int) -> np.ndarray:
    a, b = np.split(x, 2, axis=dim)
    with np.errstate(over="ignore", under="ignore"):
        s = _sigmoid(b)
        return np.concatenate([g * s, g * a * s * (1.0 - s)], axis=dim).astype(x.dtype)


def _glu_vjp(ctx: Any, g: Any) -> tuple:
    (x,) = ctx.inputs
    return (bind(GLU_BACKWARD, g, x, **ctx.params),)


def _glu_bwd_vjp(ctx: Any, gg: Any) -> tuple:
    raise EmberNotImplementedError("[glu] the second derivative of glu is not implemented")


def _glu_decomp(x: Any, *, dim: int) -> Any:
    """glu with ember tensor ops (the compiler's decomposition): float16/bfloat16 in float32."""
    a, b = x.chunk(2, dim)
    if x.dtype.name in ("float16", "bfloat16"):
        a, b = a.float(), b.float()
    return (a * b.sigmoid()).to(x.dtype)


GLU = register(OpDef(
    "glu", "composite", _glu_meta, lowp(_glu_eager), _glu_vjp, save=(0,), decomp=_glu_decomp,
    doc="Gated linear unit: first half times sigmoid of the second half along ``dim``.",
))
def _glu_bwd_decomp(g: Any, x: Any, *, dim: int) -> Any:
    """glu_backward with ember tensor ops (the compiler's decomposition)."""
    a, b = x.chunk(2, dim)
    if x.dtype.name in ("float16", "bfloat16"):
        g, a, b = g.float(), a.float(), b.float()
    s = b.sigmoid()
    return bind(CAT, g * s, g * a * s * (1.0 - s), dim=dim % x.ndim).to(x.dtype)


GLU_BACKWARD = register(OpDef(
    "glu_backward", "composite", _glu_bwd_meta, lowp(_glu_bwd_eager), _glu_bwd_vjp,
    save=(0, 1), decomp=_glu_bwd_decomp, doc="Gradient of glu.",
))


# ------------------------------------------------------------------------------ prelu
def _prelu_weight(w: np.ndarray, ndim: int) -> np.ndarray:
    """The (C,) or (1,) weight shaped to broadcast along the channel dim (dim 1)."""
    if ndim < 2 or w.size == 1:
        return w.reshape(())
    return w.reshape((1, w.size) + (1,) * (ndim - 2))


def _prelu_meta(x, w) -> tuple:  # noqa: ANN001
    return tuple(x.shape), x.dtype


def _prelu_eager(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, x * _prelu_weight(w, x.ndim)).astype(x.dtype, copy=False)


def _prelu_bwd_meta(g, x, w) -> tuple:  # noqa: ANN001
    return (tuple(x.shape), x.dtype), (tuple(w.shape), w.dtype)


def _prelu_bwd_eager(g: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple:
    pos = x > 0
    gx = np.where(pos, g, g * _prelu_weight(w, x.ndim))
    gwx = np.where(pos, 0, g * x)
    if x.ndim >= 2 and w.size > 1:
        gw = gwx.sum(axis=tuple(i for i in range(x.ndim) if i != 1))
    else:
        gw = gwx.sum()
    return gx.astype(x.dtype), np.asarray(gw).reshape(w.shape).astype(w.dtype)


def _prelu_vjp(ctx: Any, g: Any) -> tuple:
    x, w = ctx.inputs
    gx, gw = bind(PRELU_BACKWARD, g, x, w)
    nx, nw = ctx.needs_input_grad
    return (gx if nx else None, gw if nw else None)


def _prelu_bwd_vjp(ctx: Any, *grads: Any) -> tuple:
    raise EmberNotImplementedError("[prelu] the second derivative of prelu is not implemented")


def _prelu_decomp(x: Any, w: Any) -> Any:
    """prelu with ember tensor ops (the compiler's decomposition): float16/bfloat16 in float32."""
    dtype = x.dtype
    if dtype.name in ("float16", "bfloat16"):
        x, w = x.float(), w.float()
    n = w.numel()
    w = w.reshape(()) if x.ndim < 2 or n == 1 else w.reshape((1, n) + (1,) * (x.ndim - 2))
    return x.where(x > 0, x * w).to(dtype)


PRELU = register(OpDef(
    "prelu", "composite", _prelu_meta, lowp(_prelu_eager), _prelu_vjp, save=(0, 1),
    decomp=_prelu_decomp,
    grad_name="PreluKernelBackward0",
    doc="``x`` where positive, ``weight * x`` elsewhere; weight per channel (dim 1) or shared.",
))
def _prelu_bwd_decomp(g: Any, x: Any, w: Any) -> tuple:
    """prelu_backward with ember tensor ops (the compiler's decomposition)."""
    dtype, wdtype, wshape = x.dtype, w.dtype, tuple(w.shape)
    if dtype.name in ("float16", "bfloat16"):
        g, x, w = g.float(), x.float(), w.float()
    n = w.numel()
    per_channel = x.ndim >= 2 and n > 1
    ws = w.reshape((1, n) + (1,) * (x.ndim - 2)) if per_channel else w.reshape(())
    pos = x > 0
    gx = g.where(pos, g * ws)
    gwx = (g * x).where(pos.logical_not(), 0.0)
    gw = gwx.sum(tuple(d for d in range(x.ndim) if d != 1)) if per_channel else gwx.sum()
    return gx.to(dtype), gw.reshape(wshape).to(wdtype)


PRELU_BACKWARD = register(OpDef(
    "prelu_backward", "composite", _prelu_bwd_meta, lowp(_prelu_bwd_eager), _prelu_bwd_vjp,
    num_outputs=2, save=(0, 1, 2), tags=frozenset({"multi_output"}),
    decomp=_prelu_bwd_decomp,
    doc="Gradients of prelu in input and weight.",
))

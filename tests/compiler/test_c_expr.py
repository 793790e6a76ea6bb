"""Conformance of every OpDef's ``c_expr`` template with its eager kernel.

For each registered op with a ``c_expr``, each dtype its meta accepts and a few parameter
sets, a C loop kernel is generated from the template (inputs loaded in their compute type,
params rendered by ``cprelude.render_c_expr``, the result stored with one rounding), compiled
with the prelude in one library, and run on sample values plus special values (±0, ±inf, NaN,
subnormals, dtype extremes).  Integer/bool results and exact float arithmetic must be
identical; transcendental functions may differ by a few ulp (recorded in
docs/compiler_prelude.md).
"""

from __future__ import annotations

import ctypes
import re
import shutil
import zlib

import ml_dtypes
import numpy as np
import pytest

from ember import dtypes as dt
from ember.compiler.c.codegen import prelude as cprelude
from ember.ops.registry import REGISTRY

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not available")

FLOATS = ("float32", "float64", "float16", "bfloat16")
INTS = ("bool", "uint8", "int8", "int16", "int32", "int64")

# params per op (every other op with a c_expr has none)
PARAMS = {
    "convert_element_type": [{"dtype": getattr(dt, n)} for n in FLOATS + INTS],
    "nan_to_num": [{"nan": 0.0, "posinf": None, "neginf": None},
                   {"nan": 1.5, "posinf": 1e10, "neginf": -2.0}],
    "addcmul": [{"value": 0.3}, {"value": 2}],
    "addcdiv": [{"value": 0.3}, {"value": 2}],
    "logit": [{"eps": None}, {"eps": 1e-3}],
    "round": [{"decimals": 0}, {"decimals": 2}, {"decimals": -1}],
    "rsqrt_eps": [{"eps": 1e-5}],
    "gelu": [{"approximate": "none"}, {"approximate": "tanh"}],
}
# the activations' params (their derivatives take the same): defaults, values not exact in
# float32, zeros and negative ones; integer-valued ones for the integer kernels
_ACT_PARAMS = {
    "hardtanh": [{"min_val": -1.0, "max_val": 1.0}, {"min_val": 0.0, "max_val": 6.0},
                 {"min_val": -0.3, "max_val": 2.7}, {"min_val": -2, "max_val": 3},
                 {"min_val": -1.0, "max_val": -1.0}],
    "leaky_relu": [{"negative_slope": 0.01}, {"negative_slope": -1.7},
                   {"negative_slope": 0.0}],
    "threshold": [{"threshold": 0.1, "value": 20.0}, {"threshold": -1.5, "value": -0.3},
                  {"threshold": 2, "value": 7}, {"threshold": 0.0, "value": -1e5}],
    "hardshrink": [{"lambd": 0.5}, {"lambd": 0.1}, {"lambd": 0.0}],
    "softshrink": [{"lambd": 0.5}, {"lambd": 0.1}, {"lambd": 0.0}],
    "softplus": [{"beta": 1.0, "threshold": 20.0}, {"beta": 0.3, "threshold": 5.0},
                 {"beta": 2.5, "threshold": 1.0}, {"beta": -0.7, "threshold": 20.0}],
    "elu": [{"alpha": 1.0, "scale": 1.0, "input_scale": 1.0},
            {"alpha": 1.6732632423543772, "scale": 1.0507009873554805, "input_scale": 1.0},
            {"alpha": 0.7, "scale": 1.0, "input_scale": 1.0 / 0.7}],
    "gelu": PARAMS["gelu"],
}
for _name, _sets in _ACT_PARAMS.items():
    for _suffix in ("", "_backward", "_backward_backward"):
        PARAMS[_name + _suffix] = _sets
PARAMS["_red_pow"] = [{"exponent": e} for e in (2.0, 3.0, 0.5, -1.0, 1.7, 0.0)]

# ops computed by a transcendental function (prelude or libm): compared in ulps; the value is
# the max ulp allowed for float32/float64 results (float16/bfloat16: 1 ulp of the dtype)
ULP = {name: 4 for name in (
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "sigmoid", "erf", "erfc", "asinh", "acosh",
    "atanh", "logaddexp", "atan2", "hypot", "xlogy", "pow", "logit", "gelu", "silu",
    "_red_pow", "softsign_backward_backward")}
# the smooth activations and their derivatives (exp, expm1, log1p, tanh, sigmoid, erf inside)
for _name in ("elu", "softplus", "mish", "log_sigmoid", "tanhshrink", "silu", "gelu"):
    for _suffix in ("", "_backward", "_backward_backward"):
        ULP.setdefault(_name + _suffix, 4)
# tanh(x)**2: twice the difference of the two tanh's (NumPy's and the prelude's, each within
# ~1.3 ulp) plus two roundings
ULP["tanhshrink_backward"] = 6
ULP["erfinv"] = 8
# the same double steps as eager (libm's tan/log/sin vs NumPy's); the reflection's cancellation
# near negative integers can turn their last bits into a few more ulp
ULP["digamma"] = 8
ULP["trigamma"] = 8
ULP["erfc"] = 8
# float functions: the frontend converts integer inputs first, so integer dtypes never reach
# the primitive (its eager kernel on integers is not a specification)
FLOAT_ONLY = set(ULP) | {"deg2rad", "rad2deg", "erfinv", "sqrt", "rsqrt", "reciprocal",
                         "rsqrt_eps", "copysign", "lerp", "logit", "sigmoid"}
# results formed by cancellation (m + log1p(...)): ulps counted at the operands' scale
CANCEL = {"logaddexp"}
# (op, dtype) where the EAGER kernel cancels, as PyTorch's does, and the template does not:
# gelu's 0.5 x (1 + erf(x / sqrt 2)) in float64 and 0.5 x (1 + tanh(u)) in every dtype lose
# their relative accuracy for x < 0 (NumPy's float32 tanh(-9.5) is -0.99999994, not -1); the
# templates use erfc and sigmoid(2u).  Ulps are counted at the input's scale there.
CANCEL_EAGER = {("gelu", "float64", "none")} | {("gelu", d, "tanh") for d in FLOATS}
# derivatives whose formula (eager's and the template's alike) cancels: gelu' = Phi(x) + x phi(x)
# near x = -0.75, 0.5 (1 + t) + ... and 1 - t*t near |t| = 1 (the tanh forms, mish', mish''),
# s (1 - s) (2 + x (1 - 2 s)) (silu''), x - tanh(x) near 0 (tanhshrink): the last bits of tanh,
# exp, erf (NumPy's vs the prelude's, each within its ulp bound) become many ulp of the small
# result; silu' = s (1 + x (1 - s)) near its zero at x = -1.28.  Ulps are counted at the scale
# of the terms, |g| * max(1, |x|)**k (forward: |x|); k = 3 for gelu' and gelu'' (the tanh
# form's x * du and x * du**2, du ~ 3 kappa beta x**2).
CANCEL_TERMS = {"gelu_backward": 3, "gelu_backward_backward": 3, "mish_backward": 1,
                "mish_backward_backward": 1, "silu_backward": 1, "silu_backward_backward": 1,
                "tanhshrink": 1, "tanhshrink_backward_backward": 1}

# values whose eager result is a matter of platform behaviour (C leaves it undefined)
_FLOAT_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 2.5, 3.0, -3.0, 0.1, -0.7, 7.25,
                 -100.5, 1e-3, 1e4, -1e4, 1e30, -1e30, 1e-40, -1e-42, 0.999, -0.999, 1e-7,
                 np.inf, -np.inf, np.nan, 65504.0, 3.4e38, 88.5, -90.0, 710.0]


def _values(name: str, rng: np.random.Generator) -> np.ndarray:
    if name == "bool":
        return np.array([False, True])
    if name in FLOATS:
        v = np.concatenate([_FLOAT_VALUES, rng.standard_normal(40) * 3, rng.uniform(-1, 1, 20)])
        with np.errstate(all="ignore"):
            return v.astype(dt.__dict__[name].np)
    info = np.iinfo(name)
    v = np.array([0, 1, -1, 2, -2, 3, 5, -7, 13, 100, -100, info.min, info.max, info.min + 1,
                  info.max - 1], np.int64)
    v = np.concatenate([v, rng.integers(info.min, int(info.max) + 1, 20, dtype=np.int64)])
    return np.unique(np.clip(v, info.min, info.max)).astype(name)


def _np_dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _arity(op) -> int:
    return max(int(i) for _, t in op.c_templates() for i in re.findall(r"\{(\d+)\}", t)) + 1


def _inputs(op, dname: str, params: dict, rng: np.random.Generator) -> list | None:
    """Input arrays (all pairs of values for binary ops), or None where the op's domain makes
    the eager kernel raise or the C conversion undefined."""
    n = _arity(op)
    v = _values(dname, rng)
    if n == 1:
        arrays = [v]
    elif n == 2:
        a, b = np.meshgrid(v, v, indexing="ij")
        arrays = [a.ravel(), b.ravel()]
    else:
        k = len(v)
        arrays = [v[rng.integers(0, k, 400)] for _ in range(n)]
        arrays[:2] = [np.resize(v, 400), np.resize(v[::-1], 400)]
    if op.name == "where":
        arrays[0] = rng.integers(0, 2, arrays[1].size).astype(bool)
    if dname not in FLOATS:
        if op.name in ("div_trunc", "div_floor", "remainder", "fmod"):
            arrays[1] = np.where(arrays[1] == 0, np.ones((), arrays[1].dtype), arrays[1])
        if op.name in ("addcmul", "addcdiv"):
            # NumPy wraps each integer step separately; C wraps the whole expression once
            for k in range(3):
                arrays[k] = np.clip(arrays[k], -11, 11).astype(dname)
        if op.name == "pow":
            arrays[1] = np.clip(arrays[1], -3 if dname != "uint8" else 0, 9).astype(dname)
        if op.name in ("bitwise_left_shift", "bitwise_right_shift"):
            bits = np.dtype(dname).itemsize * 8
            arrays[1] = rng.integers(-3 if dname != "uint8" else 0, bits + 4,
                                     arrays[1].size).astype(dname)
    if op.name in CANCEL_TERMS and n == 2:
        # a factor such as 1 - t*t (or 0.5 (1 + tanh(u)) for x < -5) is 0 or a few ulp by
        # tanh's last bit (NumPy's vs the prelude's): times an infinite g, NaN or +-inf
        keep = np.isfinite(arrays[0].astype(np.float64))
        arrays = [a[keep] for a in arrays]
    if op.name == "convert_element_type" and dname in FLOATS:
        target = params["dtype"].name
        if target in INTS[1:]:
            # float -> int outside the target's range (and NaN/inf) is undefined in C
            info = np.iinfo(target)
            x = arrays[0].astype(np.float64)
            ok = np.isfinite(x) & (np.trunc(x) >= info.min) & (np.trunc(x) <= info.max)
            arrays[0] = arrays[0][ok]
    return arrays


def _cases() -> list:
    """(op, input dtype name, params, output dtype name) for every supported combination."""
    out = []
    for op in sorted((o for o in REGISTRY.values() if o.c_expr), key=lambda o: o.name):
        for dname in FLOATS + INTS:
            if op.name in FLOAT_ONLY and dname not in FLOATS:
                continue
            for params in PARAMS.get(op.name, [{}]):
                probe = [dt.__dict__[dname]] * _arity(op)
                if op.name == "where":
                    probe[0] = dt.bool
                try:
                    _, odt = op.meta(*(_Meta(d) for d in probe), **params)
                    # float math accepts integers only through the frontend, which converts
                    # them first: the primitive's eager kernel then returns another dtype
                    got = op.eager(*(np.ones(2, _np_dtype(d.name)) for d in probe), **params)
                except Exception:   # the eager op rejects this dtype
                    continue
                if got.dtype != _np_dtype(odt.name):
                    continue
                out.append((op, dname, params, odt.name))
    return out


class _Meta:
    """What meta functions read of an input: shape and dtype."""

    def __init__(self, d) -> None:
        self.shape = (3,)
        self.dtype = d


CASES = _cases()


def _kernel(i: int, op, dname: str, params: dict, oname: str) -> str:
    n = _arity(op)
    in_names = [dname] * n
    if op.name == "where":
        in_names[0] = "bool"
    args = [cprelude.load_expr(t, f"((const {cprelude.C_TYPES[t]}*)in{j})[i]")
            for j, t in enumerate(in_names)]
    expr = cprelude.render_c_expr(op, args, params, dname)
    sig = ", ".join(f"const void* in{j}" for j in range(n))
    return (f"void k{i}({sig}, void* out, long n) {{\n"
            f"    for (long i = 0; i < n; i++) (({cprelude.C_TYPES[oname]}*)out)[i] = "
            f"{cprelude.store_expr(oname, expr)};\n}}\n")


@pytest.fixture(scope="module")
def lib():
    src = '#include "ember_prelude.h"\n' + "".join(
        _kernel(i, *case) for i, case in enumerate(CASES))
    # -O1: the values do not depend on the level (no FMA contraction, no fast-math); the
    # prelude's -O3 code generation is tested in test_prelude.py.  Hundreds of kernels at -O3
    # take gcc most of a minute.
    return cprelude.build_test_lib(src, extra_flags=("-O1",))


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    with np.errstate(all="ignore"):
        sp = np.spacing(np.maximum(np.abs(want), np.finfo(want.dtype).smallest_subnormal))
        err = np.abs(g - w) / sp.astype(np.float64)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    return np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))


@pytest.mark.parametrize("idx", range(len(CASES)),
                         ids=[f"{c[0].name}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_c_expr_matches_eager(lib, idx):
    op, dname, params, oname = CASES[idx]
    # seeded by the case itself, not its position: adding an op leaves the others' samples
    rng = np.random.default_rng(zlib.crc32(f"{op.name}-{dname}-{params}-{oname}".encode()))
    arrays = _inputs(op, dname, params, rng)
    with np.errstate(all="ignore"):
        want = op.eager(*arrays, **params)
    out = np.empty(want.shape, _np_dtype(oname))
    ptrs = [np.ascontiguousarray(a) for a in arrays]
    getattr(lib, f"k{idx}")(*(ctypes.c_void_p(a.ctypes.data) for a in ptrs),
                            ctypes.c_void_p(out.ctypes.data), ctypes.c_long(out.size))
    if oname not in FLOATS or op.name not in ULP:
        # exact: bit patterns (NaN vs NaN with any payload counts as equal)
        if oname in FLOATS:
            w = want.astype(np.float64)
            g = out.astype(np.float64)
            nan = np.isnan(w) & np.isnan(g)
            bad = ~nan & ((g != w) | (np.signbit(g) != np.signbit(w)))
        else:
            bad = out != want
        idxs = np.flatnonzero(bad)
        assert idxs.size == 0, (op.c_template(params), [a[idxs[:4]] for a in arrays],
                                out[idxs[:4]], want[idxs[:4]])
        return
    tol = ULP[op.name] if oname in ("float32", "float64") else 1
    err = _ulps(out, want)
    if op.name in CANCEL or (op.name, dname, params.get("approximate")) in CANCEL_EAGER:
        scale = np.maximum.reduce([np.abs(a.astype(np.float64)) for a in arrays])
        with np.errstate(all="ignore"):
            sp_want = np.spacing(np.abs(want)).astype(np.float64)
            scaled = err * sp_want / np.maximum(
                np.spacing(scale.astype(want.dtype)).astype(np.float64), sp_want)
        err = np.where(err == 0, 0.0, scaled)
    elif op.name in CANCEL_TERMS:
        x = np.abs(arrays[-1].astype(np.float64))
        scale = x if len(arrays) == 1 else (np.abs(arrays[0].astype(np.float64))
                                            * np.maximum(x, 1) ** CANCEL_TERMS[op.name])
        scale = np.minimum(scale, float(ml_dtypes.finfo(want.dtype).max))
        with np.errstate(all="ignore"):
            sp_want = np.spacing(np.abs(want)).astype(np.float64)
            scaled = err * sp_want / np.maximum(
                np.spacing(scale.astype(want.dtype)).astype(np.float64), sp_want)
        err = np.where(err == 0, 0.0, scaled)
    k = int(np.argmax(err))
    assert err.max() <= tol, (op.c_template(params), [a[k] for a in arrays], out[k], want[k],
                              err.max())

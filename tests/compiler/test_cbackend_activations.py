"""The activation family in the C backend (docs/compiler.md "Activations in C"): every
activation, its first and second derivative primitives, heaviside and the reductions' pointwise
helpers compile to C kernels with no extern step, and give eager's values on special inputs
(+-0, +-inf, NaN, subnormals, the parameters' thresholds) in float32 and float64:

* bit for bit (signed zeros and NaN positions included) where eager's arithmetic is plain
  IEEE operations (the piecewise ones: hardtanh, leaky_relu, threshold, the shrinks,
  hardsigmoid, hardswish, softsign, heaviside, the masks);
* within 4 ulp (tanh(x)**2: 6) where exp/expm1/log1p/tanh/sigmoid/erf/pow are involved
  (NumPy's functions vs the prelude's, each within its documented bound); where the formula
  itself cancels (eager's as well), ulps are counted at the scale of its terms, as
  tests/compiler/test_c_expr.py does.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.config import config
from ember.ops.registry import REGISTRY, bind
from tests.compiler.test_c_expr import CANCEL_TERMS, ULP

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

F = ember.nn.functional

# name -> (params, thresholds: values where the formula switches, exact: bit-exact with eager)
ACTS = {
    "hardtanh": ({"min_val": -0.3, "max_val": 2.7}, (-0.3, 2.7), True),
    "leaky_relu": ({"negative_slope": 0.01}, (0.0,), True),
    "threshold": ({"threshold": 0.1, "value": 20.0}, (0.1,), True),
    "hardshrink": ({"lambd": 0.5}, (-0.5, 0.5), True),
    "softshrink": ({"lambd": 0.5}, (-0.5, 0.5), True),
    "hardsigmoid": ({}, (-3.0, 3.0), True),
    "hardswish": ({}, (-3.0, 3.0), True),
    "softsign": ({}, (), True),
    "elu": ({"alpha": 1.6732632423543772, "scale": 1.0507009873554805, "input_scale": 1.0},
            (0.0,), False),
    "softplus": ({"beta": 2.5, "threshold": 1.0}, (0.4, 20.0), False),
    "mish": ({}, (), False),
    "log_sigmoid": ({}, (), False),
    "tanhshrink": ({}, (), False),
    "silu": ({}, (), False),
    "gelu": ({"approximate": "none"}, (), False),
    "gelu_tanh": ({"approximate": "tanh"}, (), False),
}
# derivative primitives that exist (the piecewise-linear ones have one)
_DERIVS = {"hardtanh": 1, "leaky_relu": 1, "threshold": 1, "hardshrink": 1, "softshrink": 1,
           "hardsigmoid": 1, "hardswish": 2}
# bit-exact derivatives (g * a mask or a piecewise-constant/linear factor)
_EXACT_DERIVS = {"hardtanh", "leaky_relu", "threshold", "hardshrink", "softshrink",
                 "hardsigmoid", "hardswish", "softsign_backward"}


def _cases():
    out = []
    for key, (params, th, exact) in ACTS.items():
        name = "gelu" if key == "gelu_tanh" else key
        # (gelu's and silu's forward templates predate these: tests/compiler/test_c_expr.py)
        for k in range(1 if name in ("gelu", "silu") else 0, _DERIVS.get(name, 2) + 1):
            op = name + "_backward" * k
            ex = exact if k == 0 else (name in _EXACT_DERIVS or op in _EXACT_DERIVS)
            if op == "softsign_backward_backward":
                ex = False  # (1 + |x|) ** 3: NumPy's pow vs libm's
            out.append(pytest.param(op, params, th, ex, id=f"{op}-{key}" if k else key))
    return out


_SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-42, 1e-310, 1.0, -1.0, 3.0, -3.0,
            2.9999999, -2.9999999, 88.7, -104.5, 710.0, -750.0, 1e30, -1e30, 0.5, -0.75]


def _values(dtype, th):
    rng = np.random.default_rng(0)
    v = list(_SPECIAL)
    for t in th:
        t32 = float(np.float32(t)) if dtype == "float32" else t
        v += [t, -t, t32, np.nextafter(t32, np.inf), np.nextafter(t32, -np.inf)]
    v = np.concatenate([np.array(v), rng.standard_normal(100) * 4, rng.uniform(-1, 1, 50)])
    with np.errstate(all="ignore"):
        return v.astype(dtype)


def _compiled(fn, *args):
    ember.compiler.reset()
    got = ember.compile(fn, backend="c", fullgraph=True)(*args)
    return got, fn(*args), cbackend.last_compiled()


def _ulps(got, want):
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(all="ignore"):
        sp = np.spacing(np.maximum(np.abs(want), np.finfo(want.dtype).smallest_subnormal))
        err = np.abs(g - w) / sp.astype(np.float64)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    return np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))


def _check(op, got, want, arrays, exact):
    a, b = got.numpy(), want.numpy()
    assert a.dtype == b.dtype and a.shape == b.shape
    if exact:
        bad = ~(np.isnan(a) & np.isnan(b)) & ((a != b) | (np.signbit(a) != np.signbit(b)))
        k = np.flatnonzero(bad)
        assert k.size == 0, (op, [x[k[:4]] for x in arrays], a[k[:4]], b[k[:4]])
        return
    assert np.array_equal(np.isnan(a), np.isnan(b)), (op, "NaNs differ")
    err = _ulps(a, b)
    if op in CANCEL_TERMS:
        x = np.abs(arrays[-1].astype(np.float64))
        scale = x if len(arrays) == 1 else (np.abs(arrays[0].astype(np.float64))
                                            * np.maximum(x, 1) ** CANCEL_TERMS[op])
        scale = np.minimum(scale, np.finfo(b.dtype).max)
        with np.errstate(all="ignore"):
            sp_want = np.spacing(np.abs(b)).astype(np.float64)
            scaled = err * sp_want / np.maximum(np.spacing(scale.astype(b.dtype)), sp_want)
        err = np.where(err == 0, 0.0, scaled)
    k = int(np.argmax(err))
    assert err.max() <= ULP.get(op, 4), (op, [x[k] for x in arrays], a[k], b[k], err.max())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op,params,th,exact", _cases())
def test_activation_primitive_in_c(op, params, th, exact, dtype):
    """The primitive alone (g also runs over the special values for derivatives): one C
    kernel, no extern, eager's values."""
    x = _values(dtype, th)
    opdef = REGISTRY[op]
    if "_backward" in op:
        xs, gs = np.meshgrid(x, _values(dtype, ())[:40], indexing="ij")
        arrays = [gs.ravel(), xs.ravel()]
        if op in CANCEL_TERMS:
            # (test_c_expr: a factor such as 1 - t*t is 0 or a few ulp by tanh's last bit; an
            # infinite g makes that NaN or inf)
            keep = np.isfinite(arrays[0])
            arrays = [a[keep] for a in arrays]
    else:
        arrays = [x]
    args = [ember.tensor(a) for a in arrays]
    got, want, cg = _compiled(lambda *t: bind(opdef, *t, **params), *args)
    assert cg.stats.externs == 0 and cg.stats.fallbacks == [], cg.stats.fallbacks
    assert cg.stats.kernels == 1
    _check(op, got, want, arrays, exact)


_HELPERS = {
    "heaviside": 2, "_red_eq_mask": 2, "_red_safe_div": 2, "_red_sign": 1, "_red_notnan": 1,
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(_HELPERS) + ["_red_pow"])
def test_helper_primitive_in_c(op, dtype):
    """heaviside and the reductions' pointwise helpers: bit for bit (pow: 4 ulp; its
    exponent 0.5 is sqrt, as NumPy's power with a scalar exponent)."""
    x = _values(dtype, (0.0,))
    xs, ys = np.meshgrid(x, x[:40], indexing="ij")
    arrays = [xs.ravel(), ys.ravel()][:_HELPERS.get(op, 1)]
    args = [ember.tensor(a) for a in arrays]
    for params in ([{"exponent": e} for e in (2.0, 0.5, -1.0, 1.7)] if op == "_red_pow"
                   else [{}]):
        got, want, cg = _compiled(lambda *t, p=params: bind(REGISTRY[op], *t, **p), *args)
        assert cg.stats.externs == 0 and cg.stats.fallbacks == [], cg.stats.fallbacks
        if want.dtype == ember.bool:
            assert np.array_equal(got.numpy(), want.numpy())
        else:
            _check(op, got, want, arrays, op != "_red_pow")


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8"])
def test_integer_activations_in_c(dtype):
    """hardtanh / threshold / heaviside on integer tensors: params converted to the dtype as
    eager does (a float truncates, -1.0 wraps to 255 in uint8), bit for bit."""
    info = np.iinfo(dtype)
    x = np.array([0, 1, -1, 2, -2, 3, 5, -7, 100, info.min, info.max], np.int64)
    x = np.clip(x, info.min, info.max).astype(dtype)
    t = ember.tensor(x)

    def f(t):
        a = F.hardtanh(t, -1.0, 2.5)
        b = F.relu6(t)
        c = F.threshold(t, 1.5, -3) if dtype != "uint8" else a
        return a, b, c, ember.heaviside(t, t * 0 + 7)

    got, want, cg = _compiled(f, t)
    assert cg.stats.externs == 0 and cg.stats.fallbacks == [], cg.stats.fallbacks
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g.numpy(), w.numpy())


def test_lowp_activations_in_c():
    """float16/bfloat16 compute in float and round once; softsign/tanhshrink round their
    intermediate to the dtype where eager (PyTorch) does: equal to eager within 1 ulp of the
    dtype for the smooth ones, bit for bit for softsign."""
    x32 = _values("float32", (3.0, 0.5))
    for dt in (ember.float16, ember.bfloat16):
        t = ember.tensor(x32).to(dt)
        for name, exact in (("softsign", True), ("hardswish", True), ("tanhshrink", False),
                            ("elu", False)):
            got, want, cg = _compiled(lambda v, n=name: getattr(F, n)(v), t)
            assert cg.stats.externs == 0, cg.stats.fallbacks
            a = got.float().numpy()
            b = want.float().numpy()
            assert np.array_equal(np.isnan(a), np.isnan(b)), name
            fin = ~np.isnan(b)
            if exact:
                assert np.array_equal(a[fin], b[fin]), (name, dt)
            else:
                # 1 ulp of the result, plus 1 ulp of x where tanhshrink's x - tanh(x) (tanh
                # rounded to the dtype, its last bit NumPy's or the prelude's) cancels
                eps = 2.0 ** -10 if dt == ember.float16 else 2.0 ** -7
                step = np.spacing(np.abs(b[fin]).astype(np.float32)).astype(np.float64)
                step = step * (2.0 ** 13 if dt == ember.float16 else 2.0 ** 16)
                tol = step + np.abs(x32[fin]) * eps
                with np.errstate(invalid="ignore"):
                    err = np.where(a[fin] == b[fin], 0.0, np.abs(a[fin] - b[fin]))
                k = int(np.argmax(err - tol))
                assert np.all((err == 0) | (err <= tol)), (name, dt, x32[fin][k], a[fin][k],
                                                            b[fin][k])


def test_activation_gradients_in_c():
    """Forward and backward of a chain of the activations in one compiled graph: no extern."""
    rng = np.random.default_rng(3)
    x = ember.tensor(rng.standard_normal((8, 33)).astype(np.float32) * 3, requires_grad=True)

    def f(x):
        y = F.mish(F.elu(x, 0.7)) + F.softplus(x, 2.0, 5.0) + F.leaky_relu(x, 0.2)
        y = y + F.hardtanh(x, -2.0, 2.0) * F.logsigmoid(x) + F.softshrink(x) + F.hardswish(x)
        y = y + F.tanhshrink(x) * F.softsign(x) + F.hardsigmoid(x) + F.threshold(x, 0.3, -1.0)
        y = y + F.hardshrink(x) + F.silu(x) + F.gelu(x)
        (g,) = ember.autograd.grad(y.sum(), x)
        return y, g

    got, want, cg = _compiled(f, x)
    assert cg.stats.externs == 0 and cg.stats.fallbacks == [], cg.stats.fallbacks
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=2e-6,
                                   atol=2e-6)


def test_linear_hardswish_softplus_is_one_kernel():
    """linear -> hardswish -> softplus: the activations fuse with each other (and into the
    GEMM's epilogue): one kernel, no extern."""
    rng = np.random.default_rng(4)
    x = ember.tensor(rng.standard_normal((64, 32)).astype(np.float32))
    w = ember.tensor(rng.standard_normal((48, 32)).astype(np.float32) * 0.2)
    b = ember.tensor(rng.standard_normal(48).astype(np.float32))

    def f(x, w, b):
        return F.softplus(F.hardswish(F.linear(x, w, b)), 1.5, 4.0)

    got, want, cg = _compiled(f, x, w, b)
    assert cg.stats.externs == 0 and cg.stats.fallbacks == [], cg.stats.fallbacks
    assert cg.stats.kernels == 1, cg.stats
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)

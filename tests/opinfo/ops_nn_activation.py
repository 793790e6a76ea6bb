"""OpInfo entries for ``nn.functional`` activations (values, grads, double grads, in-place)."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import FLOATS, INTS, ErrorCase, OpInfo, Sample, make, standard_shapes

SIGNED = ("int8", "int16", "int32", "int64")


def _F(lib):  # noqa: N802
    return lib.nn.functional


def act_samples(low=-4.0, high=4.0, kwargs_list=({},), extreme=True,
                special=(np.inf, -np.inf, np.nan)):
    """Standard shapes, non-contiguous, each kwargs variant, and (for floats) values far out in
    both tails plus inf/nan."""
    def gen(dtype, rng):
        for shape in standard_shapes():
            yield Sample((make(shape, dtype, rng, low, high),), dict(kwargs_list[0]),
                         desc=f"{shape}")
        yield Sample((make((3, 4), dtype, rng, low, high, noncontig=True),),
                     dict(kwargs_list[0]), desc="non-contiguous", noncontig=True)
        for kw in kwargs_list[1:]:
            yield Sample((make((4, 5), dtype, rng, low, high),), dict(kw), desc=f"{kw}")
        if extreme and dtype in FLOATS:
            vals = np.array([-1e4, -90.0, -30.0, -9.0, -3.0, -1e-3, 0.0, 1e-3, 3.0, 6.0, 9.0,
                             30.0, 90.0, 1e4], dtype=np.float64)
            yield Sample((vals.astype(make((), dtype, rng).dtype),), dict(kwargs_list[0]),
                         desc="tails", grad=False)
            sp = np.array(special, dtype=np.float64)
            yield Sample((sp.astype(make((), dtype, rng).dtype),), dict(kwargs_list[0]),
                         desc="inf/nan", grad=False)
    return gen


def _gradgrad(f):
    """The first derivative (through ``(y*y).sum()``, so the backward op's grad input depends
    on ``x`` too) as the op: its gradient exercises the double backward."""
    def fn(lib, x, **kw):
        xx = x if x.requires_grad else x.detach().requires_grad_(True)
        with lib.enable_grad():
            y = f(lib, xx, **kw)
            (g,) = lib.autograd.grad((y * y).sum(), xx, create_graph=True)
        return g
    return fn


def _inplace(f):
    """``f(y, inplace=True)`` on a fresh non-leaf ``y``: returns ``y`` itself."""
    def fn(lib, x, **kw):
        y = x.clone()
        r = f(lib, y, inplace=True, **kw)
        assert r is y, "inplace=True must return the input tensor"
        return r
    return fn


def _inplace_view(f):
    """``f`` in place through a view: the base sees the values and the gradient."""
    def fn(lib, x, **kw):
        y = x.clone()
        f(lib, y.view(-1), inplace=True, **kw)
        return y
    return fn


# name, function, dtypes, sample kwargs variants, sample range, torch kernel name for ints
_SPECS = [
    ("relu", lambda t, x, **k: _F(t).relu(x, **k), FLOATS + INTS, ({},), (-4, 4)),
    ("relu6", lambda t, x, **k: _F(t).relu6(x, **k), FLOATS + INTS, ({},), (-8, 8)),
    ("leaky_relu", lambda t, x, **k: _F(t).leaky_relu(x, **k), FLOATS,
     ({}, {"negative_slope": 0.2}, {"negative_slope": -1.5}), (-4, 4)),
    ("hardtanh", lambda t, x, **k: _F(t).hardtanh(x, **k), FLOATS + SIGNED,
     ({}, {"min_val": -2.0, "max_val": 0.5}, {"min_val": 1.0, "max_val": 1.0}), (-4, 4)),
    ("threshold", lambda t, x, **k: _F(t).threshold(x, **k), FLOATS + SIGNED,
     ({"threshold": 0.5, "value": -2.0}, {"threshold": -1.0, "value": 3.0}), (-4, 4)),
    ("gelu", lambda t, x, **k: _F(t).gelu(x, **k), FLOATS,
     ({}, {"approximate": "tanh"}, {"approximate": "none"}), (-5, 5)),
    ("gelu_tanh", lambda t, x, **k: _F(t).gelu(x, approximate="tanh", **k), FLOATS, ({},),
     (-5, 5)),
    ("silu", lambda t, x, **k: _F(t).silu(x, **k), FLOATS, ({},), (-6, 6)),
    ("mish", lambda t, x, **k: _F(t).mish(x, **k), FLOATS, ({},), (-6, 6)),
    ("softplus", lambda t, x, **k: _F(t).softplus(x, **k), FLOATS,
     ({}, {"beta": 2.0, "threshold": 5.0}, {"beta": 0.5}, {"beta": -1.0, "threshold": 1.0}),
     (-6, 6)),
    ("elu", lambda t, x, **k: _F(t).elu(x, **k), FLOATS, ({}, {"alpha": 0.5}, {"alpha": -2.0}),
     (-4, 4)),
    ("selu", lambda t, x, **k: _F(t).selu(x, **k), FLOATS, ({},), (-4, 4)),
    ("celu", lambda t, x, **k: _F(t).celu(x, **k), FLOATS, ({}, {"alpha": 2.5}, {"alpha": 0.3}),
     (-4, 4)),
    ("hardshrink", lambda t, x, **k: _F(t).hardshrink(x, **k), FLOATS,
     ({}, {"lambd": 1.5}, {"lambd": 0.0}, {"lambd": -1.0}), (-4, 4)),
    ("softshrink", lambda t, x, **k: _F(t).softshrink(x, **k), FLOATS,
     ({}, {"lambd": 1.5}, {"lambd": 0.0}), (-4, 4)),
    ("hardsigmoid", lambda t, x, **k: _F(t).hardsigmoid(x, **k), FLOATS, ({},), (-5, 5)),
    ("hardswish", lambda t, x, **k: _F(t).hardswish(x, **k), FLOATS, ({},), (-5, 5)),
    ("logsigmoid", lambda t, x, **k: _F(t).logsigmoid(x, **k), FLOATS, ({},), (-6, 6)),
    ("F.sigmoid", lambda t, x, **k: _F(t).sigmoid(x, **k), FLOATS + INTS + ("bool",), ({},),
     (-6, 6)),
    ("F.tanh", lambda t, x, **k: _F(t).tanh(x, **k), FLOATS + INTS + ("bool",), ({},), (-4, 4)),
    ("softsign", lambda t, x, **k: _F(t).softsign(x, **k), FLOATS + INTS, ({},), (-4, 4)),
    ("tanhshrink", lambda t, x, **k: _F(t).tanhshrink(x, **k), FLOATS + INTS, ({},), (-4, 4)),
]

# activations with inplace=True
_INPLACE = {"relu", "relu6", "leaky_relu", "hardtanh", "threshold", "silu", "mish", "elu",
            "selu", "celu", "hardsigmoid", "hardswish"}
# smooth enough for a second derivative test (piecewise-linear ones have 0 a.e.)
_GRADGRAD = {"gelu", "gelu_tanh", "silu", "mish", "softplus", "elu", "selu", "celu",
             "hardswish", "logsigmoid", "F.sigmoid", "F.tanh", "softsign", "tanhshrink",
             "leaky_relu", "relu"}


def _float_kw(dtypes):
    return tuple(d for d in dtypes if d in FLOATS)


def _errors():
    f32 = np.zeros((2, 3), np.float32)
    i64 = np.zeros((2, 3), np.int64)
    b = np.zeros((2, 3), bool)
    F = lambda t: t.nn.functional  # noqa: E731
    return [
        ("gelu", lambda t, x, **k: F(t).gelu(x, **k),
         [ErrorCase((i64,), exc=NotImplementedError,
                    match=r"\[gelu\] \"GeluKernelImpl\" not implemented for 'Long'"),
          ErrorCase((f32,), {"approximate": "fast"}, exc=RuntimeError,
                    match=r"\[gelu\] approximate argument must be either none or tanh")]),
        ("silu", lambda t, x: F(t).silu(x),
         [ErrorCase((b,), exc=NotImplementedError, match=r"\[silu\].*'Bool'")]),
        ("relu", lambda t, x: F(t).relu(x),
         [ErrorCase((b,), exc=RuntimeError, match=r"\[relu\] Boolean inputs not supported")]),
        ("hardtanh", lambda t, x, **k: F(t).hardtanh(x, **k),
         [ErrorCase((f32,), {"min_val": 2.0, "max_val": 1.0}, exc=ValueError,
                    match=r"\[hardtanh\] min_val cannot be greater than max_val"),
          ErrorCase((b,), exc=RuntimeError, match=r"\[hardtanh\] Bool inputs")]),
        ("celu", lambda t, x, **k: F(t).celu(x, **k),
         [ErrorCase((f32,), {"alpha": 0.0}, exc=RuntimeError,
                    match=r"\[celu\].*alpha cannot be 0")]),
        ("elu", lambda t, x, **k: F(t).elu(x, **k),
         [ErrorCase((i64,), exc=NotImplementedError, match=r"\[elu\] \"elu_cpu\"")]),
        ("softsign", lambda t, x: F(t).softsign(x),
         [ErrorCase((b,), exc=NotImplementedError, match=r"\[softsign\]")]),
        ("relu-inplace-leaf", lambda t, x: _leaf_inplace(t),
         [ErrorCase((f32,), exc=RuntimeError,
                    match=r"\[relu_\] a leaf Variable that requires grad")]),
        ("softshrink", lambda t, x, **k: F(t).softshrink(x, **k),
         [ErrorCase((f32,), {"lambd": -1.0}, exc=RuntimeError,
                    match=r"\[softshrink\] lambda must be in range \[0, 3\.40282e\+38\] for "
                          r"input dtype Float, but found -1")]),
        ("relu-notensor", lambda t, x: F(t).relu(x),
         [ErrorCase(([1.0, 2.0],), exc=TypeError, match=r"\[relu\].*Tensor")]),
    ]


def _leaf_inplace(t):
    x = t.ones(3, requires_grad=True)
    return t.nn.functional.relu(x, inplace=True)


def glu_samples(dtype, rng):
    yield Sample((make((4, 6), dtype, rng),), desc="last dim")
    yield Sample((make((4, 6), dtype, rng),), {"dim": 0}, desc="dim 0")
    yield Sample((make((2, 4, 3), dtype, rng, noncontig=True),), {"dim": -2},
                 desc="non-contiguous dim -2", noncontig=True)
    yield Sample((make((0, 2), dtype, rng),), desc="empty")
    yield Sample((make((8,), dtype, rng, -30, 30),), desc="large")


def prelu_samples(dtype, rng):
    m = lambda s, **k: make(s, dtype, rng, **k)  # noqa: E731
    yield Sample((m((2, 3, 4)), m((3,), low=0, high=1)), desc="per channel (N,C,L)")
    yield Sample((m((2, 3)), m((1,), low=-1, high=1)), desc="shared (N,C)")
    yield Sample((m((2, 3, 2, 2), noncontig=True), m((3,))), desc="non-contiguous 4-d",
                 noncontig=True)
    yield Sample((m((5,)), m((1,))), desc="1-d")
    yield Sample((m(()), m((1,))), desc="0-d")
    yield Sample((m((0, 3)), m((3,))), desc="empty", grad=False)


def _prelu_errors():
    x = np.zeros((2, 3, 4), np.float32)
    return [
        ErrorCase((x, np.ones(4, np.float32)), exc=RuntimeError,
                  match=r"Mismatch of parameter numbers and input channel size\. Found "
                        r"parameter numbers = 4 and channel size = 3\."),
        ErrorCase((x, np.ones((1, 3), np.float32)), exc=RuntimeError,
                  match=r"Expected `weight` to be a scalar or 1D tensor, but got: ndim = 2"),
        ErrorCase((x, np.ones(3, np.float64)), exc=RuntimeError,
                  match=r"Type promoting not supported\. Got Float and Double"),
    ]


def _build():
    out = []
    for name, fn, dtypes, kws, (lo, hi) in _SPECS:
        # PyTorch's vectorised float32 erf makes gelu(+inf) nan (float64 gives inf); ember
        # gives inf, so +inf is left out of the exact gelu samples
        special = (-np.inf, np.nan) if name == "gelu" else (np.inf, -np.inf, np.nan)
        out.append(OpInfo(name, fn, act_samples(lo, hi, kws, special=special), dtypes=dtypes))
        fl = _float_kw(dtypes)
        if name in _GRADGRAD:
            out.append(OpInfo(f"{name}_gradgrad", _gradgrad(fn),
                              act_samples(lo, hi, kws, extreme=False),
                              dtypes=("float32", "float64")))
        if name in _INPLACE:
            # PyTorch refuses the backward of in-place elu/leaky_relu with a negative slope
            kws_ip = tuple(k for k in kws if k.get("alpha", 0) >= 0
                           and k.get("negative_slope", 0) >= 0)
            out.append(OpInfo(f"{name}_inplace", _inplace(fn), act_samples(lo, hi, kws_ip),
                              dtypes=fl))
            out.append(OpInfo(f"{name}_inplace_view", _inplace_view(fn),
                              act_samples(lo, hi, kws_ip, extreme=False), dtypes=("float64",)))
    out += [
        OpInfo("glu", lambda t, x, **kw: _F(t).glu(x, **kw), glu_samples,
               dtypes=("float16", "bfloat16", "float32", "float64"), errors=lambda: [
                   ErrorCase((np.zeros((4, 3)),), {"dim": 1}, exc=RuntimeError,
                             match=r"\[glu\] Halving dimension must be even, but dimension 1 is "
                                   r"size 3"),
                   ErrorCase((np.array(1.0),), exc=RuntimeError,
                             match=r"glu does not support scalars"),
                   ErrorCase((np.zeros(4, np.int64),), exc=NotImplementedError,
                             match=r"\"glu_cpu\" not implemented for 'Long'")]),
        OpInfo("prelu", lambda t, x, w: _F(t).prelu(x, w), prelu_samples, dtypes=FLOATS,
               errors=_prelu_errors),
        OpInfo("Tensor.relu", lambda t, x: x.relu(), act_samples(), dtypes=FLOATS + INTS),
        OpInfo("Tensor.relu_", lambda t, x: x.clone().relu_(), act_samples(),
               dtypes=FLOATS + SIGNED),
        OpInfo("F.relu_", lambda t, x: t.nn.functional.relu_(x.clone()), act_samples(),
               dtypes=("float32",)),
        OpInfo("F.elu_", lambda t, x: t.nn.functional.elu_(x.clone(), 0.7), act_samples(),
               dtypes=("float32",)),
        OpInfo("F.leaky_relu_", lambda t, x: t.nn.functional.leaky_relu_(x.clone(), 0.3),
               act_samples(), dtypes=("float32",)),
        OpInfo("F.hardtanh_", lambda t, x: t.nn.functional.hardtanh_(x.clone(), -0.5, 2.0),
               act_samples(), dtypes=("float32",)),
        OpInfo("F.threshold_", lambda t, x: t.nn.functional.threshold_(x.clone(), 0.1, 9.0),
               act_samples(), dtypes=("float32",)),
        OpInfo("F.selu_", lambda t, x: t.nn.functional.selu_(x.clone()), act_samples(),
               dtypes=("float32",)),
        OpInfo("F.celu_", lambda t, x: t.nn.functional.celu_(x.clone(), 1.5), act_samples(),
               dtypes=("float32",)),
    ]
    for name, fn, cases in _errors():
        out.append(OpInfo(f"{name}-errors", fn, lambda d, r: iter(()), dtypes=(), grad=False,
                          errors=lambda cases=cases: cases))
    return out


OPINFOS = _build()

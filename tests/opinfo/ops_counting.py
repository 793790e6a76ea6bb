"""OpInfo entries for counting and bucketing (bincount, histc, searchsorted, bucketize, isin),
heaviside, ldexp, frexp, logcumsumexp and small API functions (Tensor.type,
is_floating_point, is_complex, is_nonzero, dropout)."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import ALL, FLOATS, INTS, ErrorCase, OpInfo, Sample, make

F32 = np.float32
I64 = np.int64
SEARCHABLE = INTS + FLOATS


# ---------------------------------------------------------------------------- bincount
def bincount_samples(dtype, rng):
    x = make((12,), dtype, rng, 0, 6)
    yield Sample((x,), desc="plain")
    yield Sample((x,), {"minlength": 10}, desc="minlength > max")
    yield Sample((x,), {"minlength": 2}, desc="minlength < max")
    yield Sample((make((0,), dtype, rng),), desc="empty")
    yield Sample((make((0,), dtype, rng),), {"minlength": 3}, desc="empty minlength")
    yield Sample((make((8,), dtype, rng, 0, 4, noncontig=True),), desc="non-contiguous",
                 noncontig=True)
    for wd in ("float32", "float64", "float16", "int32", "uint8"):
        w = make((12,), wd, rng, 0, 3)
        yield Sample((x, w), desc=f"weights {wd}")
    yield Sample((x, make((12,), "float64", rng)), {"minlength": 9}, desc="weights minlength")
    yield Sample((make((400,), dtype, rng, 0, 5), make((400,), "float32", rng)),
                 desc="many float32 weights: summed in float32 in order")


def _errors_bincount():
    return [
        ErrorCase((np.array([-1, 0], I64),), exc=RuntimeError,
                  match=r"\[bincount\] bincount only supports 1-d non-negative"),
        ErrorCase((np.zeros((2, 2), I64),), exc=RuntimeError,
                  match=r"\[bincount\] bincount only supports 1-d"),
        ErrorCase((np.array(1, I64),), exc=RuntimeError, match=r"\[bincount\]"),
        ErrorCase((np.array([1.0], F32),), exc=NotImplementedError,
                  match=r"\[bincount\] \"bincount_cpu\" not implemented for 'Float'"),
        ErrorCase((np.array([True]),), exc=NotImplementedError, match=r"'Bool'"),
        ErrorCase((np.array([1, 2], I64), np.ones(3, F32)), exc=RuntimeError,
                  match=r"\[bincount\] weights should be 1-d and have the same length"),
        ErrorCase((np.array([1, 2], I64),), {"minlength": -1}, exc=RuntimeError,
                  match=r"\[bincount\] minlength should be >= 0"),
    ]


# ---------------------------------------------------------------------------- histc
def histc_samples(dtype, rng):
    x = make((4, 5), dtype, rng, -3, 3)
    yield Sample((x,), desc="default bins, data range")
    yield Sample((x,), {"bins": 7}, desc="bins=7")
    yield Sample((x,), {"bins": 4, "min": -1, "max": 2}, desc="range drops outside")
    yield Sample((x, 3, -3, 3), desc="positional")
    yield Sample((make((), dtype, rng),), {"bins": 3}, desc="0-d")
    yield Sample((make((0,), dtype, rng),), {"bins": 3}, desc="empty")
    yield Sample((np.ones(4, x.dtype),), {"bins": 4}, desc="constant: range widened")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"bins": 5}, desc="non-contig",
                 noncontig=True)
    edges = np.array([0, 1, 2, 3, 3, -0.0, 0.5], x.dtype)
    yield Sample((edges,), {"bins": 3, "min": 0, "max": 3}, desc="edges")
    y = make((6,), dtype, rng)
    y[[1, 4]] = np.nan
    yield Sample((y,), {"bins": 4, "min": -3, "max": 3}, desc="NaN ignored")
    # float16: (x - min) * bins overflows to inf; PyTorch puts those in bin 0
    yield Sample((make((20,), dtype, rng, -2000, 2000),), {"bins": 60}, desc="wide range")


def _errors_histc():
    x = np.array([1.0, 2.0, 4.0], F32)
    return [
        ErrorCase((x,), {"bins": 0}, exc=RuntimeError,
                  match=r"\[histc\] torch.histogram\(\): bins must be > 0"),
        ErrorCase((x,), {"min": 3, "max": 1}, exc=RuntimeError,
                  match=r"\[histc\] torch.histc: max must be larger than min"),
        ErrorCase((x,), {"min": float("nan")}, exc=RuntimeError, match=r"is not finite"),
        ErrorCase((np.array([1.0, np.inf], F32),), exc=RuntimeError, match=r"is not finite"),
        ErrorCase((np.array([1, 2], I64),), exc=NotImplementedError,
                  match=r"\[histc\] \"histogram_cpu\" not implemented for 'Long'"),
    ]


# ---------------------------------------------------------------------------- searchsorted
def _sorted(shape, dtype, rng, low=-20, high=20):
    return np.sort(make(shape, dtype, rng, low, high), axis=-1)


def searchsorted_samples(dtype, rng):
    s = _sorted((7,), dtype, rng)
    v = make((3, 4), dtype, rng, -25, 25)
    for kw in ({}, {"right": True}, {"side": "right"}, {"side": "left"},
               {"out_int32": True}, {"right": True, "side": "right"}):
        yield Sample((s, v), kw, desc=f"1-d {kw}")
    ties = np.repeat(_sorted((3,), dtype, rng), 2)
    yield Sample((ties, ties), desc="ties left")
    yield Sample((ties, ties), {"right": True}, desc="ties right")
    sb = _sorted((2, 3, 6), dtype, rng)
    vb = make((2, 3, 5), dtype, rng, -25, 25)
    yield Sample((sb, vb), desc="batched")
    yield Sample((sb, vb), {"right": True, "out_int32": True}, desc="batched right int32")
    yield Sample((s, make((), dtype, rng, -25, 25)), desc="0-d values")
    yield Sample((s, make((0,), dtype, rng)), desc="empty values")
    yield Sample((make((0,), dtype, rng), v), desc="empty sequence")
    yield Sample((make((2, 0), dtype, rng), make((2, 3), dtype, rng)), desc="empty rows")
    snc = np.sort(make((6,), dtype, rng, -20, 20, noncontig=True))[::1]
    yield Sample((_sorted((5, 8), dtype, rng)[:, ::2], make((5, 4), dtype, rng,
                                                             noncontig=True)),
                 desc="non-contiguous", noncontig=True)
    yield Sample((snc, 2), desc="scalar value")
    yield Sample((s, v.astype(np.float64)), desc="promoted values")
    if dtype in FLOATS:
        yield Sample((s, 2.5), desc="float scalar")
        n = np.array([1.0, 2.0, np.nan, np.nan], s.dtype)
        yield Sample((n, np.array([np.nan, 1.5, 3.0], s.dtype)), desc="NaN")
        yield Sample((n, np.array([np.nan, 1.5, 3.0], s.dtype)), {"right": True},
                     desc="NaN right")


def searchsorted_sorter_samples(dtype, rng):
    raw = make((7,), dtype, rng, -20, 20)
    order = np.argsort(raw, kind="stable").astype(I64)
    v = make((4,), dtype, rng, -25, 25)
    yield Sample((raw, v, order), desc="1-d sorter")
    yield Sample((raw, v, order), {"right": True}, desc="1-d sorter right")
    rawb = make((3, 5), dtype, rng, -20, 20)
    orderb = np.argsort(rawb, axis=-1, kind="stable").astype(I64)
    yield Sample((rawb, make((3, 2), dtype, rng, -25, 25), orderb), desc="batched sorter")


def _errors_searchsorted():
    s = np.array([1, 3, 5], I64)
    sb = np.array([[1, 3, 5], [2, 4, 6]], I64)
    return [
        ErrorCase((sb, np.zeros((3, 2), I64)), exc=RuntimeError,
                  match=r"\[searchsorted\] torch.searchsorted\(\): boundaries tensor should be "
                        r"1 dimension or the first N-1 dimensions"),
        ErrorCase((sb, np.zeros((2,), I64)), exc=RuntimeError, match=r"first N-1 dimensions"),
        ErrorCase((np.array(1, I64), s), exc=RuntimeError,
                  match=r"boundaries tensor should have positive dimension"),
        ErrorCase((s, s), {"side": "left", "right": True}, exc=RuntimeError,
                  match=r"side and right can't be set to opposites"),
        ErrorCase((s, s), {"side": "foo"}, exc=RuntimeError,
                  match=r"side can only be 'left' or 'right' but got foo"),
        ErrorCase((np.array([True, False]), np.array([True])), exc=NotImplementedError,
                  match=r"not implemented for 'Bool'"),
    ]


def _errors_sorter():
    s = np.array([1, 3, 5], I64)
    return [
        ErrorCase((s, s, np.array([0, 1], I64)), exc=RuntimeError,
                  match=r"boundary and sorter must have the same size"),
        ErrorCase((s, s, np.array([0, 1, 2], np.int32)), exc=RuntimeError,
                  match=r"sorter must be a tensor of long dtype but got dtype Int"),
        ErrorCase((s, s, np.array([0, 1, 3], I64)), exc=RuntimeError,
                  match=r"sorter index out of range"),
    ]


def bucketize_samples(dtype, rng):
    b = _sorted((6,), dtype, rng)
    x = make((3, 4), dtype, rng, -25, 25)
    for kw in ({}, {"right": True}, {"out_int32": True}):
        yield Sample((x, b), kw, desc=f"{kw}")
    yield Sample((make((), dtype, rng), b), desc="0-d input")
    yield Sample((make((0, 2), dtype, rng), b), desc="empty input")
    yield Sample((make((4, 3), dtype, rng, noncontig=True), b), desc="non-contig",
                 noncontig=True)
    yield Sample((3, b), desc="scalar input")
    yield Sample((True, b), desc="bool scalar input")
    yield Sample((np.repeat(b, 2), b), {"right": True}, desc="ties right")


def _errors_bucketize():
    return [ErrorCase((np.array([3], I64), np.zeros((2, 3), I64)), exc=RuntimeError,
                      match=r"\[bucketize\] boundaries tensor must be 1 dimension, but got "
                            r"dim\(2\)"),
            ErrorCase((np.array([3], I64), np.array(2, I64)), exc=RuntimeError,
                      match=r"must be 1 dimension, but got dim\(0\)")]


# ---------------------------------------------------------------------------- isin
def isin_samples(dtype, rng):
    x = make((3, 5), dtype, rng, -4, 4)
    t = make((4,), dtype, rng, -4, 4)
    for kw in ({}, {"invert": True}, {"assume_unique": True}):
        yield Sample((x, t), kw, desc=f"{kw}")
    yield Sample((x, make((2, 2), dtype, rng, -4, 4)), desc="2-d test elements")
    yield Sample((make((), dtype, rng, -4, 4), t), desc="0-d elements")
    yield Sample((make((0,), dtype, rng), t), desc="empty elements")
    yield Sample((x, make((0,), dtype, rng)), desc="empty test elements")
    yield Sample((x, 2), desc="scalar test element")
    yield Sample((1, t), {"invert": True}, desc="scalar element")
    yield Sample((make((4, 3), dtype, rng, -4, 4, noncontig=True), t), desc="non-contig",
                 noncontig=True)
    yield Sample((x, t.astype(np.float64)), desc="promoted")
    if dtype in FLOATS:
        y = x.copy()
        y[0, :2] = np.nan
        yield Sample((y, np.array([np.nan, 1.0], x.dtype)), desc="NaN never in")


def _errors_isin():
    return [
        ErrorCase((np.array([True]), np.array([True])), exc=RuntimeError,
                  match=r"\[isin\] Unsupported input type encountered for isin\(\): Bool"),
        ErrorCase((np.array([1, 2], I64), np.array([True])), exc=RuntimeError,
                  match=r"Unsupported input type"),
        ErrorCase((2, 3), exc=TypeError, match=r"\[isin\]"),
        ErrorCase((np.array([1, 2], I64), True), exc=RuntimeError,
                  match=r"Unsupported input type encountered for isin\(\): Bool"),
    ]


# ---------------------------------------------------------------------------- heaviside
def heaviside_samples(dtype, rng):
    x = make((3, 4), dtype, rng, -2, 2)
    x.reshape(-1)[::3] = 0
    yield Sample((x, make((3, 4), dtype, rng)), desc="same shape")
    yield Sample((x, make((4,), dtype, rng)), desc="broadcast values")
    yield Sample((x, make((), dtype, rng)), desc="0-d values")
    yield Sample((make((), dtype, rng), make((2,), dtype, rng)), desc="0-d input")
    yield Sample((make((0, 3), dtype, rng), make((3,), dtype, rng)), desc="empty")
    yield Sample((make((3, 4), dtype, rng, noncontig=True), make((3, 4), dtype, rng,
                                                                 noncontig=True)),
                 desc="non-contig", noncontig=True)
    if dtype in FLOATS:
        y = np.array([-1.0, np.nan, 0.0, 2.0, -0.0], x.dtype)
        yield Sample((y, np.array([7.0], x.dtype)), desc="NaN and -0")


def _errors_heaviside():
    return [
        ErrorCase((np.zeros(3, F32), np.zeros((), np.float64)), exc=RuntimeError,
                  match=r"\[heaviside\] heaviside is not yet implemented for tensors with "
                        r"different dtypes"),
        ErrorCase((np.zeros(3, F32), 0.5), exc=TypeError, match=r"\[heaviside\]"),
        ErrorCase((np.zeros(3, F32), np.zeros(2, F32)), exc=RuntimeError,
                  match=r"\[heaviside\] The size of tensor a"),
    ]


# ---------------------------------------------------------------------------- ldexp / frexp
def ldexp_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    for ed in ("int64", "int32", "int8"):
        yield Sample((x, make((3, 4), ed, rng, 0, 4)), desc=f"int exponent {ed}")
    # PyTorch's gradient for a negative integer exponent is 0 (it takes 2 ** other in integer
    # arithmetic); ember gives the true gradient (as PyTorch does for float exponents)
    yield Sample((x, make((3, 4), "int64", rng, -4, 4)), desc="negative int exponent",
                 grad=False)
    yield Sample((x, make((4,), "int64", rng, 0, 3)), desc="broadcast exponent")
    yield Sample((x, make((3, 4), dtype, rng, -3, 3)), desc="same-dtype exponent")
    yield Sample((x, make((3, 1), "float64", rng, -3, 3)), desc="float64 exponent")
    yield Sample((make((), dtype, rng), make((), "int64", rng, 0, 3)), desc="0-d")
    yield Sample((make((0, 2), dtype, rng), make((2,), "int64", rng)), desc="empty")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),
                  make((3, 4), "int64", rng, 0, 3, noncontig=True)), desc="non-contig",
                 noncontig=True)


def ldexp_int_samples(dtype, rng):
    yield Sample((make((3, 4), dtype, rng), make((3, 4), "int64", rng, -3, 3)),
                 desc="int input: default float")
    yield Sample((make((5,), dtype, rng), make((5,), "int32", rng, 0, 3)), desc="int32")
    yield Sample((make((3,), "bool", rng), make((3,), "int64", rng, 0, 3)), desc="bool input")


def _errors_ldexp():
    return [ErrorCase((np.ones(2, F32), 2), exc=TypeError, match=r"\[ldexp\]"),
            ErrorCase((np.ones(2, F32), np.array([True, False])), exc=NotImplementedError,
                      match=r"\[ldexp\] \"ldexp_cpu_exp\" not implemented for 'Bool'")]


def frexp_samples(dtype, rng):
    for shape in ((), (0,), (5,), (3, 4), (2, 3, 4)):
        yield Sample((make(shape, dtype, rng, -50, 50),), desc=f"{shape}")
    yield Sample((make((3, 4), dtype, rng, -50, 50, noncontig=True),), desc="non-contig",
                 noncontig=True)
    sp = np.array([0.0, -0.0, 1.0, 0.5, -3.5, 1024.0, np.inf, -np.inf, np.nan], dtype="float64")
    yield Sample((sp.astype(make((1,), dtype, rng).dtype),), desc="specials", grad=False)
    if dtype == "float32":
        yield Sample((np.array([1e-40, 3e-39, 1e38], F32),), desc="subnormal", grad=False)


def _errors_frexp():
    return [ErrorCase((np.array([1, 2], I64),), exc=RuntimeError,
                      match=r"\[frexp\] torch.frexp\(\) only supports floating-point dtypes")]


# ---------------------------------------------------------------------------- logcumsumexp
def logcumsumexp_samples(dtype, rng):
    x = make((3, 5), dtype, rng, -4, 4)
    for dim in (0, 1, -1):
        yield Sample((x, dim), desc=f"dim={dim}")
    yield Sample((make((2, 3, 4), dtype, rng), 1), desc="3-d")
    yield Sample((make((), dtype, rng), 0), desc="0-d")
    yield Sample((make((), dtype, rng), -1), desc="0-d dim=-1")
    yield Sample((make((0, 3), dtype, rng), 0), desc="empty")
    yield Sample((make((4, 3), dtype, rng, noncontig=True), 0), desc="non-contig",
                 noncontig=True)
    yield Sample((make((6,), dtype, rng, 50, 80), 0), desc="large values")
    sp = np.array([-np.inf, np.inf, 1.0, -np.inf], dtype=x.dtype)
    yield Sample((sp, 0), desc="infinities", grad=False)
    yield Sample((np.array([-np.inf, -np.inf, 0.0], dtype=x.dtype), 0), desc="-inf run",
                 grad=False)
    y = x.copy()
    y[1, 2] = np.nan
    yield Sample((y, 1), desc="NaN", grad=False)


def _errors_logcumsumexp():
    return [
        ErrorCase((np.array([1, 2], I64), 0), exc=NotImplementedError,
                  match=r"\[logcumsumexp\] \"logcumsumexp_out_cpu\" not implemented for 'Long'"),
        ErrorCase((np.zeros((2, 3), F32), 2), exc=IndexError,
                  match=r"\[logcumsumexp\] Dimension out of range"),
    ]


# ---------------------------------------------------------------------------- small API
def _type_name(lib, x, *args):
    """Tensor.type(): the legacy type name, ember's prefix mapped to torch's."""
    out = x.type(*args)
    return out.replace("ember.", "torch.") if isinstance(out, str) else out


def _cmp_type(actual, expected):
    assert actual == expected, (actual, expected)


def type_samples(dtype, rng):
    yield Sample((make((2, 3), dtype, rng),), desc="name")


def type_convert_samples(dtype, rng):
    x = make((2, 3), dtype, rng, 0, 3)
    for target in ("torch.FloatTensor", "torch.LongTensor", "torch.DoubleTensor",
                   "torch.BoolTensor", "torch.HalfTensor", "torch.ByteTensor",
                   "torch.IntTensor", "torch.BFloat16Tensor"):
        yield Sample((x, target), desc=target)


def type_dtype_samples(dtype, rng):
    import ember
    x = make((2, 3), dtype, rng, 0, 3)
    for target in (ember.float64, ember.int32, ember.bool, getattr(ember, dtype)):
        yield Sample((x, target), desc=str(target))


def _errors_type():
    return [
        ErrorCase((np.ones(2, F32), "torch.Foo"), exc=ValueError,
                  match=r"\[type\] invalid type: 'torch.Foo'"),
        ErrorCase((np.ones(2, F32), 3), exc=TypeError, match=r"\[type\] dtype must be"),
    ]


def _pred_samples(dtype, rng):
    yield Sample((make((2, 3), dtype, rng),))
    yield Sample((make((), dtype, rng),))


def is_nonzero_samples(dtype, rng):
    yield Sample((np.zeros((), make((1,), dtype, rng).dtype),), desc="0-d zero")
    yield Sample((np.ones((1,), make((1,), dtype, rng).dtype),), desc="1-element one")
    yield Sample((np.ones((1, 1), make((1,), dtype, rng).dtype),), desc="1x1")


def _errors_is_nonzero():
    return [
        ErrorCase((np.zeros(0, F32),), exc=RuntimeError,
                  match=r"\[is_nonzero\] Boolean value of Tensor with no values is ambiguous"),
        ErrorCase((np.zeros(2, F32),), exc=RuntimeError,
                  match=r"with more than one value is ambiguous"),
    ]


def _errors_is_floating_point():
    return [ErrorCase((3.0,), exc=TypeError, match=r"\[is_floating_point\]")]


def dropout_samples(dtype, rng):
    yield Sample((make((3, 4), dtype, rng), 0.5, False), desc="eval: identity")
    yield Sample((make((3, 4), dtype, rng), 0.0, True), desc="p=0: identity")
    yield Sample((make((0, 4), dtype, rng), 0.3, True), desc="empty")


def dropout_train_samples(dtype, rng):
    yield Sample((make((50, 40), dtype, rng), 0.5, True), desc="train", grad=False)


def _first_grad(lib, fn, *xs):
    """The gradient of ``sum(fn(*xs) ** 2)`` with its graph kept, so the grad driver checks
    the second derivative against torch and finite differences."""
    xs = [x if x.requires_grad else x.detach().requires_grad_(True) for x in xs]
    y = fn(*xs)
    return lib.autograd.grad((y * y).sum(), xs, create_graph=True)


def _double_samples(dtype, rng):
    yield Sample((make((3, 4), dtype, rng),), desc="3x4")


def _dropout_same_as_functional(lib, x, p):
    """``dropout(x, p, True)`` draws the same mask as ``nn.functional.dropout`` from one
    seed."""
    lib.manual_seed(7)
    a = lib.dropout(x, p, True)
    lib.manual_seed(7)
    b = lib.nn.functional.dropout(x, p, True)
    return bool((a == b).all()), bool((a == 0).any())


OPINFOS = [
    OpInfo("bincount", lambda t, x, *a, **kw: t.bincount(x, *a, **kw), bincount_samples,
           dtypes=INTS, grad=False, errors=_errors_bincount),
    OpInfo("bincount_method", lambda t, x, w=None: x.bincount(w, 3),
           lambda d, r: [Sample((make((6,), d, r, 0, 5),)),
                         Sample((make((6,), d, r, 0, 5), make((6,), "float32", r)))],
           dtypes=("int64", "uint8"), grad=False),
    OpInfo("histc", lambda t, x, *a, **kw: t.histc(x, *a, **kw), histc_samples,
           dtypes=FLOATS, grad=False, errors=_errors_histc),
    OpInfo("histc_method", lambda t, x: x.histc(5, -2, 2),
           lambda d, r: [Sample((make((10,), d, r),))], grad=False),
    OpInfo("searchsorted", lambda t, s, v, **kw: t.searchsorted(s, v, **kw),
           searchsorted_samples, dtypes=SEARCHABLE, grad=False, errors=_errors_searchsorted),
    OpInfo("searchsorted_sorter",
           lambda t, s, v, o, **kw: t.searchsorted(s, v, sorter=o, **kw),
           searchsorted_sorter_samples, dtypes=SEARCHABLE, grad=False, errors=_errors_sorter),
    OpInfo("bucketize", lambda t, x, b, **kw: t.bucketize(x, b, **kw), bucketize_samples,
           dtypes=SEARCHABLE, grad=False, errors=_errors_bucketize),
    OpInfo("isin", lambda t, x, y, **kw: t.isin(x, y, **kw), isin_samples,
           dtypes=SEARCHABLE, grad=False, errors=_errors_isin),
    OpInfo("heaviside", lambda t, x, v: t.heaviside(x, v), heaviside_samples, dtypes=ALL,
           grad=False, errors=_errors_heaviside),
    OpInfo("heaviside_method", lambda t, x, v: x.heaviside(v),
           lambda d, r: [Sample((make((5,), d, r, -1, 1), make((1,), d, r)))], grad=False),
    OpInfo("ldexp", lambda t, x, e: t.ldexp(x, e), ldexp_samples, dtypes=FLOATS,
           errors=_errors_ldexp),
    OpInfo("ldexp_int", lambda t, x, e: t.ldexp(x, e), ldexp_int_samples, dtypes=INTS,
           grad=False),
    OpInfo("ldexp_method", lambda t, x, e: x.ldexp(e),
           lambda d, r: [Sample((make((4,), d, r), make((4,), "int64", r, 0, 2)))]),
    OpInfo("frexp", lambda t, x: t.frexp(x), frexp_samples, dtypes=FLOATS,
           errors=_errors_frexp),
    OpInfo("frexp_fields", lambda t, x: (x.frexp().mantissa, x.frexp().exponent),
           lambda d, r: [Sample((make((4,), d, r, -9, 9),))], grad=False),
    OpInfo("logcumsumexp", lambda t, x, d: t.logcumsumexp(x, d), logcumsumexp_samples,
           dtypes=FLOATS, errors=_errors_logcumsumexp),
    OpInfo("logcumsumexp_method", lambda t, x: x.logcumsumexp(dim=1),
           lambda d, r: [Sample((make((3, 4), d, r),))]),
    OpInfo("logcumsumexp_double_backward",
           lambda t, x: _first_grad(t, lambda a: t.logcumsumexp(a, 1), x), _double_samples),
    OpInfo("ldexp_double_backward",
           lambda t, x, e: _first_grad(t, lambda a, b: t.ldexp(a, b), x, e),
           lambda d, r: [Sample((make((3, 4), d, r), make((3, 4), d, r, -2, 2)))]),
    OpInfo("Tensor.type", _type_name, type_samples, dtypes=ALL, grad=False, compare=_cmp_type,
           errors=_errors_type),
    OpInfo("Tensor.type_convert", _type_name, type_convert_samples, dtypes=ALL, grad=False),
    OpInfo("Tensor.type_dtype", _type_name, type_dtype_samples, dtypes=ALL, grad=False),
    OpInfo("is_floating_point", lambda t, x: t.is_floating_point(x), _pred_samples, dtypes=ALL,
           grad=False, errors=_errors_is_floating_point),
    OpInfo("is_complex", lambda t, x: t.is_complex(x), _pred_samples, dtypes=ALL, grad=False),
    OpInfo("is_nonzero", lambda t, x: t.is_nonzero(x), is_nonzero_samples, dtypes=ALL,
           grad=False, errors=_errors_is_nonzero),
    OpInfo("is_nonzero_method", lambda t, x: x.is_nonzero(), is_nonzero_samples,
           dtypes=("float32", "int64"), grad=False),
    OpInfo("dropout_fn", lambda t, x, p, train: t.dropout(x, p, train), dropout_samples,
           dtypes=FLOATS),
    OpInfo("dropout_fn_train", lambda t, x, p, train: t.dropout(x, p, train),
           dropout_train_samples, dtypes=FLOATS, grad=False, random=True),
    OpInfo("dropout_fn_matches_functional", _dropout_same_as_functional,
           lambda d, r: [Sample((make((20, 30), d, r, 1, 2), 0.5))], grad=False),
]

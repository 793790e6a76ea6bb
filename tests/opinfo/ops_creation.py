"""OpInfo entries for (non-random) tensor creation, compared with torch's values and dtypes:
zeros/ones/full/empty, the ``_like`` variants, arange, linspace, eye, tensor/as_tensor with
PyTorch's dtype inference from Python data."""

from __future__ import annotations

import numpy as np

import ember
from tests.opinfo.core import ALL, FLOATS, ErrorCase, OpInfo, Sample, make


def _dt(name: str) -> ember.dtype:
    return getattr(ember, name)


def _size_samples(dtype, rng):
    d = _dt(dtype)
    yield Sample((2, 3), {"dtype": d}, desc="varargs")
    yield Sample(((2, 3, 4),), {"dtype": d}, desc="tuple")
    yield Sample(([4],), {"dtype": d}, desc="list")
    yield Sample(((),), {"dtype": d}, desc="0-d")
    yield Sample((0, 3), {"dtype": d}, desc="empty")


def _default_samples(dtype, rng):
    yield Sample((2, 3), desc="default dtype")
    yield Sample(((3,),), {"requires_grad": True}, desc="requires_grad")


def _shape_only(actual, expected):
    assert tuple(actual.shape) == tuple(expected.shape)
    assert str(actual.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]


def _full_samples(dtype, rng):
    d = _dt(dtype)
    v = {"bool": True, "float16": 1.5, "bfloat16": -2.5, "float32": 3.25,
         "float64": -0.1}.get(dtype, 7)
    yield Sample(((2, 3), v), {"dtype": d}, desc="dtype")
    yield Sample(((), v), {"dtype": d}, desc="0-d")
    yield Sample(((0, 2), v), {"dtype": d}, desc="empty")
    if dtype in ("int64", "float32", "float64"):
        # the fill value alone decides the dtype
        for value in (3, 2.5, True, False, -1):
            yield Sample(((2,), value), desc=f"infer {value!r}")
    if dtype in ("int32", "int64", "float32"):
        yield Sample(((2,), 2.7), {"dtype": d}, desc="float into dtype")


def _like_samples(dtype, rng):
    for shape in [(), (0,), (3, 4)]:
        yield Sample((make(shape, dtype, rng),), desc=f"{shape}")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), desc="noncontig", noncontig=True)
    yield Sample((make((2,), dtype, rng),), {"dtype": ember.float64}, desc="dtype kw")


def _full_like_samples(dtype, rng):
    for value in (3, 2.5, True):
        yield Sample((make((2, 3), dtype, rng), value), desc=f"value {value!r}")
    yield Sample((make((2,), dtype, rng), 2.5), {"dtype": ember.float64}, desc="dtype kw")


def _arange_samples(dtype, rng):
    d = _dt(dtype)
    for args in [(5,), (1, 4), (0, 10, 3), (10, 0, -3), (0, 5, 1.5), (0, -5, -1.5), (0.5, 5),
                 (-2.5, 3), (0, 5.5), (0, 0)]:
        if dtype in ("uint8",) and min(args) < 0:
            continue
        yield Sample(args, {"dtype": d}, desc=f"{args}")
    if dtype in ("float32", "float64"):
        for args in [(0, 1, 0.1), (-1, 1, 0.013), (0, 100, 0.37), (1, 2.5, 0.3)]:
            yield Sample(args, {"dtype": d}, desc=f"{args}")
    if dtype in ("float16", "bfloat16"):
        yield Sample((0, 8, 0.25), {"dtype": d}, desc="exact steps")
    if dtype in ("int16", "int32"):
        yield Sample((1, 2.5, 0.3), {"dtype": d}, desc="step truncates to 0")


def _arange_infer_samples(dtype, rng):
    for args in [(5,), (0.5,), (1, 4), (0, 1, 0.1), (-1.0, 1.0, 0.25), (True, 5), (2, 9.5, 2)]:
        yield Sample(args, desc=f"infer {args}")


def _linspace_samples(dtype, rng):
    d = _dt(dtype)
    for args in [(0, 1, 5), (0, 10, 7), (-3, 7, 4), (3, 3, 4), (0, 1, 1), (0, 1, 0), (10, 0, 6),
                 (0.5, 10.7, 5), (-1, 1, 101), (0, 255, 10)]:
        if dtype in ("uint8", "int8") and (min(args[:2]) < 0 or max(args[:2]) > 127):
            continue
        yield Sample(args, {"dtype": d}, desc=f"{args}")
    if dtype == "uint8":
        yield Sample((-1, 1, 5), {"dtype": d}, desc="negative int start wraps")


def _eye_samples(dtype, rng):
    d = _dt(dtype)
    yield Sample((3,), {"dtype": d}, desc="n")
    yield Sample((2, 4), {"dtype": d}, desc="n, m")
    yield Sample((0,), {"dtype": d}, desc="empty")


DATA = [
    [1, 2, 3], [1.0, 2], [True, False], [True, 2], [True, 2.5], [[1, 2], [3, 4]],
    [[1.5, 2], [3, 4]], 3, 3.5, True, [], [[]], [[True], [False]], 2 ** 40, [2 ** 62, 1],
    [1e300], (1, 2.0), [(1, 2), (3, 4)], [-0.0, float("inf"), float("nan")],
]


def _tensor_data_samples(dtype, rng):
    for data in DATA:
        yield Sample((data,), desc=f"infer {data!r}")
    yield Sample((np.float32(2.5),), desc="numpy scalar")
    yield Sample((np.array([1, 2], dtype=np.int32),), desc="int32 array")


def _tensor_dtype_samples(dtype, rng):
    d = _dt(dtype)
    data = [[1.5, -2.7], [0, 1]] if dtype != "uint8" else [[1.5, 2.7], [0, 1]]
    yield Sample((data,), {"dtype": d}, desc="floats into dtype")
    yield Sample(([True, False],), {"dtype": d}, desc="bools into dtype")
    yield Sample(([1, 0, 3],), {"dtype": d}, desc="ints into dtype")
    yield Sample((make((3, 4), dtype, rng),), desc="from array")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), desc="noncontig array",
                 noncontig=True)
    if dtype == "uint8":
        yield Sample(([-1, 255],), {"dtype": d}, desc="negative ints wrap")


def _tensor_errors():
    return [
        ErrorCase(([300, -1],), {"dtype": ember.uint8}, exc=RuntimeError,
                  match=r"\[tensor\] value cannot be converted to type uint8 without overflow"),
        ErrorCase(([1e10],), {"dtype": ember.int32}, exc=RuntimeError,
                  match=r"\[tensor\] value cannot be converted to type int32"),
        ErrorCase(([[1, 2], [3]],), exc=ValueError, match=r"\[tensor\]"),
        ErrorCase(([1 + 2j],), exc=TypeError, match=r"\[tensor\]"),
    ]


def _arange_errors():
    return [
        ErrorCase((0, 5, 0), exc=RuntimeError, match=r"\[arange\] step must be nonzero"),
        ErrorCase((0, 5, -1), exc=RuntimeError, match=r"\[arange\] upper bound and larger"),
        ErrorCase((1, 2.5, 0.3), {"dtype": ember.int64}, exc=ValueError,
                  match=r"\[arange\] step must be nonzero"),
        ErrorCase((0, float("inf")), exc=RuntimeError, match=r"\[arange\] unsupported range"),
    ]


def _linspace_errors():
    return [
        ErrorCase((0, 1, -1), exc=RuntimeError,
                  match=r"\[linspace\] number of steps must be non-negative"),
        ErrorCase((1, 1000, 5), {"dtype": ember.uint8}, exc=RuntimeError,
                  match=r"\[linspace\] value cannot be converted"),
    ]


def _full_errors():
    return [
        ErrorCase(((2,), 300), {"dtype": ember.uint8}, exc=RuntimeError,
                  match=r"\[full\] value cannot be converted to type uint8"),
        ErrorCase(((-1, 2), 1.0), exc=RuntimeError, match=r"\[full\] .*negative dimension"),
    ]


def _fn(name: str):
    return lambda t, *a, **kw: getattr(t, name)(*a, **kw)


OPINFOS = [
    OpInfo("zeros", _fn("zeros"), _size_samples, dtypes=ALL, grad=False),
    OpInfo("ones", _fn("ones"), _size_samples, dtypes=ALL, grad=False),
    OpInfo("zeros_default", _fn("zeros"), _default_samples, dtypes=("float32",), grad=False),
    OpInfo("empty", _fn("empty"), _size_samples, dtypes=ALL, grad=False, compare=_shape_only),
    OpInfo("full", _fn("full"), _full_samples, dtypes=ALL, grad=False, errors=_full_errors),
    OpInfo("zeros_like", _fn("zeros_like"), _like_samples, dtypes=ALL, grad=False),
    OpInfo("ones_like", _fn("ones_like"), _like_samples, dtypes=ALL, grad=False),
    OpInfo("empty_like", _fn("empty_like"), _like_samples, dtypes=ALL, grad=False,
           compare=_shape_only),
    OpInfo("full_like", _fn("full_like"), _full_like_samples, dtypes=ALL, grad=False),
    OpInfo("arange", _fn("arange"), _arange_samples,
           dtypes=("uint8", "int16", "int32", "int64") + FLOATS, grad=False,
           errors=_arange_errors),
    OpInfo("arange_infer", _fn("arange"), _arange_infer_samples, dtypes=("float32",),
           grad=False),
    OpInfo("linspace", _fn("linspace"), _linspace_samples,
           dtypes=("uint8", "int8", "int32", "int64") + FLOATS, grad=False,
           errors=_linspace_errors),
    OpInfo("eye", _fn("eye"), _eye_samples, dtypes=ALL, grad=False),
    OpInfo("tensor_infer", _fn("tensor"), _tensor_data_samples, dtypes=("float32",),
           grad=False, errors=_tensor_errors),
    OpInfo("tensor_infer_float64", _fn("tensor"), _tensor_data_samples, dtypes=("float64",),
           grad=False),
    OpInfo("tensor", _fn("tensor"), _tensor_dtype_samples, dtypes=ALL, grad=False),
    OpInfo("as_tensor", _fn("as_tensor"), _tensor_dtype_samples, dtypes=ALL, grad=False),
    OpInfo("as_tensor_infer", _fn("as_tensor"), _tensor_data_samples, dtypes=("float32",),
           grad=False),
]

"""OpInfo entries for reductions, scans and the softmax family."""

from __future__ import annotations

import math

import numpy as np

from tests.opinfo.core import (
    ALL,
    FLOATS,
    INTS,
    ErrorCase,
    OpInfo,
    Sample,
    make,
    standard_shapes,
)

F32 = np.float32


def reduce_samples(dtype, rng, tuple_dims=True, low=-3.0, high=3.0):
    for shape in standard_shapes():
        yield Sample((make(shape, dtype, rng, low, high),), desc=f"all {shape}")
    x = make((2, 3, 4), dtype, rng, low, high)
    dims = (0, -1, (0, 2), (-1, 0, 1)) if tuple_dims else (0, -1, 1)
    for dim in dims:
        for keepdim in (False, True):
            yield Sample((x,), {"dim": dim, "keepdim": keepdim}, desc=f"dim={dim} k={keepdim}")
    yield Sample((make((3, 4), dtype, rng, low, high, noncontig=True),), {"dim": 1},
                 desc="non-contiguous", noncontig=True)
    yield Sample((make((), dtype, rng, low, high),), {"dim": 0}, desc="0-d dim=0")
    yield Sample((make((), dtype, rng, low, high),), {"dim": -1, "keepdim": True},
                 desc="0-d dim=-1 keepdim")
    yield Sample((make((0, 3), dtype, rng, low, high),), {"dim": 0}, desc="empty dim 0")
    yield Sample((make((2, 0), dtype, rng, low, high),), {"dim": 0, "keepdim": True},
                 desc="empty dim 1, reduce 0")
    if tuple_dims:
        # torch's var backward takes dim=() as "no dims" (inf gradient): values only
        yield Sample((x,), {"dim": ()}, desc="dim=() means all", grad=False)
        yield Sample((x,), {"dim": None, "keepdim": True}, desc="dim=None keepdim")


def nonempty_reduce_samples(dtype, rng):
    """Reductions without identity (amax, max, argmax): no reduction over an empty range."""
    for s in reduce_samples(dtype, rng):
        x = s.args[0]
        if x.size == 0:
            dim = s.kwargs.get("dim")
            if dim is None or dim == () or x.shape[dim] == 0:
                continue
        yield s
    yield Sample((make((2, 0), dtype, rng),), {"dim": 0}, desc="empty result")


def int_dim_samples(dtype, rng):
    yield from reduce_samples(dtype, rng, tuple_dims=False)


def nan_reduce_samples(dtype, rng):
    yield from reduce_samples(dtype, rng)
    if dtype in FLOATS:
        x = make((3, 4), dtype, rng)
        x[0, 1] = x[2, 2] = np.nan
        x[1] = np.nan
        for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
            yield Sample((x,), kw, desc=f"nans {kw}", grad=False)


def ties_samples(dtype, rng):
    x = np.array([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, -1.0, -1.0, 2.0]], dtype=np.float64)
    yield Sample((x,), desc="ties all")
    yield Sample((x,), {"dim": 1}, desc="ties dim 1")
    yield Sample((x,), {"dim": 0, "keepdim": True}, desc="ties dim 0")


def _tied(shape, dtype, rng):
    """Values in {0, 1, 2} (floats rounded): ties everywhere; PyTorch picks the first index."""
    a = make(shape, dtype, rng, 0, 2)
    if dtype in FLOATS:
        a = np.round(a.astype(np.float64)).astype(a.dtype)
    return a


def prod_zero_samples(dtype, rng):
    yield from int_dim_samples(dtype, rng)
    x = make((3, 4), dtype, rng, 0.5, 2.0)
    x[0, 1] = 0
    x[2, 0] = 0
    x[2, 3] = 0
    for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
        yield Sample((x,), kw, desc=f"zeros {kw}")


def _dim_samples(dtype, rng):
    """(values, indices) reductions along one dim: random floats have no ties."""
    x = make((2, 3, 4), dtype, rng)
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            yield Sample((x, dim), {"keepdim": keepdim}, desc=f"dim={dim} k={keepdim}")
    yield Sample((make((3, 4), dtype, rng, noncontig=True), 1), desc="non-contiguous",
                 noncontig=True)
    yield Sample((make((), dtype, rng), 0), desc="0-d")
    yield Sample((make((5,), dtype, rng), -1), desc="1-d")
    yield Sample((make((2, 0), dtype, rng), 0), desc="empty result")


def var_samples(dtype, rng):
    for s in reduce_samples(dtype, rng):
        x = s.args[0]
        if x.ndim == 0 or x.size == 0:
            s.grad = False  # nan (no degrees of freedom) or empty
        yield s
    x = make((3, 5), dtype, rng)
    yield Sample((x,), {"dim": 1, "correction": 0}, desc="correction=0")
    yield Sample((x,), {"dim": 1, "correction": 2, "keepdim": True}, desc="correction=2")
    yield Sample((x,), {"dim": 0, "unbiased": False}, desc="unbiased=False")
    yield Sample((x,), {"dim": (0, 1), "unbiased": True}, desc="unbiased=True")
    yield Sample((x, 1, True, True), desc="legacy positional (dim, unbiased, keepdim)")
    yield Sample((make((1, 3), dtype, rng),), {"dim": 0}, desc="one element: nan", grad=False)


def norm_samples(dtype, rng):
    x = make((3, 4), dtype, rng, exclude_zero=True)
    for p in (2, 1, math.inf, -math.inf, 0, 3, 0.5, 1.5, "fro"):
        yield Sample((x,), {"p": p}, desc=f"p={p}")
        yield Sample((x,), {"p": p, "dim": 1, "keepdim": True}, desc=f"p={p} dim=1")
    yield Sample((make((2, 3, 4), dtype, rng, exclude_zero=True),), {"dim": (0, 2)},
                 desc="dim tuple")
    yield Sample((make((), dtype, rng, exclude_zero=True),), desc="0-d")
    yield Sample((make((0,), dtype, rng),), desc="empty")
    yield Sample((make((3, 4), dtype, rng, exclude_zero=True, noncontig=True),), {"dim": 0},
                 desc="non-contiguous", noncontig=True)
    z = np.zeros((2, 3), dtype=x.dtype)
    z[1] = x[0, :3]
    yield Sample((z,), {"dim": 1}, desc="a zero row: subgradient 0")


def vector_norm_samples(dtype, rng):
    x = make((3, 4), dtype, rng, exclude_zero=True)
    for ord in (2, 1, math.inf, 4):
        yield Sample((x, ord), desc=f"ord={ord}")
    yield Sample((x, 2, (0, 1), True), desc="dim tuple keepdim")
    if dtype in ("float16", "float32"):
        yield Sample((x, 2), {"dtype": __import__("ember").float64}, desc="dtype=float64")


def scan_samples(dtype, rng):
    for shape, dim in (((5,), 0), ((3, 4), 1), ((3, 4), -2), ((2, 3, 4), 1), ((), 0),
                       ((0, 3), 0), ((2, 0), 1)):
        yield Sample((make(shape, dtype, rng, -2, 2), dim), desc=f"{shape} dim={dim}")
    yield Sample((make((3, 4), dtype, rng, -2, 2, noncontig=True), 1), desc="non-contiguous",
                 noncontig=True)


def cumprod_samples(dtype, rng):
    yield from scan_samples(dtype, rng)
    x = make((2, 5), dtype, rng, 0.5, 2.0)
    x[0, 1] = 0
    x[1, 2] = 0
    x[1, 4] = 0
    yield Sample((x, 1), desc="zeros")


def cumext_samples(dtype, rng):
    yield from scan_samples(dtype, rng)
    yield Sample((_tied((3, 8), dtype, rng), 1), desc="ties: latest index", grad=False)
    if dtype in FLOATS:
        x = make((2, 6), dtype, rng)
        x[0, 2] = x[0, 4] = x[1, 0] = np.nan
        yield Sample((x, 1), desc="nan propagates", grad=False)


def softmax_samples(dtype, rng):
    for shape, dim in (((5,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((), 0),
                       ((0, 3), 1)):
        yield Sample((make(shape, dtype, rng), dim), desc=f"{shape} dim={dim}")
    yield Sample((make((3, 4), dtype, rng, 40, 90), -1), desc="large values (stability)")
    for dim in (0, 1):  # long rows: low-precision rounding must follow PyTorch's kernels
        yield Sample((make((4, 300), dtype, rng), dim), desc=f"long rows dim={dim}", grad=False)
    yield Sample((make((3, 4), dtype, rng, noncontig=True), 1), desc="non-contiguous",
                 noncontig=True)
    x = make((2, 3), dtype, rng)
    x[0, 1] = -np.inf
    yield Sample((x, 1), desc="-inf entry", grad=False)


def softmax_dtype_samples(dtype, rng):
    import ember
    yield Sample((make((3, 4), dtype, rng), 1), {"dtype": ember.float64}, desc="dtype=float64",
                 grad=False)


def lse_samples(dtype, rng):
    for shape, dim in (((5,), 0), ((3, 4), 1), ((2, 3, 4), (0, 2)), ((), 0), ((0, 3), 0),
                       ((3, 0), 1)):
        for keepdim in (False, True):
            yield Sample((make(shape, dtype, rng), dim, keepdim), desc=f"{shape} {dim}")
    yield Sample((make((3, 4), dtype, rng, 50, 90), 1), desc="large values")
    yield Sample((make((4, 300), dtype, rng), 1), desc="long rows", grad=False)
    yield Sample((make((3, 4), dtype, rng, noncontig=True), 0), desc="non-contiguous",
                 noncontig=True)
    if dtype in FLOATS:
        yield Sample((np.full((2, 3), -np.inf, dtype=make((1,), dtype, rng).dtype), 1),
                     desc="all -inf", grad=False)


def bool_reduce_samples(dtype, rng):
    yield from reduce_samples(dtype, rng, low=0, high=2)
    yield Sample((np.ones((2, 3), dtype=make((1,), dtype, rng).dtype),), {"dim": 1},
                 desc="all ones")


def _errors_dim(name, fn_kwargs=None):
    def cases():
        x = np.zeros((2, 3), np.float32)
        yield ErrorCase((x,), {"dim": 2, **(fn_kwargs or {})}, exc=IndexError,
                        match=rf"\[{name}\].*Dimension out of range")
    return cases


def _errors_sum():
    x = np.zeros((2, 3), F32)
    return [
        ErrorCase((x,), {"dim": 2}, exc=IndexError, match=r"\[sum\] Dimension out of range"),
        ErrorCase((x,), {"dim": (0, -2)}, exc=RuntimeError,
                  match=r"\[sum\] dim 0 appears multiple times"),
    ]


def _errors_mean():
    import ember
    return [
        ErrorCase((np.zeros((2, 3), np.int64),), exc=RuntimeError,
                  match=r"\[mean\].*Input dtype must be either a floating point"),
        ErrorCase((np.zeros((2,), bool),), exc=RuntimeError, match=r"\[mean\]"),
        ErrorCase((np.zeros((2, 3), F32),), {"dtype": ember.int64}, exc=RuntimeError,
                  match=r"\[mean\].*Optional dtype"),
        ErrorCase((np.zeros((2, 3), F32),), {"dim": -3}, exc=IndexError,
                  match=r"Dimension out of range"),
    ]


def _errors_amax():
    return [
        ErrorCase((np.zeros((0,), F32),), exc=RuntimeError,
                  match=r"\[amax\].*Expected reduction dim to be specified"),
        ErrorCase((np.zeros((0, 3), F32),), {"dim": 0}, exc=IndexError,
                  match=r"\[amax\].*Expected reduction dim 0 to have non-zero size"),
        ErrorCase((np.zeros((2, 3), F32),), {"dim": 5}, exc=IndexError,
                  match=r"Dimension out of range"),
    ]


def _errors_max():
    return [ErrorCase((np.zeros((0,), F32),), exc=RuntimeError, match=r"\[max\].*numel\(\) == 0")]


def _errors_max_dim():
    return [
        ErrorCase((np.zeros((0, 3), F32), 0), exc=IndexError,
                  match=r"\[max\].*dim 0 to have non-zero size"),
        ErrorCase((np.zeros((2, 3), F32), 2), exc=IndexError, match=r"Dimension out of range"),
    ]


def _errors_argmax():
    return [
        ErrorCase((np.zeros((0,), F32),), exc=IndexError, match=r"\[argmax\]"),
        ErrorCase((np.zeros((2,), bool),), exc=RuntimeError,
                  match=r"\[argmax\].*does not support bool"),
        ErrorCase((np.zeros((2, 3), F32),), {"dim": 2}, exc=IndexError,
                  match=r"Dimension out of range"),
    ]


def _errors_var():
    return [
        ErrorCase((np.zeros((2, 3), np.int64),), exc=RuntimeError,
                  match=r"\[var\] std and var only support floating point"),
        ErrorCase((np.zeros((2, 3), F32),), {"dim": 3}, exc=IndexError,
                  match=r"Dimension out of range"),
        ErrorCase((np.zeros((2, 3), F32),), {"unbiased": True, "correction": 1},
                  exc=RuntimeError, match=r"\[var\] Cannot specify both"),
    ]


def _errors_norm():
    import ember
    return [
        ErrorCase((np.zeros((2, 3), np.int64),), exc=RuntimeError,
                  match=r"\[linalg.vector_norm\] Expected a floating point"),
        ErrorCase((np.zeros((0,), F32),), {"p": math.inf}, exc=RuntimeError,
                  match=r"cannot compute the inf norm on an empty tensor"),
        ErrorCase((np.zeros((2, 3), F32),), {"dtype": ember.int64}, exc=RuntimeError,
                  match=r"dtype should be floating point"),
    ]


def _errors_softmax(name):
    def cases():
        return [
            ErrorCase((np.zeros((2, 3), np.int64), 1), exc=NotImplementedError,
                      match=rf"\[{name}\].*not implemented for 'int64'"),
            ErrorCase((np.zeros((2, 3), F32), 2), exc=IndexError,
                      match=rf"\[{name}\] Dimension out of range"),
        ]
    return cases


def _errors_scan(name):
    def cases():
        return [ErrorCase((np.zeros((2, 3), F32), -3), exc=IndexError,
                          match=rf"\[{name}\] Dimension out of range")]
    return cases


def _vector_norm(lib, x, *args, **kwargs):
    """``linalg.vector_norm``; ember's lives in the reduction frontend until ember.linalg."""
    linalg = getattr(lib, "linalg", None)
    if linalg is None:
        from ember._frontend.reduction import vector_norm
        return vector_norm(x, *args, **kwargs)
    return linalg.vector_norm(x, *args, **kwargs)


OPINFOS = [
    OpInfo("sum", lambda t, x, **kw: t.sum(x, **kw), reduce_samples, dtypes=ALL,
           errors=_errors_sum),
    OpInfo("sum_dtype", lambda t, x, **kw: x.sum(dtype=t.float64, **kw),
           lambda d, r: reduce_samples(d, r), dtypes=ALL, grad_dtypes=("float32",)),
    OpInfo("mean", lambda t, x, **kw: t.mean(x, **kw), reduce_samples, dtypes=FLOATS,
           errors=_errors_mean),
    OpInfo("mean_dtype", lambda t, x, **kw: x.mean(dtype=t.float64, **kw),
           lambda d, r: reduce_samples(d, r), dtypes=ALL, grad_dtypes=("float32",)),
    OpInfo("nansum", lambda t, x, **kw: t.nansum(x, **kw), nan_reduce_samples, dtypes=ALL),
    OpInfo("nanmean", lambda t, x, **kw: x.nanmean(**kw), nan_reduce_samples, dtypes=FLOATS,
           xfail={"float16": "PyTorch's CPU nansum accumulates float16 in float16 over several "
                             "dims; ember accumulates in float32 (off by ~1 ulp)"},
           errors=lambda: [ErrorCase((np.zeros(3, np.int64),), exc=RuntimeError,
                                     match=r"\[nanmean\] nanmean\(\): expected input")]),
    OpInfo("nanmean_grad_nan", lambda t, x: t.nanmean(x, 1), lambda d, r: [Sample((np.array(
        [[1.0, np.nan, 3.0], [4.0, 5.0, np.nan]]),))], fd_check=False),
    OpInfo("prod", lambda t, x, **kw: t.prod(x, **kw), prod_zero_samples, dtypes=ALL,
           tols={"float16": (2e-3, 1e-3), "bfloat16": (3e-2, 1e-2)}),
    OpInfo("prod_dtype", lambda t, x, **kw: x.prod(dtype=t.float64, **kw), int_dim_samples,
           dtypes=("int32", "float32"), grad=False),
    OpInfo("amax", lambda t, x, **kw: t.amax(x, **kw), nonempty_reduce_samples, dtypes=ALL,
           errors=_errors_amax),
    OpInfo("amin", lambda t, x, **kw: x.amin(**kw), nonempty_reduce_samples, dtypes=ALL),
    OpInfo("amax_ties", lambda t, x, **kw: t.amax(x, **kw), ties_samples, fd_check=False),
    OpInfo("max_full", lambda t, x: t.max(x), lambda d, r: [
        Sample((make(s, d, r),)) for s in ((), (5,), (3, 4))], dtypes=ALL,
        errors=_errors_max),
    OpInfo("min_full", lambda t, x: x.min(), lambda d, r: [
        Sample((make(s, d, r),)) for s in ((), (5,), (3, 4))], dtypes=ALL),
    OpInfo("max_full_ties", lambda t, x: t.max(x), lambda d, r: [s for s in ties_samples(d, r)
                                                               if not s.kwargs],
           fd_check=False),
    OpInfo("max_dim", lambda t, x, dim, **kw: t.max(x, dim, **kw), _dim_samples, dtypes=ALL,
           errors=_errors_max_dim),
    OpInfo("min_dim", lambda t, x, dim, **kw: x.min(dim=dim, **kw), _dim_samples, dtypes=ALL),
    OpInfo("max_dim_ties", lambda t, x, dim, **kw: t.max(x, dim, **kw),
           lambda d, r: [Sample((_tied((4, 6), d, r), 1)),
                         Sample((_tied((4, 6), d, r), 0), {"keepdim": True})],
           dtypes=ALL, fd_check=False),
    OpInfo("min_dim_ties", lambda t, x, dim: t.min(x, dim),
           lambda d, r: [Sample((_tied((4, 6), d, r), 1))], dtypes=ALL, fd_check=False),
    OpInfo("argmax", lambda t, x, **kw: t.argmax(x, **kw), lambda d, r: (
        s for s in nonempty_reduce_samples(d, r)
        if not isinstance(s.kwargs.get("dim"), tuple) and s.kwargs.get("dim", 0) is not None),
        dtypes=INTS + FLOATS, grad=False, errors=_errors_argmax),
    OpInfo("argmin", lambda t, x, **kw: x.argmin(**kw), lambda d, r: (
        s for s in nonempty_reduce_samples(d, r)
        if not isinstance(s.kwargs.get("dim"), tuple) and s.kwargs.get("dim", 0) is not None),
        dtypes=INTS + FLOATS, grad=False),
    OpInfo("argmax_keepdim_all", lambda t, x: t.argmax(x, keepdim=True),
           lambda d, r: [Sample((make((3, 4), d, r, 0, 2),))], dtypes=INTS + FLOATS, grad=False),
    OpInfo("var", lambda t, x, *a, **kw: t.var(x, *a, **kw), var_samples, dtypes=FLOATS,
           errors=_errors_var, tols={"float16": (2e-3, 1e-3), "bfloat16": (3e-2, 1e-2)}),
    OpInfo("std", lambda t, x, *a, **kw: x.std(*a, **kw), var_samples, dtypes=FLOATS,
           tols={"float16": (2e-3, 1e-3), "bfloat16": (3e-2, 1e-2)}),
    OpInfo("std_constant", lambda t, x: t.std(x, 1),
           lambda d, r: [Sample((np.ones((2, 3)) * 1.5,))], fd_check=False),
    OpInfo("var_mean", lambda t, x, *a, **kw: t.var_mean(x, *a, **kw), var_samples,
           dtypes=("float32", "float64")),
    OpInfo("std_mean", lambda t, x, *a, **kw: t.std_mean(x, *a, **kw), var_samples,
           dtypes=("float32", "float64")),
    OpInfo("norm", lambda t, x, **kw: t.norm(x, **kw), norm_samples, dtypes=FLOATS,
           errors=_errors_norm, tols={"float16": (2e-3, 1e-3), "bfloat16": (3e-2, 1e-2)}),
    OpInfo("vector_norm", _vector_norm, vector_norm_samples, dtypes=FLOATS),
    OpInfo("logsumexp", lambda t, x, *a, **kw: t.logsumexp(x, *a, **kw), lse_samples,
           dtypes=ALL),
    OpInfo("all", lambda t, x, **kw: t.all(x, **kw), bool_reduce_samples, dtypes=ALL,
           grad=False, errors=_errors_dim("all")),
    OpInfo("any", lambda t, x, **kw: x.any(**kw), bool_reduce_samples, dtypes=ALL, grad=False),
    OpInfo("count_nonzero", lambda t, x, **kw: t.count_nonzero(x, **{
        k: v for k, v in kw.items() if k != "keepdim"}),
        lambda d, r: (s for s in bool_reduce_samples(d, r) if not s.kwargs.get("keepdim")),
        dtypes=ALL, grad=False),
    OpInfo("cumsum", lambda t, x, dim: t.cumsum(x, dim), scan_samples, dtypes=ALL,
           errors=_errors_scan("cumsum")),
    OpInfo("cumsum_dtype", lambda t, x, dim: x.cumsum(dim, dtype=t.float64), scan_samples,
           dtypes=ALL, grad_dtypes=("float32",)),
    OpInfo("cumprod", lambda t, x, dim: t.cumprod(x, dim), cumprod_samples, dtypes=ALL,
           errors=_errors_scan("cumprod"),
           tols={"float16": (2e-3, 1e-3), "bfloat16": (3e-2, 1e-2)}),
    OpInfo("cumsum_", lambda t, x, dim: x.clone().cumsum_(dim), scan_samples,
           dtypes=INTS[-1:] + FLOATS),
    OpInfo("cummax", lambda t, x, dim: t.cummax(x, dim), cumext_samples, dtypes=ALL,
           errors=_errors_scan("cummax")),
    OpInfo("cummin", lambda t, x, dim: x.cummin(dim), cumext_samples, dtypes=ALL),
    OpInfo("softmax", lambda t, x, dim, **kw: t.softmax(x, dim, **kw), softmax_samples,
           dtypes=FLOATS, errors=_errors_softmax("softmax")),
    OpInfo("log_softmax", lambda t, x, dim, **kw: x.log_softmax(dim, **kw), softmax_samples,
           dtypes=FLOATS, errors=_errors_softmax("log_softmax")),
    OpInfo("softmax_dtype", lambda t, x, dim, **kw: t.softmax(x, dim, **kw),
           softmax_dtype_samples, dtypes=ALL, grad=False),
    OpInfo("log_softmax_dtype", lambda t, x, dim, **kw: t.log_softmax(x, dim, **kw),
           softmax_dtype_samples, dtypes=ALL, grad=False),
]

"""OpInfo entries for pointwise ops."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import ALL, FLOATS, INTS, ErrorCase, OpInfo, Sample, make, standard_shapes


def binary_samples(low=-3.0, high=3.0, exclude_zero_rhs=False, scalars=True):
    def gen(dtype, rng):
        for shape in standard_shapes():
            yield Sample((make(shape, dtype, rng, low, high),
                          make(shape, dtype, rng, low, high, exclude_zero=exclude_zero_rhs)),
                         desc=f"same shape {shape}")
        yield Sample((make((3, 1), dtype, rng, low, high),
                      make((1, 4), dtype, rng, low, high, exclude_zero=exclude_zero_rhs)),
                     desc="broadcast (3,1)x(1,4)")
        yield Sample((make((2, 3, 4), dtype, rng, low, high),
                      make((4,), dtype, rng, low, high, exclude_zero=exclude_zero_rhs)),
                     desc="broadcast (2,3,4)x(4,)")
        yield Sample((make((3, 4), dtype, rng, low, high, noncontig=True),
                      make((3, 4), dtype, rng, low, high, noncontig=True,
                           exclude_zero=exclude_zero_rhs)),
                     desc="non-contiguous", noncontig=True)
        yield Sample((make((3, 4), dtype, rng, low, high),
                      make((), dtype, rng, low, high, exclude_zero=exclude_zero_rhs)),
                     desc="0-d rhs")
        if scalars:
            yield Sample((make((3, 4), dtype, rng, low, high), 2), desc="int scalar rhs",
                         grad=True)
            if dtype in FLOATS:
                yield Sample((make((3, 4), dtype, rng, low, high), 1.5), desc="float scalar")
    return gen


def mixed_dtype_samples(dtype, rng):
    """Promotion: the op's dtype against float32/int64/bool tensors and scalars."""
    a = make((3, 4), dtype, rng, 1, 3)
    for other in ("float32", "int64", "bool", "float16", "int32"):
        yield Sample((a, make((3, 4), other, rng, 1, 3, exclude_zero=True)), desc=f"vs {other}",
                     grad=False)
    yield Sample((a, make((), "float64", rng, 1, 3)), desc="vs 0-d float64", grad=False)
    yield Sample((a, 2.5), desc="vs python float", grad=False)
    yield Sample((a, True), desc="vs python bool", grad=False)


def unary_samples(low=-3.0, high=3.0):
    def gen(dtype, rng):
        for shape in standard_shapes():
            yield Sample((make(shape, dtype, rng, low, high),), desc=f"{shape}")
        yield Sample((make((3, 4), dtype, rng, low, high, noncontig=True),),
                     desc="non-contiguous", noncontig=True)
    return gen


def _bad_broadcast():
    return [ErrorCase((np.zeros((3, 4), np.float32), np.zeros((5,), np.float32)),
                      exc=RuntimeError, match=r"\[add\].*(3, 4).*\(5,\)")]


OPINFOS = [
    OpInfo("add", lambda t, x, y: t.add(x, y), binary_samples(), dtypes=ALL,
           errors=_bad_broadcast),
    OpInfo("add_alpha", lambda t, x, y: t.add(x, y, alpha=2), binary_samples(scalars=False),
           dtypes=INTS + FLOATS),
    OpInfo("add_promote", lambda t, x, y: x + y, mixed_dtype_samples, dtypes=ALL, grad=False),
    OpInfo("sub", lambda t, x, y: x - y, binary_samples(), dtypes=INTS + FLOATS),
    OpInfo("rsub_scalar", lambda t, x: 3 - x, unary_samples(), dtypes=INTS + FLOATS),
    OpInfo("mul", lambda t, x, y: x * y, binary_samples(), dtypes=ALL),
    OpInfo("div", lambda t, x, y: x / y, binary_samples(exclude_zero_rhs=True), dtypes=ALL),
    OpInfo("div_promote", lambda t, x, y: t.div(x, y), mixed_dtype_samples, dtypes=ALL,
           grad=False),
    OpInfo("rdiv_scalar", lambda t, x: 2 / x, unary_samples(0.5, 3.0), dtypes=FLOATS + INTS),
    OpInfo("neg", lambda t, x: -x, unary_samples(), dtypes=INTS + FLOATS),
    OpInfo("exp", lambda t, x: t.exp(x), unary_samples(), dtypes=ALL),
]

"""OpInfo entries for the core in-place methods (copy_, fill_, zero_) and contiguous()."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import ALL, FLOATS, ErrorCase, OpInfo, Sample, make, standard_shapes


def _fresh(x):
    """In-place ops must not touch the sample's array or a leaf: work on ``x * 1`` (x + 0 for
    bools is not allowed, so clone)."""
    return x.clone()


def _copy(lib, x, src):
    y = _fresh(x)
    out = y.copy_(src)
    assert out is y
    return y


def _fill(lib, x, value):
    y = _fresh(x)
    assert y.fill_(value) is y
    return y


def _zero(lib, x):
    y = _fresh(x)
    assert y.zero_() is y
    return y


def _copy_samples(dtype, rng):
    for shape in standard_shapes():
        yield Sample((make(shape, dtype, rng), make(shape, dtype, rng)), desc=f"{shape}")
    yield Sample((make((3, 4), dtype, rng), make((4,), dtype, rng)), desc="broadcast src")
    yield Sample((make((3, 4), dtype, rng), make((3, 4), "float64", rng)), desc="cast src",
                 grad=dtype in FLOATS)
    yield Sample((make((3, 4), dtype, rng, noncontig=True), make((3, 4), dtype, rng)),
                 desc="non-contiguous destination", noncontig=True)


def _fill_samples(dtype, rng):
    value = {"bool": True}.get(dtype, 2 if dtype not in FLOATS else 1.5)
    for shape in standard_shapes():
        yield Sample((make(shape, dtype, rng), value), desc=f"{shape}", grad=False)
    yield Sample((make((3, 4), dtype, rng), make((), dtype, rng)), desc="0-d tensor value")


def _zero_samples(dtype, rng):
    for shape in standard_shapes():
        yield Sample((make(shape, dtype, rng),), desc=f"{shape}", grad=False)


def _contig_samples(dtype, rng):
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), desc="strided")
    yield Sample((make((2, 3, 4), dtype, rng).transpose(2, 0, 1),), desc="permuted")
    yield Sample((make((3, 4), dtype, rng),), desc="already contiguous")


def _copy_errors():
    return [ErrorCase((np.zeros((3, 4), np.float32), np.zeros((5,), np.float32)),
                      exc=RuntimeError, match=r"\[copy_\]")]


def _fill_errors():
    return [ErrorCase((np.zeros((3,), np.float32), np.zeros((2,), np.float32)),
                      exc=RuntimeError, match=r"\[fill_\] fill_ only supports 0-dimension")]


OPINFOS = [
    OpInfo("copy_", _copy, _copy_samples, dtypes=ALL, errors=_copy_errors, fd_check=False),
    OpInfo("fill_", _fill, _fill_samples, dtypes=ALL, errors=_fill_errors, fd_check=False),
    OpInfo("zero_", _zero, _zero_samples, dtypes=ALL, grad=False),
    OpInfo("contiguous", lambda lib, x: x.contiguous(), _contig_samples, dtypes=ALL),
]

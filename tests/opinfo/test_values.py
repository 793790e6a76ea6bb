"""Values and dtypes of every OpInfo sample against PyTorch."""

from __future__ import annotations

import pytest

import ember
from tests.opinfo import ALL_OPINFOS
from tests.opinfo.core import (
    FLOAT32_64,
    assert_close,
    convert_kwargs,
    dot_tolerance,
    to_ember,
    to_torch,
)

torch = pytest.importorskip("torch")

CASES = [(op, d) for op in ALL_OPINFOS for d in op.dtypes]


def _run_ember(op, sample):
    return op.fn(ember, *[to_ember(a) for a in sample.args], **sample.kwargs)


def _run_torch(op, sample):
    args = [to_torch(a, torch) for a in sample.args]
    return op.fn(torch, *args, **convert_kwargs(sample.kwargs, torch))


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{o.name}-{d}" for o, d in CASES])
def test_values_match_torch(op, dtype):
    if dtype in op.xfail:
        pytest.xfail(op.xfail[dtype])
    if op.skip_torch:
        pytest.skip(op.skip_torch)
    n = 0
    for sample in op.samples(dtype, op.rng(dtype)):
        expected = _run_torch(op, sample)
        actual = _run_ember(op, sample)
        what = f"{op.name}[{dtype}] {sample!r}"
        if op.compare is not None:
            op.compare(actual, expected)
        elif op.random:
            assert tuple(actual.shape) == tuple(expected.shape), what
            assert str(actual.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1], what
        else:
            bound = (dot_tolerance(op, sample, torch, dtype)
                     if op.sum_of_products and dtype in FLOAT32_64 else None)
            assert_close(actual, expected, dtype, op.tols, what, bound)
        n += 1
    assert n > 0, f"{op.name} has no samples for {dtype}"

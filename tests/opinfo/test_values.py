"""Values and dtypes of every OpInfo sample against PyTorch (cases and samples from
``harness.py``; every case checks at least one sample)."""

from __future__ import annotations

import pytest

import ember
from tests.opinfo import harness
from tests.opinfo.core import (
    FLOAT32_64,
    assert_close,
    convert_kwargs,
    dot_tolerance,
    to_ember,
    to_torch,
)

torch = pytest.importorskip("torch")


def _params():
    out = []
    for op, d in harness.cases("values"):
        marks = [pytest.mark.xfail(strict=True, reason=op.xfail[d])] if d in op.xfail else []
        out.append(pytest.param(op, d, marks=marks, id=f"{op.name}-{d}"))
    return out


def _check(op, dtype, sample):
    args = [to_torch(a, torch) for a in sample.args]
    expected = op.fn(torch, *args, **convert_kwargs(sample.kwargs, torch))
    actual = op.fn(ember, *[to_ember(a) for a in sample.args], **sample.kwargs)
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
    return True


@pytest.mark.parametrize("op,dtype", _params())
def test_values_match_torch(op, dtype):
    if op.skip_torch:
        pytest.skip(op.skip_torch)
    harness.run_case("values", op, dtype, lambda sample, pos: _check(op, dtype, sample))

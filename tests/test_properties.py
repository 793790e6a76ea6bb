"""Property tests (hypothesis): broadcasting and promotion of binary ops agree with PyTorch for
random shapes and dtypes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from tests.opinfo.core import assert_close, make, to_ember, to_torch

torch = pytest.importorskip("torch")

DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


@st.composite
def broadcastable_pair(draw):
    ndim = draw(st.integers(0, 4))
    base = draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim))

    def variant():
        drop = draw(st.integers(0, ndim))
        dims = base[drop:]
        return [1 if draw(st.booleans()) else d for d in dims]

    return tuple(variant()), tuple(variant())


@settings(max_examples=150, deadline=None)
@given(shapes=broadcastable_pair(), da=st.sampled_from(DTYPES), db=st.sampled_from(DTYPES),
       op=st.sampled_from(["add", "mul"]), seed=st.integers(0, 2**16))
def test_binary_broadcast_and_promotion(shapes, da, db, op, seed):
    rng = np.random.default_rng(seed)
    a, b = make(shapes[0], da, rng), make(shapes[1], db, rng)
    expected = getattr(torch, op)(to_torch(a, torch), to_torch(b, torch))
    actual = getattr(ember, op)(to_ember(a), to_ember(b))
    assert_close(actual, expected, str(expected.dtype)[6:], what=f"{op} {shapes} {da} {db}")


@settings(max_examples=100, deadline=None)
@given(shape=st.lists(st.integers(0, 4), max_size=4), d=st.sampled_from(DTYPES),
       scalar=st.one_of(st.booleans(), st.integers(-3, 3), st.floats(-3, 3, width=32)),
       seed=st.integers(0, 2**16))
def test_scalar_promotion(shape, d, scalar, seed):
    rng = np.random.default_rng(seed)
    a = make(tuple(shape), d, rng)
    expected = torch.mul(to_torch(a, torch), scalar)
    actual = ember.mul(to_ember(a), scalar)
    assert_close(actual, expected, str(expected.dtype)[6:], what=f"{shape} {d} * {scalar!r}")

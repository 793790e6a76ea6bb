"""default_collate / default_convert against torch's, over a table of nested samples."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import ember
from ember.utils.data import default_collate, default_convert
from tests.utils._compare import assert_same

torch = pytest.importorskip("torch")
from torch.utils.data import default_collate as torch_collate  # noqa: E402
from torch.utils.data import default_convert as torch_convert  # noqa: E402

Point = collections.namedtuple("Point", ["x", "y"])


class Record(dict):
    """A dict subclass: collate keeps the subclass (copy + update)."""


def _arr(seed: int, shape: tuple, dtype: str = "float32") -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# Each case: name -> function(lib) -> list of samples (lib is ember or torch).
CASES = {
    "tensors": lambda lib: [lib.tensor(_arr(i, (2, 3))) for i in range(4)],
    "tensors_0d_int": lambda lib: [lib.tensor(i) for i in range(3)],
    "tensors_bool": lambda lib: [lib.tensor([True, False]) for _ in range(2)],
    "tensors_f64": lambda lib: [lib.tensor(_arr(i, (3,), "float64")) for i in range(2)],
    "numpy_arrays": lambda lib: [_arr(i, (2, 2)) for i in range(3)],
    "numpy_int_arrays": lambda lib: [np.arange(4, dtype=np.int32) + i for i in range(3)],
    "numpy_scalars_f32": lambda lib: [np.float32(i) for i in range(3)],
    "numpy_scalars_f64": lambda lib: [np.float64(i) / 3 for i in range(3)],
    "numpy_scalars_i16": lambda lib: [np.int16(i) for i in range(3)],
    "numpy_bool": lambda lib: [np.bool_(i % 2) for i in range(3)],
    "floats": lambda lib: [0.5, 1.25, -3.0],
    "ints": lambda lib: [1, 2, -7],
    "bools": lambda lib: [True, False, True],
    "int_then_float": lambda lib: [1, 2.5],
    "strings": lambda lib: ["a", "bc", "def"],
    "bytes": lambda lib: [b"a", b"b"],
    "tuples": lambda lib: [(lib.tensor(float(i)), i, f"s{i}") for i in range(3)],
    "lists": lambda lib: [[i, 2.0 * i] for i in range(3)],
    "dicts": lambda lib: [{"x": lib.tensor(_arr(i, (2,))), "y": i, "name": str(i)}
                          for i in range(3)],
    "dict_subclass": lambda lib: [Record(a=i, b=float(i)) for i in range(2)],
    "namedtuples": lambda lib: [Point(i, lib.tensor([i, i + 1])) for i in range(3)],
    "nested": lambda lib: [
        {"img": _arr(i, (1, 2)), "meta": {"id": i, "tags": ("a", "b")},
         "pts": [Point(float(i), np.int64(i))]} for i in range(2)],
    "tuple_of_arrays": lambda lib: [(_arr(i, (3,)), np.int64(i)) for i in range(4)],
    "single_sample": lambda lib: [(lib.tensor([1.0, 2.0]), 3)],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_default_collate_matches_torch(name):
    make = CASES[name]
    assert_same(default_collate(make(ember)), torch_collate(make(torch)))


CONVERT_CASES = {
    "int": lambda lib: 3,
    "float": lambda lib: 2.5,
    "str": lambda lib: "abc",
    "ndarray": lambda lib: _arr(0, (2, 2)),
    "str_ndarray": lambda lib: np.array(["a", "b"]),
    "np_scalar": lambda lib: np.float32(1.5),
    "tensor": lambda lib: lib.tensor([1, 2]),
    "tuple": lambda lib: (np.arange(3), 4),
    "list": lambda lib: [np.arange(2), "x"],
    "dict": lambda lib: {"a": np.ones(2), "b": [np.zeros(1)]},
    "namedtuple": lambda lib: Point(np.array(0), np.array(1.0)),
}


@pytest.mark.parametrize("name", sorted(CONVERT_CASES))
def test_default_convert_matches_torch(name):
    make = CONVERT_CASES[name]
    assert_same(default_convert(make(ember)), torch_convert(make(torch)))


def test_collate_keeps_tensor_identity_semantics():
    # Stacking copies: the batch does not alias the samples.
    xs = [ember.zeros(2) for _ in range(2)]
    b = default_collate(xs)
    b.add_(1)
    assert xs[0].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("batch, exc, match", [
    ([object(), object()], TypeError, "default_collate: batch must contain tensors"),
    ([np.array(["a"]), np.array(["b"])], TypeError, "default_collate: batch must contain"),
    ([[1, 2], [3]], RuntimeError, "each element in list of batch should be of equal size"),
    ([None, None], TypeError, "found <class 'NoneType'>"),
])
def test_collate_errors_match_torch(batch, exc, match):
    with pytest.raises(exc, match=match):
        torch_collate(batch)
    with pytest.raises(exc, match=match):
        default_collate(batch)

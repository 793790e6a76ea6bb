"""dtypes: promotion tables, result_type with scalars and 0-d tensors, finfo/iinfo, defaults."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ember
from ember import dtypes as dt

torch = pytest.importorskip("torch")

NAMES = [d.name for d in dt.ALL_DTYPES]


def _t(name):
    return getattr(torch, name)


@pytest.mark.parametrize("a,b", list(itertools.product(NAMES, NAMES)))
def test_promote_types_matches_torch(a, b):
    assert ember.promote_types(getattr(ember, a), getattr(ember, b)).name == \
        str(torch.promote_types(_t(a), _t(b))).replace("torch.", "")


def _operands(name, kind):
    """An ember and a torch operand of the given kind: 'nd' tensor, '0d' tensor, or scalar."""
    if kind == "nd":
        return ember.zeros(2, dtype=getattr(ember, name)), torch.zeros(2, dtype=_t(name))
    if kind == "0d":
        return ember.zeros((), dtype=getattr(ember, name)), torch.zeros((), dtype=_t(name))
    value = {"bool": True, "int64": 3, "float32": 2.5}[name]
    return value, value


KINDS = [(n, k) for n in NAMES for k in ("nd", "0d")] + \
    [("bool", "scalar"), ("int64", "scalar"), ("float32", "scalar")]


@pytest.mark.parametrize("x,y", list(itertools.combinations(KINDS, 2)))
def test_result_type_matches_torch(x, y):
    if x[1] == "scalar" and y[1] == "scalar":
        pytest.skip("torch.result_type needs a tensor")
    ea, ta = _operands(*x)
    eb, tb = _operands(*y)
    assert ember.result_type(ea, eb).name == \
        str(torch.result_type(ta, tb)).replace("torch.", "")


def test_result_type_follows_default_dtype():
    ember.set_default_dtype(ember.float64)
    assert ember.result_type(ember.zeros(2, dtype=ember.int32), 1.5) is ember.float64
    assert ember.tensor([1.0]).dtype is ember.float64
    assert (ember.tensor([1, 2]) / 2).dtype is ember.float64
    ember.set_default_dtype(ember.float32)
    assert (ember.tensor([1, 2]) / 2).dtype is ember.float32


def test_set_default_dtype_rejects_ints():
    with pytest.raises(TypeError, match="floating"):
        ember.set_default_dtype(ember.int32)


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_torch(name):
    e, t = ember.finfo(getattr(ember, name)), torch.finfo(_t(name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(e, attr) == getattr(t, attr), attr


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(name):
    e, t = ember.iinfo(getattr(ember, name)), torch.iinfo(_t(name))
    assert (e.bits, e.min, e.max) == (t.bits, t.min, t.max)


def test_finfo_errors():
    with pytest.raises(TypeError, match=r"\[finfo\]"):
        ember.finfo(ember.int32)
    with pytest.raises(TypeError, match=r"\[iinfo\]"):
        ember.iinfo(ember.float32)


def test_dtype_properties():
    assert ember.float32.is_floating_point and not ember.int8.is_floating_point
    assert ember.int8.is_signed and not ember.uint8.is_signed
    assert ember.float32.itemsize == 4 and ember.bfloat16.itemsize == 2
    assert repr(ember.bfloat16) == "ember.bfloat16"
    assert ember.half is ember.float16 and ember.long is ember.int64
    assert ember.tensor([1.0], dtype=ember.bfloat16)._data.dtype == dt.bfloat16.np
    assert ember.can_cast(ember.int32, ember.float16) and not ember.can_cast(ember.float32,
                                                                             ember.int64)


def test_tensor_dtype_inference_matches_torch():
    for data in ([1, 2], [1.0, 2], [True, False], [[1, 2], [3, 4]], 3, 2.5, True,
                 np.array([1, 2], np.int32), np.array([1.0], np.float16)):
        assert ember.tensor(data).dtype.name == str(torch.tensor(data).dtype)[6:]


def test_unsupported_numpy_dtype():
    with pytest.raises(TypeError, match=r"\[from_numpy\].*complex"):
        ember.from_numpy(np.zeros(2, np.complex64))

"""Tensor protocol: construction, metadata, Python conversions, item/tolist/numpy, copying."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def test_metadata_matches_torch():
    for shape in [(), (0,), (3,), (2, 3, 4)]:
        e, t = ember.zeros(shape), torch.zeros(shape)
        assert tuple(e.shape) == tuple(t.shape) and e.ndim == t.ndim and e.dim() == t.dim()
        assert e.numel() == t.numel() and e.stride() == t.stride()
        assert e.is_contiguous() and e.storage_offset() == 0
        assert e.element_size() == t.element_size() and e.nbytes == t.nbytes
    e = ember.zeros(2, 3)
    assert e.size() == (2, 3) and e.size(1) == 3 and e.size(-1) == 3
    assert isinstance(e.shape, ember.Size) and repr(e.shape) == "ember.Size([2, 3])"
    assert e.shape.numel() == 6
    with pytest.raises(IndexError, match="Dimension out of range"):
        e.size(2)


def test_permuted_strides_match_torch():
    e = ember.zeros(2, 3, 4).permute(2, 0, 1)
    t = torch.zeros(2, 3, 4).permute(2, 0, 1)
    assert e.stride() == t.stride() and e.is_contiguous() == t.is_contiguous()
    assert e.contiguous().stride() == t.contiguous().stride()
    e1, t1 = ember.zeros(1, 3).expand(4, 3), torch.zeros(1, 3).expand(4, 3)
    assert e1.stride() == t1.stride() and e1.is_contiguous() == t1.is_contiguous()


def test_item_and_python_conversions():
    assert ember.tensor(2.5).item() == 2.5 and isinstance(ember.tensor(2.5).item(), float)
    assert ember.tensor(3).item() == 3 and isinstance(ember.tensor(3).item(), int)
    assert ember.tensor(True).item() is True
    assert ember.tensor([[7]]).item() == 7
    assert float(ember.tensor([1.5])) == 1.5 and int(ember.tensor(2.9)) == 2
    assert [10, 20, 30][ember.tensor(1)] == 20  # __index__
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        ember.tensor([1.0, 2.0]).item()
    with pytest.raises(TypeError, match="only integer tensors"):
        [1, 2][ember.tensor(1.0)]


def test_bool_rules():
    assert bool(ember.tensor([1.0])) and not bool(ember.tensor(0))
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        bool(ember.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="no values is ambiguous"):
        bool(ember.tensor([]))


def test_tolist_and_len_match_torch():
    data = [[1.5, 2.0], [3.0, -4.25]]
    assert ember.tensor(data).tolist() == torch.tensor(data).tolist()
    assert ember.tensor(data, dtype=ember.bfloat16).tolist() == \
        torch.tensor(data, dtype=torch.bfloat16).tolist()
    assert ember.tensor([1, 2]).tolist() == [1, 2] and ember.tensor(5).tolist() == 5
    assert len(ember.zeros(4, 2)) == 4
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(ember.tensor(1.0))


def test_tensor_constructor_forms():
    assert ember.Tensor([1, 2]).dtype is ember.float32
    assert tuple(ember.Tensor(2, 3).shape) == (2, 3)
    x = ember.tensor([1.0, 2.0])
    y = ember.tensor(x)
    y.add_(1)
    assert x.tolist() == [1.0, 2.0]  # tensor() copies
    z = ember.as_tensor(x)
    assert z is x
    a = np.array([1, 2], dtype=np.int32)
    assert np.shares_memory(ember.as_tensor(a).numpy(), a)


def test_deepcopy_and_pickle():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = copy.deepcopy(x)
    assert y.requires_grad and y.tolist() == [1.0, 2.0]
    assert not np.shares_memory(y.detach().numpy(), x.detach().numpy())
    z = pickle.loads(pickle.dumps(ember.tensor([[1, 2]], dtype=ember.int16)))
    assert z.dtype is ember.int16 and z.tolist() == [[1, 2]]
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(x * 2)


def test_untyped_storage_and_data_ptr():
    x = ember.zeros(4)
    v = x.view(2, 2)
    assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert v.data_ptr() == x.data_ptr()
    assert x.untyped_storage().nbytes() == 16


def test_data_property():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    d = x.data
    assert not d.requires_grad
    d.mul_(2)
    assert x.tolist() == [2.0, 4.0]
    x.data = ember.tensor([5.0, 6.0])
    assert x.tolist() == [5.0, 6.0] and x.requires_grad


def test_format_of_scalar_tensor():
    assert f"{ember.tensor(2.5):.2f}" == "2.50"

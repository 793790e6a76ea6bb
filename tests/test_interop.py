"""NumPy and DLPack interop: zero-copy in both directions."""

from __future__ import annotations

import numpy as np
import pytest

import ember


def test_from_numpy_shares_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ember.from_numpy(a)
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    assert np.shares_memory(t.numpy(), a)
    assert t.dtype is ember.float32 and tuple(t.shape) == (2, 3)


def test_numpy_and_array_protocol():
    t = ember.tensor([1.0, 2.0])
    assert np.shares_memory(np.asarray(t), t.numpy())
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    with pytest.raises(RuntimeError, match="requires grad"):
        ember.tensor([1.0], requires_grad=True).numpy()


def test_dlpack_roundtrip_numpy():
    t = ember.arange(6, dtype=ember.float32).reshape(2, 3)
    a = np.from_dlpack(t)
    assert np.shares_memory(a, t.numpy())
    assert t.__dlpack_device__() == (1, 0)
    back = ember.from_dlpack(a)
    assert np.shares_memory(back.numpy(), a)
    assert back.dtype is ember.float32


def test_dlpack_with_torch():
    torch = pytest.importorskip("torch")
    t = ember.arange(6, dtype=ember.float64).reshape(2, 3)
    tt = torch.from_dlpack(t)
    assert tt.dtype == torch.float64 and tt.shape == (2, 3)
    tt[0, 0] = 7.0
    assert float(t.numpy()[0, 0]) == 7.0  # zero-copy
    e = ember.from_dlpack(torch.ones(3, dtype=torch.int32))
    assert e.dtype is ember.int32 and e.tolist() == [1, 1, 1]


def test_dlpack_errors():
    with pytest.raises(TypeError, match=r"\[from_dlpack\]"):
        ember.from_dlpack([1, 2, 3])
    with pytest.raises(TypeError, match="bfloat16"):
        ember.tensor([1.0], dtype=ember.bfloat16).__dlpack__()

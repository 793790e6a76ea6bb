"""Behaviour behind the signature fixes: pin_memory, asarray's copy, PyTorch's argument names
of Tensor.split/swapaxes/uniform_/expand, promote_types(type1=, type2=)."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

MAKERS = [
    ("zeros", lambda t, **k: t.zeros(2, 3, **k)), ("ones", lambda t, **k: t.ones(2, **k)),
    ("full", lambda t, **k: t.full((2,), 1.5, **k)), ("arange", lambda t, **k: t.arange(4, **k)),
    ("linspace", lambda t, **k: t.linspace(0, 1, 5, **k)), ("eye", lambda t, **k: t.eye(3, **k)),
    ("rand", lambda t, **k: t.rand(2, **k).shape), ("randn", lambda t, **k: t.randn(2, **k).shape),
    ("zeros_like", lambda t, **k: t.zeros_like(t.ones(2), **k)),
    ("full_like", lambda t, **k: t.full_like(t.ones(2), 7, **k)),
    ("rand_like", lambda t, **k: t.rand_like(t.ones(2), **k).shape),
    ("tril_indices", lambda t, **k: t.tril_indices(3, 3, **k)),
    ("new_zeros", lambda t, **k: t.ones(2).new_zeros(3, **k)),
    ("new_full", lambda t, **k: t.ones(2).new_full((2,), 3.0, **k)),
]


@pytest.mark.parametrize("name,make", MAKERS, ids=[m[0] for m in MAKERS])
def test_pin_memory_like_torch_on_a_cpu_build(name, make):
    e, t = make(ember, pin_memory=False), make(torch, pin_memory=False)
    if isinstance(t, torch.Tensor):
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    else:
        assert tuple(e) == tuple(t)
    with pytest.raises(RuntimeError) as te:
        make(torch, pin_memory=True)
    with pytest.raises(RuntimeError, match=rf"\[{name}\] pin_memory=True requires a CUDA"):
        make(ember, pin_memory=True)
    assert "pin_memory=True requires" in str(te.value)


def test_asarray_copy_semantics_like_torch():
    for lib in (ember, torch):
        a = np.ones(3, np.float32)
        shared, copied = lib.asarray(a), lib.asarray(a, copy=True)
        a[0] = 5
        assert shared[0].item() == 5 and copied[0].item() == 1
        with pytest.raises(ValueError, match="can't alias arbitrary sequence"):
            lib.asarray([1.0, 2.0], copy=False)
        assert lib.asarray([1.0], requires_grad=True).requires_grad
        assert lib.asarray(obj=[1, 2]).tolist() == [1, 2]


def test_pytorch_argument_names():
    for lib in (ember, torch):
        x = lib.arange(6.0).reshape(2, 3)
        assert [p.tolist() for p in x.split(split_size=2, dim=1)] == [[[0.0, 1.0], [3.0, 4.0]],
                                                                      [[2.0], [5.0]]]
        assert lib.split(x, split_size_or_sections=1)[1].tolist() == [[3.0, 4.0, 5.0]]
        assert x.swapaxes(axis0=0, axis1=1).shape == (3, 2)
        assert lib.swapaxes(x, axis0=0, axis1=1).shape == (3, 2)
        assert x.swapdims(dim0=0, dim1=1).shape == (3, 2)
        assert x.expand(2, 2, 3, implicit=True).shape == (2, 2, 3)
        u = lib.empty(1000).uniform_(2.0, to=3.0)
        assert 2.0 <= u.min().item() and u.max().item() < 3.0
        u = lib.empty(10).uniform_(**{"from": -1.0, "to": -0.5})
        assert -1.0 <= u.min().item() and u.max().item() < -0.5
        assert lib.promote_types(type1=lib.int32, type2=lib.float16) == lib.float16

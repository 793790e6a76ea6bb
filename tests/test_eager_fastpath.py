"""The eager fast paths of issue 21 (``Tensor.__add__``/``__sub__``/``__mul__``/``__truediv__``
straight to ``_bind_fast._eager_pointwise``, the binder calling a small array's ufunc, the inlined
autograd node of a binary op): every case they take, and the ones they must leave to the general
path, give PyTorch's values, dtypes, errors and gradients."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

OPS = [operator.add, operator.sub, operator.mul, operator.truediv]


def _check(e, t):
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.detach().float().numpy(), t.detach().float().numpy(),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "int64"])
def test_same_dtype_and_shape(op, dtype):
    a = np.array([1.5, -2.0, 3.25, 4.0]) if "float" in dtype else np.array([7, -3, 5, 9])
    b = np.array([0.5, 4.0, -1.25, 2.0]) if "float" in dtype else np.array([2, 4, -3, 1])
    ea = ember.tensor(a, dtype=getattr(ember, dtype))
    eb = ember.tensor(b, dtype=getattr(ember, dtype))
    ta = torch.tensor(a, dtype=getattr(torch, dtype))
    tb = torch.tensor(b, dtype=getattr(torch, dtype))
    _check(op(ea, eb), op(ta, tb))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("scalar", [2, 0.5, -3, True])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64"])
def test_tensor_and_python_scalar(op, scalar, dtype):
    a = np.array([1.0, -2.0, 3.0]) if "float" in dtype else np.array([1, -2, 3])
    e = ember.tensor(a, dtype=getattr(ember, dtype))
    t = torch.tensor(a, dtype=getattr(torch, dtype))
    for f in (lambda x: op(x, scalar), lambda x: op(scalar, x)):
        try:
            want = f(t)
        except RuntimeError:   # torch refuses (a bool scalar in a subtraction): so must ember
            with pytest.raises(RuntimeError):
                f(e)
            continue
        _check(f(e), want)


def test_broadcast_and_promotion_take_the_general_path():
    ea, ta = ember.ones(2, 3), torch.ones(2, 3)
    eb, tb = ember.arange(3), torch.arange(3)
    for op in OPS:
        _check(op(ea, eb), op(ta, tb))
        _check(op(ea, eb.double()), op(ta, tb.double()))


def test_bool_subtraction_raises_like_torch():
    ea = ember.tensor([True, False])
    with pytest.raises(Exception, match="[Ss]ubtraction"):
        ea - ea
    _check(ea + ea, torch.tensor([True, False]) + torch.tensor([True, False]))
    _check(ea * ea, torch.tensor([True, False]) * torch.tensor([True, False]))


@pytest.mark.parametrize("op", OPS)
def test_gradients_of_both_operands(op):
    a, b = np.array([1.5, -2.0, 3.0]), np.array([0.5, 4.0, -1.5])
    ea, eb = ember.tensor(a, requires_grad=True), ember.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (op(ea, eb) * op(ea, 2.0)).sum().backward()
    (op(ta, tb) * op(ta, 2.0)).sum().backward()
    _check(ea.grad, ta.grad)
    _check(eb.grad, tb.grad)


def test_one_operand_requires_grad_and_grad_fn_names():
    ea, eb = ember.tensor([1.0, 2.0], requires_grad=True), ember.tensor([3.0, 4.0])
    out = ea + eb
    assert out.requires_grad and out.grad_fn.name() == "AddBackward0"
    assert (eb * eb).grad_fn is None and not (eb * eb).requires_grad
    assert (ea * eb).grad_fn.name() == "MulBackward0"
    out.sum().backward()
    np.testing.assert_allclose(ea.grad.numpy(), [1.0, 1.0])


def test_no_grad_and_inference_mode():
    ea = ember.tensor([1.0, 2.0], requires_grad=True)
    with ember.no_grad():
        out = ea * ea
    assert not out.requires_grad and out.grad_fn is None
    with ember.inference_mode():
        out = ea + ea
    assert out.is_inference()


def test_views_as_operands_keep_their_history():
    base = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    tbase = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (base[0] * base[1]).sum().backward()
    (tbase[0] * tbase[1]).sum().backward()
    _check(base.grad, tbase.grad)

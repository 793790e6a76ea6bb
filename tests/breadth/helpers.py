"""Compare an ember function with its torch counterpart: values in several dtypes, gradients in
float64 against torch's and against finite differences (``ember.autograd.gradcheck``)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

import ember


def _to(x: Any, lib: Any, dtype: str | None, grad: bool) -> Any:
    if isinstance(x, np.ndarray):
        arr = x.astype(dtype) if dtype and x.dtype.kind == "f" else x
        t = lib.tensor(arr)
        if grad:
            t.requires_grad_(True)
        return t
    if isinstance(x, (list, tuple)) and x and isinstance(x[0], np.ndarray):
        return type(x)(_to(v, lib, dtype, grad) for v in x)
    return x


def _np(x: Any) -> Any:
    if hasattr(x, "detach"):
        return x.detach().numpy()
    if isinstance(x, (list, tuple)):
        return [_np(v) for v in x]
    return x


def assert_same(e: Any, t: Any, rtol: float, atol: float) -> None:
    if isinstance(t, (list, tuple)):
        assert isinstance(e, (list, tuple)) and len(e) == len(t), (e, t)
        for a, b in zip(e, t):
            assert_same(a, b, rtol, atol)
        return
    if hasattr(t, "detach"):
        assert tuple(e.shape) == tuple(t.shape), (tuple(e.shape), tuple(t.shape))
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (e.dtype, t.dtype)
        np.testing.assert_allclose(_np(e), _np(t), rtol=rtol, atol=atol, equal_nan=True)
        return
    assert e == t, (e, t)


def _flat(out: Any) -> list:
    if isinstance(out, (list, tuple)):
        return [o for v in out for o in _flat(v)]
    return [out] if hasattr(out, "detach") and out.dtype.is_floating_point else []


def compare(ef: Callable, tf: Callable, args: Sequence, kwargs: dict | None = None, *,
            dtypes: Sequence[str] = ("float32", "float64"), grad: Sequence[int] = (),
            rtol: float | None = None, atol: float | None = None, fd: bool = True) -> None:
    """Values for each dtype; if ``grad`` (indices of array args), gradients in float64."""
    import torch

    kwargs = kwargs or {}
    for d in dtypes:
        r = rtol if rtol is not None else (1e-5 if d == "float32" else 1e-10)
        a = atol if atol is not None else (1e-6 if d == "float32" else 1e-12)
        e = ef(*[_to(x, ember, d, False) for x in args], **kwargs)
        t = tf(*[_to(x, torch, d, False) for x in args], **kwargs)
        assert_same(e, t, r, a)
    if not grad:
        return
    ea = [_to(x, ember, "float64", i in grad) for i, x in enumerate(args)]
    ta = [_to(x, torch, "float64", i in grad) for i, x in enumerate(args)]
    eo, to = _flat(ef(*ea, **kwargs)), _flat(tf(*ta, **kwargs))
    rng = np.random.default_rng(7)
    ws = [rng.standard_normal(tuple(o.shape)) for o in to]
    sum(((o * ember.tensor(w)).sum() for o, w in zip(eo, ws)), ember.tensor(0.0)).backward()
    sum(((o * torch.tensor(w)).sum() for o, w in zip(to, ws)), torch.tensor(0.0)).backward()
    for i in grad:
        np.testing.assert_allclose(ea[i].grad.numpy(), ta[i].grad.numpy(), rtol=1e-7, atol=1e-9)
    if fd:
        inputs = tuple(_to(args[i], ember, "float64", True) for i in grad)

        def f(*gs: Any) -> Any:
            full = [_to(x, ember, "float64", False) for x in args]
            for i, g in zip(grad, gs):
                full[i] = g
            return ef(*full, **kwargs)
        assert ember.autograd.gradcheck(f, inputs)

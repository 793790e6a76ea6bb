"""Helpers for the layer-module tests: copy torch's state into ember, run both, compare."""

from __future__ import annotations

from typing import Any

import numpy as np

import ember


def load_from_torch(e_mod: Any, t_mod: Any) -> None:
    """Copy torch's state_dict (parameters and buffers) into the ember module."""
    sd = {k: ember.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()}
    e_mod.load_state_dict(sd)


def to_np(x: Any) -> np.ndarray:
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def run_both(e_mod: Any, t_mod: Any, torch: Any, *arrays: np.ndarray, grad: bool = True,
             seed_grad: int = 0, **kwargs: Any) -> tuple:
    """Forward both modules on the same float inputs (kwargs: numpy masks etc., passed as
    tensors), backward with the same random cotangent; returns (e_out, t_out, e_in, t_in)."""
    e_in = [ember.tensor(a, requires_grad=grad) for a in arrays]
    t_in = [torch.tensor(a, requires_grad=grad) for a in arrays]
    ek = {k: (ember.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    tk = {k: (torch.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    e_out, t_out = e_mod(*e_in, **ek), t_mod(*t_in, **tk)
    if grad:
        eo = e_out[0] if isinstance(e_out, tuple) else e_out
        to = t_out[0] if isinstance(t_out, tuple) else t_out
        g = np.random.default_rng(seed_grad).standard_normal(tuple(to.shape))
        eo.backward(ember.tensor(g.astype(to_np(to).dtype)))
        to.backward(torch.tensor(g.astype(to_np(to).dtype)))
    return e_out, t_out, e_in, t_in


def assert_close_all(e_mod: Any, t_mod: Any, e_out: Any, t_out: Any, e_in: list, t_in: list,
                     rtol: float = 1e-10, atol: float = 1e-10) -> None:
    """Outputs, input grads and parameter grads agree."""
    eo = e_out if isinstance(e_out, tuple) else (e_out,)
    to = t_out if isinstance(t_out, tuple) else (t_out,)
    for a, b in zip(eo, to):
        if b is None:
            assert a is None
            continue
        np.testing.assert_allclose(to_np(a), to_np(b), rtol=rtol, atol=atol)
    for a, b in zip(e_in, t_in):
        if b.grad is not None:
            np.testing.assert_allclose(to_np(a.grad), to_np(b.grad), rtol=rtol, atol=atol)
    tp = dict(t_mod.named_parameters())
    for name, p in e_mod.named_parameters():
        if tp[name].grad is None:
            assert p.grad is None, name
        else:
            np.testing.assert_allclose(to_np(p.grad), to_np(tp[name].grad), rtol=rtol,
                                       atol=atol, err_msg=name)

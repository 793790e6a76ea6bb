"""``gradcheck`` / ``gradgradcheck``: analytic gradients against central finite differences.

Inputs should be float64 tensors with ``requires_grad=True`` (as in PyTorch).  The analytic
Jacobian is built row by row with ``autograd.grad`` (one vector-Jacobian product per output
element); the numerical one perturbs each input element by ``±eps``.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.autograd.grad_mode import enable_grad
from ember.errors import EmberRuntimeError


class GradcheckError(EmberRuntimeError):
    """Raised by gradcheck when analytic and numerical Jacobians disagree."""


def _as_tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _outputs(fn: Callable, inputs: tuple) -> tuple:
    from ember.tensor import Tensor
    return tuple(o for o in _as_tuple(fn(*inputs)) if isinstance(o, Tensor)
                 and o.dtype.is_floating_point)


def _numerical(fn: Callable, inputs: tuple, idx: int, eps: float) -> list[np.ndarray]:
    """d(outputs)/d(inputs[idx]) as one (out_numel, in_numel) matrix per output."""
    x = inputs[idx]
    data = x._data
    cols = []
    # evaluated with grad mode on: the function may itself differentiate (gradgradcheck)
    if True:
        for j in np.ndindex(data.shape):
            orig = data[j].copy()
            data[j] = orig + eps
            plus = [o._data.astype(np.float64).reshape(-1).copy() for o in _outputs(fn, inputs)]
            data[j] = orig - eps
            minus = [o._data.astype(np.float64).reshape(-1).copy() for o in _outputs(fn, inputs)]
            data[j] = orig
            cols.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
    outs = _outputs(fn, inputs)
    result = []
    for k in range(len(outs)):
        if cols:
            result.append(np.stack([c[k] for c in cols], axis=1))
        else:
            result.append(np.zeros((outs[k].numel(), 0)))
    return result


def _analytic(fn: Callable, inputs: tuple, idx_list: list[int]) -> list[list[np.ndarray]]:
    """[input][output] Jacobian matrices from autograd."""
    from ember.autograd.engine import grad as autograd_grad
    from ember.tensor import _wrap
    outs = _outputs(fn, inputs)
    jac = [[np.zeros((o.numel(), inputs[i].numel())) for o in outs] for i in idx_list]
    for k, o in enumerate(outs):
        if not o.requires_grad:
            continue
        for r in range(o.numel()):
            go = np.zeros(o.numel(), dtype=o.dtype.np)
            go[r] = 1
            g = autograd_grad([o], [inputs[i] for i in idx_list],
                              [_wrap(go.reshape(o._data.shape), o.dtype)],
                              retain_graph=True, allow_unused=True)
            for n, gi in enumerate(g):
                if gi is not None:
                    jac[n][k][r, :] = gi._data.astype(np.float64).reshape(-1)
    return jac


def gradcheck(func: Callable[..., Any], inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, raise_exception: bool = True,
              nondet_tol: float = 0.0, check_undefined_grad: bool = True,
              fast_mode: bool = False) -> bool:
    """True when autograd's gradients of ``func`` at ``inputs`` match finite differences."""
    inputs = _as_tuple(inputs)
    idx = [i for i, x in enumerate(inputs) if getattr(x, "requires_grad", False)]
    if not idx:
        raise GradcheckError("[gradcheck] expected at least one input tensor to require gradient")
    analytic = _analytic(func, inputs, idx)
    for n, i in enumerate(idx):
        numerical = _numerical(func, inputs, i, eps)
        for k, (a, nu) in enumerate(zip(analytic[n], numerical)):
            if not np.allclose(a, nu, rtol=rtol, atol=atol):
                if not raise_exception:
                    return False
                raise GradcheckError(
                    f"[gradcheck] Jacobian mismatch for output {k} with respect to input {i},\n"
                    f"numerical:{nu}\nanalytical:{a}\n"
                )
    return True


def gradgradcheck(func: Callable[..., Any], inputs: Any, grad_outputs: Sequence | None = None,
                  *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                  raise_exception: bool = True, gen_non_contig_grad_outputs: bool = False
                  ) -> bool:
    """Check second derivatives: gradcheck of the vector-Jacobian product of ``func``."""
    from ember.autograd.engine import grad as autograd_grad
    from ember.tensor import _wrap
    inputs = _as_tuple(inputs)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = [
            _wrap(rng.standard_normal(o._data.shape).astype(o.dtype.np), o.dtype)
            .requires_grad_(True) for o in outs
        ]
    grad_outputs = tuple(grad_outputs)
    n_in = len(inputs)
    diff = [i for i, x in enumerate(inputs) if getattr(x, "requires_grad", False)]

    def vjp(*args: Any) -> tuple:
        xs, gos = args[:n_in], args[n_in:]
        # the numerical Jacobian evaluates under no_grad, but the vjp itself needs autograd
        with enable_grad():
            o = _outputs(func, xs)
            gs = autograd_grad(list(o), [xs[i] for i in diff], list(gos), create_graph=True,
                               allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(vjp, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)

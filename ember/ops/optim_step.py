"""Multi-tensor optimizer steps: one graph node for a whole parameter group.

``adam_step`` is torch's single-tensor Adam/AdamW update (``torch/optim/adam.py``,
``_single_tensor_adam`` with ``amsgrad=False``) over every parameter of a group at once, as one
OpDef, so that a compiled training step records ONE node for its optimizer instead of nine per
parameter (docs/optim.md, "Inside `ember.compile`").  Its inputs are flat groups of five tensors
``(param, grad, exp_avg, exp_avg_sq, step)`` per parameter; its outputs are the new values
``(step, param, exp_avg, exp_avg_sq)`` per parameter, which the optimizer writes back in place
(the compiled entry computes them into the state's own memory).

Its numbers are params, each handed as it is to the primitive that needs it:
``decay = 1 - lr * weight_decay`` (AdamW; None: no decay), ``w1 = 1 - beta1``, ``beta2``,
``w2 = 1 - beta2``, ``eps``, and per parameter ``bc2`` (the square root of the second bias
correction) and ``neg_step`` (``-lr / (1 - beta1 ** step)``), all computed by the caller in
Python double precision exactly as torch computes them.  The ``scalar_passthrough`` tag says
so: the C backend's decomposition accepts these numbers after they were lifted to runtime
arguments (they change every step, and with a scheduled lr), and a compiled call follows its
known trace through new values of them without recompiling.  ``maximize`` negates the
gradient; ``coupled_wd`` (Adam's ``weight_decay``; None: none) adds ``weight_decay * param`` to
it, rounded to the parameter's dtype as the frontend rounds ``alpha`` (were it ever lifted, the
decomposition would see a computed number and keep the node, which then runs its eager kernel).

The C backend lowers the op by decomposition into the same primitives the single-tensor path
binds (``add``, ``mul``, ``lerp``, ``addcmul``, ``sqrt``, ``div``, ``addcdiv``), so compiled
numbers are those of the per-parameter graph; the eager kernel runs the same primitives'
kernels in the same order.

>>> outs = bind(ADAM_STEP, p, g, m, v, s, decay=0.99999, w1=0.1, beta2=0.999, w2=0.001,
...             eps=1e-8, bc2=(0.0316,), neg_step=(-0.01,))          # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.errors import DTypeError, ShapeError
from ember.ops.registry import OPS, OpDef, bind, register

_PER_PARAM = 5      # inputs per parameter: param, grad, exp_avg, exp_avg_sq, step


def _groups(tensors: tuple) -> list[tuple]:
    return [tensors[k:k + _PER_PARAM] for k in range(0, len(tensors), _PER_PARAM)]


def _adam_meta(*tensors: Any, decay: Any, w1: Any, beta2: Any, w2: Any, eps: Any,
               bc2: tuple, neg_step: tuple, coupled_wd: Any = None,
               maximize: bool = False) -> tuple:
    """Shapes and dtypes of the new ``(step, param, exp_avg, exp_avg_sq)`` of each parameter."""
    if not tensors or len(tensors) % _PER_PARAM:
        raise ShapeError(f"[adam_step] expected groups of {_PER_PARAM} tensors (param, grad, "
                         f"exp_avg, exp_avg_sq, step), got {len(tensors)} tensors")
    groups = _groups(tensors)
    if len(bc2) != len(groups) or len(neg_step) != len(groups):
        raise ShapeError(f"[adam_step] expected one bc2 and one neg_step per parameter "
                         f"({len(groups)}), got {len(bc2)} and {len(neg_step)}")
    out = []
    for i, (p, g, m, v, s) in enumerate(groups):
        shape = tuple(p.shape)
        for name, t in (("grad", g), ("exp_avg", m), ("exp_avg_sq", v)):
            if tuple(t.shape) != shape or t.dtype != p.dtype:
                raise ShapeError(f"[adam_step] parameter {i}: {name} is {t.dtype.name}"
                                 f"{list(t.shape)}, expected {p.dtype.name}{list(shape)}")
        if not p.dtype.is_floating_point:
            raise DTypeError(f"[adam_step] parameter {i}: expected a floating dtype, got "
                             f"{p.dtype.name}")
        if tuple(s.shape) != () or not s.dtype.is_floating_point:
            raise ShapeError(f"[adam_step] parameter {i}: the step must be a 0-d floating "
                             f"tensor, got {s.dtype.name}{list(s.shape)}")
        out += [((), s.dtype), (shape, p.dtype), (shape, p.dtype), (shape, p.dtype)]
    return tuple(out)


def _run(unary: Any, binary: Any, ternary: Any, tensors: tuple, decay: Any, w1: float,
         beta2: float, w2: float, eps: float, bc2: tuple, neg_step: tuple,
         coupled_wd: Any = None, maximize: bool = False) -> list:
    """The update with the given ways to apply ``OPS.x`` (eager kernels or ``bind``)."""
    out: list = []
    for (p, g, m, v, s), bc, neg in zip(_groups(tensors), bc2, neg_step):
        s_new = binary(OPS.add, s, 1.0)                          # state_steps[i] += 1
        if maximize:
            g = unary(OPS.neg, g)                                # grad = -grad
        if coupled_wd is not None:     # grad.add(param, alpha=wd), alpha as the frontend
            g = binary(OPS.add_scaled, g, p, alpha=_rounded(coupled_wd, p.dtype))  # rounds it
        if decay is not None:
            p = binary(OPS.mul, p, decay)                        # param.mul_(1 - lr * wd)
        m_new = ternary(OPS.lerp, m, g, w1)                      # exp_avg.lerp_(grad, 1 - b1)
        v_new = ternary(OPS.addcmul, binary(OPS.mul, v, beta2), g, g, value=w2)
        denom = binary(OPS.add, binary(OPS.div, unary(OPS.sqrt, v_new), bc), eps)
        p_new = ternary(OPS.addcdiv, p, m_new, denom, value=neg)  # param.addcdiv_(..)
        out += [s_new, p_new, m_new, v_new]
    return out


def _rounded(x: float, dtype: Any) -> float:
    """``x`` rounded to ``dtype`` (a NumPy dtype, or an ember dtype under ``decomp``)."""
    return float(np.asarray(x).astype(getattr(dtype, "np", dtype)))


def _kernel(dtype: Any) -> Any:
    def call(op: OpDef, *args: Any, **params: Any) -> np.ndarray:
        return np.asarray(op.eager(*args, **params), dtype=dtype)
    return call


def _adam_eager(*arrays: np.ndarray, **params: Any) -> tuple:
    """torch's single-tensor Adam/AdamW step over each parameter with the primitives' NumPy
    kernels; returns the new (step, param, exp_avg, exp_avg_sq) per parameter."""
    out: list = []
    for grp, bc, neg in zip(_groups(arrays), params["bc2"], params["neg_step"]):
        k = _kernel(grp[0].dtype)
        ks = _kernel(grp[4].dtype)
        one = dict(params, bc2=(bc,), neg_step=(neg,))
        res = _run(k, k, k, grp, **one)
        res[0] = ks(OPS.add, grp[4], 1.0)
        out += res
    return tuple(out)


def _adam_decomp(*tensors: Any, **params: Any) -> tuple:
    """The step with ``bind`` of the primitives (the C backend's decomposition)."""
    def call(op: OpDef, *args: Any, **kw: Any) -> Any:
        return bind(op, *args, **kw)
    return tuple(_run(call, call, call, tensors, **params))


ADAM_STEP = register(OpDef(
    "adam_step", "composite", _adam_meta, _adam_eager, None, num_outputs=0,
    tags=frozenset({"nondifferentiable", "multi_output", "scalar_passthrough"}),
    decomp=_adam_decomp,
    doc="One Adam/AdamW step (torch's single-tensor update) over a group of parameters; "
        "returns the new (step, param, exp_avg, exp_avg_sq) of each.",
))

__all__ = ["ADAM_STEP"]

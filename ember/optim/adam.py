"""Adam and AdamW (decoupled weight decay), torch's single-tensor update step for step."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ember._frontend.creation import zeros_like
from ember._frontend.pointwise_logic import maximum
from ember._lazy import STATE as _LZ
from ember._lazy import LazyArray as _LazyArray
from ember._lazy import Trace as _Trace
from ember.dtypes import float32, float64
from ember.ops import OPS as _OPS
from ember.ops import _parallel
from ember.ops._fma import fma, native_fma
from ember.ops.optim_step import ADAM_STEP as _ADAM_STEP
from ember.ops.registry import bind as _bind
from ember.optim.optimizer import (
    Optimizer,
    _advance_step,
    _check_hparams,
    _next_count,
    _recompute,
    _scalar_step,
)
from ember.tensor import Tensor

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """``torch.optim.Adam``; ``decoupled_weight_decay=True`` gives AdamW.

    Example::

        opt = Adam([w], lr=1e-3, betas=(0.9, 0.999), amsgrad=True)
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        _check_hparams(lr, eps=eps, betas=betas, weight_decay=weight_decay)
        if not (isinstance(betas[0], float) and isinstance(betas[1], float)
                or isinstance(betas[0], Tensor) and isinstance(betas[1], Tensor)):
            raise ValueError("betas must be either both floats or both Tensors")
        betas = tuple(float(b) for b in betas)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable, "fused": fused,
                    "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)

    def _state_for(self, p: Tensor, amsgrad: bool) -> dict[str, Any]:
        state = self.state[p]
        if len(state) == 0:
            state["step"] = _scalar_step()
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = zeros_like(p)
        return state

    def _step_group(self, group: dict[str, Any]) -> None:
        if _LZ.trace is None or not isinstance(_LZ.trace, _Trace):
            super()._step_group(group)
            return
        fused, seen = [], set()
        amsgrad = group["amsgrad"]
        # the group's own checks once (``_fusable`` repeats them for a single parameter)
        ok = not group["differentiable"] and not amsgrad and type(group["lr"]) is float and \
            type(group["eps"]) is float and type(group["weight_decay"]) in (float, int)
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self._state_for(p, amsgrad)
            vcs = _fusable_vcs(p, state) if ok else None
            if vcs is not None and not vcs & seen:
                fused.append((p, state))
                seen |= vcs
            else:   # parameters are independent: their updates commute
                self._update(p, group)
        if fused:
            _fused_update(fused, group)

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        lr, wd, eps = float(group["lr"]), group["weight_decay"], group["eps"]
        beta1, beta2 = group["betas"]
        amsgrad = group["amsgrad"]
        state = self._state_for(p, amsgrad)
        if _fast_ok(p, state, group):
            _fast_update(p, state, lr, wd, eps, beta1, beta2, amsgrad,
                         group["decoupled_weight_decay"])
            return
        if _traced_ok(p, state, group):
            _traced_update(p, state, lr, wd, eps, beta1, beta2, group["decoupled_weight_decay"])
            return
        grad = -p.grad if group["maximize"] else p.grad
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        step_t = state["step"]
        step = _advance_step(step_t, recomputed=True)
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                grad = grad.add(p, alpha=wd)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction2_sqrt, neg_step_size = _adam_scalars(step, lr, beta1, beta2)
        _recompute((bias_correction2_sqrt, neg_step_size),
                   lambda: _adam_scalars(_next_count(step_t), lr, beta1, beta2))
        if amsgrad:
            max_sq = state["max_exp_avg_sq"]
            max_sq.copy_(maximum(max_sq, exp_avg_sq))
            denom = (max_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        else:
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        p.addcdiv_(exp_avg, denom, value=neg_step_size)


# ------------------------------------------------------------------- recording path (compile)
# Under ``ember.compile`` the update above is recorded, not run: each in-place method is a
# frontend call, a bound op and a functionalized write (``Trace.write``), ~40 of them per
# parameter and step.  For plain tensors the same primitives with the same arguments are bound
# here directly and each state tensor is written once with its final value (its version counter
# still advances once per in-place op of the general path): the same graph, the same numbers,
# the same versions, at a fraction of the recording cost.  ``Adam._step_group`` goes further:
# every eligible parameter of a group is updated by ONE ``adam_step`` node (``_fused_update``),
# which the C backend decomposes into these same primitives.
def _written_ok(t: Any, dtype: Any, shape: tuple) -> bool:
    if not isinstance(t, Tensor) or t._base is not None or t._dtype is not dtype:
        return False
    d = t._data
    if d.__class__ is _LazyArray:
        return d.owner is None and d.value is None and d.shape == shape
    if d.__class__ is not np.ndarray or d.base is not None or d.shape != shape:
        return False
    f = d.flags
    return f.c_contiguous and f.writeable


def _traced_ok(p: Tensor, state: dict, group: dict) -> bool:
    if _LZ.trace is None or not isinstance(_LZ.trace, _Trace) or group["maximize"] or \
            group["weight_decay"] != 0 and not group["decoupled_weight_decay"]:
        return False
    return _fusable(p, state, group)


def _fusable(p: Tensor, state: dict, group: dict) -> bool:
    """``p`` can be updated by ``adam_step`` (``_fused_update``; the caller checked that a
    trace records): plain tensors, float numbers, no amsgrad (maximize and coupled weight decay
    are the node's params)."""
    if group["differentiable"] or group["amsgrad"] or p._dtype not in (float32, float64):
        return False
    lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
    if type(lr) is not float or type(eps) is not float or type(wd) not in (float, int):
        return False
    return _fusable_vcs(p, state) is not None


def _fusable_vcs(p: Tensor, state: dict) -> set | None:
    """``_fusable``'s per-parameter part (the group's settings checked by the caller): the ids
    of the version counters of ``p``, its gradient and state, or None when ``p`` is not
    fusable."""
    if p._dtype is not float32 and p._dtype is not float64:
        return None
    shape = tuple(p._data.shape)
    g, m, v, step = p.grad, state["exp_avg"], state["exp_avg_sq"], state["step"]
    if not (isinstance(g, Tensor) and g._dtype is p._dtype and tuple(g._data.shape) == shape
            and _written_ok(p, p._dtype, shape) and _written_ok(m, p._dtype, shape)
            and _written_ok(v, p._dtype, shape) and isinstance(step, Tensor)
            and _written_ok(step, step._dtype, ()) and step._dtype in (float32, float64)):
        return None
    vcs = {id(p._version_counter), id(g._version_counter), id(m._version_counter),
           id(v._version_counter), id(step._version_counter)}
    return vcs if len(vcs) == 5 else None


def _traced_update(p: Tensor, state: dict, lr: float, wd: float, eps: float, beta1: float,
                   beta2: float, decoupled: bool) -> None:
    """``_update``'s general path as it records under a trace (see above)."""
    tr = _LZ.trace
    step_t, m, v, g = state["step"], state["exp_avg"], state["exp_avg_sq"], p.grad
    step = _next_count(step_t)                   # step_t.add_(1), read before the write
    step_new = _bind(_OPS.add, step_t, 1.0)
    decay = wd != 0
    p_in = _bind(_OPS.mul, p, 1 - lr * wd) if decay else p      # p.mul_(1 - lr * wd)
    m_new = _bind(_OPS.lerp, m, g, 1 - beta1)                     # exp_avg.lerp_(grad, 1 - b1)
    v_new = _bind(_OPS.addcmul, _bind(_OPS.mul, v, beta2), g, g, value=1 - beta2)
    bias_correction2_sqrt, neg_step_size = _adam_scalars(step, lr, beta1, beta2)
    _recompute((bias_correction2_sqrt, neg_step_size),
               lambda: _adam_scalars(_next_count(step_t), lr, beta1, beta2))
    denom = _bind(_OPS.add, _bind(_OPS.div, _bind(_OPS.sqrt, v_new), bias_correction2_sqrt),
                  eps)
    p_new = _bind(_OPS.addcdiv, p_in, m_new, denom, value=neg_step_size)
    # storages are first written in the general path's order (it orders the graph's outputs)
    _write_final(tr, step_t, step_new, 1)
    if decay:
        _write_final(tr, p, p_new, 2)
    _write_final(tr, m, m_new, 1)
    _write_final(tr, v, v_new, 2)
    if not decay:
        _write_final(tr, p, p_new, 1)


def _fused_update(items: list, group: dict) -> None:
    """The update of each ``(param, state)`` of ``items`` (their tensors share no version
    counter) as ONE recorded node (``adam_step``, ``ember/ops/optim_step.py``): the primitives
    of ``_traced_update`` (and of the general path's ``maximize`` and coupled weight decay) once
    the C backend decomposes it, at a fraction of the recording."""
    lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
    beta1, beta2 = group["betas"]
    decoupled, maximize = group["decoupled_weight_decay"], group["maximize"]
    tr = _LZ.trace
    inputs: list = []
    bc2, neg = [], []
    recording = _LZ.recorder is not None   # a ``reduce-overhead`` recording (``_recompute``)
    for p, state in items:
        step_t = state["step"]
        inputs += [p, p.grad, state["exp_avg"], state["exp_avg_sq"], step_t]
        scalars = _adam_scalars(_next_count(step_t), lr, beta1, beta2)
        if recording:
            _recompute(scalars,
                       lambda s=step_t: _adam_scalars(_next_count(s), lr, beta1, beta2))
        bc2.append(scalars[0])
        neg.append(scalars[1])
    decay = wd != 0 and decoupled
    coupled = {"coupled_wd": wd} if wd != 0 and not decoupled else {}
    if maximize:
        coupled["maximize"] = True
    outs = _bind(_ADAM_STEP, *inputs, decay=1 - lr * wd if decay else None, w1=1 - beta1,
                 beta2=beta2, w2=1 - beta2, eps=eps, bc2=tuple(bc2), neg_step=tuple(neg),
                 **coupled)
    writes: list = []   # (tensor, value, in-place ops it stands for), in the general order
    for k, (p, state) in enumerate(items):
        step_new, p_new, m_new, v_new = outs[4 * k:4 * k + 4]
        writes.append((state["step"], step_new, 1))
        if decay:
            writes.append((p, p_new, 2))
        writes.append((state["exp_avg"], m_new, 1))
        writes.append((state["exp_avg_sq"], v_new, 2))
        if not decay:
            writes.append((p, p_new, 1))
    undone = tr.write_all(writes)
    if undone:   # the trace was realized at the first of these (cannot happen for plain t)
        t, new, _ = undone[0]
        np.copyto(t._data, new._data)
        t._version_counter[0] += 1
        for t, new, n in undone[1:]:
            _write_final(tr, t, new, n)


def _write_final(tr: Any, t: Tensor, new: Tensor, ops: int) -> None:
    """The last of ``ops`` in-place writes into ``t``: only its value is recorded, the version
    counter advances by ``ops``."""
    vc = t._version_counter
    vc[0] += ops - 1
    if not tr.write(t, new):  # the trace was realized instead (cannot happen for plain t)
        np.copyto(t._data, new._data)
    vc[0] += 1


def _adam_scalars(step: float, lr: float, beta1: float, beta2: float) -> tuple:
    """(sqrt of the second bias correction, -step size) of step number ``step``."""
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    step_size = lr / bias_correction1
    return bias_correction2**0.5, -step_size


# ---------------------------------------------------------------------------- NumPy fast path
# The update above is ~12 in-place tensor ops per parameter, each a frontend call and a fresh
# full-size temporary.  For plain float32/float64 tensors the same arithmetic, in the same
# order and precision (so the same bits), runs here as in-place NumPy ufuncs on cache-sized
# blocks spread over ember's threads: the temporaries stay in cache and no Tensor is built.
_FAST_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_BLOCK = 1 << 14      # elements per block (two scratch rows + four operands fit in L2)
# with the C fma kernel a block has no float64 temporaries, and each fma call costs a few
# microseconds of Python: larger blocks (1.5 MiB of operands) run faster
_BLOCK_NATIVE_FMA = 1 << 16


def _plain(t: Any, dtype: np.dtype, shape: tuple) -> bool:
    return (isinstance(t, Tensor) and t._base is None and t._data.dtype == dtype
            and t._data.shape == shape)


def _fast_ok(p: Tensor, state: dict, group: dict) -> bool:
    if _LZ.trace is not None:  # compiled code: the ember ops below are recorded instead
        return False
    d = p._data
    if (d.dtype not in _FAST_DTYPES or group["maximize"] or group["differentiable"]
            or isinstance(group["lr"], Tensor) or p._base is not None
            or not d.flags.c_contiguous or not d.flags.writeable):
        return False
    g = p.grad
    if not (isinstance(g, Tensor) and g._data.dtype == d.dtype and g._data.shape == d.shape):
        return False
    keys = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group["amsgrad"] else ())
    step = state["step"]
    return (all(_plain(state[k], d.dtype, d.shape) and state[k]._data.flags.c_contiguous
                for k in keys)
            and isinstance(step, Tensor) and step._data.shape == () and step._base is None)


def _adam_block(pd: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray,
                vmax: np.ndarray | None, c: tuple) -> None:
    """One block of the update; ``c`` holds the scalars of this step."""
    decay, coupled_wd, w, beta2, one_m_b2, bc2_sqrt, eps, neg_step = c
    t1 = np.empty_like(pd)
    if coupled_wd is not None:           # grad.add(p, alpha=wd): grad + wd * p, rounded once
        g = fma(pd.dtype.type(coupled_wd), pd, g)
    elif decay is not None:              # p.mul_(1 - lr * wd)
        pd *= decay
    # exp_avg.lerp_(grad, w): fma(w, end - start, start), or fma(start - end, 1 - w, end)
    np.subtract(g, m, out=t1)
    if abs(w) < 0.5:
        fma(m.dtype.type(w), t1, m, out=m)
    else:
        np.negative(t1, out=t1)
        fma(t1, m.dtype.type(1) - m.dtype.type(w), g, out=m)
    # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2): fma(value * g, g, v)
    v *= beta2
    np.multiply(g, one_m_b2, out=t1)
    fma(t1, g, v, out=v)
    if vmax is not None:
        np.maximum(vmax, v, out=vmax)
    # denom = (sqrt(v) / bias_correction2_sqrt).add_(eps); p.addcdiv_(m, denom, -step_size)
    np.sqrt(v if vmax is None else vmax, out=t1)
    t1 /= bc2_sqrt
    t1 += eps
    t2 = np.multiply(m, neg_step)
    t2 /= t1
    pd += t2


def _fast_update(p: Tensor, state: dict, lr: float, wd: float, eps: float, beta1: float,
                 beta2: float, amsgrad: bool, decoupled: bool) -> None:
    step_t = state["step"]
    step_t._data[...] = step_t._data + 1           # state["step"].add_(1)
    step_t._version_counter[0] += 1
    step = step_t._data.item()
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    c = (1 - lr * wd if wd != 0 and decoupled else None,
         wd if wd != 0 and not decoupled else None,
         1 - beta1, beta2, 1 - beta2, bias_correction2**0.5, eps, -(lr / bias_correction1))
    arrays = [p._data, p.grad._data, state["exp_avg"]._data, state["exp_avg_sq"]._data,
              state["max_exp_avg_sq"]._data if amsgrad else None]
    n = p._data.size
    block = _BLOCK_NATIVE_FMA if native_fma() else _BLOCK
    if n <= block or not p.grad._data.flags.c_contiguous:
        _adam_block(*arrays, c)
    else:
        flat = [None if a is None else a.reshape(-1) for a in arrays]
        blocks = [(lo, min(lo + block, n)) for lo in range(0, n, block)]
        threads = min(_parallel.get_num_threads(), len(blocks))

        todo = iter(blocks)  # shared: blocks go to whichever thread is free

        def work(k: int) -> None:
            for lo, hi in todo:
                _adam_block(*(None if a is None else a[lo:hi] for a in flat), c)

        if threads > 1:
            _parallel._run([lambda k=k: work(k) for k in range(threads)])
        else:
            work(0)
    for key in ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if amsgrad else ()):
        state[key]._version_counter[0] += 1
    p._version_counter[0] += 1


class AdamW(Adam):
    """``torch.optim.AdamW``: Adam with decoupled weight decay (``p *= 1 - lr * wd``).

    Example::

        opt = AdamW([w], lr=1e-3, weight_decay=1e-2)
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)

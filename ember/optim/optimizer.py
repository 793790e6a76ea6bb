"""``Optimizer``: the base class that holds param groups and per-parameter state.

Matches ``torch.optim.Optimizer``: param groups are dicts with the defaults filled in, ``state``
maps each parameter tensor to a dict, and ``state_dict()`` refers to parameters by integer ids
(their order across the groups) so a checkpoint can be loaded into a fresh optimizer.
"""

from __future__ import annotations

import copy
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from ember._frontend.creation import tensor as _tensor
from ember._lazy import STATE as _LZ
from ember.autograd.grad_mode import enable_grad, no_grad
from ember.dtypes import float32, float64, get_default_dtype
from ember.tensor import Tensor

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Marks a hyperparameter that has no default (torch's ``required``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj: Any) -> str:
    return obj.type() if isinstance(obj, Tensor) else type(obj).__name__


def _scalar_step() -> Tensor:
    """A fresh step counter: a 0-d tensor, float64 only when that is the default dtype (torch)."""
    dtype = float64 if get_default_dtype() == float64 else float32
    return _tensor(0.0, dtype=dtype)


def _scalar_state(value: float) -> Tensor:
    """A 0-d state value (NAdam's ``mu_product``, ASGD's ``eta``/``mu``) in the step counter's
    dtype, as torch makes them."""
    dtype = float64 if get_default_dtype() == float64 else float32
    return _tensor(value, dtype=dtype)


_HPARAM_LABELS = {"eps": "epsilon"}


def _check_hparams(lr: Any, **named: Any) -> None:
    """Validate hyperparameters with torch.optim's checks and messages, in the order given:
    ``lr`` (a number or a 1-element tensor, >= 0), ``betas`` (each in [0, 1)), ``rho`` (in
    [0, 1]), and any other name: >= 0 (``ValueError("Invalid weight_decay value: -1")``)."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    for name, value in named.items():
        if name == "betas":
            for i, beta in enumerate(value[:2]):
                if not 0.0 <= beta < 1.0:
                    raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        elif name == "rho":
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"Invalid rho value: {value}")
        elif not 0.0 <= value:
            raise ValueError(f"Invalid {_HPARAM_LABELS.get(name, name)} value: {value}")


def _next_count(step: Tensor) -> float:
    """The count ``step.add_(1)`` makes, as a Python number (at the counter's own precision)."""
    return float(step._data.dtype.type(step.item() + 1))


def _advance_step(step: Tensor, recomputed: bool = False) -> float:
    """``step.add_(1)`` and return the new count as a Python number.  The count is read before
    the write (at the counter's own precision): inside ``ember.compile`` the written counter is
    lazy and reading it afterwards would break the graph; the number then changes every step
    and is lifted to a runtime argument instead of recompiling.

    A ``mode="reduce-overhead"`` recording must not replay a number made from it unless the
    caller registered how to recompute it (``recomputed=True`` and ``_recompute``)."""
    n = _next_count(step)
    rec = _LZ.recorder
    if rec is not None and not recomputed:
        rec.refuse("the optimizer's step count is read as a Python number that replay cannot "
                   "recompute")
    step.add_(1)
    return n


def _note_scheduler_step() -> None:
    """An lr scheduler steps: its counters are Python state a replay would not advance."""
    rec = _LZ.recorder
    if rec is not None:
        rec.refuse("an lr scheduler stepped during the call (its counters advance on recording "
                   "calls only; step it outside the compiled function)")


def _recompute(values: tuple, fn: Callable[[], tuple]) -> None:
    """Inside a ``mode="reduce-overhead"`` recording: the Python numbers ``values`` (passed to
    ops as they are) change from call to call; ``fn()``, called before a replay runs the graph,
    gives their values for that call.  A no-op otherwise."""
    rec = _LZ.recorder
    if rec is not None:
        rec.recompute(values, fn)


class Optimizer:
    """Base class of all optimizers.

    Example::

        opt = ember.optim.SGD([w], lr=0.1)
        opt.zero_grad(); loss.backward(); opt.step()
    """

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                f"dicts, but got {_typename(params)}"
            )
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self) -> dict[str, Any]:
        # the step wrapper a scheduler installs is a local function: leave it out of pickles
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(group.keys()):
                if key != "params":
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters (a dict with ``"params"`` and optional hyperparameters)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list instead."
            )
        else:
            param_group["params"] = list(params)
        _split_names(param_group)
        differentiable = param_group.get("differentiable", self.defaults.get("differentiable"))
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the params is "
                    + _typename(param)
                )
            if not differentiable and not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    "parameter group didn't specify a value of required optimization "
                    f"parameter {name}"
                )
            param_group.setdefault(name, default)
        params = param_group["params"]
        if len(params) != len({id(p) for p in params}):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, "
                "this will cause an error; see github.com/pytorch/pytorch/issues/40967 for "
                "more information",
                stacklevel=3,
            )
        for group in self.param_groups:
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {which} to the optimizer")
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters (to ``None`` by default, else to zeros)."""
        if _LZ.recorder is not None:
            _LZ.recorder.optimizer_used(self)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()

    def _closure_loss(self, closure: Callable[[], Any] | None) -> Any:
        if closure is None:
            return None
        with enable_grad():
            return closure()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One optimization step over every parameter that has a gradient; ``closure``
        re-evaluates the model and returns the loss.  Subclasses define ``_update``."""
        if _LZ.recorder is not None:
            _LZ.recorder.optimizer_used(self)
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                self._step_group(group)
        return loss

    def _step_group(self, group: dict[str, Any]) -> None:
        """Update every parameter of ``group`` that has a gradient (a subclass may update
        several at once, e.g. as one multi-tensor op while compiling)."""
        for p in group["params"]:
            if p.grad is not None:
                self._update(p, group)

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        """Update one parameter in place (under no_grad) with its group's settings."""
        raise NotImplementedError

    # -- checkpoints -------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The optimizer state in torch's format: ``{"state": {id: {...}}, "param_groups": [...]}``.

        Parameters are referred to by their position across all groups; state tensors are the
        live objects (as in torch), so copy the dict before mutating the optimizer if needed.
        """
        index: dict[int, int] = {}
        start = 0
        packed_groups = []
        for group in self.param_groups:
            for i, p in enumerate(group["params"], start):
                index.setdefault(id(p), i)
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index[id(p)] for p in group["params"]]
            start += len(packed["params"])
            packed_groups.append(packed)
        packed_state = {index[id(p)]: v for p, v in self.state.items()}
        return {"state": packed_state, "param_groups": packed_groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state produced by ``state_dict()`` (hyperparameters and per-parameter state)."""
        state_dict = copy.deepcopy(state_dict)
        groups = self.param_groups
        saved_groups = state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of "
                "optimizer's group"
            )
        id_map = {
            old_id: p
            for g, s in zip(groups, saved_groups)
            for old_id, p in zip(s["params"], g["params"])
        }
        state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = {key: _cast_state(param, val, key) for key, val in v.items()}
            else:
                state[k] = v
        new_groups = []
        for group, saved in zip(groups, saved_groups):
            saved["params"] = group["params"]
            if "param_names" in group and "param_names" not in saved:
                saved["param_names"] = group["param_names"]
            new_groups.append(saved)
        self.state = state
        self.param_groups = new_groups


def _split_names(param_group: dict[str, Any]) -> None:
    """``named_parameters()`` given as params: keep the tensors in ``"params"`` and the names in
    ``"param_names"`` (torch 2.x; they appear in ``state_dict()["param_groups"]``)."""
    tensors, names = [], []
    for param in param_group["params"]:
        if isinstance(param, tuple):
            names.append(param[0])
            tensors.append(param[1])
        else:
            tensors.append(param)
    param_group["params"] = tensors
    if names:
        if len(names) != len(tensors):
            raise ValueError("all optimizer params should be with/without names. Some param "
                             "names are missing")
        param_group["param_names"] = names


def _cast_state(param: Tensor, value: Any, key: str) -> Any:
    """Cast a loaded state value like torch: floating state follows the param's dtype; the
    ``step`` counter keeps its own dtype."""
    if isinstance(value, Tensor):
        if key == "step":
            return value
        if param.is_floating_point() and value.is_floating_point():
            return value.to(dtype=param.dtype)
        return value
    if isinstance(value, dict):
        return {k: _cast_state(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(param, v, key) for v in value)
    return value

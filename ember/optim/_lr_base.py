"""The ``LRScheduler`` base class and helpers shared by the schedulers in ``lr_scheduler``."""

from __future__ import annotations

import functools
import types
import warnings
import weakref
from typing import Any

from ember.optim.optimizer import Optimizer, _note_scheduler_step
from ember.tensor import Tensor

_EPOCH_DEPRECATION = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
    "possible. Please use `scheduler.step()` to step the scheduler. During the deprecation, if "
    "epoch is different from None, the closed form is used instead of the new chainable form, "
    "where available. Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose."
)


def _group_lrs(optimizer: Optimizer) -> list[Any]:
    # tensor lrs are copied so the returned list never aliases the groups (torch)
    return [g["lr"].clone() if isinstance(g["lr"], Tensor) else g["lr"]
            for g in optimizer.param_groups]


def _set_lr(group: dict[str, Any], lr: Any) -> None:
    """Write ``lr`` into the group; a tensor lr is filled in place, as torch does."""
    if isinstance(group["lr"], Tensor):
        group["lr"].fill_(float(lr))
    else:
        group["lr"] = lr


def _format_param(name: str, optimizer: Optimizer, param: Any) -> list[Any]:
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. "
                f"{name} has {len(param)} values, param_groups has "
                f"{len(optimizer.param_groups)}."
            )
        return list(param)
    return [param] * len(optimizer.param_groups)


def _track_optimizer_step(opt: Optimizer) -> None:
    """Wrap ``opt.step`` (once) so a scheduler can warn when it is stepped before the
    optimizer, as torch does."""
    if hasattr(opt.step, "_wrapped_by_lr_sched"):
        return
    opt_ref = weakref.ref(opt)
    func = opt.step.__func__

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        o = opt_ref()
        o._opt_called = True
        return func.__get__(o, o.__class__)(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    opt.step = wrapper


class LRScheduler:
    """Base class: ``step()`` advances ``last_epoch`` and writes ``get_lr()`` into the groups.

    Example::

        sched = StepLR(opt, step_size=10)
        for epoch in range(30): train(); opt.step(); sched.step()
    """

    _get_lr_called_within_step: bool = False
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                lr = group["lr"]
                group.setdefault("initial_lr", lr.clone() if isinstance(lr, Tensor) else lr)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming scheduler with last_epoch >= 0."
                    )
        self.base_lrs: list[Any] = [
            g["initial_lr"].clone() if isinstance(g["initial_lr"], Tensor) else g["initial_lr"]
            for g in optimizer.param_groups
        ]
        self.last_epoch = last_epoch
        _track_optimizer_step(optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict[str, Any]:
        """Every attribute except the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the attributes saved by ``state_dict()``."""
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list[Any]:
        """The learning rates most recently set by this scheduler."""
        return self._last_lr

    def get_lr(self) -> list[Any]:
        """The next learning rate for each param group (called by ``step``)."""
        raise NotImplementedError

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or jump to ``epoch``, deprecated) and update the groups' ``lr``."""
        _note_scheduler_step()
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn(
                "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch "
                "1.1.0 and later, you should call them in the opposite order: "
                "`optimizer.step()` before `lr_scheduler.step()`.  Failure to do this will "
                "result in PyTorch skipping the first value of the learning rate schedule.",
                UserWarning, stacklevel=2,
            )
        self._step_count += 1
        if epoch is not None:
            warnings.warn(_EPOCH_DEPRECATION, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            _set_lr(group, lr)
        self._last_lr = _group_lrs(self.optimizer)


def _check_callables(fns: list[Any]) -> None:
    for fn in fns:
        if not callable(fn):
            raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")


def _lambdas_state_dict(sched: Any, exclude: tuple[str, ...]) -> dict[str, Any]:
    sd = {k: v for k, v in sched.__dict__.items() if k not in exclude}
    sd["lr_lambdas"] = [
        None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
        for fn in sched.lr_lambdas
    ]
    return sd


def _lambdas_load_state_dict(sched: Any, state_dict: dict[str, Any]) -> None:
    lr_lambdas = state_dict.pop("lr_lambdas")
    sched.__dict__.update(state_dict)
    state_dict["lr_lambdas"] = lr_lambdas
    for idx, fn in enumerate(lr_lambdas):
        if fn is not None:
            sched.lr_lambdas[idx].__dict__.update(fn)

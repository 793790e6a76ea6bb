"""Grad-mode switches: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``.

Each is a context manager and a decorator.  The state is per thread, as in PyTorch: a thread
starts with grad enabled and ``no_grad`` in one thread does not affect another.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


# bumped with every change of any thread's grad mode (each writer of ``STATE.grad_enabled`` or
# ``STATE.inference`` does it; tests/compiler/test_held_tensors.py checks that they do): a reader
# that caches its thread's mode (the binder's follow path keeps it on the compiled call's trace)
# reads it again when this moved
GENERATION = [0]


class _State(threading.local):
    grad_enabled: bool = True   # class defaults: a new thread starts with grad enabled
    inference: bool = False


STATE = _State()


def is_grad_enabled() -> bool:
    """Whether ops record autograd graphs now."""
    return STATE.grad_enabled


def is_inference_mode_enabled() -> bool:
    return STATE.inference


class _Mode:
    """Base: saves the state on enter, restores on exit; usable as a decorator."""

    def _apply(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> _Mode:
        self._prev = (STATE.grad_enabled, STATE.inference)
        self._apply()
        return self

    def __exit__(self, *exc: object) -> None:
        STATE.grad_enabled, STATE.inference = self._prev
        GENERATION[0] += 1

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__(*self._args()):
                return fn(*args, **kwargs)
        return wrapper  # type: ignore[return-value]

    def _args(self) -> tuple:
        return ()


class no_grad(_Mode):  # noqa: N801
    """Ops inside record no gradients: ``with ember.no_grad(): ...``."""

    def _apply(self) -> None:
        STATE.grad_enabled = False
        GENERATION[0] += 1


class enable_grad(_Mode):  # noqa: N801
    """Re-enables gradient recording inside ``no_grad``."""

    def _apply(self) -> None:
        STATE.grad_enabled = True
        GENERATION[0] += 1


class set_grad_enabled(_Mode):  # noqa: N801
    """``set_grad_enabled(False)`` as a call sets the mode; as a context manager it restores."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._prev = (STATE.grad_enabled, STATE.inference)
        STATE.grad_enabled = self.mode
        GENERATION[0] += 1

    def _apply(self) -> None:
        STATE.grad_enabled = self.mode
        GENERATION[0] += 1

    def __enter__(self) -> set_grad_enabled:
        # the state was already applied by __init__; _prev holds what was before it
        return self

    def __call__(self, fn: F) -> F:
        STATE.grad_enabled, STATE.inference = self._prev  # used as a decorator: undo __init__
        GENERATION[0] += 1
        return super().__call__(fn)

    def _args(self) -> tuple:
        return (self.mode,)


class inference_mode(_Mode):  # noqa: N801
    """Like ``no_grad``; tensors made inside are inference tensors (``is_inference()``)."""

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)

    def _apply(self) -> None:
        if self.mode:
            STATE.grad_enabled = False
            STATE.inference = True
            GENERATION[0] += 1

    def _args(self) -> tuple:
        return (self.mode,)

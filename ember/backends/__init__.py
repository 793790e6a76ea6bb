"""``ember.backends``: PyTorch's backend flags, stored so scripts can set and read them.

ember computes on the CPU with NumPy and generated C, so none of these flags changes what ember
computes; each one answers what PyTorch answers on a CPU-only build (``cudnn.is_available()``
False, ``mps.is_available()`` False, ``openmp.is_available()`` True ...).  Setting a flag
(``ember.backends.cudnn.benchmark = True``) stores it and is otherwise a documented no-op.

Also here: ``set_float32_matmul_precision`` / ``use_deterministic_algorithms`` state (re-exported
as ``ember.set_float32_matmul_precision`` ...).  ember's float32 matmul always computes at full
float32 precision and its kernels are deterministic, so these are stored and reported only.
"""

from __future__ import annotations

import warnings

from ember.backends import _state, cpu, cuda, cudnn, mkl, mkldnn, mps, openmp  # noqa: F401
from ember.errors import EmberTypeError

_PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision: str) -> None:
    """Store the float32 matmul precision ('highest', 'high' or 'medium').  ember computes
    float32 matmuls at full precision whatever it says.

    >>> ember.set_float32_matmul_precision("high")
    """
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", stacklevel=2)
        return
    _state.float32_matmul_precision = precision


def get_float32_matmul_precision() -> str:
    """The stored float32 matmul precision (default 'highest')."""
    return _state.float32_matmul_precision


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Store the deterministic-algorithms flag.  ember's kernels are deterministic already
    (fixed reduction orders, counter-based randomness), so nothing else changes."""
    if not isinstance(mode, bool):
        raise EmberTypeError(f"[use_deterministic_algorithms] mode must be a bool, got "
                             f"{type(mode).__name__}")
    _state.deterministic = mode
    _state.deterministic_warn_only = bool(warn_only) and mode


def are_deterministic_algorithms_enabled() -> bool:
    return _state.deterministic


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _state.deterministic_warn_only


__all__ = ["are_deterministic_algorithms_enabled", "cpu", "cuda", "cudnn",
           "get_float32_matmul_precision", "is_deterministic_algorithms_warn_only_enabled",
           "mkl", "mkldnn", "mps", "openmp", "set_float32_matmul_precision",
           "use_deterministic_algorithms"]

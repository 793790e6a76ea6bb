"""``ember.backends.cudnn``: cuDNN's flags, stored; ember has no cuDNN (``is_available()`` is
False), so setting them changes nothing.

>>> ember.backends.cudnn.benchmark = True
"""

from __future__ import annotations

import contextlib
from typing import Iterator

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: ember has no cuDNN."""
    return False


def version() -> None:
    """None, as PyTorch without cuDNN."""
    return None


def is_acceptable(tensor: object) -> bool:
    return False


@contextlib.contextmanager
def flags(enabled: bool = False, benchmark: bool = False, benchmark_limit: int | None = 10,
          deterministic: bool = False, allow_tf32: bool = True) -> Iterator[None]:
    """Set the flags inside a ``with`` block and restore them after (stored only)."""
    g = globals()
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    old = {n: g[n] for n in names}
    g.update(enabled=enabled, benchmark=benchmark, deterministic=deterministic,
             allow_tf32=allow_tf32)
    if benchmark_limit is not None:
        g["benchmark_limit"] = benchmark_limit
    try:
        yield
    finally:
        g.update(old)

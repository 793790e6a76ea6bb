"""``ember.distributed``: importable; ``is_available()`` is False until ember's collectives land
(another issue builds them).  ``is_initialized()`` is False, and the functions that need a
process group raise PyTorch's ``ValueError`` about an uninitialized default group."""

from __future__ import annotations

from typing import Any

from ember.errors import EmberValueError


def is_available() -> bool:
    """False: ember has no distributed backend yet."""
    return False


def is_initialized() -> bool:
    return False


def _no_group(op: str) -> Any:
    raise EmberValueError(f"[distributed.{op}] Default process group has not been initialized, "
                          "please make sure to call init_process_group.")


def get_rank(group: Any = None) -> int:
    return _no_group("get_rank")


def get_world_size(group: Any = None) -> int:
    return _no_group("get_world_size")


__all__ = ["get_rank", "get_world_size", "is_available", "is_initialized"]

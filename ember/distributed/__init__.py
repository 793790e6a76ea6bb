"""``ember.distributed``: importable; ``is_available()`` is False until ember's collectives land
(another issue builds them).  ``is_initialized()`` is False; the names training scripts import
at their top (``init_process_group``, ``destroy_process_group``, ``barrier``, ``all_reduce``,
``ReduceOp`` ...) exist: ``init_process_group`` raises ``EmberNotImplementedError`` and the
functions that need a process group raise PyTorch's ``ValueError`` about an uninitialized
default group.

>>> import ember.distributed as dist
>>> dist.is_available(), dist.is_initialized()
(False, False)
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from ember.errors import EmberNotImplementedError, EmberValueError


class ReduceOp(Enum):
    """The reduction of a collective (PyTorch's names)."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"


def is_available() -> bool:
    """False: ember has no distributed backend yet."""
    return False


def is_initialized() -> bool:
    return False


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: Any = None, world_size: int = -1, rank: int = -1,
                       store: Any = None, group_name: str = "", pg_options: Any = None,
                       device_id: Any = None) -> None:
    """Raises ``EmberNotImplementedError``: ember has no process groups yet."""
    raise EmberNotImplementedError("[distributed.init_process_group] ember.distributed is not "
                                   "available yet (is_available() is False)")


def _no_group(op: str) -> Any:
    raise EmberValueError(f"[distributed.{op}] Default process group has not been initialized, "
                          "please make sure to call init_process_group.")


def destroy_process_group(group: Any = None) -> None:
    _no_group("destroy_process_group")


def get_rank(group: Any = None) -> int:
    return _no_group("get_rank")


def get_world_size(group: Any = None) -> int:
    return _no_group("get_world_size")


def get_backend(group: Any = None) -> str:
    return _no_group("get_backend")


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> None:
    _no_group("barrier")


def all_reduce(tensor: Any, op: ReduceOp = ReduceOp.SUM, group: Any = None,
               async_op: bool = False) -> None:
    _no_group("all_reduce")


def broadcast(tensor: Any, src: int | None = None, group: Any = None, async_op: bool = False,
              group_src: int | None = None) -> None:
    _no_group("broadcast")


__all__ = ["ReduceOp", "all_reduce", "barrier", "broadcast", "destroy_process_group",
           "get_backend", "get_rank", "get_world_size", "init_process_group", "is_available",
           "is_initialized"]

"""Object collectives: ``broadcast_object_list``, ``all_gather_object``, ``gather_object``.

PyTorch pickles the objects and unpickles whatever arrives, which runs code chosen by the
sender.  ember sends ``ember.save``'s archive and the receivers read it with
``ember.load(weights_only=True)``: only the allowlist (tensors, containers, numbers, strings,
bytes, dtypes, ... and what ``ember.serialization.add_safe_globals`` adds) is rebuilt, no code
runs.  The sender checks its own archive first, so an object the receivers would refuse makes
every rank raise the same clear error instead of some ranks waiting forever.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from ember.distributed._collectives import _group_src
from ember.distributed._group import ProcessGroup, _resolve, wait_data
from ember.errors import EmberRuntimeError, EmberValueError


def _dump(obj: Any) -> tuple[bytes, Exception | None]:
    """``obj`` as an ember archive, and the error a safe load of it raises (None if fine)."""
    from ember.serialization import load, save

    buf = io.BytesIO()
    try:
        save(obj, buf)
        data = buf.getvalue()
        load(io.BytesIO(data), weights_only=True)
    except Exception as e:  # noqa: BLE001 (any failure: the peers must learn about it)
        return b"", e
    return data, None


def _undump(data: bytes) -> Any:
    from ember.serialization import load

    return load(io.BytesIO(data), weights_only=True)


def _fail(op: str, pg: ProcessGroup, sizes: np.ndarray, mine: Exception | None,
          local: Exception | None = None) -> None:
    """Raise on every rank when some rank's object cannot be sent safely (size -1) or its
    arguments are wrong (size -2)."""
    if local is not None:
        raise local
    if mine is not None:
        raise EmberRuntimeError(f"[distributed.{op}] this rank's object cannot be sent with "
                                f"ember's safe serialization: {mine}") from mine
    bad = [pg.ranks[r] for r in np.nonzero(sizes == -1)[0]]
    if bad:
        raise EmberRuntimeError(f"[distributed.{op}] rank(s) {bad} passed objects that ember's "
                                "safe serialization cannot send (their error says which)")
    bad = [pg.ranks[r] for r in np.nonzero(sizes == -2)[0]]
    if bad:
        raise EmberRuntimeError(f"[distributed.{op}] rank(s) {bad} passed invalid arguments "
                                "(their error says which)")


def _sizes(pg: ProcessGroup, op: str, data: bytes, err: Exception | None,
           local: Exception | None) -> np.ndarray:
    mine = -2 if local is not None else (-1 if err is not None else len(data))
    sizes = np.empty(pg.size(), np.int64)
    wait_data(pg, op, pg.comm.Iallgather(np.array([mine], np.int64), sizes))
    return sizes


def _list_error(op: str, what: str, items: Any, n: int) -> Exception | None:
    if items is None or len(items) < n:
        return EmberValueError(f"[distributed.{op}] {what} must hold world_size={n} items, "
                               f"got {None if items is None else len(items)}")
    return None


def broadcast_object_list(object_list: list[Any], src: int | None = None, group: Any = None,
                          device: Any = None, group_src: int | None = None) -> None:
    """Replace ``object_list``'s items with rank ``src``'s (every rank passes a list of the same
    length).

    >>> objs = [{"epoch": 3}] if dist.get_rank() == 0 else [None]   # doctest: +SKIP
    >>> dist.broadcast_object_list(objs, src=0); objs                 # doctest: +SKIP
    [{'epoch': 3}]
    """
    op = "broadcast_object_list"
    pg = _resolve(group, op)
    root = _group_src(pg, op, 0 if src is None and group_src is None else src, group_src)
    data, err = _dump(list(object_list)) if pg.rank() == root else (b"", None)
    size = np.array([-1 if err is not None else len(data)], np.int64)
    wait_data(pg, op, pg.comm.Ibcast(size, root=root))
    _fail(op, pg, size if pg.rank() != root else np.zeros(1), err)
    buf = np.frombuffer(data, np.uint8).copy() if pg.rank() == root else np.empty(size[0],
                                                                                  np.uint8)
    wait_data(pg, op, pg.comm.Ibcast(buf, root=root))
    if pg.rank() != root:
        got = _undump(buf.tobytes())
        if len(got) != len(object_list):
            raise EmberValueError(f"[distributed.{op}] rank {pg.ranks[root]} sent "
                                  f"{len(got)} objects, this rank's list holds "
                                  f"{len(object_list)}")
        object_list[:] = got


def _allgather_bytes(pg: ProcessGroup, op: str, obj: Any,
                     local: Exception | None) -> list[bytes]:
    data, err = _dump(obj)
    sizes = _sizes(pg, op, data, err, local)
    _fail(op, pg, sizes, err, local)
    out = np.empty(int(sizes.sum()), np.uint8)
    displs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    wait_data(pg, op, pg.comm.Iallgatherv(np.frombuffer(data, np.uint8),
                                          [out, (sizes.tolist(), displs.tolist())]))
    return [out[d:d + s].tobytes() for d, s in zip(displs, sizes)]


def all_gather_object(object_list: list[Any], obj: Any, group: Any = None) -> None:
    """``object_list[r]`` = rank r's ``obj`` on every rank (``object_list`` has
    ``world_size`` items).

    >>> out = [None] * dist.get_world_size()                 # doctest: +SKIP
    >>> dist.all_gather_object(out, {"rank": dist.get_rank()})  # doctest: +SKIP
    """
    op = "all_gather_object"
    pg = _resolve(group, op)
    parts = _allgather_bytes(pg, op, obj,
                             _list_error(op, "object_list", object_list, pg.size()))
    for r, part in enumerate(parts):
        object_list[r] = _undump(part)


def gather_object(obj: Any, object_gather_list: list[Any] | None = None, dst: int | None = None,
                  group: Any = None, group_dst: int | None = None) -> None:
    """``object_gather_list[r]`` = rank r's ``obj`` on rank ``dst`` (None elsewhere)."""
    op = "gather_object"
    pg = _resolve(group, op)
    root = _group_src(pg, op, 0 if dst is None and group_dst is None else dst, group_dst)
    me_root = pg.rank() == root
    local = (_list_error(op, "object_gather_list", object_gather_list, pg.size())
             if me_root else None)
    data, err = _dump(obj)
    sizes = _sizes(pg, op, data, err, local)
    _fail(op, pg, sizes, err, local)
    displs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    out = np.empty(int(sizes.sum()), np.uint8) if me_root else None
    wait_data(pg, op, pg.comm.Igatherv(
        np.frombuffer(data, np.uint8),
        [out, (sizes.tolist(), displs.tolist())] if me_root else None, root=root))
    if me_root:
        for r, (d, s) in enumerate(zip(displs, sizes)):
            object_gather_list[r] = _undump(out[d:d + s].tobytes())

"""Point-to-point messages: ``send``/``recv`` and their non-blocking forms on MPI."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.distributed._group import ProcessGroup, Work, _resolve
from ember.errors import EmberValueError


def _peer(pg: ProcessGroup, name: str, rank: int | None, group_rank: int | None) -> int:
    if group_rank is not None:
        return int(group_rank)
    if rank is None:
        raise EmberValueError(f"[distributed.{name}] give the peer's global rank or its "
                              "group rank")
    if rank not in pg.ranks:
        raise EmberValueError(f"[distributed.{name}] rank {rank} is not part of the group")
    if pg.ranks.index(rank) == pg.rank():
        raise EmberValueError(f"[distributed.{name}] Invalid destination rank: should not be "
                              "the same as the rank of the current process.")
    return pg.ranks.index(rank)


def _buf(tensor: Any) -> np.ndarray:
    return np.ascontiguousarray(tensor.numpy(force=True))


def isend(tensor: Any, dst: int | None = None, group: Any = None, tag: int = 0,
          group_dst: int | None = None) -> Work:
    """Start sending ``tensor`` to rank ``dst``; ``wait()`` the returned ``Work`` before
    changing the tensor.

    >>> dist.isend(t, dst=1).wait()   # doctest: +SKIP
    True
    """
    pg = _resolve(group, "isend")
    peer = _peer(pg, "isend", dst, group_dst)
    buf = _buf(tensor)
    req = pg.comm.Isend(buf.reshape(-1).view(np.uint8), dest=peer, tag=tag)
    return Work(req, on_done=lambda: buf, timeout=pg.timeout.total_seconds(),  # buf: kept alive
                op="isend")


def irecv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0,
          group_src: int | None = None) -> Work:
    """Start receiving into ``tensor`` from rank ``src`` (any rank when ``None``)."""
    from mpi4py import MPI

    pg = _resolve(group, "irecv")
    peer = MPI.ANY_SOURCE if src is None and group_src is None else _peer(pg, "irecv", src,
                                                                          group_src)
    buf = _buf(tensor)
    status = MPI.Status()
    req = pg.comm.Irecv(buf.reshape(-1).view(np.uint8), source=peer, tag=tag)

    def finish() -> int:
        dst = tensor.numpy(force=True)
        if dst is not buf:
            dst[...] = buf
        tensor._version_counter[0] += 1
        return pg.ranks[status.Get_source()] if peer == MPI.ANY_SOURCE else pg.ranks[peer]

    work = Work(req, on_done=finish, timeout=pg.timeout.total_seconds(), op="irecv")
    work._request = _WithStatus(req, status)
    return work


class _WithStatus:
    def __init__(self, req: Any, status: Any) -> None:
        self.req, self.status = req, status

    def Wait(self) -> None:  # noqa: N802 (mpi4py's name)
        self.req.Wait(self.status)

    def Test(self) -> bool:  # noqa: N802
        return bool(self.req.Test(self.status))


def send(tensor: Any, dst: int | None = None, group: Any = None, tag: int = 0,
         group_dst: int | None = None) -> None:
    """Send ``tensor`` to rank ``dst`` (blocks until it can be reused)."""
    isend(tensor, dst, group, tag, group_dst).wait()


def recv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0,
         group_src: int | None = None) -> int:
    """Receive into ``tensor`` from ``src`` (any rank when ``None``); returns the sender."""
    return irecv(tensor, src, group, tag, group_src).result()

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


class P2POp:
    """One point-to-point operation for ``batch_isend_irecv`` (PyTorch's ``P2POp``): ``op`` is
    ``isend`` or ``irecv``, ``peer`` the other rank (global; or ``group_peer`` its rank in
    ``group``).

    >>> ops = [dist.P2POp(dist.isend, a, 1), dist.P2POp(dist.irecv, b, 1)]  # doctest: +SKIP
    >>> for w in dist.batch_isend_irecv(ops): w.wait()                     # doctest: +SKIP
    """

    def __init__(self, op: Any, tensor: Any, peer: int | None = None, group: Any = None,
                 tag: int = 0, group_peer: int | None = None) -> None:
        if op not in (isend, irecv):
            raise EmberValueError("[distributed.P2POp] Invalid ``op``. Expected ``op`` to be of "
                                  "type ``torch.distributed.isend`` or "
                                  "``torch.distributed.irecv``.")
        if peer is None and group_peer is None:
            raise EmberValueError("[distributed.P2POp] give peer (a global rank) or group_peer")
        self.op, self.tensor, self.peer, self.group = op, tensor, peer, group
        self.tag, self.group_peer = tag, group_peer

    def __repr__(self) -> str:
        return (f"P2POp(op={self.op.__name__}, peer={self.peer}, group_peer={self.group_peer}, "
                f"tag={self.tag}, shape={tuple(self.tensor.shape)}, dtype={self.tensor.dtype})")


def batch_isend_irecv(p2p_op_list: list) -> list[Work]:
    """Post every operation of ``p2p_op_list`` (``P2POp``s) at once and return their ``Work``s
    (PyTorch's ``batch_isend_irecv``); MPI matches each send with its receive whatever the
    order, so a ring exchange cannot deadlock.

    >>> reqs = dist.batch_isend_irecv([send_op, recv_op])   # doctest: +SKIP
    >>> for req in reqs: req.wait()                          # doctest: +SKIP
    """
    if not isinstance(p2p_op_list, (list, tuple)) or not p2p_op_list or not all(
            isinstance(p, P2POp) for p in p2p_op_list):
        raise EmberValueError("[distributed.batch_isend_irecv] expects a non-empty list of "
                              "P2POp")
    groups = {id(p.group) for p in p2p_op_list}
    if len(groups) > 1:
        raise EmberValueError("[distributed.batch_isend_irecv] every P2POp must use the same "
                              "group")
    works = []
    for p in p2p_op_list:
        if p.op is isend:
            works.append(isend(p.tensor, p.peer, p.group, p.tag, p.group_peer))
        else:
            works.append(irecv(p.tensor, p.peer, p.group, p.tag, p.group_peer))
    return works

"""Symmetric memory across nodes: the same heap, handles and ops on MPI RMA windows.

When the ranks do not share one node's memory (or ``symm_mem.set_backend("MPI_RMA")`` /
``EMBER_SYMM_MEM_BACKEND=rma`` asks for it on one node), each segment of the symmetric heap is
an ``MPI.Win.Allocate`` window over the default group's ranks, opened once for passive-target
access (``Lock_all``).  A rank's own buffer is still a plain tensor of its own memory; a
peer's memory is reached with one-sided ``Put``/``Get`` (completed by ``Flush``) and the
signal pads with ``Compare_and_swap``, MPI's atomics, so the memory model is the one-node
model's: stores (and ``put``) made before ``put_signal(dst)`` are visible to ``dst`` once its
``wait_signal`` returns; ``barrier`` orders everything.  What differs: ``get_buffer`` and
``get_signal_pad`` of a peer raise (no process can map another node's memory; PyTorch has the
same limit for peers without NVLink), ``buffer_ptrs``/``signal_pad_ptrs`` hold 0 for peers, and
``hdl.put``/``hdl.get`` (which work on both backends) copy to and from a peer's buffer.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

import numpy as np

from ember.errors import EmberRuntimeError

_P = ctypes.c_void_p


def allocate(comm: Any, size: int) -> tuple[Any, int]:
    """A window of ``size`` bytes on every rank of ``comm`` (collective), opened for
    passive-target access; (window, this rank's base address)."""
    from mpi4py import MPI

    win = MPI.Win.Allocate(size, 1, comm=comm)
    win.Lock_all(MPI.MODE_NOCHECK)
    return win, int(win.tomemory().address)


def free(win: Any) -> None:
    win.Unlock_all()
    win.Free()


def put(win: Any, target: int, disp: int, src: np.ndarray) -> None:
    """Copy ``src`` (bytes) to ``target``'s window at byte ``disp``; complete at the target on
    return."""
    from mpi4py import MPI

    data = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
    if data.size:
        win.Put(data, target, target=(disp, data.size, MPI.BYTE))
        win.Flush(target)


def get(win: Any, target: int, disp: int, dst: np.ndarray) -> None:
    """Fill ``dst`` (C-contiguous) from ``target``'s window at byte ``disp``."""
    from mpi4py import MPI

    data = dst.reshape(-1).view(np.uint8)
    if data.size:
        win.Get(data, target, target=(disp, data.size, MPI.BYTE))
        win.Flush(target)


def cas_wait(win: Any, target: int, disp: int, frm: int, to: int, deadline: float) -> bool:
    """Atomically change the int32 slot at ``target``:``disp`` from ``frm`` to ``to``, waiting
    until it holds ``frm``; False past ``deadline`` (``time.monotonic()``)."""
    from mpi4py import MPI

    origin, compare = np.array([to], np.int32), np.array([frm], np.int32)
    result = np.empty(1, np.int32)
    spins = 0
    while True:
        win.Compare_and_swap([origin, MPI.INT32_T], [compare, MPI.INT32_T],
                             [result, MPI.INT32_T], target, disp)
        win.Flush(target)
        if result[0] == frm:
            win.Sync()  # the peer's completed puts are visible to this rank's loads
            return True
        spins += 1
        if spins > 50:
            if time.monotonic() > deadline:
                return False
            time.sleep(0 if spins < 2000 else 1e-4)


class RmaHandle:
    """The RMA half of a ``_SymmetricMemory`` handle: signals, barrier, put/get by MPI."""

    def __init__(self, win: Any, targets: list[int], pad_off: int, data_off: int,
                 world: int, rank: int) -> None:
        self.win, self.targets = win, targets  # group rank -> rank in the window's comm
        self.pad_off, self.data_off, self.world, self.rank = pad_off, data_off, world, rank

    def slot(self, channel: int, src: int) -> int:
        return self.pad_off + 4 * (channel * self.world + src)

    def signal(self, dst: int, channel: int, timeout_s: float) -> bool:
        self.win.Sync()  # this rank's stores to its own window before the signal
        return cas_wait(self.win, self.targets[dst], self.slot(channel, self.rank), 0, 1,
                        time.monotonic() + timeout_s)

    def wait(self, src: int, channel: int, timeout_s: float) -> bool:
        return cas_wait(self.win, self.targets[self.rank], self.slot(channel, src), 1, 0,
                        time.monotonic() + timeout_s)

    def barrier(self, channel: int, timeout_s: float) -> int:
        """Signal every peer, then wait for every peer: -1, or the peer that timed out."""
        deadline = time.monotonic() + timeout_s
        self.win.Sync()
        for k in range(1, self.world):
            peer = (self.rank + k) % self.world
            if not cas_wait(self.win, self.targets[peer], self.slot(channel, self.rank), 0, 1,
                            deadline):
                return peer
        for k in range(1, self.world):
            peer = (self.rank + self.world - k) % self.world
            if not cas_wait(self.win, self.targets[self.rank], self.slot(channel, peer), 1, 0,
                            deadline):
                return peer
        return -1

    def put(self, rank: int, offset: int, src: np.ndarray) -> None:
        self.win.Sync()
        put(self.win, self.targets[rank], self.data_off + offset, src)

    def get(self, rank: int, offset: int, dst: np.ndarray) -> None:
        get(self.win, self.targets[rank], self.data_off + offset, dst)

    def region_ptrs(self, own: int, off: int, nbytes: int, lo: int,
                    hi: int) -> tuple[Any, list]:
        """Pointers to bytes [off+lo, off+hi) of every rank's buffer, in rank order: this
        rank's own memory, and copies fetched from the peers (kept alive by the list)."""
        keep, ptrs = [], []
        for r in range(self.world):
            if r == self.rank:
                ptrs.append(own + off + lo)
                continue
            tmp = np.empty(hi - lo, np.uint8)
            self.get(r, off + lo, tmp)
            keep.append(tmp)
            ptrs.append(tmp.ctypes.data)
        return (_P * self.world)(*ptrs), keep


def no_peer_memory(op: str, rank: int) -> EmberRuntimeError:
    return EmberRuntimeError(
        f"[symm_mem.{op}] rank {rank}'s memory cannot be mapped into this process: the "
        "symmetric heap is on MPI RMA windows (ranks on several nodes, or "
        "set_backend('MPI_RMA')); copy with hdl.put(rank, tensor) / hdl.get(rank, sizes, "
        "dtype), or use the symm_mem ops")

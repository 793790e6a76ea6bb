"""Symmetric memory on one node: PyTorch's ``torch.distributed._symmetric_memory`` on MPI
shared-memory windows.

``empty`` allocates from a *symmetric heap*: segments of an MPI shared-memory window
(``MPI.Win.Allocate_shared`` over the ranks of this node), so every rank maps every peer's
memory and reads or writes it with plain loads and stores.  Allocation is a bump pointer: when
every rank calls ``empty`` with the same sizes in the same order (PyTorch's rule), each buffer
sits at the same offset on every rank.  Each allocation carries a signal pad (int32 slots) in
front of its data.  ``rendezvous(tensor, group)`` (collective) checks that the ranks passed the
same allocation and returns the handle with the peers' addresses.  The memory model
(docs/distributed.md): stores made before ``put_signal(dst)`` are visible to ``dst`` once its
``wait_signal(src)`` returns; ``barrier`` orders everything before it on every rank before
everything after it.  Nothing else orders peer accesses.

>>> import ember.distributed._symmetric_memory as symm_mem   # doctest: +SKIP
>>> t = symm_mem.empty(4, dtype=ember.float32)                # doctest: +SKIP
>>> hdl = symm_mem.rendezvous(t, dist.group.WORLD)            # doctest: +SKIP
>>> hdl.get_buffer(1 - hdl.rank, (4,), ember.float32)         # the peer's memory # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ember import config
from ember import dtypes as _dt
from ember.distributed import _symm_rma as _rma
from ember.distributed._group import ProcessGroup, _mpi, _resolve_name, _world, wait_data
from ember.errors import EmberRuntimeError, EmberValueError, ShapeError
from ember.ops._native import Native, csrc

_PAD = {"size": 9216}  # bytes of int32 slots per allocation: PyTorch's default (2304 slots)
_ALIGN = 64
_SEGMENT = int(os.environ.get("EMBER_SYMM_MEM_SEGMENT_MB", "64")) << 20
_DTYPES = list(_dt.ALL_DTYPES)

_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_REDUCE_ARGS = [ctypes.POINTER(_P), ctypes.c_int, _I64, _P, _I64]
NATIVE = Native("symm_mem", csrc("bf16_scalar.h") + csrc("symm_mem.c"), {
    "ember_symm_put_signal": (ctypes.c_int, [_P, _I64]),
    "ember_symm_wait_signal": (ctypes.c_int, [_P, _I64]),
    "ember_symm_barrier": (ctypes.c_int, [ctypes.POINTER(_P), ctypes.c_int, ctypes.c_int,
                                          ctypes.c_int, _I64]),
    **{f"ember_symm_sum_{k}": (None, _REDUCE_ARGS) for k in ("f32", "f64", "bf16", "f16")},
    "ember_symm_gather": (None, _REDUCE_ARGS),
    "ember_symm_scatter_copy": (None, _REDUCE_ARGS),
    "ember_symm_one_shot": (ctypes.c_int, [ctypes.POINTER(_P), ctypes.POINTER(_P), ctypes.c_int,
                                           ctypes.c_int, ctypes.c_int, _I64, _I64, _P, _I64,
                                           ctypes.c_int]),
    "ember_symm_one_shot_plan": (ctypes.c_int, [_P, _P]),
    "ember_symm_two_shot_plan": (ctypes.c_int, [_P]),
})


class Plan(ctypes.Structure):
    """``ember_symm_plan`` of symm_mem.c: a one-shot all-reduce's arguments, packed once."""

    _fields_ = [("pads", _P), ("bufs", _P), ("rank", _I64), ("world", _I64),
                ("channel", _I64), ("timeout_ns", _I64), ("off", _I64), ("count", _I64),
                ("kind", _I64), ("out", _P)]


def _lib(op: str) -> Any:
    lib = NATIVE.lib()
    if lib is None:
        raise EmberRuntimeError(f"[symm_mem.{op}] symmetric memory needs its C kernels and they "
                                "could not be built (no C compiler? EMBER_EAGER_C=0?)")
    return lib


@dataclass(eq=False)
class _Segment:
    win: Any
    bases: list[int]   # base address of each node rank's part, in this process
    size: int
    used: int = 0


@dataclass(eq=False)
class _Alloc:
    seq: int            # the n-th allocation of this process
    seg: int
    pad_off: int        # offset of the signal pad in the segment part
    data_off: int       # offset of the data
    nbytes: int
    pad_size: int
    handles: dict = field(default_factory=dict)


@dataclass
class _Heap:
    comm: Any = None          # the node's ranks (MPI.COMM_TYPE_SHARED); RMA: every rank
    segments: list = field(default_factory=list)
    allocs: list = field(default_factory=list)
    leader: int = -1          # global rank of the node's first rank
    rma: bool = False         # segments are MPI RMA windows (ember.distributed._symm_rma)


_HEAP = _Heap()
_BACKENDS = ("MPI_SHM", "MPI_RMA")
_CHOICE: dict = {"backend": None}  # set_backend's choice (None: config, then automatic)


def set_backend(name: str) -> None:
    """Choose the symmetric heap's transport before the first ``empty`` (PyTorch's
    ``set_backend``): ``"MPI_SHM"`` (MPI shared-memory windows: ranks on one node map each
    other's buffers) or ``"MPI_RMA"`` (MPI RMA windows: works across nodes; peers' memory is
    reached with one-sided puts and gets).  By default: ``EMBER_SYMM_MEM_BACKEND``, else SHM
    when every rank is on one node, else RMA.

    >>> symm_mem.set_backend("MPI_RMA")   # doctest: +SKIP
    """
    if name not in _BACKENDS:
        raise EmberValueError(f"[symm_mem.set_backend] backend must be one of {_BACKENDS}, "
                              f"got {name!r}")
    if _HEAP.comm is not None:
        raise EmberRuntimeError("[symm_mem.set_backend] the symmetric heap exists already: "
                                "choose the backend before the first symm_mem.empty")
    _CHOICE["backend"] = name


def get_backend(device: Any = None) -> str:
    """The symmetric heap's transport: ``"MPI_SHM"`` or ``"MPI_RMA"`` (the choice, or what
    the first ``empty`` picked)."""
    if _HEAP.comm is not None:
        return "MPI_RMA" if _HEAP.rma else "MPI_SHM"
    return _CHOICE["backend"] or config.symm_mem_backend() or "MPI_SHM"


def _node_comm() -> Any:
    """The heap's communicator (collective on first use): the node's ranks, or with RMA the
    default group's ranks (in its rank order)."""
    if _HEAP.comm is None:
        MPI = _mpi()  # noqa: N806 (mpi4py's name)
        world = _world("symm_mem.empty").comm
        node = world.Split_type(MPI.COMM_TYPE_SHARED)
        choice = _CHOICE["backend"] or config.symm_mem_backend()
        # every node is smaller than the world on every rank, or none is: all ranks agree
        _HEAP.rma = choice == "MPI_RMA" or (choice is None and
                                            node.Get_size() != world.Get_size())
        if _HEAP.rma:
            node.Free()
            node = world.Dup()
        leader = np.array([world.Get_rank()], np.int64)
        wait_data(_world("symm_mem.empty"), "symm_mem.empty", node.Ibcast(leader, root=0))
        _HEAP.comm, _HEAP.leader = node, int(leader[0])
    return _HEAP.comm


def _new_segment(size: int) -> None:
    """Collective over the heap's ranks: every rank adds a segment of ``size`` bytes."""
    MPI = _mpi()  # noqa: N806
    comm = _node_comm()
    if _HEAP.rma:
        win, base = _rma.allocate(comm, size)
        me = comm.Get_rank()
        bases = [base if r == me else 0 for r in range(comm.Get_size())]
    else:
        win = MPI.Win.Allocate_shared(size, 1, comm=comm)
        bases = [win.Shared_query(r)[0].address for r in range(comm.Get_size())]
    _HEAP.segments.append(_Segment(win, bases, size))


def _round(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _allocate(nbytes: int) -> _Alloc:
    pad = _PAD["size"]
    need = pad + _round(max(nbytes, 1))
    seg = _HEAP.segments[-1] if _HEAP.segments else None
    if seg is None or seg.used + need > seg.size:
        # every rank runs out at the same call when the calls match (PyTorch's rule)
        _new_segment(max(_SEGMENT, need))
        seg = _HEAP.segments[-1]
    me = _HEAP.comm.Get_rank()
    pad_off = seg.used
    seg.used += need
    ctypes.memset(seg.bases[me] + pad_off, 0, pad)
    alloc = _Alloc(len(_HEAP.allocs), len(_HEAP.segments) - 1, pad_off, pad_off + pad, nbytes,
                   pad)
    _HEAP.allocs.append(alloc)
    return alloc


def _view(address: int, shape: Sequence[int], dtype: Any) -> Any:
    """An ember tensor whose memory is ``address`` (no copy)."""
    import ember

    n = int(np.prod(shape, dtype=np.int64))
    raw = (ctypes.c_char * max(n * dtype.itemsize, 1)).from_address(address)
    arr = np.frombuffer(raw, dtype=dtype.np, count=n).reshape(tuple(shape))
    return ember.from_numpy(arr)


def _sizes(size: tuple) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if any(not isinstance(s, (int, np.integer)) or s < 0 for s in size):
        raise EmberValueError(f"[symm_mem.empty] sizes must be non-negative ints, got {size}")
    return tuple(int(s) for s in size)


def empty(*size: Any, dtype: Any = None, device: Any = None) -> Any:
    """A tensor like ``ember.empty`` whose memory comes from the symmetric heap (the first call
    is collective over the node: every rank must call ``empty`` with the same sizes in the same
    order, as PyTorch requires).

    >>> t = symm_mem.empty(16, dtype=ember.float32)   # doctest: +SKIP
    """
    import ember

    if device is not None and str(device).split(":")[0] != "cpu":
        raise EmberValueError(f"[symm_mem.empty] ember's symmetric memory lives on the CPU, "
                              f"got device={device!r}")
    shape = _sizes(size)
    dtype = dtype or ember.get_default_dtype()
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    alloc = _allocate(nbytes)
    seg = _HEAP.segments[alloc.seg]
    return _view(seg.bases[_HEAP.comm.Get_rank()] + alloc.data_off, shape, dtype)


def _address(t: Any) -> int:
    return int(t.numpy(force=True).__array_interface__["data"][0])


def _find(t: Any) -> tuple[_Alloc, int] | None:
    """The allocation holding ``t``'s first element, and ``t``'s byte offset in it."""
    if not _HEAP.allocs:
        return None
    addr = _address(t)
    me = _HEAP.comm.Get_rank()
    for alloc in _HEAP.allocs:
        start = _HEAP.segments[alloc.seg].bases[me] + alloc.data_off
        if start <= addr < start + max(alloc.nbytes, 1):
            return alloc, addr - start
    return None


def is_symm_mem_tensor(tensor: Any) -> bool:
    """True when ``tensor`` lives in memory from ``empty``."""
    return _find(tensor) is not None


def _group_of(group: Any, op: str) -> ProcessGroup:
    return _resolve_name(group, f"symm_mem.{op}")


def rendezvous(tensor: Any, group: Any) -> _SymmetricMemory:
    """Exchange the addresses of ``tensor``'s allocation with the ranks of ``group`` (a
    ``ProcessGroup`` or its name); collective.  The ranks must pass the same allocation (the
    n-th ``empty`` of each, same size): otherwise every rank raises a ``RuntimeError`` that
    lists what each rank passed.

    >>> hdl = symm_mem.rendezvous(t, dist.group.WORLD)   # doctest: +SKIP
    """
    pg = _group_of(group, "rendezvous")
    found = _find(tensor)
    if found is not None and pg.group_name in found[0].handles:
        return found[0].handles[pg.group_name]  # agreed before: no communication
    mine = np.array([-1, 0, 0, -1, -1], np.int64)
    if found is not None:
        alloc, _ = found
        mine[:] = [alloc.seq, alloc.nbytes, alloc.seg, _HEAP.comm.Get_rank(),
                   _node_leader()]
    every = np.empty((pg.size(), 5), np.int64)
    wait_data(pg, "symm_mem.rendezvous", pg.comm.Iallgather(mine, every))
    _check_rendezvous(pg, every)
    alloc = found[0]
    if pg.group_name not in alloc.handles:
        alloc.handles[pg.group_name] = _SymmetricMemory(pg, alloc, [int(r) for r in every[:, 3]])
    return alloc.handles[pg.group_name]


def _node_leader() -> int:
    """The global rank of this node's first rank: equal on ranks that share memory (found when
    the heap is made, so ``rendezvous`` has no collective call that only some ranks make)."""
    return _HEAP.leader


def _check_rendezvous(pg: ProcessGroup, every: np.ndarray) -> None:
    op = "[symm_mem.rendezvous]"
    if (every[:, 0] < 0).any():
        bad = [pg.ranks[r] for r in np.nonzero(every[:, 0] < 0)[0]]
        raise EmberValueError(f"{op} rank(s) {bad} passed a tensor that is not from "
                              "symm_mem.empty")
    if (every[:, 4] != every[0, 4]).any():
        raise EmberRuntimeError(f"{op} the ranks {pg.ranks} do not share one node's memory; "
                                "ember's symmetric memory spans one node")
    if (every[:, :3] != every[0, :3]).any():
        lines = "; ".join(f"rank {pg.ranks[r]}: allocation #{s[0]} of {s[1]} bytes"
                          for r, s in enumerate(every))
        raise EmberRuntimeError(f"{op} the ranks passed different allocations ({lines}): "
                                "empty() and rendezvous() must be called in the same order "
                                "with the same sizes on every rank")


class _SymmetricMemory:
    """The handle ``rendezvous`` returns (PyTorch's ``_SymmetricMemory``): the group's view of
    one allocation.  Signal pad slot of (channel, source rank) on a pad:
    ``channel * world_size + source`` (PyTorch's layout)."""

    def __init__(self, pg: ProcessGroup, alloc: _Alloc, node_ranks: list[int]) -> None:
        seg = _HEAP.segments[alloc.seg]
        self._pg, self._alloc = pg, alloc
        self.rank, self.world_size = pg.rank(), pg.size()
        self.buffer_ptrs = [seg.bases[n] + alloc.data_off for n in node_ranks]
        self.signal_pad_ptrs = [seg.bases[n] + alloc.pad_off for n in node_ranks]
        self.buffer_size, self.signal_pad_size = alloc.nbytes, alloc.pad_size
        self.multicast_ptr, self.has_multicast_support = 0, False
        self._pads = (_P * self.world_size)(*self.signal_pad_ptrs)
        self._bufs = (_P * self.world_size)(*self.buffer_ptrs)
        self.channels = alloc.pad_size // 4 // self.world_size
        self._rma = (_rma.RmaHandle(seg.win, node_ranks, alloc.pad_off, alloc.data_off,
                                    self.world_size, self.rank) if _HEAP.rma else None)

    @property
    def group_name(self) -> str:
        return self._pg.group_name

    def __repr__(self) -> str:
        return (f"_SymmetricMemory(rank={self.rank}, world_size={self.world_size}, "
                f"buffer_size={self.buffer_size}, group={self.group_name!r})")

    def _region(self, op: str, rank: int, sizes: Sequence[int], dtype: Any, offset: int,
                limit: int) -> int:
        if not 0 <= rank < self.world_size:
            raise EmberValueError(f"[symm_mem.{op}] rank {rank} is outside [0, "
                                  f"{self.world_size})")
        n = int(np.prod(tuple(sizes), dtype=np.int64))
        end = (int(offset) + n) * dtype.itemsize
        if offset < 0 or end > limit:
            raise ShapeError(f"[symm_mem.{op}] sizes {tuple(sizes)} of {dtype} at "
                             f"storage_offset {offset} need {end} bytes, the buffer has {limit}")
        return int(offset) * dtype.itemsize

    def get_buffer(self, rank: int, sizes: Sequence[int], dtype: Any,
                   storage_offset: int = 0) -> Any:
        """A tensor that IS rank ``rank``'s buffer (its loads and stores are the peer's memory).

        >>> peer = hdl.get_buffer(1, (4,), ember.float32)   # doctest: +SKIP
        """
        sizes = tuple(sizes)
        off = self._region("get_buffer", rank, sizes, dtype, storage_offset, self.buffer_size)
        if self._rma is not None and rank != self.rank:
            raise _rma.no_peer_memory("get_buffer", rank)
        return _view(self.buffer_ptrs[rank] + off, sizes, dtype)

    def put(self, rank: int, tensor: Any, storage_offset: int = 0) -> None:
        """Copy ``tensor`` into rank ``rank``'s buffer at element ``storage_offset`` (of
        ``tensor``'s dtype); done at the peer on return (ember's extension: it works on both
        backends; publish it to the peer with ``put_signal``).

        >>> hdl.put(1, ember.ones(4))   # doctest: +SKIP
        """
        src = np.ascontiguousarray(tensor.numpy(force=True))
        off = self._region("put", rank, tuple(src.shape), tensor.dtype, storage_offset,
                           self.buffer_size)
        if self._rma is not None:
            self._rma.put(rank, off, src)
        elif src.nbytes:
            ctypes.memmove(self.buffer_ptrs[rank] + off, src.ctypes.data, src.nbytes)

    def get(self, rank: int, sizes: Sequence[int], dtype: Any, storage_offset: int = 0) -> Any:
        """A new tensor copied from rank ``rank``'s buffer (ember's extension, both backends).

        >>> hdl.get(1, (4,), ember.float32)   # doctest: +SKIP
        """
        import ember

        sizes = tuple(sizes)
        off = self._region("get", rank, sizes, dtype, storage_offset, self.buffer_size)
        dst = np.empty(sizes, dtype.np)
        if self._rma is not None:
            self._rma.get(rank, off, dst)
        elif dst.nbytes:
            ctypes.memmove(dst.ctypes.data, self.buffer_ptrs[rank] + off, dst.nbytes)
        return ember.from_numpy(dst)

    def get_signal_pad(self, rank: int, sizes: Sequence[int] = (), dtype: Any = None,
                       storage_offset: int = 0) -> Any:
        """Rank ``rank``'s signal pad as a tensor (int32; the whole pad when ``sizes`` is
        empty)."""
        dtype = dtype or _dt.int32
        sizes = tuple(sizes) or (self.signal_pad_size // dtype.itemsize - storage_offset,)
        off = self._region("get_signal_pad", rank, sizes, dtype, storage_offset,
                           self.signal_pad_size)
        if self._rma is not None and rank != self.rank:
            raise _rma.no_peer_memory("get_signal_pad", rank)
        return _view(self.signal_pad_ptrs[rank] + off, sizes, dtype)

    def _timeout_ns(self, timeout_ms: int) -> int:
        if timeout_ms and timeout_ms > 0:
            return int(timeout_ms) * 1_000_000
        return int(self._pg.timeout.total_seconds() * 1e9)

    def _channel(self, op: str, channel: int) -> int:
        if not 0 <= channel < self.channels:
            raise EmberValueError(f"[symm_mem.{op}] channel {channel} is outside [0, "
                                  f"{self.channels}) (the signal pad holds "
                                  f"{self.signal_pad_size // 4} slots for {self.world_size} "
                                  "ranks)")
        return channel

    def _timed_out(self, op: str, peer: int, channel: int, timeout_ns: int) -> None:
        raise EmberRuntimeError(
            f"[symm_mem.{op}] timed out after {timeout_ns // 1_000_000} ms on channel {channel} "
            f"waiting for rank {self._pg.ranks[peer]} (group rank {peer})")

    def barrier(self, channel: int = 0, timeout_ms: int = 0) -> None:
        """Every rank of the group waits for every other; stores before it are visible to
        every rank after it.  ``timeout_ms=0``: the process group's timeout."""
        ch = self._channel("barrier", channel)
        ns = self._timeout_ns(timeout_ms)
        if self._rma is not None:
            peer = self._rma.barrier(ch, ns / 1e9)
            if peer >= 0:
                self._timed_out("barrier", peer, ch, ns)
            return
        rc = _lib("barrier").ember_symm_barrier(self._pads, self.rank, self.world_size, ch, ns)
        if rc:
            self._timed_out("barrier", -rc - 1, ch, ns)

    def _slot(self, pad_rank: int, channel: int, src: int) -> int:
        return self.signal_pad_ptrs[pad_rank] + 4 * (channel * self.world_size + src)

    def _peer(self, op: str, rank: int) -> int:
        if not 0 <= rank < self.world_size or rank == self.rank:
            raise EmberValueError(f"[symm_mem.{op}] peer rank {rank} must be another rank of "
                                  f"[0, {self.world_size})")
        return rank

    def put_signal(self, dst_rank: int, channel: int = 0, timeout_ms: int = 0) -> None:
        """Signal ``dst_rank`` (release: this rank's earlier stores are visible to it after its
        ``wait_signal``); waits while the previous signal on this channel is unconsumed."""
        dst, ch = self._peer("put_signal", dst_rank), self._channel("put_signal", channel)
        ns = self._timeout_ns(timeout_ms)
        if self._rma is not None:
            if not self._rma.signal(dst, ch, ns / 1e9):
                self._timed_out("put_signal", dst, ch, ns)
            return
        if _lib("put_signal").ember_symm_put_signal(self._slot(dst, ch, self.rank), ns):
            self._timed_out("put_signal", dst, ch, ns)

    def wait_signal(self, src_rank: int, channel: int = 0, timeout_ms: int = 0) -> None:
        """Wait for (and consume) ``src_rank``'s signal on ``channel`` (acquire)."""
        src, ch = self._peer("wait_signal", src_rank), self._channel("wait_signal", channel)
        ns = self._timeout_ns(timeout_ms)
        if self._rma is not None:
            if not self._rma.wait(src, ch, ns / 1e9):
                self._timed_out("wait_signal", src, ch, ns)
            return
        if _lib("wait_signal").ember_symm_wait_signal(self._slot(self.rank, ch, src), ns):
            self._timed_out("wait_signal", src, ch, ns)


def get_signal_pad_size() -> int:
    """Bytes of the signal pad of future allocations (PyTorch's default, 9216)."""
    return _PAD["size"]


def set_signal_pad_size(size: int) -> None:
    """Set the signal pad size (bytes, a positive multiple of 64) of future allocations.

    >>> symm_mem.set_signal_pad_size(16384)   # doctest: +SKIP
    """
    if not isinstance(size, int) or size <= 0 or size % 64:
        raise EmberValueError(f"[symm_mem.set_signal_pad_size] size must be a positive "
                              f"multiple of 64 bytes, got {size!r}")
    _PAD["size"] = size


def is_nvshmem_available() -> bool:
    """False: ember's symmetric memory is MPI shared memory, not NVSHMEM."""
    return False


def enable_symm_mem_for_group(group_name: str) -> None:
    """Accepted for PyTorch compatibility (every group can use symmetric memory)."""
    _resolve_name(group_name, "symm_mem.enable_symm_mem_for_group")


def is_symm_mem_enabled_for_group(group_name: str) -> bool:
    """True for every group of this process (symmetric memory needs no enabling)."""
    _resolve_name(group_name, "symm_mem.is_symm_mem_enabled_for_group")
    return True


def _reset() -> None:
    """Forget the heap (``destroy_process_group``): windows are freed collectively."""
    for seg in _HEAP.segments:
        if _HEAP.rma:
            _rma.free(seg.win)
        else:
            seg.win.Free()
    if _HEAP.comm is not None:
        _HEAP.comm.Free()
    _HEAP.__init__()


__all__ = ["empty", "enable_symm_mem_for_group", "get_backend", "get_signal_pad_size",
           "is_nvshmem_available", "set_backend",
           "is_symm_mem_enabled_for_group", "is_symm_mem_tensor", "rendezvous",
           "set_signal_pad_size"]

from ember.distributed import _symm_ops  # noqa: E402,F401  (registers ember.ops.symm_mem)

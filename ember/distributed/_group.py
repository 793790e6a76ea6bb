"""Process groups on MPI: the default group, ``new_group``, ``Work`` and rank bookkeeping.

MPI (``mpi4py``; ``pip install mpi4py mpich``) is the engine.  A job started by ``mpiexec`` (or
by ``python -m ember.distributed.run``, which uses it) already shares ``MPI.COMM_WORLD``; the
``env://`` variables (``RANK``, ``WORLD_SIZE``) then order the ranks and are checked against MPI.
"""

from __future__ import annotations

import atexit
import datetime
import os
import sys
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

import numpy as np

from ember import config
from ember.errors import (
    EmberNotImplementedError,
    EmberRuntimeError,
    EmberTypeError,
    EmberValueError,
)


class ReduceOp(Enum):
    """The reduction of a collective (PyTorch's names)."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"


_BACKENDS = (None, "gloo", "mpi", "cpu:gloo", "cpu:mpi")


@dataclass(eq=False)
class ProcessGroup:
    """A set of ranks with an MPI communicator; ``rank()``/``size()`` are this process's rank in
    the group and the group's size (PyTorch's ``ProcessGroup`` methods)."""

    comm: Any
    ranks: list[int]  # global ranks, in group-rank order
    backend: str
    name: str = ""
    timeout: datetime.timedelta = field(default_factory=lambda: datetime.timedelta(minutes=30))
    group_name: str = "0"  # PyTorch's registered name: "0" for the default group, then "1", ...
    check_comm: Any = None  # a duplicate of comm for the signature exchange (lazily made)
    pair: Any = None  # (check_comm, rank) of a two-rank group: the fused all_reduce's fast path
    shm: Any = None  # the all_reduce staging window of a group on one node (_shm.ShmAllReduce)

    def rank(self) -> int:
        return int(self.comm.Get_rank())

    def size(self) -> int:
        return int(self.comm.Get_size())

    def __repr__(self) -> str:
        return f"ProcessGroup(backend={self.backend!r}, ranks={self.ranks})"


class GroupMember:
    """PyTorch's markers: ``GroupMember.WORLD`` (the default group, ``None`` before init) and
    ``NON_GROUP_MEMBER`` (what ``new_group`` returns on ranks outside the new group)."""

    WORLD: ProcessGroup | None = None
    NON_GROUP_MEMBER: int = -100


class group:  # noqa: N801 (PyTorch's name: ``dist.group.WORLD``)
    WORLD: ProcessGroup | None = None


@dataclass
class _State:
    world: ProcessGroup | None = None
    groups: list[ProcessGroup] = field(default_factory=list)
    names: int = 0  # groups created so far (every rank counts, members or not)


_STATE = _State()


class Work:
    """What ``async_op=True`` returns: ``wait()`` blocks until the operation is done (and runs
    its completion, e.g. copying a received buffer into the tensor) or raises a
    ``RuntimeError`` past the group's timeout; ``is_completed()``.

    >>> work = dist.all_reduce(t, async_op=True)   # doctest: +SKIP
    >>> work.wait()                                 # doctest: +SKIP
    True
    """

    def __init__(self, request: Any = None, on_done: Callable[[], Any] | None = None,
                 result: Any = None, timeout: float | None = None, op: str = "") -> None:
        self._request = request
        self._on_done = on_done
        self._result = result
        self._timeout, self._op = timeout, op
        self._done = request is None
        if self._done and on_done is not None:
            self._result = on_done()

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        if not self._done:
            limit = timeout.total_seconds() if timeout is not None else self._timeout
            if limit is None:
                self._request.Wait()
            elif not wait_until(self._request.Test, limit):
                raise EmberRuntimeError(
                    f"[distributed.{self._op or 'wait'}] timed out after {limit:g} s waiting "
                    "for the operation to complete (a peer stopped responding)")
            self._done = True
            if self._on_done is not None:
                self._result = self._on_done()
        return True

    def is_completed(self) -> bool:
        if not self._done and self._request.Test():
            self.wait()
        return self._done

    def is_success(self) -> bool:
        return self.is_completed()

    def result(self) -> Any:
        self.wait()
        return self._result


def wait_until(test: Callable[[], Any], limit_s: float) -> bool:
    """Poll ``test()`` (an MPI ``Test``) until it is true (True) or ``limit_s`` passes (False):
    spin first (low latency), then yield the core between polls (``sched_yield``, which
    returns at once when no other process waits; ``time.sleep(0)`` would sleep the timer
    slack, ~50 us), then sleep a millisecond at a time (ranks may outnumber cores)."""
    if test():
        return True
    start = time.monotonic()
    spins = 0
    while not test():
        spins += 1
        if spins > 1000:  # MPICH's own blocking calls poll ~1000 times before yielding
            waited = time.monotonic() - start
            if waited > limit_s:
                return False
            if waited > 0.05:
                time.sleep(0.001)
            else:
                _yield()
    return True


_yield = getattr(os, "sched_yield", lambda: time.sleep(0))


# ops of the signature exchange (a signature's first entry); its length; the fused-message
# flag (the rank sent a fused all_reduce message to every peer: ember.distributed._checks) and
# the failed flag (the rank's local argument checks failed), its last two entries
OPS = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor",
       "broadcast", "reduce", "scatter", "gather", "all_to_all_single", "reduce_scatter",
       "all_to_all", "barrier")
SIG_LEN = 13
FUSED, FAILED = 11, 12
SIG_TAG = 11  # the tag of signature messages on ``check_comm``


def exchange(pg: ProcessGroup, op: str, mine: np.ndarray, known: dict | None = None,
             consumed: frozenset = frozenset()) -> np.ndarray:
    """Every rank's signature ``mine`` (rows in group-rank order), by point-to-point messages
    on a duplicate communicator, so a rank that never arrives is named after the group's
    timeout: ``[distributed.all_reduce] timed out after 30 s: rank(s) [1] did not reach
    all_reduce``.  ``known``: peers' signatures already received (by a fused all_reduce that
    met them instead of data); ``consumed``: peers whose fused message this rank received.  A
    peer that flags a fused message this rank did not receive has it drained here, so no stale
    message is left on the communicator."""
    comm, n, me = check_comm(pg), pg.size(), pg.rank()
    every = np.empty((n, SIG_LEN), np.int64)
    every[me] = mine
    if n == 1:
        return every
    from mpi4py import MPI

    if n == 2 and not known:
        return _exchange_pair(pg, op, comm, every, me, consumed)
    known = known or {}
    for r, sig in known.items():
        every[r] = sig
    peers = [r for r in range(n) if r != me]
    waiting = [r for r in peers if r not in known]
    recvs = [comm.Irecv(every[r], source=r, tag=SIG_TAG) for r in waiting]
    sends = [comm.Isend(every[me], dest=r, tag=SIG_TAG) for r in peers]
    limit = pg.timeout.total_seconds()
    if not wait_until(lambda: MPI.Request.Testall(recvs), limit):
        missing = [pg.ranks[r] for r, q in zip(waiting, recvs) if not q.Test()]
        raise EmberRuntimeError(f"[distributed.{op}] timed out after {limit:g} s: rank(s) "
                                f"{missing} did not reach {op} (dead, hung, or in another "
                                "collective)")
    MPI.Request.Waitall(sends)
    for r in peers:
        if every[r, FUSED] and r not in consumed:
            _drain(comm, r)
    return every


def wait_data(pg: ProcessGroup, op: str, request: Any) -> None:
    """Wait for a started MPI non-blocking collective (a blocking collective's data phase) at
    most the group's timeout, then raise the named timeout error: a rank that died or hung
    inside the collective never leaves the others waiting forever."""
    limit = pg.timeout.total_seconds()
    if wait_until(request.Test, limit):
        return
    tag = op if op.startswith("symm_mem.") else f"distributed.{op}"
    raise EmberRuntimeError(f"[{tag}] timed out after {limit:g} s in the data phase: "
                            f"{_suspects(pg)} did not complete {op} (dead or hung)")


def _suspects(pg: ProcessGroup) -> str:
    """The peers that sent this rank nothing since (a peer that finished the collective and
    went on has sent its next signature or data on ``check_comm``): 'rank(s) [1]'."""
    from mpi4py import MPI

    comm, me = check_comm(pg), pg.rank()
    quiet = [pg.ranks[r] for r in range(pg.size())
             if r != me and not comm.Iprobe(source=r, tag=MPI.ANY_TAG)]
    return f"rank(s) {quiet}" if quiet else "a peer"


def _exchange_pair(pg: ProcessGroup, op: str, comm: Any, every: np.ndarray, me: int,
                   consumed: frozenset) -> np.ndarray:
    """``exchange`` of a two-rank group, written out (one receive, one send, a spin)."""
    peer = 1 - me
    recv = comm.Irecv(every[peer], source=peer, tag=SIG_TAG)
    send = comm.Isend(every[me], dest=peer, tag=SIG_TAG)
    spins = 0
    while not recv.Test():
        spins += 1
        if spins > 1000:
            limit = pg.timeout.total_seconds()
            if not wait_until(recv.Test, limit):
                raise EmberRuntimeError(
                    f"[distributed.{op}] timed out after {limit:g} s: rank(s) "
                    f"{[pg.ranks[peer]]} did not reach {op} (dead, hung, or in another "
                    "collective)")
            break
    send.Wait()
    if every[peer, FUSED] and peer not in consumed:
        _drain(comm, peer)
    return every


def check_comm(pg: ProcessGroup) -> Any:
    """The group's communicator for signatures and fused all_reduce messages."""
    if pg.check_comm is None:
        pg.check_comm = pg.comm.Dup()
    return pg.check_comm


def _drain(comm: Any, src: int) -> None:
    """Receive (and drop) ``src``'s oldest pending message: its fused all_reduce data, sent
    before its signature."""
    from mpi4py import MPI

    status = MPI.Status()
    comm.Probe(source=src, tag=MPI.ANY_TAG, status=status)
    comm.Recv(np.empty(max(status.Get_count(MPI.BYTE), 1), np.uint8), source=src,
              tag=status.Get_tag())


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError:
        raise EmberNotImplementedError(
            "[distributed.init_process_group] ember.distributed is not available: it runs on "
            "MPI; install it with `pip install mpi4py mpich` (the 'distributed' extra)") from None
    return MPI


def is_available() -> bool:
    """True when MPI (``mpi4py``) can be imported."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_initialized() -> bool:
    """True between ``init_process_group`` and ``destroy_process_group``."""
    return _STATE.world is not None


def is_mpi_available() -> bool:
    return is_available()


def is_gloo_available() -> bool:
    """ember maps ``"gloo"`` onto MPI, so this answers like ``is_mpi_available``."""
    return is_available()


def is_nccl_available() -> bool:
    return False


def _env_rank_size(rank: int, world_size: int, mpi_rank: int, mpi_size: int) -> tuple[int, int]:
    env = config.dist_env()
    if rank < 0:
        rank = int(env.get("RANK", mpi_rank))
    if world_size < 0:
        world_size = int(env.get("WORLD_SIZE", mpi_size))
    if world_size != mpi_size:
        raise EmberRuntimeError(
            f"[distributed.init_process_group] world_size is {world_size} but MPI started "
            f"{mpi_size} process(es): launch the job with `python -m ember.distributed.run "
            f"--nproc-per-node {world_size} script.py` or `mpiexec -n {world_size} python "
            "script.py`, or set MASTER_ADDR and MASTER_PORT (and RANK) in every process "
            "before MPI starts (ember then joins plain processes; see docs/distributed.md)")
    if not 0 <= rank < world_size:
        raise EmberValueError(f"[distributed.init_process_group] rank {rank} is outside "
                              f"[0, {world_size})")
    return rank, world_size


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: datetime.timedelta | None = None, world_size: int = -1,
                       rank: int = -1, store: Any = None, group_name: str = "",
                       pg_options: Any = None, device_id: Any = None) -> None:
    """Create the default process group on MPI.  ``backend`` ``"mpi"``, ``"gloo"`` or ``None``
    (all run on MPI; ``get_backend()`` reports the name given, ``"undefined"`` for ``None`` as
    PyTorch does).  Ranks come from ``rank``/``world_size``, else ``RANK``/``WORLD_SIZE``, else
    MPI's own numbering; they must agree with the processes MPI started.  Plain processes
    (``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT``, no mpiexec) are joined into one
    MPI world first (``ember.distributed._pmi``).

    >>> dist.init_process_group("gloo")   # run under mpiexec -n 2 # doctest: +SKIP
    >>> dist.get_world_size()             # doctest: +SKIP
    2
    """
    op = "distributed.init_process_group"
    if _STATE.world is not None:
        raise EmberValueError(f"[{op}] trying to initialize the default process group twice!")
    if backend not in _BACKENDS:
        if str(backend).lower() == "nccl":
            raise EmberRuntimeError(f"[{op}] Distributed package doesn't have NCCL built in")
        raise EmberValueError(f"[{op}] unknown backend {backend!r}; ember runs 'mpi', and "
                              "'gloo' (or None) on MPI")
    if init_method not in (None, "env://") and not str(init_method).startswith(("tcp://",
                                                                                  "file://")):
        raise EmberValueError(f"[{op}] unsupported init_method {init_method!r}")
    _join_plain(init_method, rank, world_size, timeout)
    MPI = _mpi()  # noqa: N806 (mpi4py's name)
    world = MPI.COMM_WORLD
    rank, world_size = _env_rank_size(rank, world_size, world.Get_rank(), world.Get_size())
    comm = world.Split(0, rank)
    ranks = list(range(world_size))
    name = "undefined" if backend is None else backend
    pg = ProcessGroup(comm, ranks, name, group_name or "default_pg",
                      timeout or datetime.timedelta(minutes=30))
    _STATE.world, _STATE.names = pg, 1
    pg.shm = _attach_shm(pg)
    run_dir = config.dist_env().get("EMBER_RUN_DIR")
    if run_dir:  # the launcher names a rank that dies by its pid
        path = os.path.join(run_dir, f"rank{rank}.pid")
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(path + ".tmp", path)  # the launcher never reads half a file
        atexit.register(_mark_done, os.path.join(run_dir, f"rank{rank}.done"))
    GroupMember.WORLD = group.WORLD = pg


def _join_plain(init_method: str | None, rank: int, world_size: int,
                timeout: datetime.timedelta | None) -> None:
    """Plain processes (``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT``, no mpiexec):
    join them into one MPI world through ember's PMI server (``_pmi``) before MPI starts."""
    env = config.dist_env()
    size = world_size if world_size > 0 else int(env.get("WORLD_SIZE", "1"))
    from ember.distributed import _pmi

    if not is_available() or not _pmi.needed(size):
        return
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if init_method and init_method.startswith("tcp://"):
        addr, _, port = init_method[len("tcp://"):].rpartition(":")
    if not addr or not port:
        return  # init_process_group then says how to launch the ranks
    me = rank if rank >= 0 else int(env.get("RANK", "0"))
    _pmi.join(me, size, addr.strip("[]"), int(port), timeout or datetime.timedelta(minutes=30))


def _resolve_name(group: Any, op: str) -> ProcessGroup:
    """A ``ProcessGroup`` or a group name (``pg.group_name``, PyTorch's ``str group_name``)."""
    if isinstance(group, str):
        world = _world(op)
        for pg in [world, *_STATE.groups]:
            if pg.group_name == group and pg.comm is not None:
                return pg
        raise EmberValueError(f"[distributed.{op}] no process group named {group!r} on this "
                              "rank (the default group is '0')")
    return _resolve(group, op)


def _mark_done(path: str) -> None:
    """A normal exit (the launcher's watcher then does not count this rank as dead)."""
    try:
        with open(path, "w"):
            pass
    except OSError:
        pass


def _world(op: str) -> ProcessGroup:
    if _STATE.world is None:
        raise EmberValueError(f"[distributed.{op}] Default process group has not been "
                              "initialized, please make sure to call init_process_group.")
    return _STATE.world


def _resolve(grp: Any, op: str) -> ProcessGroup:
    world = _world(op)
    if grp is None:
        return world
    if isinstance(grp, ProcessGroup):
        if grp.comm is None:
            raise EmberRuntimeError(f"[distributed.{op}] the group was destroyed")
        return grp
    if grp == GroupMember.NON_GROUP_MEMBER:
        raise EmberValueError(f"[distributed.{op}] this rank is not a member of the group")
    raise EmberTypeError(f"[distributed.{op}] expected a ProcessGroup, got {type(grp).__name__}")


def new_group(ranks: list[int] | None = None, timeout: datetime.timedelta | None = None,
              backend: str | None = None, pg_options: Any = None,
              use_local_synchronization: bool = False, group_desc: str | None = None,
              device_id: Any = None) -> ProcessGroup | int:
    """A group of the given global ``ranks`` (every rank of the default group must call it,
    as in PyTorch); ranks outside it get ``GroupMember.NON_GROUP_MEMBER``.

    >>> sub = dist.new_group([0, 1])   # doctest: +SKIP
    """
    world = _world("new_group")
    ranks = list(range(world.size())) if ranks is None else sorted(int(r) for r in ranks)
    if len(set(ranks)) != len(ranks) or any(not 0 <= r < world.size() for r in ranks):
        raise EmberValueError(f"[distributed.new_group] ranks {ranks} must be distinct ranks "
                              f"of the default group [0, {world.size()})")
    me = world.rank()
    MPI = _mpi()  # noqa: N806
    color = 0 if me in ranks else MPI.UNDEFINED
    comm = world.comm.Split(color, ranks.index(me) if me in ranks else 0)
    name = str(_STATE.names)
    _STATE.names += 1
    if me not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(comm, ranks, backend or world.backend, group_desc or "",
                      timeout or world.timeout, name)
    pg.shm = _attach_shm(pg)
    _STATE.groups.append(pg)
    return pg


def _attach_shm(pg: ProcessGroup) -> Any:
    """The group's all_reduce staging window (collective over the group; None when its ranks
    span nodes or it is turned off)."""
    from ember.distributed import _shm

    return _shm.attach(pg)


def destroy_process_group(group: Any = None) -> None:
    """Free ``group`` (or every group and the default one, when ``None``)."""
    world = _world("destroy_process_group")
    targets = [world, *_STATE.groups] if group is None else [_resolve(group, "destroy")]
    if group is None or group is world:
        symm = sys.modules.get("ember.distributed._symmetric_memory")
        if symm is not None:
            symm._reset()  # its windows are collective over the node, like this call
    for pg in targets:
        if pg.shm is not None:
            pg.shm.free()
            pg.shm = None
        if pg.check_comm is not None:
            pg.check_comm.Free()
            pg.check_comm = pg.pair = None
        if pg.comm is not None:
            pg.comm.Free()
            pg.comm = None
    if group is None or group is world:
        _STATE.world = None
        _STATE.groups.clear()
        GroupMember.WORLD = globals()["group"].WORLD = None


def get_rank(group: Any = None) -> int:
    """This process's rank in ``group`` (the default group when ``None``); -1 outside it."""
    if group == GroupMember.NON_GROUP_MEMBER and not isinstance(group, ProcessGroup):
        _world("get_rank")
        return -1
    return _resolve(group, "get_rank").rank()


def get_world_size(group: Any = None) -> int:
    """The number of ranks in ``group``; -1 on a rank outside it."""
    if group == GroupMember.NON_GROUP_MEMBER and not isinstance(group, ProcessGroup):
        _world("get_world_size")
        return -1
    return _resolve(group, "get_world_size").size()


def get_backend(group: Any = None) -> str:
    """The backend name given to ``init_process_group`` (or ``new_group``)."""
    return _resolve(group, "get_backend").backend


def get_global_rank(group: Any, group_rank: int) -> int:
    return _resolve(group, "get_global_rank").ranks[group_rank]


def get_group_rank(group: Any, global_rank: int) -> int:
    pg = _resolve(group, "get_group_rank")
    if global_rank not in pg.ranks:
        raise EmberValueError(f"[distributed.get_group_rank] global rank {global_rank} is not "
                              "part of the group")
    return pg.ranks.index(global_rank)


def get_process_group_ranks(group: Any) -> list[int]:
    return list(_resolve(group, "get_process_group_ranks").ranks)


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> Work | None:
    """Wait until every rank of ``group`` reaches the barrier."""
    pg = _resolve(group, "barrier")
    if async_op:
        return Work(pg.comm.Ibarrier(), timeout=pg.timeout.total_seconds(), op="barrier")
    sig = np.full(SIG_LEN, -1, np.int64)
    sig[0], sig[FUSED], sig[FAILED] = OPS.index("barrier"), 0, 0
    every = exchange(pg, "barrier", sig)  # names a rank that never arrives
    if (every[:, 0] != sig[0]).any():  # a peer in another collective
        others = [f"rank {pg.ranks[r]}: {OPS[s[0]]}" for r, s in enumerate(every)]
        raise EmberRuntimeError("[distributed.barrier] the ranks called different collectives: "
                                + "; ".join(others))
    return None

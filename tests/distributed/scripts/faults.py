"""Fault injection: ``kill`` (rank 1 is killed by SIGKILL after one all-reduce) or ``hang``
(rank 1 never reaches the second all-reduce); ``data-kill`` / ``data-hang``: rank 1 dies or
hangs inside the data phase of a ``reduce`` (after the signature exchange: it never posts its
part); ``object-hang``: rank 1 never reaches an ``all_gather_object``.  The group's timeout is
3 s."""

import datetime
import os
import signal
import sys
import time

import ember
import ember.distributed as dist


class _Stuck:
    """Rank 1's communicator in the data-phase modes: its ``Igather`` never posts."""

    def __init__(self, comm, kill: bool) -> None:
        self._comm, self._kill = comm, kill

    def Igather(self, *args, **kwargs):  # noqa: N802 (MPI's name)
        if self._kill:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)

    def __getattr__(self, name):
        return getattr(self._comm, name)


mode = sys.argv[1]
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
r = dist.get_rank()
t = ember.ones(4)
dist.all_reduce(t)
print(f"rank {r} first all_reduce {t.tolist()}", flush=True)
if mode.startswith("data-"):
    if r == 1:
        dist.group.WORLD.comm = _Stuck(dist.group.WORLD.comm, mode == "data-kill")
    dist.reduce(t, dst=0)  # rank 0 waits in the data phase; the timeout names rank 1
    print(f"rank {r} unreachable", flush=True)
    sys.exit(0)
if r == 1:
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # hang: alive, but never joins
if mode == "object-hang":
    dist.all_gather_object([None, None], {"rank": r})
else:
    dist.all_reduce(t)  # rank 0 waits here; the timeout names rank 1
print(f"rank {r} unreachable", flush=True)

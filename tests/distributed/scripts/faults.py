"""Fault injection: ``kill`` (rank 1 is killed by SIGKILL after one all-reduce) or ``hang``
(rank 1 never reaches the second all-reduce); the group's timeout is 3 s."""

import datetime
import os
import signal
import sys
import time

import ember
import ember.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
r = dist.get_rank()
t = ember.ones(4)
dist.all_reduce(t)
print(f"rank {r} first all_reduce {t.tolist()}", flush=True)
if r == 1:
    if sys.argv[1] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # hang: alive, but never joins
dist.all_reduce(t)  # rank 0 waits here; the timeout names rank 1
print(f"rank {r} unreachable", flush=True)

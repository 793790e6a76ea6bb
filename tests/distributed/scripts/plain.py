"""A rank started as a plain process (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, no mpiexec):
ember joins the processes into one MPI world; prints the rank's results (timeout: argv[1] s)."""

import datetime
import sys

import ember
import ember.distributed as dist

try:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(sys.argv[1])))
except RuntimeError as e:
    print("ERROR", e, flush=True)
    raise SystemExit(0) from None
r, n = dist.get_rank(), dist.get_world_size()
t = ember.full((3,), float(r + 1))
dist.all_reduce(t)
big = ember.ones(20000)
dist.all_reduce(big)
objs = [None] * n
dist.all_gather_object(objs, {"rank": r})
print("PLAIN", r, n, t.tolist(), float(big[0]), objs, flush=True)
dist.destroy_process_group()

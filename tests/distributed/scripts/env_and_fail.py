"""Writes torchrun's variables and the args to OUT/rank<r>.txt (OUT is the first argument);
with --fail, rank 1 exits with status 3."""

import os
import sys

import ember.distributed as dist

dist.init_process_group()
keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
with open(f"{sys.argv[1]}/rank{dist.get_rank()}.txt", "w") as f:
    print(dist.get_rank(), dist.get_backend(), *(os.environ[k] for k in keys), *sys.argv[2:],
          file=f)
if "--fail" in sys.argv and dist.get_rank() == 1:
    raise SystemExit(3)
dist.barrier()  # rank 0 would wait here forever if the launcher did not end the job

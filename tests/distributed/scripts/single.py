"""Without a launcher: a world of one process; with WORLD_SIZE=2 a clear error."""

import ember
import ember.distributed as dist

try:
    dist.init_process_group("gloo")
except RuntimeError as e:
    print("ERROR", e)
    raise SystemExit(0) from None
t = ember.tensor([2.0, 3.0])
dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
print("ONE", dist.get_rank(), dist.get_world_size(), dist.get_backend(), t.tolist())
try:
    dist.init_process_group("gloo")
except ValueError as e:
    print("TWICE", e)
dist.destroy_process_group()
dist.init_process_group("mpi")  # a destroyed group can be created again
print("AGAIN", dist.get_backend())

"""all_reduce's cross-rank checks on N ranks: the fused small path (data and signature in one
message round) and the checked large path, mismatches between them and with other
collectives, and the group still working after each error.  The last rank is the odd one out.
Each rank writes "name: value" lines to OUT/rank<r>.txt."""

import sys

import numpy as np

import ember
import ember.distributed as dist
from ember.distributed import ReduceOp

LINES: list = []


def report(name: str, value: object) -> None:
    LINES.append(f"{name}: {value}")


def error_of(fn) -> str:
    try:
        fn()
    except Exception as e:  # the test checks type and message
        return f"{type(e).__name__}: {e}"
    return "no error"


def works() -> str:
    """A fused and a checked all_reduce after an error: the group is still consistent."""
    n = dist.get_world_size()
    small, big = ember.ones(3), ember.ones(10000)
    dist.all_reduce(small)
    dist.all_reduce(big)
    return str((small.tolist(), float(big[0]), float(big[-1]))) if \
        small.tolist() == [float(n)] * 3 else f"wrong sum {small.tolist()}"


def main(out: str) -> None:
    dist.init_process_group("gloo")
    r, n = dist.get_rank(), dist.get_world_size()
    odd = r == n - 1
    report("has_shm", dist.group.WORLD.shm is not None)
    # results: every dtype goes through the fused path in other tests; here the values of a
    # 3-rank rank-order sum that float32 rounding makes order-dependent
    x = ember.tensor(np.array([1e8, 1.0, -1e8][r % 3] * np.ones(4), np.float32))
    dist.all_reduce(x)
    report("order_sum", x.tolist())
    w = dist.all_reduce(ember.full((3,), float(r)), op=ReduceOp.MAX, async_op=True)
    report("async_fused", (w.wait(), w.is_completed()))
    t = ember.arange(6.0).reshape(2, 3) + r
    dist.all_reduce(t, op=ReduceOp.AVG)
    report("avg", t.tolist())
    # mismatches on the fused path: shape, dtype, reduce op, a bigger message (cut off)
    report("shape", error_of(lambda: dist.all_reduce(ember.ones(3 if odd else 2))))
    report("after_shape", works())
    report("dtype", error_of(lambda: dist.all_reduce(
        ember.ones(2, dtype=ember.int32 if odd else ember.float32))))
    report("redop", error_of(lambda: dist.all_reduce(
        ember.ones(2), op=ReduceOp.MAX if odd else ReduceOp.SUM)))
    report("truncated", error_of(lambda: dist.all_reduce(ember.ones(3000 if odd else 2))))
    report("after_truncated", works())
    # fused on some ranks, checked (large) on the others
    report("fused_vs_checked", error_of(lambda: dist.all_reduce(ember.ones(10000 if odd else 4))))
    report("after_mixed", works())
    # fused all_reduce against another collective and against a barrier
    report("vs_all_gather", error_of(
        lambda: dist.all_gather([ember.zeros(2) for _ in range(n)], ember.ones(2)) if odd
        else dist.all_reduce(ember.ones(2))))
    report("after_vs_all_gather", works())
    report("vs_barrier", error_of(lambda: dist.barrier() if odd else
                                  dist.all_reduce(ember.ones(2))))
    report("after_vs_barrier", works())
    report("local_error", error_of(lambda: dist.all_reduce(
        ember.ones(2, dtype=ember.int32), op=ReduceOp.AVG if odd else ReduceOp.SUM)))
    report("after_local", works())
    with open(f"{out}/rank{r}.txt", "w") as f:
        f.write("\n".join(LINES) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])

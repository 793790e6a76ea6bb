"""Every collective on every dtype; each rank saves its results to OUT/rank<r>.npz."""

import sys

import numpy as np

import ember
import ember.distributed as dist
from ember.distributed import ReduceOp

DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"]


def make(dtype: str, rank: int, shape=(2, 3)) -> ember.Tensor:
    """Rank ``rank``'s input: small values so products and sums stay exact."""
    base = (np.arange(int(np.prod(shape))).reshape(shape) % 3) + rank + 1
    if dtype == "bool":
        return ember.tensor(base % 2 == 0)
    return ember.tensor(base.astype(np.float32 if dtype in ("float16", "bfloat16") else dtype),
                        dtype=getattr(ember, dtype))


def save(res: dict, key: str, t: ember.Tensor) -> None:
    a = t.numpy()
    res[key] = a.astype(np.float32) if t.dtype in (ember.float16, ember.bfloat16) else a


def main(out: str) -> None:
    dist.init_process_group("gloo")
    r, n = dist.get_rank(), dist.get_world_size()
    res: dict = {}
    for dt in DTYPES:
        ops = ["SUM", "PRODUCT", "MIN", "MAX"]
        ops += ["AVG"] if dt.startswith(("float", "bfloat")) else ["BAND", "BOR", "BXOR"]
        for op in ops:
            t = make(dt, r)
            work = dist.all_reduce(t, op=getattr(ReduceOp, op), async_op=(op == "SUM"))
            if work is not None:
                assert work.wait() is True and work.is_completed()
            save(res, f"all_reduce-{op}-{dt}", t)
        outs = [ember.zeros(2, 3, dtype=getattr(ember, dt)) for _ in range(n)]
        dist.all_gather(outs, make(dt, r))
        save(res, f"all_gather-{dt}", ember.stack(outs))
        big = ember.zeros(2 * n, 3, dtype=getattr(ember, dt))
        dist.all_gather_into_tensor(big, make(dt, r))
        save(res, f"all_gather_into_tensor-{dt}", big)
        t = make(dt, r)
        dist.broadcast(t, src=1)
        save(res, f"broadcast-{dt}", t)
    # reduce_scatter_tensor, reduce, scatter, gather, all_to_all_single (float32 and bfloat16)
    for dt in ("float32", "bfloat16", "int64"):
        small = ember.zeros(2, 3, dtype=getattr(ember, dt))
        dist.reduce_scatter_tensor(small, make(dt, r, (2 * n, 3)))
        save(res, f"reduce_scatter_tensor-{dt}", small)
        t = make(dt, r)
        dist.reduce(t, dst=0, op=ReduceOp.MAX)
        save(res, f"reduce-{dt}", t)
        t = ember.zeros(2, 3, dtype=getattr(ember, dt))
        parts = [make(dt, 10 + i) for i in range(n)] if r == 0 else None
        dist.scatter(t, parts, src=0)
        save(res, f"scatter-{dt}", t)
        gl = [ember.zeros(2, 3, dtype=getattr(ember, dt)) for _ in range(n)] if r == 1 else None
        dist.gather(make(dt, r), gl, dst=1)
        if r == 1:
            save(res, f"gather-{dt}", ember.stack(gl))
        o = ember.zeros(2 * n, 3, dtype=getattr(ember, dt))
        dist.all_to_all_single(o, make(dt, r, (2 * n, 3)))
        save(res, f"all_to_all_single-{dt}", o)
    np.savez(f"{out}/rank{r}.npz", **res)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])

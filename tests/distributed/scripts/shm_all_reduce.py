"""all_reduce through the shared-memory staging window (ember.distributed._shm) on N ranks:
every reduce op on every dtype, contiguous, strided and multi-block tensors, async rounds in
flight together, and a tensor above the window's size; each rank saves OUT/rank<r>.npz."""

import datetime
import sys
import time

import ml_dtypes
import numpy as np

import ember
import ember.distributed as dist
from ember.distributed import ReduceOp

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32",
          "int64", "bool"]
SHAPES = {"small": (2, 3), "block": (3, 700)}  # 700 * 3: several of the kernel's blocks


def ops_of(dt: str) -> list:
    extra = ["AVG"] if dt.startswith(("float", "bfloat")) else ["BAND", "BOR", "BXOR"]
    return ["SUM", "PRODUCT", "MIN", "MAX", *extra]


def make(dt: str, rank: int, shape: tuple) -> np.ndarray:
    """Rank ``rank``'s input as NumPy (bfloat16 as float32): products overflow the integer
    types (they must wrap as NumPy's do), floats hold a NaN and signed values."""
    g = np.random.default_rng(1000 * rank + len(shape) + shape[-1])
    if dt == "bool":
        return g.random(shape) < 0.5
    if dt.startswith(("float", "bfloat")):
        a = g.uniform(-4, 4, shape).astype(np.float32)
        a.reshape(-1)[rank] = np.nan  # MIN/MAX propagate it; each rank's NaN sits elsewhere
        if dt == "bfloat16":  # the values a bfloat16 tensor holds
            return a.astype(ml_dtypes.bfloat16).astype(np.float32)
        return a if dt == "float32" else a.astype(dt)
    info = np.iinfo(dt)
    return g.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True,
                      dtype=dt) if info.min < 0 else g.integers(0, 255, shape, dtype=dt)


def tensor(dt: str, a: np.ndarray) -> ember.Tensor:
    return ember.tensor(a, dtype=getattr(ember, dt))


def save(res: dict, key: str, t: ember.Tensor) -> None:
    a = t.numpy()
    res[key] = a.astype(np.float32) if t.dtype == ember.bfloat16 else a


def main(out: str) -> None:
    dist.init_process_group("gloo")
    r = dist.get_rank()
    res: dict = {"has_shm": np.array(dist.group.WORLD.shm is not None)}
    for dt in DTYPES:
        for name, shape in SHAPES.items():
            for op in ops_of(dt):
                t = tensor(dt, make(dt, r, shape))
                dist.all_reduce(t, op=getattr(ReduceOp, op))
                save(res, f"{name}-{op}-{dt}", t)
        # a strided view (the window takes a contiguous copy and writes the result back)
        base = tensor(dt, make(dt, r, (3, 4)))
        view = base.t()
        dist.all_reduce(view, op=ReduceOp.MAX)
        save(res, f"strided-MAX-{dt}", base)
    # async rounds in flight together (more than the window's two slots), waited out of order,
    # with a blocking round among them
    ts = [ember.full((5,), float(r + i)) for i in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in ts[:3]]
    dist.all_reduce(ts[3])
    for w in reversed(works):
        assert w.wait() is True and w.is_completed()
    res["async"] = np.stack([t.numpy() for t in ts])
    # a mismatch in an async round is raised by wait() on every rank; the group goes on
    odd = r == dist.get_world_size() - 1
    w = dist.all_reduce(ember.ones(3 if odd else 2), async_op=True)
    try:
        w.wait()
        res["async_mismatch"] = np.array("no error")
    except RuntimeError as e:
        res["async_mismatch"] = np.array(f"{type(e).__name__}: {e}")
    t = ember.ones(2)
    dist.all_reduce(t)
    res["after_async_mismatch"] = t.numpy()
    # an async round facing a peer in another collective: both raise, no wait for the timeout
    try:
        if odd:
            dist.all_gather([ember.zeros(2) for _ in range(dist.get_world_size())],
                            ember.ones(2))
        else:
            dist.all_reduce(ember.ones(2), async_op=True).wait()
        res["async_vs_all_gather"] = np.array("no error")
    except RuntimeError as e:
        res["async_vs_all_gather"] = np.array(f"{type(e).__name__}: {e}")
    t = ember.ones(2)
    dist.all_reduce(t)
    res["after_async_vs_all_gather"] = t.numpy()
    # above the window's size: the checked MPI path
    big = ember.full((dist.group.WORLD.shm.cap // 4 + 1,), float(r + 1))
    dist.all_reduce(big)
    res["big"] = big.numpy()[[0, -1]]
    # a subgroup of ranks 0 and 1 has its own window and round counter
    sub = dist.new_group([0, 1])
    if r < 2:
        t = ember.full((3,), float(r + 1))
        dist.all_reduce(t, group=sub)
        res["sub"] = t.numpy()
    # a rank that never arrives is named after the group's timeout; the group goes on
    quick = dist.new_group(list(range(dist.get_world_size())),
                           timeout=datetime.timedelta(seconds=1))
    if odd:
        time.sleep(4)  # past the others' timeout
        res["timeout"] = np.array("skipped")
    else:
        try:
            dist.all_reduce(ember.ones(2), group=quick)
            res["timeout"] = np.array("no error")
        except RuntimeError as e:
            res["timeout"] = np.array(f"{type(e).__name__}: {e}")
    dist.barrier()
    t = ember.ones(2)
    dist.all_reduce(t, group=quick)
    res["after_timeout"] = t.numpy()
    dist.barrier()
    np.savez(f"{out}/rank{r}.npz", **res)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])

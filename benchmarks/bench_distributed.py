"""ember.distributed on 2 ranks: all_reduce vs mpi4py and torch gloo, one_shot_all_reduce
latency, DDP step overhead.  Run under the launcher (each rank runs this file):

    PYTHONPATH=$PWD python -m ember.distributed.run --nproc-per-node 2 \\
        benchmarks/bench_distributed.py [--quick]

Rank 0 prints Markdown tables.  Each repetition starts after a barrier; every rank times the
same loop and the slower rank's best time (``--median``: median) is reported.  torch's gloo
group is initialized from the launcher's env:// variables.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import numpy as np

import ember
import ember.distributed as dist
import ember.distributed._symmetric_memory as symm_mem
from ember.distributed._checks import FUSED_MAX_BYTES

BEST = True
SIZES = [4 << 10, 16 << 10, 32 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]  # float32 bytes


def _fmt(s: float) -> str:
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def timeit(fns: list[Callable[[], Any]], reps: int,
           barrier: Callable[[], Any]) -> list[float]:
    """The slower rank's best time of each of ``fns``, interleaved (every repetition runs each
    function once, after a barrier, so all see the same machine load).  On a loaded machine
    the median mostly measures how long the ranks wait for a core, so the best time is the
    default."""
    for fn in fns:
        fn()
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, ts in zip(fns, times):
            barrier()
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    stat = np.array([min(ts) if BEST else statistics.median(ts) for ts in times])
    t = ember.from_numpy(stat)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [float(v) for v in t.tolist()]


def _reps(nbytes: int, quick: bool) -> int:
    base = 1000 if nbytes <= 64 << 10 else 100 if nbytes <= 1 << 20 else 10
    return max(3, base // 10) if quick else base


def bench_all_reduce(quick: bool) -> list[tuple]:
    """mpi4py and ember interleaved; torch's gloo afterwards (its threads would disturb the
    others' timings on a 2-core machine)."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rows = []
    for nbytes in SIZES:
        n = nbytes // 4
        a = np.ones(n, np.float32)
        t = ember.ones(n)
        t_mpi, t_ember = timeit([lambda a=a: comm.Allreduce(MPI.IN_PLACE, a),
                                 lambda t=t: dist.all_reduce(t)], _reps(nbytes, quick),
                                comm.Barrier)
        rows.append([nbytes, t_mpi, t_ember])
    import torch
    import torch.distributed as tdist

    torch.set_num_threads(1)
    tdist.init_process_group("gloo")
    for row in rows:
        tt = torch.ones(row[0] // 4)
        row += timeit([lambda tt=tt: tdist.all_reduce(tt)], _reps(row[0], quick), comm.Barrier)
    tdist.destroy_process_group()
    return [tuple(r) for r in rows]


def bench_one_shot(quick: bool) -> tuple[float, float, float]:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    n = 1024  # 4 KiB of float32
    x = symm_mem.empty(n, dtype=ember.float32)
    x.fill_(1.0)
    symm_mem.rendezvous(x, dist.group.WORLD)
    out = ember.empty(n)
    a = np.ones(n, np.float32)
    sm = ember.ops.symm_mem
    fns = [lambda: comm.Allreduce(MPI.IN_PLACE, a),
           lambda: sm.one_shot_all_reduce_out(x, "sum", "0", out),
           lambda: sm.two_shot_all_reduce_(x, "sum", "0")]
    per_call = timeit(fns, 200 if quick else 3000, comm.Barrier)
    return tuple(per_call) + tuple(latency_blocks(fns, 10 if quick else 40, 100, comm.Barrier))


def latency_blocks(fns: list[Callable[[], Any]], blocks: int, calls: int,
                   barrier: Callable[[], Any]) -> list[float]:
    """Latency as the OSU micro-benchmarks measure it: ``calls`` back-to-back calls after one
    barrier, the block's time over ``calls``; the slower rank's median over ``blocks`` blocks,
    the functions interleaved block by block.  (``timeit``'s barrier before every call adds the
    ranks' exit skew from that barrier to every call, which shrinks the ratio between a fast and
    a slow collective toward 1.)"""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(blocks):
        for fn, ts in zip(fns, times):
            barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            ts.append((time.perf_counter() - t0) / calls)
    t = ember.from_numpy(np.array([statistics.median(ts) for ts in times]))
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [float(v) for v in t.tolist()]


def bench_ddp(quick: bool) -> tuple[float, float]:
    """A char-GPT training step (the demo's model, 16 windows of 64 per rank) with and without
    DDP, both timed while both ranks run (the same CPU contention)."""
    from mpi4py import MPI

    import ember.nn.functional as F
    from ember.demo import CharGPT
    from ember.nn.parallel import DistributedDataParallel

    comm = MPI.COMM_WORLD
    ember.manual_seed(0)
    vocab, block, batch = 96, 64, 16
    x = ember.randint(0, vocab, (batch, block))
    y = ember.randint(0, vocab, (batch, block))

    def make_step(model: Any) -> Callable[[], None]:
        opt = ember.optim.AdamW(model.parameters(), lr=1e-3)

        def step() -> None:
            loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        return step

    plain, ddp = timeit([make_step(CharGPT(vocab, block=block)),
                         make_step(DistributedDataParallel(CharGPT(vocab, block=block)))],
                        5 if quick else 20, comm.Barrier)
    return plain, ddp


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--median", action="store_true", help="report medians, not best times")
    a = ap.parse_args()
    global BEST
    BEST = not a.median
    dist.init_process_group("gloo")
    one = bench_one_shot(a.quick)
    rows = bench_all_reduce(a.quick)
    ddp = bench_ddp(a.quick)
    if dist.get_rank() == 0:
        print(f"all_reduce (float32 SUM), {dist.get_world_size()} ranks\n")
        print("| size | mpi4py Allreduce | ember all_reduce | torch gloo all_reduce "
              "| ember / mpi4py | ember / gloo |")
        print("|---|---|---|---|---|---|")
        for nbytes, t_mpi, t_ember, t_gloo in rows:
            size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
            shm = dist.group.WORLD.shm
            size += (" (shm)" if shm is not None and nbytes <= shm.cap else
                     " (fused)" if shm is None and nbytes <= FUSED_MAX_BYTES else "")
            print(f"| {size} | {_fmt(t_mpi)} | {_fmt(t_ember)} | {_fmt(t_gloo)} | "
                  f"{t_ember / t_mpi:.2f} | {t_ember / t_gloo:.2f} |")
        print("\n| 4 KiB | MPI Allreduce | one_shot_all_reduce_out | two_shot_all_reduce_ "
              "| one_shot / MPI |")
        print("|---|---|---|---|---|")
        for how, (t_mpi, t_one, t_two) in (("per call, after a barrier", one[:3]),
                                           ("back-to-back blocks of 100 (OSU)", one[3:])):
            print(f"| {how} | {_fmt(t_mpi)} | {_fmt(t_one)} | {_fmt(t_two)} | "
                  f"{t_one / t_mpi:.2f} |")
        plain, with_ddp = ddp
        print("\n| char-GPT step (16x64 per rank) | no DDP | DDP | DDP / no DDP |")
        print("|---|---|---|---|")
        print(f"| time | {_fmt(plain)} | {_fmt(with_ddp)} | {with_ddp / plain:.2f} |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

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

BEST = True
SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]  # bytes of float32


def _fmt(s: float) -> str:
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def timeit(fn: Callable[[], Any], reps: int, barrier: Callable[[], Any]) -> float:
    """The slower rank's best time of ``fn`` (after 2 warm-up calls; on a loaded machine the
    median mostly measures how long the ranks wait for a core, so the best time is reported)."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        barrier()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    med = np.array([min(times) if BEST else statistics.median(times)])
    dist.all_reduce(med_t := ember.from_numpy(med), op=dist.ReduceOp.MAX)
    return float(med_t.item())


def _reps(nbytes: int, quick: bool) -> int:
    base = 200 if nbytes <= 64 << 10 else 30 if nbytes <= 1 << 20 else 8
    return max(3, base // 4) if quick else base


def bench_all_reduce(quick: bool) -> list[tuple]:
    import torch
    import torch.distributed as tdist
    from mpi4py import MPI

    tdist.init_process_group("gloo")
    comm = MPI.COMM_WORLD
    rows = []
    for nbytes in SIZES:
        n = nbytes // 4
        a = np.ones(n, np.float32)
        t = ember.ones(n)
        tt = torch.ones(n)
        reps = _reps(nbytes, quick)
        t_mpi = timeit(lambda a=a: comm.Allreduce(MPI.IN_PLACE, a), reps, comm.Barrier)
        t_ember = timeit(lambda t=t: dist.all_reduce(t), reps, comm.Barrier)
        t_gloo = timeit(lambda tt=tt: tdist.all_reduce(tt), reps, comm.Barrier)
        rows.append((nbytes, t_mpi, t_ember, t_gloo))
    tdist.destroy_process_group()
    return rows


def bench_one_shot(quick: bool) -> tuple[float, float, float]:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    n = 1024  # 4 KiB of float32
    x = symm_mem.empty(n, dtype=ember.float32)
    x.fill_(1.0)
    symm_mem.rendezvous(x, dist.group.WORLD)
    out = ember.empty(n)
    a = np.ones(n, np.float32)
    reps = 100 if quick else 500
    t_mpi = timeit(lambda: comm.Allreduce(MPI.IN_PLACE, a), reps, comm.Barrier)
    sm = ember.ops.symm_mem
    t_one = timeit(lambda: sm.one_shot_all_reduce_out(x, "sum", "0", out), reps, comm.Barrier)
    t_two = timeit(lambda: sm.two_shot_all_reduce_(x, "sum", "0"), reps, comm.Barrier)
    return t_mpi, t_one, t_two


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

    reps = 5 if quick else 20
    plain = timeit(make_step(CharGPT(vocab, block=block)), reps, comm.Barrier)
    ddp = timeit(make_step(DistributedDataParallel(CharGPT(vocab, block=block))), reps,
                 comm.Barrier)
    return plain, ddp


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--median", action="store_true", help="report medians, not best times")
    a = ap.parse_args()
    global BEST
    BEST = not a.median
    dist.init_process_group("gloo")
    rows = bench_all_reduce(a.quick)
    one = bench_one_shot(a.quick)
    ddp = bench_ddp(a.quick)
    if dist.get_rank() == 0:
        print(f"all_reduce (float32 SUM), {dist.get_world_size()} ranks\n")
        print("| size | mpi4py Allreduce | ember all_reduce | torch gloo all_reduce "
              "| ember / mpi4py | ember / gloo |")
        print("|---|---|---|---|---|---|")
        for nbytes, t_mpi, t_ember, t_gloo in rows:
            size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
            print(f"| {size} | {_fmt(t_mpi)} | {_fmt(t_ember)} | {_fmt(t_gloo)} | "
                  f"{t_ember / t_mpi:.2f} | {t_ember / t_gloo:.2f} |")
        t_mpi, t_one, t_two = one
        print("\n| 4 KiB | MPI Allreduce | one_shot_all_reduce_out | two_shot_all_reduce_ "
              "| one_shot / MPI |")
        print("|---|---|---|---|---|")
        print(f"| latency | {_fmt(t_mpi)} | {_fmt(t_one)} | {_fmt(t_two)} | "
              f"{t_one / t_mpi:.2f} |")
        plain, with_ddp = ddp
        print("\n| char-GPT step (16x64 per rank) | no DDP | DDP | DDP / no DDP |")
        print("|---|---|---|---|")
        print(f"| time | {_fmt(plain)} | {_fmt(with_ddp)} | {with_ddp / plain:.2f} |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""send/recv, isend/irecv, new_group, barrier, and the cross-rank errors; each rank writes one
line per check ("R<rank> name: value") to OUT/rank<r>.txt for the test to read."""

import sys
import time

import ember
import ember.distributed as dist

LINES: list = []


def report(name: str, value: object) -> None:
    LINES.append(f"R{dist.get_rank()} {name}: {value}")


def error_of(fn) -> str:
    try:
        fn()
    except Exception as e:  # the test checks type and message
        return f"{type(e).__name__}: {e}"
    return "no error"


def main() -> None:
    dist.init_process_group("mpi")
    r = dist.get_rank()
    report("backend", dist.get_backend())
    report("initialized", dist.is_initialized())
    # blocking and non-blocking point-to-point, bfloat16 included
    if r == 0:
        dist.send(ember.arange(4.0), dst=1, tag=3)
        w = dist.isend(ember.tensor([1.5, -2.0], dtype=ember.bfloat16), dst=1)
        report("isend", w.wait())
    else:
        t = ember.zeros(4)
        report("recv_from", dist.recv(t, src=0, tag=3))
        report("recv", t.tolist())
        b = ember.zeros(2, dtype=ember.bfloat16)
        w = dist.irecv(b, src=0)
        w.wait()
        report("irecv", b.tolist())
    dist.barrier()
    # a group of rank 1 only, and one of both ranks in reverse order
    solo = dist.new_group([1])
    report("solo_rank", dist.get_rank(solo) if r == 1 else solo)
    both = dist.new_group([0, 1])
    t = ember.tensor([float(r + 1)])
    dist.all_reduce(t, group=both)
    report("group_sum", t.tolist())
    # errors every rank sees at once (no hang)
    report("shape_error", error_of(lambda: dist.all_reduce(ember.ones(r + 1))))
    report("dtype_error", error_of(
        lambda: dist.all_reduce(ember.ones(2, dtype=ember.float32 if r else ember.int64))))
    report("list_error", error_of(lambda: dist.all_gather([ember.ones(2)] * (1 + r),
                                                          ember.ones(2))))
    report("avg_int_error", error_of(
        lambda: dist.all_reduce(ember.ones(2, dtype=ember.int32), op=dist.ReduceOp.AVG)))
    report("after_errors", error_of(lambda: dist.barrier()))
    async_collectives(r)
    object_collectives(r)
    batched_and_all_to_all(r)
    dist.destroy_process_group()
    LINES.append(f"R{r} destroyed: {error_of(lambda: dist.get_rank())}")
    with open(f"{sys.argv[1]}/rank{r}.txt", "w") as f:
        f.write("\n".join(LINES) + "\n")


def async_collectives(r: int) -> None:
    """async_op=True posts an MPI non-blocking collective and returns at once: rank 1 sleeps
    before it waits, so rank 0's 8 MB all-reduce is still pending right after the call."""
    big = ember.full((2 << 20,), float(r + 1))
    start = time.monotonic()
    w = dist.all_reduce(big, async_op=True)
    report("async_returned_fast", time.monotonic() - start < 0.5)
    if r == 0:
        report("async_pending", not w.is_completed())
    else:
        time.sleep(1.0)
    report("async_wait", w.wait())
    report("async_done", (w.is_completed(), float(big[0]), float(big[-1])))
    out = ember.zeros(4)
    w1 = dist.all_gather_into_tensor(out, ember.tensor([r, r + 0.5]), async_op=True)
    b = ember.tensor([float(r) * 7])
    w2 = dist.broadcast(b, src=1, async_op=True)
    w3 = dist.all_reduce(ember.tensor([r + 1.0], dtype=ember.bfloat16), async_op=True)
    w2.wait()
    w1.wait()
    w3.wait()
    report("async_others", (out.tolist(), b.tolist()))


class Unsafe:
    """Not on ember.load's allowlist: receivers would refuse it."""


def object_collectives(r: int) -> None:
    objs = [{"lr": 0.1, "w": ember.arange(3.0)}, ("a", 2), None] if r == 1 else [0, 0, 0]
    dist.broadcast_object_list(objs, src=1)
    report("bcast_objects", (objs[0]["lr"], objs[0]["w"].tolist(), objs[1], objs[2]))
    out = [None, None]
    dist.all_gather_object(out, {"rank": r, "name": f"r{r}"})
    report("all_gather_object", out)
    got = [None, None] if r == 0 else None
    dist.gather_object([r] * (r + 1), got, dst=0)
    report("gather_object", got)
    report("unsafe_object", error_of(lambda: dist.all_gather_object(
        [None, None], Unsafe() if r == 0 else 1)))
    report("unsafe_bcast", error_of(lambda: dist.broadcast_object_list(
        [Unsafe() if r == 0 else None], src=0)))
    report("short_list", error_of(lambda: dist.gather_object(r, [None] if r == 0 else None)))
    report("objects_after", error_of(lambda: dist.all_gather_object([0, 0], r)))




def batched_and_all_to_all(r: int) -> None:
    """batch_isend_irecv of a ring exchange (both ranks post the send first: MPI matches them),
    the list form of all_to_all with a different size per pair, and their errors."""
    peer = 1 - r
    got = ember.zeros(3)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, ember.full((3,), float(r + 1)), peer),
                                   dist.P2POp(dist.irecv, got, peer)])
    report("batch_waits", [w.wait() for w in reqs])
    report("batch_got", got.tolist())
    # rank r sends r*10 + i (length i + 1 + r) to rank i
    ins = [ember.full((i + 1 + r,), 10.0 * r + i) for i in range(2)]
    outs = [ember.zeros(r + 1 + j) for j in range(2)]
    dist.all_to_all(outs, ins)
    report("all_to_all", [o.tolist() for o in outs])
    report("p2pop_error", error_of(lambda: dist.P2POp(dist.send, ember.zeros(1), peer)))
    report("batch_error", error_of(lambda: dist.batch_isend_irecv([])))
    report("a2a_list_error", error_of(lambda: dist.all_to_all([ember.zeros(1)] * (1 + r),
                                                              [ember.zeros(1)] * 2)))
    g = ember.zeros(4)
    dist.all_gather_single(g, ember.full((2,), float(r)))
    rs = ember.zeros(2)
    dist.reduce_scatter_single(rs, ember.arange(4.0) + r)
    report("single_forms", (g.tolist(), rs.tolist()))
    # rank 1 expects 2 floats from rank 1 where rank 1 sends 1
    report("a2a_size_error", error_of(lambda: dist.all_to_all(
        [ember.zeros(1), ember.zeros(1 + r)], [ember.zeros(1), ember.zeros(1)])))
    report("a2a_after", error_of(lambda: dist.barrier()))

if __name__ == "__main__":
    main()

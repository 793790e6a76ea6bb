"""Symmetric memory on N ranks: the handle, peer buffers, signal ordering, timeouts, the ops and
the rendezvous errors.  Each rank saves arrays to OUT/rank<r>.npz and one line per check
("name: value") to OUT/rank<r>.txt.  Under EMBER_SYMM_MEM_BACKEND=rma (MPI RMA windows) the
peers' memory is reached with ``hdl.put``/``hdl.get`` instead of ``get_buffer`` views."""

import sys

import numpy as np

import ember
import ember.distributed as dist
import ember.distributed._symmetric_memory as symm_mem

LINES: list = []
RES: dict = {}
N_ELEMS = 1001  # not a multiple of 2 or 3: uneven two-shot chunks
ROUNDS = 60


def inp(rank: int, n: int = N_ELEMS) -> np.ndarray:
    """Rank ``rank``'s input (the test recomputes it)."""
    return ((np.arange(n) % 17) * 0.37 - 2.5 + rank * 1.25).astype(np.float32)


def report(name: str, value: object) -> None:
    LINES.append(f"{name}: {value}")


def error_of(fn) -> str:
    try:
        fn()
    except Exception as e:  # the test checks type and message
        return f"{type(e).__name__}: {e}"
    return "no error"


def rma() -> bool:
    return symm_mem.get_backend() == "MPI_RMA"


def peer_store(hdl, rank: int, view, index: int, value, dtype) -> None:
    """Rank ``rank``'s buffer[index] = value: a store through the ``get_buffer`` view, or a
    ``put`` on RMA windows."""
    if view is None:
        hdl.put(rank, ember.tensor([value], dtype=dtype), storage_offset=index)
    else:
        view[index] = value


def save(key: str, t: ember.Tensor) -> None:
    RES[key] = t.numpy().astype(np.float64)


def handle_and_buffers(r: int, n: int) -> None:
    t = symm_mem.empty(N_ELEMS, dtype=ember.float32)
    t.copy_(ember.from_numpy(inp(r)))
    hdl = symm_mem.rendezvous(t, dist.group.WORLD)
    report("handle", (hdl.rank, hdl.world_size, hdl.buffer_size, len(hdl.buffer_ptrs),
                      len(hdl.signal_pad_ptrs)))
    report("own_ptr", hdl.buffer_ptrs[r] == t.numpy().ctypes.data)
    report("is_symm", (symm_mem.is_symm_mem_tensor(t), symm_mem.is_symm_mem_tensor(t[3:]),
                       symm_mem.is_symm_mem_tensor(ember.zeros(3))))
    report("same_handle", symm_mem.rendezvous(t, "0") is hdl)
    pad = hdl.get_signal_pad(r)
    report("signal_pad", (tuple(pad.shape), str(pad.dtype)))  # slots may be in use already
    hdl.barrier(timeout_ms=60000)
    nxt = (r + 1) % n
    report("get", hdl.get(nxt, (3,), ember.float32, storage_offset=2).tolist())
    if rma():
        report("peer_view", error_of(lambda: hdl.get_buffer(nxt, (4,), ember.float32)))
        report("peer_pad", error_of(lambda: hdl.get_signal_pad(nxt)))
        save("peer_read", hdl.get(nxt, (N_ELEMS,), ember.float32))
        view = None
    else:
        save("peer_read", hdl.get_buffer(nxt, (N_ELEMS,), ember.float32))
        view = hdl.get_buffer(nxt, (4,), ember.float32, storage_offset=N_ELEMS - 4)
    # a store through get_buffer (or a put) lands in the peer's own tensor
    peer_store(hdl, nxt, None if view is None else view[:1], 0 if view is not None else
               N_ELEMS - 4, 1000.0 + r, ember.float32)
    hdl.barrier(timeout_ms=60000)
    report("written_by_prev", float(t[N_ELEMS - 4]))
    report("bad_region", error_of(lambda: hdl.get_buffer(0, (N_ELEMS + 1,), ember.float32)))
    report("self_signal", error_of(lambda: hdl.put_signal(r)))
    hdl.barrier(timeout_ms=60000)


def ordering(r: int, n: int) -> None:
    """A token passed round the ring ROUNDS times through peer stores + signals (channel 0),
    and a stream of distinct slots to the next rank with back-pressure (channel 1)."""
    buf = symm_mem.empty(2 * ROUNDS + 2, dtype=ember.int64)
    buf.zero_()
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    hdl.barrier(timeout_ms=60000)
    nxt, prv = (r + 1) % n, (r - 1) % n
    peer = None if rma() else hdl.get_buffer(nxt, (2 * ROUNDS + 2,), ember.int64)
    seen = []
    for k in range(ROUNDS):
        if not (r == 0 and k == 0):
            hdl.wait_signal(prv, channel=0, timeout_ms=60000)
        seen.append(int(buf[0]))
        peer_store(hdl, nxt, peer, 0, int(buf[0]) + 1, ember.int64)
        hdl.put_signal(nxt, channel=0, timeout_ms=60000)
    if r == 0:
        hdl.wait_signal(prv, channel=0, timeout_ms=60000)
        seen.append(int(buf[0]))
    report("token_seen", seen)
    stream = []
    for k in range(ROUNDS):
        peer_store(hdl, nxt, peer, ROUNDS + 1 + k, 10 * k + r + 1, ember.int64)  # then release
        hdl.put_signal(nxt, channel=1, timeout_ms=60000)
        hdl.wait_signal(prv, channel=1, timeout_ms=60000)
        stream.append(int(buf[ROUNDS + 1 + k]) - 10 * k)
    report("stream_ok", stream == [prv + 1] * ROUNDS)
    hdl.barrier(timeout_ms=60000)
    msg = error_of(lambda: hdl.wait_signal(prv, channel=2, timeout_ms=300))
    report("timeout", msg)
    hdl.barrier(timeout_ms=60000)


def ops(r: int, n: int) -> None:
    sm = ember.ops.symm_mem
    for dt in ("float32", "float64", "bfloat16", "float16"):
        dtype = getattr(ember, dt)
        x = symm_mem.empty(N_ELEMS, dtype=dtype)
        x.copy_(ember.from_numpy(inp(r)))
        symm_mem.rendezvous(x, "0")
        save(f"one_shot-{dt}", sm.one_shot_all_reduce(x, "sum", "0"))
        out = ember.empty(N_ELEMS, dtype=dtype)
        save(f"one_shot_out-{dt}", sm.one_shot_all_reduce_out(x, "sum", "0", out))
        save(f"input_kept-{dt}", x)
        res = sm.two_shot_all_reduce_(x, "sum", "0")
        report(f"two_shot_returns_input-{dt}", res is x)
        save(f"two_shot-{dt}", x)
        x.copy_(ember.from_numpy(inp(r)))
        out2 = ember.zeros(N_ELEMS, dtype=dtype)
        sm.two_shot_all_reduce_out(x, "sum", "0", out2)
        save(f"two_shot_out-{dt}", out2)
        x.copy_(ember.from_numpy(inp(r)))
        sm.multimem_all_reduce_(x, "sum", "0")
        save(f"multimem-{dt}", x)
        x.copy_(ember.from_numpy(inp(r)))
        gathered = ember.empty(n, N_ELEMS, dtype=dtype)
        sm.multimem_all_gather_out(x, "0", gathered)
        save(f"gather-{dt}", gathered)
    x = symm_mem.empty(8, dtype=ember.float32)
    x.fill_(1.0)
    report("op_bad_reduce", error_of(lambda: sm.one_shot_all_reduce(x, "max", "0")))
    report("op_not_symm", error_of(lambda: sm.one_shot_all_reduce(ember.ones(8), "sum", "0")))
    report("op_small", sm.one_shot_all_reduce(x, "sum", "0").tolist())


def rendezvous_errors(r: int, n: int) -> None:
    a = symm_mem.empty(8, dtype=ember.float32)
    b = symm_mem.empty(16, dtype=ember.float32)
    first, second = (a, b) if r == 0 else (b, a)
    report("order_error", error_of(lambda: symm_mem.rendezvous(first, dist.group.WORLD)))
    report("order_error2", error_of(lambda: symm_mem.rendezvous(second, dist.group.WORLD)))
    report("not_symm", error_of(lambda: symm_mem.rendezvous(ember.ones(2), dist.group.WORLD)))
    report("after_errors", symm_mem.rendezvous(a, dist.group.WORLD).buffer_size)


def pad_size(r: int, n: int) -> None:
    report("pad_default", symm_mem.get_signal_pad_size())
    report("pad_bad", error_of(lambda: symm_mem.set_signal_pad_size(100)))
    symm_mem.set_signal_pad_size(256)
    x = symm_mem.empty(4, dtype=ember.float32)
    hdl = symm_mem.rendezvous(x, "0")
    report("pad_small", (hdl.signal_pad_size, tuple(hdl.get_signal_pad(r).shape), hdl.channels))
    hdl.barrier(channel=hdl.channels - 2, timeout_ms=60000)
    report("pad_channel_error", error_of(lambda: hdl.barrier(channel=hdl.channels)))
    symm_mem.set_signal_pad_size(9216)
    report("compat", (symm_mem.is_nvshmem_available(),
                      symm_mem.is_symm_mem_enabled_for_group("0")))


def subgroup(r: int, n: int) -> None:
    sub = dist.new_group([0, 1])
    x = symm_mem.empty(16, dtype=ember.float32)
    if r < 2:
        x.fill_(float(r + 1))
        hdl = symm_mem.rendezvous(x, sub)
        report("sub", (sub.group_name, hdl.world_size,
                       ember.ops.symm_mem.one_shot_all_reduce(x, "sum", sub.group_name)[:2]
                       .tolist()))


def main(out: str) -> None:
    dist.init_process_group("gloo")
    r, n = dist.get_rank(), dist.get_world_size()
    handle_and_buffers(r, n)
    ordering(r, n)
    ops(r, n)
    rendezvous_errors(r, n)
    pad_size(r, n)
    subgroup(r, n)
    dist.barrier()
    np.savez(f"{out}/rank{r}.npz", **RES)
    with open(f"{out}/rank{r}.txt", "w") as f:
        f.write("\n".join(LINES) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])

"""``all_reduce`` through a shared-memory staging window, for groups whose ranks share a node.

When a group is created and all its ranks are on one node, every rank allocates a part of one
MPI shared-memory window (``MPI.Win.Allocate_shared``): a ``ready`` and a ``done`` sequence
number and two slots of a signature and ``cap`` data bytes (``shm_all_reduce.c``).  An
``all_reduce`` of at most ``cap`` bytes is then one C call: copy the signature (op, dtype,
shape, reduce op, size, whether the local checks failed) and the data into this round's slot,
publish the round, wait for every rank's, check that every signature equals this rank's, and
reduce the ranks' slots in rank order into the tensor (every rank gets bit-identical
results).  Rounds alternate between the two slots and a rank reuses a slot only when every
rank is done reading it, so no closing barrier is needed.

Mismatches are seen by every rank in the same slots, so every rank raises the same error and
the group stays usable.  A peer that is in another (checked) collective sends its signature on
the group's ``check_comm``: while waiting, a rank looks for such a message, withdraws its round
and answers with ``_group.exchange``, so both raise the mismatch error.  A peer that never
arrives is named after the group's timeout.
"""

from __future__ import annotations

import ctypes
import time
from collections import deque
from typing import Any

import numpy as np

from ember import config
from ember import dtypes as _dt
from ember.distributed._checks import _make_signature, local_error, raise_mismatch
from ember.distributed._group import (
    SIG_LEN,
    SIG_TAG,
    ProcessGroup,
    ReduceOp,
    Work,
    check_comm,
    exchange,
)
from ember.errors import EmberRuntimeError
from ember.ops._native import Native, csrc, ptr

SIG = 128  # bytes of a slot's signature: SIG_LEN int64, the reduce op, the size
_P, _I64 = ctypes.c_void_p, ctypes.c_int64
NATIVE = Native("shm_all_reduce", csrc("bf16_scalar.h") + csrc("shm_all_reduce.c"), {
    "ember_shm_all_reduce": (ctypes.c_int, [_P, _P, _I64, _P, _P, _I64]),
    "ember_shm_post": (ctypes.c_int, [_P, _P, _I64, _P, _I64]),
    "ember_shm_wait": (ctypes.c_int, [_P, _I64, _I64]),
    "ember_shm_reduce": (ctypes.c_int, [_P, _P, _I64, _P]),
    "ember_shm_done": (None, [_P, _I64]),
    "ember_shm_unpost": (None, [_P, _I64]),
})
SPIN_NS = 200_000  # C waits this long (spinning, then yielding) before Python looks around
POLL_NS = 2_000_000  # then in steps of this, between looks for a peer in another collective
MAX_RANKS = 64

_KIND = {_dt.float32: 0, _dt.float64: 1, _dt.float16: 2, _dt.bfloat16: 3, _dt.int8: 4,
         _dt.uint8: 5, _dt.int16: 6, _dt.int32: 7, _dt.int64: 8, _dt.bool: 5}
_OP = {ReduceOp.SUM: 0, ReduceOp.AVG: 1, ReduceOp.PRODUCT: 2, ReduceOp.MIN: 3, ReduceOp.MAX: 4,
       ReduceOp.BAND: 5, ReduceOp.BOR: 6, ReduceOp.BXOR: 7}
# bool: PyTorch's logical meanings (SUM/MAX are "or", PRODUCT/MIN "and") on 0/1 bytes
_BOOL_OP = {ReduceOp.SUM: 6, ReduceOp.MAX: 6, ReduceOp.BOR: 6, ReduceOp.PRODUCT: 5,
            ReduceOp.MIN: 5, ReduceOp.BAND: 5, ReduceOp.BXOR: 7}


class _Ctx(ctypes.Structure):
    _fields_ = [("bases", _P), ("world", _I64), ("rank", _I64), ("cap", _I64),
                ("stride", _I64)]


class _CPlan(ctypes.Structure):
    _fields_ = [("sig", _P), ("nbytes", _I64), ("count", _I64), ("kind", _I64), ("op", _I64)]


class _Plan:
    """One (dtype, shape, reduce op): its signature, local error and C arguments."""

    __slots__ = ("dtype", "shape", "op", "sig", "error", "c", "addr", "nbytes")

    def __init__(self, dtype: Any, shape: tuple, op: ReduceOp, validate: Any) -> None:
        self.dtype, self.shape, self.op = dtype, shape, op
        self.error = local_error(validate, op, dtype, "all_reduce")
        count = int(np.prod(shape, dtype=np.int64))
        self.nbytes = count * dtype.itemsize
        sig = np.zeros(SIG // 8, np.int64)
        sig[:SIG_LEN] = _make_signature("all_reduce", dtype, shape)
        sig[SIG_LEN - 1] = 1 if self.error is not None else 0  # the FAILED flag
        sig[SIG_LEN], sig[SIG_LEN + 1] = list(ReduceOp).index(op), self.nbytes
        self.sig = sig
        kind = _KIND.get(dtype, -1) if self.error is None else -1
        code = _BOOL_OP[op] if dtype == _dt.bool else _OP[op]
        self.c = _CPlan(sig.ctypes.data, 0 if self.error else self.nbytes, count, kind, code)
        self.addr = ctypes.addressof(self.c)


class ShmAllReduce:
    """A group's staging window and its round counter (see the module docstring)."""

    def __init__(self, pg: ProcessGroup, win: Any, bases: list[int], cap: int,
                 stride: int) -> None:
        self.pg, self.win, self.cap = pg, win, cap
        self.n, self.me = pg.size(), pg.rank()
        self._bases = (_P * self.n)(*bases)
        self.ctx = _Ctx(ctypes.addressof(self._bases), self.n, self.me, cap, stride)
        self.addr = ctypes.addressof(self.ctx)
        self.bases, self.stride = bases, stride
        self.seq = 0  # the last round this rank posted
        self.pending: deque = deque()  # async rounds posted, not yet reduced (in order)
        self.plans: dict = {}
        self.last: _Plan | None = None
        self.last_arr: Any = None  # the last contiguous tensor array, and its address
        self.last_ptr = 0
        lib = NATIVE.lib()
        self.lib, self.run_fn = lib, lib.ember_shm_all_reduce

    def plan(self, dtype: Any, shape: tuple, op: ReduceOp, validate: Any) -> _Plan:
        key = (dtype, shape, op)
        plan = self.plans.get(key)
        if plan is None:
            if len(self.plans) > 1024:
                self.plans.clear()
            plan = self.plans[key] = _Plan(dtype, shape, op, validate)
        self.last = plan
        return plan

    def all_reduce(self, tensor: Any, arr: np.ndarray, op: ReduceOp, async_op: bool,
                   validate: Any) -> Work | None:
        """``tensor`` (its array ``arr``, at most ``cap`` bytes) all-reduced in place."""
        plan = self.last
        if plan is None or plan.op is not op or plan.dtype is not tensor._dtype or \
                plan.shape != arr.shape:
            plan = self.plan(tensor._dtype, arr.shape, op, validate)
        if arr is self.last_arr:  # the same array as last call (held, so its id is unique)
            buf, p = arr, self.last_ptr
        else:
            flags = arr.flags
            buf = arr if flags.c_contiguous and flags.writeable else arr.copy(order="C")
            p = ptr(buf)
            if buf is arr:
                self.last_arr, self.last_ptr = arr, p
        seq = self.seq + 1
        if self.pending:  # reduce this rank's earlier rounds first (a blocking round marks
            # itself and so every earlier round done; an async one reuses round seq-2's slot)
            self._complete_before(seq - 1 if async_op else seq)
        if async_op:
            self._post(plan, seq, buf)
            rnd = _Round(self, plan, seq, tensor, arr, buf)
            self.pending.append(rnd)
            return Work(rnd, on_done=rnd.complete, timeout=self.pg.timeout.total_seconds(),
                        op="all_reduce")
        rc = self.run_fn(self.addr, plan.addr, seq, p, p, SPIN_NS)
        if rc == 0:
            self.seq = seq
        else:
            rc = self._slow(rc, plan, seq, buf)
            if rc:
                self._special(rc, plan, seq, buf)
        if buf is not arr:
            arr[...] = buf
        tensor._version_counter[0] += 1
        return None

    # ------------------------------------------------------------------------ slow paths

    def _post(self, plan: _Plan, seq: int, buf: np.ndarray) -> None:
        limit = self.pg.timeout.total_seconds()
        start = time.monotonic()
        while True:
            rc = self.lib.ember_shm_post(self.addr, plan.addr, seq, ptr(buf), POLL_NS)
            if rc == 0:
                self.seq = seq
                return
            if time.monotonic() - start > limit:
                self._timeout([-rc - 1], limit, "complete the previous all_reduce")

    def _slow(self, rc: int, plan: _Plan, seq: int, buf: np.ndarray) -> int:
        """Finish a blocking round whose one C call returned ``rc`` 3 (not posted) or 4 (a
        peer had not posted): wait, looking for a peer in another collective."""
        if rc == 3:
            self._post(plan, seq, buf)
        elif rc in (0, 1, 2):
            self.seq = seq
            return rc
        else:
            self.seq = seq
        self._wait(plan, seq)
        return self.lib.ember_shm_reduce(self.addr, plan.addr, seq, ptr(buf))

    def _wait(self, plan: _Plan, seq: int) -> None:
        """Wait for every rank's round ``seq`` for at most the group's timeout; a peer that
        sent a checked collective's signature instead makes this rank withdraw its round and
        raise the mismatch error (the peer raises it too)."""
        from mpi4py import MPI

        limit = self.pg.timeout.total_seconds()
        comm, start = check_comm(self.pg), time.monotonic()
        while True:
            rc = self.lib.ember_shm_wait(self.addr, seq, POLL_NS)
            if rc == 0:
                return
            missing = self._missing(seq)
            status = MPI.Status()
            for r in missing:
                if comm.Iprobe(source=r, tag=SIG_TAG, status=status) and r in self._missing(seq):
                    self._withdraw(seq)
                    theirs = np.empty(SIG_LEN, np.int64)
                    comm.Recv(theirs, source=r, tag=SIG_TAG)
                    mine = plan.sig[:SIG_LEN].copy()
                    allsig = exchange(self.pg, "all_reduce", mine, {r: theirs})
                    raise_mismatch(self.pg, "all_reduce", allsig, mine, plan.error)
                    raise EmberRuntimeError("[distributed.all_reduce] a peer is in another "
                                            "all_reduce")  # unreachable: ops differ
            if time.monotonic() - start > limit:
                self._withdraw(seq)
                self._timeout(missing, limit, "reach all_reduce (dead, hung, or in another "
                              "collective)")

    def _missing(self, seq: int) -> list[int]:
        return [r for r in range(self.n)
                if ctypes.c_int64.from_address(self.bases[r]).value < seq]

    def _withdraw(self, seq: int) -> None:
        self.lib.ember_shm_unpost(self.addr, seq)
        self.seq = seq - 1

    def _timeout(self, missing: list[int], limit: float, what: str) -> None:
        ranks = [self.pg.ranks[r] for r in missing]
        raise EmberRuntimeError(f"[distributed.all_reduce] timed out after {limit:g} s: "
                                f"rank(s) {ranks} did not {what}")

    def _special(self, rc: int, plan: _Plan, seq: int, buf: np.ndarray) -> None:
        """``ember_shm_reduce`` returned 1 (signatures differ) or 2 (Python reduces)."""
        if rc == 1:
            allsig = self._signatures(seq)
            raise_mismatch(self.pg, "all_reduce", allsig[:, :SIG_LEN], plan.sig[:SIG_LEN],
                           plan.error)
            raise EmberRuntimeError("[distributed.all_reduce] the ranks passed different reduce "
                                    f"ops (dtype and shape agree; this rank passed {plan.op})")
        try:
            if plan.error is not None:  # every rank failed alike
                raise plan.error
            from ember.distributed._collectives import reduce_parts

            parts = [self._slot(r, seq, plan) for r in range(self.n)]
            buf[...] = reduce_parts(parts, plan.op, plan.dtype, "all_reduce").reshape(buf.shape)
        finally:
            self.lib.ember_shm_done(self.addr, seq)

    def _slot_bytes(self, r: int, seq: int, nbytes: int) -> np.ndarray:
        addr = self.bases[r] + 128 + (seq & 1) * self.stride
        return np.frombuffer((ctypes.c_char * nbytes).from_address(addr), np.uint8)

    def _signatures(self, seq: int) -> np.ndarray:
        return np.stack([self._slot_bytes(r, seq, SIG).view(np.int64) for r in range(self.n)])

    def _slot(self, r: int, seq: int, plan: _Plan) -> np.ndarray:
        raw = self._slot_bytes(r, seq, SIG + plan.nbytes)[SIG:]
        return raw.view(plan.dtype.np).reshape(plan.shape)

    def _complete_before(self, seq: int) -> None:
        """Reduce this rank's pending async rounds numbered below ``seq``, in order."""
        while self.pending and self.pending[0].seq < seq:
            self.pending[0].complete()

    def free(self) -> None:
        self.pending.clear()
        self.last_arr = None
        self.win.Free()


class _Round:
    """An async round in flight: ``Test()`` polls it, ``complete()`` reduces it (after this
    rank's earlier rounds) and raises its mismatch error, if any."""

    __slots__ = ("shm", "plan", "seq", "tensor", "arr", "buf", "state")

    def __init__(self, shm: ShmAllReduce, plan: _Plan, seq: int, tensor: Any,
                 arr: np.ndarray, buf: np.ndarray) -> None:
        self.shm, self.plan, self.seq = shm, plan, seq
        self.tensor, self.arr, self.buf = tensor, arr, buf
        self.state: Any = None  # None: pending; True: reduced; an exception: failed

    def Test(self) -> bool:  # noqa: N802 (MPI's name: what Work polls)
        """True when every rank has posted the round, or when a peer sent a checked
        collective's signature (``complete`` then tells whether it is a mismatch)."""
        shm = self.shm
        if self.state is not None or shm.lib.ember_shm_wait(shm.addr, self.seq, 0) == 0:
            return True
        from mpi4py import MPI

        return bool(check_comm(shm.pg).Iprobe(source=MPI.ANY_SOURCE, tag=SIG_TAG))

    def complete(self) -> None:
        if self.state is None:
            shm = self.shm
            shm._complete_before(self.seq)
            try:
                shm._wait(self.plan, self.seq)
                rc = shm.lib.ember_shm_reduce(shm.addr, self.plan.addr, self.seq, ptr(self.buf))
                if rc:
                    shm._special(rc, self.plan, self.seq, self.buf)
                if self.buf is not self.arr:
                    self.arr[...] = self.buf
                self.tensor._version_counter[0] += 1
                self.state = True
            except Exception as e:
                self.state = e
            finally:
                if shm.pending and shm.pending[0] is self:
                    shm.pending.popleft()
        if self.state is not True:
            raise self.state


def attach(pg: ProcessGroup) -> ShmAllReduce | None:
    """Collective over ``pg`` (at its creation): its staging window when every rank is on one
    node, the C kernels are built and ``config.dist_shm_max_bytes()`` is not 0; else None."""
    from mpi4py import MPI

    n, cap = pg.size(), config.dist_shm_max_bytes()
    ok = 1 < n <= MAX_RANKS and cap > 0 and NATIVE.lib() is not None
    node = pg.comm.Split_type(MPI.COMM_TYPE_SHARED)
    ok = ok and node.Get_size() == n
    node.Free()
    flag = np.array([1 if ok else 0], np.int32)
    pg.comm.Allreduce(MPI.IN_PLACE, flag, op=MPI.MIN)  # every rank decides alike
    if not flag[0]:
        return None
    stride = (SIG + cap + 63) // 64 * 64
    win = MPI.Win.Allocate_shared(128 + 2 * stride, 1, comm=pg.comm)
    bases = [win.Shared_query(r)[0].address for r in range(n)]
    ctypes.memset(bases[pg.rank()], 0, 128 + 2 * SIG)
    check_comm(pg)  # made now: a rank that waits for a peer in another collective probes it
    pg.comm.Barrier()  # every part is zeroed before any rank reads it
    return ShmAllReduce(pg, win, bases, cap, stride)


__all__ = ["ShmAllReduce", "attach"]

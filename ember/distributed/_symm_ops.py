"""``ember.ops.symm_mem``: PyTorch's symmetric-memory collectives as C kernels over the peers'
buffer pointers (``symm_mem.c``), registered in ``ember.ops``'s op namespace ``symm_mem``.

Each op synchronizes with a barrier on the signal pad's last channel (reserved for the ops)
before it reads the peers' buffers and after, so no rank overwrites its input while a peer
still reads it.  Reductions (``reduce_op="sum"``, the only one PyTorch accepts) read the ranks
in order: every rank gets bit-identical results; float16/bfloat16 accumulate in float32.

>>> out = ember.ops.symm_mem.one_shot_all_reduce(t, "sum", "0")   # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ember import dtypes as _dt
from ember.distributed import _symmetric_memory as _sm
from ember.errors import DTypeError, EmberValueError, ShapeError
from ember.ops._native import ptr

_KERNEL = {_dt.float32: "f32", _dt.float64: "f64", _dt.bfloat16: "bf16", _dt.float16: "f16"}


def _prepare(op: str, input: Any, group_name: Any, reduce_op: str | None = "sum"  # noqa: A002
             ) -> tuple[Any, int]:
    """The group's handle of ``input``'s allocation and ``input``'s byte offset in it."""
    if reduce_op is not None and reduce_op != "sum":
        raise EmberValueError(f"[symm_mem.{op}] reduce_op must be 'sum', got {reduce_op!r}")
    found = _sm._find(input)
    if found is None:
        raise EmberValueError(f"[symm_mem.{op}] input must be a symmetric-memory tensor "
                              "(allocated with symm_mem.empty)")
    if not input.is_contiguous():
        raise EmberValueError(f"[symm_mem.{op}] input must be contiguous")
    if reduce_op is not None and input.dtype not in _KERNEL:
        raise DTypeError(f"[symm_mem.{op}] supports float32, float64, bfloat16 and float16, "
                         f"got {input.dtype}")
    hdl = _sm.rendezvous(input, group_name)
    return hdl, found[1]


def _sync(hdl: Any, op: str) -> None:
    ch = hdl.channels - 1
    ns = hdl._timeout_ns(0)
    if hdl._rma is not None:
        peer = hdl._rma.barrier(ch, ns / 1e9)
        if peer >= 0:
            hdl._timed_out(op, peer, ch, ns)
        return
    rc = _sm._lib(op).ember_symm_barrier(hdl._pads, hdl.rank, hdl.world_size, ch, ns)
    if rc:
        hdl._timed_out(op, -rc - 1, ch, ns)


def _out_array(op: str, out: Any, dtype: Any, numel: int) -> np.ndarray:
    if out.dtype != dtype:
        raise DTypeError(f"[symm_mem.{op}] out has dtype {out.dtype}, expected {dtype}")
    if out.numel() != numel:
        raise ShapeError(f"[symm_mem.{op}] out has {out.numel()} elements, expected {numel}")
    arr = out.numpy(force=True)
    if not arr.flags.c_contiguous:
        raise EmberValueError(f"[symm_mem.{op}] out must be contiguous")
    return arr


def _reduce_into(hdl: Any, input: Any, off: int, lo: int, hi: int,  # noqa: A002
                 dst: np.ndarray) -> None:
    """``dst`` = the sum over the ranks of elements [lo, hi) of ``input``'s buffer."""
    if hi <= lo:
        return
    fn = getattr(_sm._lib("symm_mem"), f"ember_symm_sum_{_KERNEL[input.dtype]}")
    fn(hdl._bufs, hdl.world_size, off // input.dtype.itemsize + lo, dst.ctypes.data, hi - lo)


def _bump(t: Any) -> None:
    t._version_counter[0] += 1


_KIND = {_dt.float32: 0, _dt.float64: 1, _dt.bfloat16: 2, _dt.float16: 3}
_PLANS: dict = {}  # (id(input), id(out) or None, group_name) -> _Planned


class _Planned:
    """A checked one-shot (or in-place two-shot) all-reduce of one input (and out): the
    arguments of the fused C call (barrier, reduce, barrier), so a repeated call costs one
    ctypes call.  It holds the
    input's and out's arrays: a tensor whose array changed gets a new plan."""

    def __init__(self, input: Any, group_name: Any, out: Any | None,  # noqa: A002
                 op: str) -> None:
        hdl, off = _prepare(op, input, group_name, "sum")
        self.hdl, self.inp = hdl, input.numpy(force=True)
        self.out = None if out is None else _out_array(op, out, input.dtype, input.numel())
        self.fn = _sm._lib(op).ember_symm_one_shot_plan
        self.two_shot = _sm._lib(op).ember_symm_two_shot_plan
        self.c = _sm.Plan(ctypes.addressof(hdl._pads), ctypes.addressof(hdl._bufs), hdl.rank,
                          hdl.world_size, hdl.channels - 1, hdl._timeout_ns(0),
                          off // input.dtype.itemsize, input.numel(), _KIND[input.dtype],
                          0 if self.out is None else ptr(self.out))
        self.addr, self.op = ctypes.addressof(self.c), op
        self.tin, self.tout, self.group = input, out, group_name

    def run(self, out_arr: np.ndarray | None) -> None:
        rc = self.fn(self.addr, None if out_arr is None else ptr(out_arr))
        if rc:
            self.fail(rc)

    def fail(self, rc: int) -> None:
        self.hdl._timed_out(self.op, -rc - 1, self.c.channel, self.c.timeout_ns)


_LAST: dict = {}  # op -> the plan of its last call (a repeated call: identity tests only)


def _plan(input: Any, reduce_op: str, group_name: Any, out: Any | None,  # noqa: A002
          op: str) -> _Planned:
    # hot path: the plan of the last call with these tensors, whose arrays are still theirs
    # (``_data`` is the eager array; a lazy or replaced payload fails the identity test)
    plan = _LAST.get(op)
    if (plan is not None and plan.tin is input and plan.tout is out and
            plan.inp is input._data and (out is None or plan.out is out._data) and
            plan.group == group_name and reduce_op == "sum"):
        return plan
    plan = _PLANS.get((id(input), id(out), group_name, op))
    if (plan is not None and plan.inp is input._data and reduce_op == "sum" and
            (out is None or plan.out is out._data)):
        _LAST[op] = plan
        return plan
    if reduce_op != "sum":
        _prepare(op, input, group_name, reduce_op)  # raises
    if len(_PLANS) > 256:
        _PLANS.clear()
        _LAST.clear()
    plan = _PLANS[(id(input), id(out), group_name, op)] = _Planned(input, group_name, out, op)
    _LAST[op] = plan
    return plan


def one_shot_all_reduce_out(input: Any, reduce_op: str, group_name: Any,  # noqa: A002
                            out: Any) -> Any:
    """Every rank reads every peer's ``input`` and writes the sum into ``out``."""
    if _sm._HEAP.rma:
        return _rma_one_shot("one_shot_all_reduce_out", input, reduce_op, group_name, out)
    plan = _plan(input, reduce_op, group_name, out, "one_shot_all_reduce_out")
    rc = plan.fn(plan.addr, None)  # the plan holds out's address
    if rc:
        plan.fail(rc)
    out._version_counter[0] += 1
    return out


def one_shot_all_reduce(input: Any, reduce_op: str, group_name: Any) -> Any:  # noqa: A002
    """The sum of ``input`` (a symmetric tensor) over the group, in a new tensor; one read of
    every peer's buffer: the lowest latency for small messages.

    >>> ember.ops.symm_mem.one_shot_all_reduce(t, "sum", "0")   # doctest: +SKIP
    """
    import ember

    if _sm._HEAP.rma:
        out = ember.empty(tuple(input.shape), dtype=input.dtype)
        return _rma_one_shot("one_shot_all_reduce", input, reduce_op, group_name, out)
    plan = _plan(input, reduce_op, group_name, None, "one_shot_all_reduce")
    res = np.empty(plan.inp.shape, plan.inp.dtype)
    plan.run(res)
    return ember.from_numpy(res)


def _chunk(hdl: Any, n: int, rank: int) -> tuple[int, int]:
    size = -(-n // hdl.world_size)
    return min(n, rank * size), min(n, (rank + 1) * size)


def two_shot_all_reduce_(input: Any, reduce_op: str, group_name: Any) -> Any:  # noqa: A002
    """In-place sum over the group in two steps: rank r reduces the r-th chunk from every
    peer's buffer, then writes it into every peer's buffer (reduce-scatter + all-gather)."""
    return _two_shot("two_shot_all_reduce_", input, reduce_op, group_name)


def _two_shot(op: str, input: Any, reduce_op: str, group_name: Any) -> Any:  # noqa: A002
    if _sm._HEAP.rma:
        return _rma_two_shot(op, input, reduce_op, group_name, None)
    plan = _plan(input, reduce_op, group_name, None, op)
    rc = plan.two_shot(plan.addr)
    if rc:
        plan.fail(rc)
    input._version_counter[0] += 1
    return input


def two_shot_all_reduce_out(input: Any, reduce_op: str, group_name: Any,  # noqa: A002
                            output: Any) -> Any:
    """Like ``two_shot_all_reduce_`` with the result in ``output``; ``input`` is clobbered (its
    r-th chunk holds the reduced chunk on rank r, as PyTorch's ``Tensor(a!) input`` says)."""
    op = "two_shot_all_reduce_out"
    if _sm._HEAP.rma:
        return _rma_two_shot(op, input, reduce_op, group_name, output)
    hdl, off = _prepare(op, input, group_name, reduce_op)
    arr = _out_array(op, output, input.dtype, input.numel()).reshape(-1)
    n, size = input.numel(), input.dtype.itemsize
    lo, hi = _chunk(hdl, n, hdl.rank)
    _sync(hdl, op)
    _reduce_into(hdl, input, off, lo, hi, arr[lo:hi])
    ctypes.memmove(hdl.buffer_ptrs[hdl.rank] + off + lo * size, arr[lo:hi].ctypes.data,
                   (hi - lo) * size)
    _sync(hdl, op)
    for r in range(hdl.world_size):
        rlo, rhi = _chunk(hdl, n, r)
        if r != hdl.rank and rhi > rlo:
            ctypes.memmove(arr[rlo:rhi].ctypes.data, hdl.buffer_ptrs[r] + off + rlo * size,
                           (rhi - rlo) * size)
    _sync(hdl, op)
    _bump(input)
    _bump(output)
    return output


def multimem_all_reduce_(input: Any, reduce_op: str, group_name: Any) -> Any:  # noqa: A002
    """In-place sum over the group.  PyTorch uses NVLink multicast; on the CPU every rank
    maps every buffer, so this is ``two_shot_all_reduce_``."""
    return _two_shot("multimem_all_reduce_", input, reduce_op, group_name)


def multimem_all_gather_out(input: Any, group_name: Any, out: Any) -> Any:  # noqa: A002
    """``out`` = every rank's ``input`` concatenated in rank order (along dim 0)."""
    op = "multimem_all_gather_out"
    hdl, off = _prepare(op, input, group_name, reduce_op=None)
    arr = _out_array(op, out, input.dtype, input.numel() * hdl.world_size)
    if hdl._rma is not None:
        return _rma_all_gather(hdl, input, off, arr, out)
    _sync(hdl, op)
    _sm._lib(op).ember_symm_gather(hdl._bufs, hdl.world_size, off, arr.ctypes.data,
                                   input.numel() * input.dtype.itemsize)
    _sync(hdl, op)
    _bump(out)
    return out


# ------------------------------------------------ the same ops on MPI RMA windows (_symm_rma)

def _rma_sum(hdl: Any, input: Any, off: int, lo: int, hi: int,  # noqa: A002
             dst_ptr: int) -> None:
    """Elements [lo, hi) of ``input``'s buffer summed over the ranks (peers' parts fetched
    with ``Get``) into ``dst_ptr``, in rank order (the one-node kernels' rounding)."""
    if hi <= lo:
        return
    size = input.dtype.itemsize
    own = hdl.buffer_ptrs[hdl.rank]
    ptrs, keep = hdl._rma.region_ptrs(own, off, hdl.buffer_size, lo * size, hi * size)
    fn = getattr(_sm._lib("symm_mem"), f"ember_symm_sum_{_KERNEL[input.dtype]}")
    fn(ptrs, hdl.world_size, 0, dst_ptr, hi - lo)
    del keep


def _rma_one_shot(op: str, input: Any, reduce_op: str, group_name: Any,  # noqa: A002
                  out: Any) -> Any:
    hdl, off = _prepare(op, input, group_name, reduce_op)
    arr = _out_array(op, out, input.dtype, input.numel())
    _sync(hdl, op)
    _rma_sum(hdl, input, off, 0, input.numel(), arr.ctypes.data)
    _sync(hdl, op)
    _bump(out)
    return out


def _rma_two_shot(op: str, input: Any, reduce_op: str, group_name: Any,  # noqa: A002
                  output: Any | None) -> Any:
    """Rank r reduces chunk r into its own buffer (and ``output``), then every rank fetches
    the other reduced chunks from their owners."""
    hdl, off = _prepare(op, input, group_name, reduce_op)
    n, size = input.numel(), input.dtype.itemsize
    own = hdl.buffer_ptrs[hdl.rank] + off
    arr = None if output is None else _out_array(op, output, input.dtype, n).reshape(-1)
    lo, hi = _chunk(hdl, n, hdl.rank)
    _sync(hdl, op)
    _rma_sum(hdl, input, off, lo, hi, own + lo * size)
    _sync(hdl, op)
    mine = input.numpy(force=True).reshape(-1)
    dst = mine if arr is None else arr
    if arr is not None:
        arr[lo:hi] = mine[lo:hi]
    for r in range(hdl.world_size):
        rlo, rhi = _chunk(hdl, n, r)
        if r != hdl.rank and rhi > rlo:
            hdl._rma.get(r, off + rlo * size, dst[rlo:rhi])
    _sync(hdl, op)
    _bump(input)
    if output is None:
        return input
    _bump(output)
    return output


def _rma_all_gather(hdl: Any, input: Any, off: int, arr: np.ndarray,  # noqa: A002
                    out: Any) -> Any:
    op = "multimem_all_gather_out"
    rows = arr.reshape(hdl.world_size, -1)
    _sync(hdl, op)
    for r in range(hdl.world_size):
        if r == hdl.rank:
            rows[r] = input.numpy(force=True).reshape(-1)
        else:
            hdl._rma.get(r, off, rows[r])
    _sync(hdl, op)
    _bump(out)
    return out


_SCHEMAS = {
    "one_shot_all_reduce": "(Tensor input, str reduce_op, str group_name) -> Tensor",
    "one_shot_all_reduce_out":
        "(Tensor input, str reduce_op, str group_name, Tensor(a!) out) -> Tensor(a!)",
    "two_shot_all_reduce_": "(Tensor(a!) input, str reduce_op, str group_name) -> Tensor(a!)",
    "two_shot_all_reduce_out": "(Tensor(a!) input, str reduce_op, str group_name, "
                               "Tensor(b!) output) -> Tensor(b!)",
    "multimem_all_reduce_": "(Tensor(a!) input, str reduce_op, str group_name) -> Tensor(a!)",
    "multimem_all_gather_out": "(Tensor input, str group_name, Tensor(a!) out) -> Tensor(a!)",
}


def _register() -> None:
    """Each op is its plain function (no wrapper: the call is on the latency path) with
    PyTorch's ``.default`` (itself) and ``._schema``."""
    from ember.ops import PACKETS

    for name, schema in _SCHEMAS.items():
        fn = globals()[name]
        fn.default = fn
        fn._schema = f"symm_mem::{name}{schema}"
        PACKETS[f"symm_mem::{name}"] = fn


_register()

"""Collectives on ember tensors over MPI, for every dtype.

Tensors travel as raw bytes (so bfloat16, float16, bool and complex need no MPI datatype), and
reductions run in NumPy on the gathered contributions, in rank order, so every rank computes
bit-identical results.  Before each collective the ranks exchange a small signature (op, dtype,
shape) and all raise the same clear error when they disagree, instead of hanging or summing
garbage (a small ``all_reduce`` checks inside its one data round: ``_checks``).  Every data
phase is a non-blocking MPI call waited at most the group's timeout.  Results are written into
the caller's tensors in place, as PyTorch does.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember import dtypes as _dt
from ember.distributed._checks import FUSED_MAX_BYTES, FUSED_MAX_RANKS, fused_all_reduce
from ember.distributed._checks import check as _check
from ember.distributed._checks import local_error as _local
from ember.distributed._group import ProcessGroup, ReduceOp, Work, _resolve, wait_data
from ember.errors import DTypeError, EmberRuntimeError, EmberValueError, ShapeError

_DTYPES = list(_dt.ALL_DTYPES)


def _arr(t: Any) -> np.ndarray:
    return t.numpy(force=True)


def _bytes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _write(t: Any, values: np.ndarray) -> None:
    """Write ``values`` into ``t``'s memory (in place, as PyTorch's collectives do)."""
    dst = _arr(t)
    dst[...] = values.reshape(dst.shape)
    t._version_counter[0] += 1


def _allgather(pg: ProcessGroup, a: np.ndarray, op: str) -> np.ndarray:
    """Every rank's array stacked on a new leading dim (all arrays have the same shape)."""
    out = np.empty((pg.size(), *a.shape), a.dtype)
    wait_data(pg, op, pg.comm.Iallgather(_bytes(a), _bytes(out).reshape(pg.size(), -1)))
    return out


def _validate_op(op: ReduceOp, dtype: Any, name: str) -> None:
    kind = _kind(dtype)
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and kind == "float":
        raise DTypeError(f"[distributed.{name}] {op} needs an integer or bool tensor, got "
                         f"{dtype}")
    if op == ReduceOp.AVG and kind != "float":
        raise DTypeError(f"[distributed.{name}] ReduceOp.AVG needs a floating-point tensor, "
                         f"got {dtype}")


def _kind(dtype: Any) -> str:
    return "bool" if dtype == _dt.bool else ("float" if dtype.is_floating_point or
                                             dtype.is_complex else "int")


def _reduce_stack(stack: np.ndarray, op: ReduceOp, dtype: Any, name: str) -> np.ndarray:
    """Reduce ``stack`` over its first dim in rank order with PyTorch's meaning of ``op``."""
    return reduce_parts(list(stack), op, dtype, name)


def reduce_parts(parts: Sequence[np.ndarray], op: ReduceOp, dtype: Any,
                 name: str) -> np.ndarray:
    """Reduce the ranks' ``parts`` (equal shapes) in rank order with PyTorch's meaning of
    ``op``; 16-bit floats compute in float32 and round once."""
    _validate_op(op, dtype, name)
    ufunc = _ufunc(op, dtype)
    wide = dtype in (_dt.float16, _dt.bfloat16)
    acc = parts[0].astype(np.float32) if wide else parts[0].copy()
    for part in parts[1:]:  # rank order: the same rounding on every rank
        acc = ufunc(acc, part.astype(np.float32) if wide else part)
    if op == ReduceOp.AVG:
        acc = acc / len(parts)
    return acc.astype(parts[0].dtype)


def _ufunc(op: ReduceOp, dtype: Any) -> Any:
    """The NumPy ufunc of ``op`` on ``dtype`` (bool: logical ops, as PyTorch)."""
    if _kind(dtype) == "bool":
        return {ReduceOp.SUM: np.logical_or, ReduceOp.MAX: np.logical_or,
                ReduceOp.BOR: np.logical_or, ReduceOp.PRODUCT: np.logical_and,
                ReduceOp.MIN: np.logical_and, ReduceOp.BAND: np.logical_and,
                ReduceOp.BXOR: np.logical_xor}[op]
    return {ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PRODUCT: np.multiply,
            ReduceOp.MIN: np.minimum, ReduceOp.MAX: np.maximum,
            ReduceOp.BAND: np.bitwise_and, ReduceOp.BOR: np.bitwise_or,
            ReduceOp.BXOR: np.bitwise_xor}[op]


def _fused_ufunc(op: ReduceOp, dtype: Any) -> Any:
    """The in-place ufunc of a fused all_reduce, or None (16-bit floats and bool reduce with
    ``reduce_parts``)."""
    if dtype in (_dt.float16, _dt.bfloat16, _dt.bool) or dtype.is_complex and op in (
            ReduceOp.MIN, ReduceOp.MAX):
        return None
    return _ufunc(op, dtype)


_INTS = (_dt.uint8, _dt.int8, _dt.int16, _dt.int32, _dt.int64)
_MPI_OPS: dict = {}
_MPI_NAMES = {ReduceOp.SUM: "SUM", ReduceOp.AVG: "SUM", ReduceOp.PRODUCT: "PROD",
              ReduceOp.MIN: "MIN", ReduceOp.MAX: "MAX", ReduceOp.BAND: "BAND",
              ReduceOp.BOR: "BOR", ReduceOp.BXOR: "BXOR"}


def _mpi_op(op: ReduceOp, dtype: Any) -> Any:
    """MPI's own reduction when it gives PyTorch's result (float32/float64 SUM, AVG, PRODUCT;
    every integer op), else None (NumPy reduces the gathered parts: bool, 16-bit floats, and
    float MIN/MAX, whose NaN handling MPI does not define)."""
    key = (op, dtype)
    if key not in _MPI_OPS:
        from mpi4py import MPI

        native = dtype in _INTS or (dtype in (_dt.float32, _dt.float64) and
                                    op in (ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT))
        _MPI_OPS[key] = getattr(MPI, _MPI_NAMES[op]) if native else None
        _IN_PLACE[:] = [MPI.IN_PLACE]
    return _MPI_OPS[key]


_IN_PLACE: list = []  # MPI.IN_PLACE, set by _mpi_op's first call


def _start(async_op: bool, request: Any, on_done: Any, pg: ProcessGroup,
           op: str) -> Work | None:
    """Run (``async_op=False``) or hand back (``True``) a started MPI non-blocking operation;
    waiting for it raises past the group's timeout."""
    work = Work(request, on_done=on_done, timeout=pg.timeout.total_seconds(), op=op)
    if async_op:
        return work
    work.wait()
    return None


def _done(async_op: bool, result: Any = None) -> Work | None:
    return Work(result=result) if async_op else None


def _op(op: Any) -> ReduceOp:
    if not isinstance(op, ReduceOp):
        raise EmberValueError(f"[distributed] expected a ReduceOp, got {op!r}")
    return op


def _inplace_buffer(t: Any) -> tuple[np.ndarray, np.ndarray]:
    """(``t``'s array, a C-contiguous buffer MPI may write): the array itself when it can."""
    arr = _arr(t)
    if arr.flags.c_contiguous and arr.flags.writeable:
        return arr, arr
    return arr, np.ascontiguousarray(arr).copy()


def all_reduce(tensor: Any, op: ReduceOp = ReduceOp.SUM, group: Any = None,
               async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` over the ranks of ``group``; every rank gets the result in place.
    Up to ``FUSED_MAX_BYTES`` the data and the cross-rank check travel in one message round
    (``_checks.fused_all_reduce``); larger tensors exchange signatures, then run MPI's
    ``Iallreduce`` (or ``Iallgather`` and a NumPy reduction for bool and 16-bit floats).  With
    ``async_op=True`` the tensor holds the result after ``work.wait()``.

    >>> t = ember.tensor([float(dist.get_rank() + 1)])   # doctest: +SKIP
    >>> dist.all_reduce(t); t                            # doctest: +SKIP
    tensor([3.])
    """
    pg = _resolve(group, "all_reduce")
    if op.__class__ is not ReduceOp:
        op = _op(op)
    arr = tensor._data
    if arr.__class__ is not np.ndarray:
        arr = _arr(tensor)
    shm = pg.shm
    if shm is not None and arr.nbytes <= shm.cap:
        return shm.all_reduce(tensor, arr, op, async_op, _validate_op)
    if arr.nbytes <= FUSED_MAX_BYTES and (pg.pair is not None or
                                          1 < pg.size() <= FUSED_MAX_RANKS):
        return fused_all_reduce(pg, tensor, arr, op, async_op, _validate_op, _fused_ufunc)
    dtype = tensor.dtype
    _check(pg, "all_reduce", tensor, _local(_validate_op, op, dtype, "all_reduce"))
    mop = _mpi_op(op, dtype)
    if mop is None:
        a = _arr(tensor)
        stack = np.empty((pg.size(), *a.shape), a.dtype)
        req = pg.comm.Iallgather(_bytes(a), _bytes(stack).reshape(pg.size(), -1))
        return _start(async_op, req, lambda: _write(
            tensor, _reduce_stack(stack, op, tensor.dtype, "all_reduce")), pg, "all_reduce")
    arr, buf = _inplace_buffer(tensor)
    req = pg.comm.Iallreduce(_IN_PLACE[0], buf.reshape(-1), op=mop)
    return _start(async_op, req, _finisher(tensor, arr, buf, op, pg.size()), pg, "all_reduce")


def _finisher(tensor: Any, arr: np.ndarray, buf: np.ndarray, op: ReduceOp | None,
              n: int) -> Any:
    """The completion of an MPI reduction into ``buf``: divide by ``n`` for AVG, copy into
    ``arr`` (``tensor``'s array) when MPI wrote a copy, bump ``tensor``'s version."""
    def finish() -> None:
        if op == ReduceOp.AVG:
            np.divide(buf, n, out=buf)
        if buf is not arr:
            arr[...] = buf
        tensor._version_counter[0] += 1
    return finish


def _check_list(name: str, ref: Any, tensors: Sequence[Any], n: int, what: str) -> None:
    if len(tensors) != n:
        raise EmberValueError(f"[distributed.{name}] {what} must hold world_size={n} tensors, "
                              f"got {len(tensors)}")
    for i, t in enumerate(tensors):
        if t.dtype != ref.dtype:
            raise DTypeError(f"[distributed.{name}] {what}[{i}] has dtype {t.dtype}, expected "
                             f"{ref.dtype}")
        if tuple(t.shape) != tuple(ref.shape):
            raise ShapeError(f"[distributed.{name}] {what}[{i}] has shape {tuple(t.shape)}, "
                             f"expected {tuple(ref.shape)}")


def all_gather(tensor_list: list[Any], tensor: Any, group: Any = None,
               async_op: bool = False) -> Work | None:
    """Fill ``tensor_list[r]`` with rank r's ``tensor``."""
    pg = _resolve(group, "all_gather")
    err = _local(_check_list, "all_gather", tensor, tensor_list, pg.size(), "tensor_list")
    _check(pg, "all_gather", tensor, err)
    a = np.ascontiguousarray(_arr(tensor))
    stack = np.empty((pg.size(), *a.shape), a.dtype)
    req = pg.comm.Iallgather(_bytes(a), _bytes(stack).reshape(pg.size(), -1))

    def finish() -> None:
        for out, part in zip(tensor_list, stack):
            _write(out, part)
    return _start(async_op, req, finish, pg, "all_gather")


def _check_multiple(name: str, big: Any, small: Any, n: int, big_name: str) -> None:
    if big.dtype != small.dtype:
        raise DTypeError(f"[distributed.{name}] input and output dtypes differ: {small.dtype} "
                         f"and {big.dtype}")
    if big.numel() != n * small.numel():
        raise ShapeError(f"[distributed.{name}] {big_name} must have world_size ({n}) times "
                         f"the elements of the other tensor: got shapes {tuple(big.shape)} and "
                         f"{tuple(small.shape)}")


def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: Any = None,
                           async_op: bool = False) -> Work | None:
    """Concatenate (or stack) every rank's ``input_tensor`` into ``output_tensor``."""
    pg = _resolve(group, "all_gather_into_tensor")
    err = _local(_check_multiple, "all_gather_into_tensor", output_tensor, input_tensor,
                 pg.size(), "output_tensor")
    _check(pg, "all_gather_into_tensor", input_tensor, err)
    a = np.ascontiguousarray(_arr(input_tensor))
    arr, buf = _inplace_buffer(output_tensor)  # MPI writes the output's memory when it can
    req = pg.comm.Iallgather(_bytes(a), _bytes(buf).reshape(pg.size(), -1))
    return _start(async_op, req, _finisher(output_tensor, arr, buf, None, pg.size()), pg,
                  "all_gather_into_tensor")


def reduce_scatter_tensor(output: Any, input: Any, op: ReduceOp = ReduceOp.SUM,  # noqa: A002
                          group: Any = None, async_op: bool = False) -> Work | None:
    """Reduce ``input`` over the ranks and give rank r the r-th chunk (along dim 0)."""
    pg = _resolve(group, "reduce_scatter_tensor")
    err = _local(_check_multiple, "reduce_scatter_tensor", input, output, pg.size(), "input")
    _check(pg, "reduce_scatter_tensor", input, err)
    op = _op(op)
    a = np.ascontiguousarray(_arr(input))
    mop = _mpi_op(op, input.dtype)
    if mop is None:
        stack = np.empty((pg.size(), *a.shape), a.dtype)
        req = pg.comm.Iallgather(_bytes(a), _bytes(stack).reshape(pg.size(), -1))
        return _start(async_op, req, lambda: _write(output, _reduce_stack(
            stack, op, input.dtype, "reduce_scatter_tensor").reshape(pg.size(), -1)[pg.rank()]),
            pg, "reduce_scatter_tensor")
    arr, buf = _inplace_buffer(output)
    req = pg.comm.Ireduce_scatter_block(a.reshape(-1), buf.reshape(-1), op=mop)
    return _start(async_op, req, _finisher(output, arr, buf, op, pg.size()), pg,
                  "reduce_scatter_tensor")


def reduce_scatter(output: Any, input_list: list[Any], op: ReduceOp = ReduceOp.SUM,
                   group: Any = None, async_op: bool = False) -> Work | None:
    """Reduce ``input_list[r]`` over the ranks into rank r's ``output``."""
    pg = _resolve(group, "reduce_scatter")
    err = _local(_check_list, "reduce_scatter", output, input_list, pg.size(), "input_list")
    _check(pg, "reduce_scatter", output, err)
    full = np.stack([_arr(t) for t in input_list])
    red = _reduce_stack(_allgather(pg, full, "reduce_scatter"), _op(op), output.dtype,
                        "reduce_scatter")
    _write(output, red[pg.rank()])
    return _done(async_op)


def _group_src(pg: ProcessGroup, name: str, src: int | None, group_src: int | None) -> int:
    if group_src is not None:
        return int(group_src)
    if src is None:
        raise EmberValueError(f"[distributed.{name}] give src (a global rank) or group_src")
    if src not in pg.ranks:
        raise EmberValueError(f"[distributed.{name}] rank {src} is not part of the group")
    return pg.ranks.index(src)


def broadcast(tensor: Any, src: int | None = None, group: Any = None, async_op: bool = False,
              group_src: int | None = None) -> Work | None:
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank."""
    pg = _resolve(group, "broadcast")
    root = _group_src(pg, "broadcast", src, group_src)
    _check(pg, "broadcast", tensor)
    arr, buf = _inplace_buffer(tensor)
    req = pg.comm.Ibcast(_bytes(buf) if buf.size else buf.view(np.uint8), root=root)

    def finish() -> None:
        if pg.rank() != root:
            if buf is not arr:
                arr[...] = buf
            tensor._version_counter[0] += 1
    return _start(async_op, req, finish, pg, "broadcast")


def reduce(tensor: Any, dst: int | None = None, op: ReduceOp = ReduceOp.SUM, group: Any = None,
           async_op: bool = False, group_dst: int | None = None) -> Work | None:
    """Reduce ``tensor`` over the ranks into rank ``dst``'s ``tensor``."""
    pg = _resolve(group, "reduce")
    root = _group_src(pg, "reduce", dst, group_dst)
    _check(pg, "reduce", tensor)
    a = _arr(tensor)
    stack = np.empty((pg.size(), *a.shape), a.dtype) if pg.rank() == root else None
    wait_data(pg, "reduce", pg.comm.Igather(
        _bytes(a), None if stack is None else _bytes(stack).reshape(pg.size(), -1), root=root))
    if stack is not None:
        _write(tensor, _reduce_stack(stack, _op(op), tensor.dtype, "reduce"))
    return _done(async_op)


def gather(tensor: Any, gather_list: list[Any] | None = None, dst: int | None = None,
           group: Any = None, async_op: bool = False, group_dst: int | None = None) -> Work | None:
    """Collect every rank's ``tensor`` into ``gather_list`` on rank ``dst``."""
    pg = _resolve(group, "gather")
    root = _group_src(pg, "gather", 0 if dst is None and group_dst is None else dst, group_dst)
    err = (_local(_check_list, "gather", tensor, gather_list or [], pg.size(), "gather_list")
           if pg.rank() == root else None)
    _check(pg, "gather", tensor, err)
    a = _arr(tensor)
    stack = np.empty((pg.size(), *a.shape), a.dtype) if pg.rank() == root else None
    wait_data(pg, "gather", pg.comm.Igather(
        _bytes(a), None if stack is None else _bytes(stack).reshape(pg.size(), -1), root=root))
    if stack is not None:
        for out, part in zip(gather_list, stack):
            _write(out, part)
    return _done(async_op)


def scatter(tensor: Any, scatter_list: list[Any] | None = None, src: int | None = None,
            group: Any = None, async_op: bool = False, group_src: int | None = None) -> Work | None:
    """Give rank r ``scatter_list[r]`` of rank ``src``."""
    pg = _resolve(group, "scatter")
    root = _group_src(pg, "scatter", 0 if src is None and group_src is None else src, group_src)
    err = (_local(_check_list, "scatter", tensor, scatter_list or [], pg.size(), "scatter_list")
           if pg.rank() == root else None)
    _check(pg, "scatter", tensor, err)
    a = np.ascontiguousarray(_arr(tensor))
    send = (np.stack([_arr(t) for t in scatter_list]) if pg.rank() == root else None)
    wait_data(pg, "scatter", pg.comm.Iscatter(
        None if send is None else _bytes(send).reshape(pg.size(), -1), _bytes(a), root=root))
    _write(tensor, a)
    return _done(async_op)


def _splits(name: str, sizes: Sequence[int] | None, rows: int, n: int) -> list[int]:
    if sizes is None or len(sizes) == 0:
        if rows % n:
            raise ShapeError(f"[distributed.{name}] dim 0 ({rows}) must divide by world_size "
                             f"({n}) when no split sizes are given")
        return [rows // n] * n
    if len(sizes) != n or sum(sizes) != rows:
        raise ShapeError(f"[distributed.{name}] split sizes {list(sizes)} must have world_size "
                         f"({n}) entries summing to dim 0 ({rows})")
    return [int(s) for s in sizes]


def all_to_all_single(output: Any, input: Any,  # noqa: A002
                      output_split_sizes: list[int] | None = None,
                      input_split_sizes: list[int] | None = None, group: Any = None,
                      async_op: bool = False) -> Work | None:
    """Rank r sends its i-th chunk of ``input`` (dim 0) to rank i, which stores it as its r-th
    chunk of ``output``."""
    pg = _resolve(group, "all_to_all_single")
    n = pg.size()
    a, o = np.ascontiguousarray(_arr(input)), np.ascontiguousarray(_arr(output))
    cin, cout, err = _a2a_counts(input, output, a, o, input_split_sizes, output_split_sizes, n)
    # each receiver checks that what is sent to it matches what it expects; all ranks agree
    expect = np.empty(n, np.int64)
    wait_data(pg, "all_to_all_single", pg.comm.Ialltoall(np.array(cin, np.int64), expect))
    if err is None and list(expect) != cout:
        err = EmberRuntimeError(f"[distributed.all_to_all_single] rank {pg.ranks[pg.rank()]} "
                                f"expects chunks of {cout} bytes but the ranks send "
                                f"{list(expect)}")
    _check(pg, "all_to_all_single", input.reshape(-1)[:0], err)
    wait_data(pg, "all_to_all_single", pg.comm.Ialltoallv(
        [_bytes(a), (cin, np.cumsum([0] + cin[:-1]).tolist())],
        [_bytes(o), (cout, np.cumsum([0] + cout[:-1]).tolist())]))
    _write(output, o)
    return _done(async_op)


def _a2a_counts(input: Any, output: Any, a: np.ndarray, o: np.ndarray,  # noqa: A002
                sizes_in: Any, sizes_out: Any, n: int) -> tuple[list, list, Exception | None]:
    """Byte counts each rank sends and receives (zeros with the error when the args are bad)."""
    try:
        if input.dtype != output.dtype:
            raise DTypeError(f"[distributed.all_to_all_single] input and output dtypes differ: "
                             f"{input.dtype} and {output.dtype}")
        row_in = a[:1].nbytes if a.ndim and a.shape[0] else a.itemsize
        row_out = o[:1].nbytes if o.ndim and o.shape[0] else o.itemsize
        sin = _splits("all_to_all_single", sizes_in, a.shape[0] if a.ndim else 1, n)
        sout = _splits("all_to_all_single", sizes_out, o.shape[0] if o.ndim else 1, n)
        return [s * row_in for s in sin], [s * row_out for s in sout], None
    except (DTypeError, ShapeError) as e:
        return [0] * n, [0] * n, e


def all_to_all(output_tensor_list: list[Any], input_tensor_list: list[Any], group: Any = None,
               async_op: bool = False) -> Work | None:
    """Rank r sends ``input_tensor_list[i]`` to rank i, which stores it in its
    ``output_tensor_list[r]`` (PyTorch's list form; tensors may differ in size per pair, not
    in dtype).

    >>> out = [ember.empty(2) for _ in range(world)]            # doctest: +SKIP
    >>> ins = [ember.full((2,), 10. * r + i) for i in range(world)]  # doctest: +SKIP
    >>> dist.all_to_all(out, ins)                                    # doctest: +SKIP
    """
    pg = _resolve(group, "all_to_all")
    n = pg.size()
    err = _local(_check_a2a_lists, output_tensor_list, input_tensor_list, n)
    probe = input_tensor_list[0].reshape(-1)[:0] if err is None else _empty_probe()
    _check(pg, "all_to_all", probe, err)  # bad lists on any rank: every rank raises
    ins = [np.ascontiguousarray(_arr(t)) for t in input_tensor_list]
    outs = [np.ascontiguousarray(_arr(t)) for t in output_tensor_list]
    cin, cout = [a.nbytes for a in ins], [a.nbytes for a in outs]
    expect = np.empty(n, np.int64)
    wait_data(pg, "all_to_all", pg.comm.Ialltoall(np.array(cin, np.int64), expect))
    sent = [int(x) for x in expect]
    bad = np.array([int(sent != cout)], np.int64)
    wait_data(pg, "all_to_all", pg.comm.Iallreduce(_in_place(), bad, op=_mpi_max()))
    if bad[0]:  # sizes that do not pair up
        raise EmberRuntimeError(f"[distributed.all_to_all] rank {pg.ranks[pg.rank()]} expects "
                                f"tensors of {cout} bytes from the ranks, which send {sent}"
                                if sent != cout else "[distributed.all_to_all] the ranks' "
                                "tensor sizes do not pair up (another rank's error says where)")
    send = np.concatenate([a.reshape(-1).view(np.uint8) for a in ins])
    recv = np.empty(sum(cout), np.uint8)
    wait_data(pg, "all_to_all", pg.comm.Ialltoallv(
        [send, (cin, np.cumsum([0] + cin[:-1]).tolist())],
        [recv, (cout, np.cumsum([0] + cout[:-1]).tolist())]))
    start = 0
    for t, a in zip(output_tensor_list, outs):
        a.reshape(-1).view(np.uint8)[...] = recv[start:start + a.nbytes]
        start += a.nbytes
        _write(t, a)
    return _done(async_op)


def _check_a2a_lists(outs: Sequence[Any], ins: Sequence[Any], n: int) -> None:
    for what, ts in (("input_tensor_list", ins), ("output_tensor_list", outs)):
        if not isinstance(ts, (list, tuple)) or len(ts) != n:
            raise EmberValueError(f"[distributed.all_to_all] {what} must hold world_size={n} "
                                  f"tensors, got {len(ts) if hasattr(ts, '__len__') else ts!r}")
    for i, t in enumerate(list(ins) + list(outs)):
        if t.dtype != ins[0].dtype:
            what = "input_tensor_list" if i < n else "output_tensor_list"
            raise DTypeError(f"[distributed.all_to_all] {what}[{i % n}] has dtype {t.dtype}, "
                             f"expected {ins[0].dtype}")


def _empty_probe() -> Any:
    import ember

    return ember.empty(0)


def _in_place() -> Any:
    from mpi4py import MPI

    return MPI.IN_PLACE


def _mpi_max() -> Any:
    from mpi4py import MPI

    return MPI.MAX


def all_gather_single(output_tensor: Any, input_tensor: Any, group: Any = None,
                      async_op: bool = False) -> Work | None:
    """PyTorch 2.13's name for ``all_gather_into_tensor`` (the same call)."""
    return all_gather_into_tensor(output_tensor, input_tensor, group, async_op)


def reduce_scatter_single(output: Any, input: Any, op: ReduceOp = ReduceOp.SUM,  # noqa: A002
                          group: Any = None, async_op: bool = False) -> Work | None:
    """PyTorch 2.13's name for ``reduce_scatter_tensor`` (the same call)."""
    return reduce_scatter_tensor(output, input, op, group, async_op)

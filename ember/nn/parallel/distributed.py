"""``DistributedDataParallel``: data parallelism over an ``ember.distributed`` process group.

At construction rank 0's parameters and buffers are broadcast to every rank and the parameters
are split into buckets of at most ``bucket_cap_mb`` (per dtype, reverse registration order,
roughly the order backward produces the gradients).  Each parameter gets a post-accumulate-grad
hook: as soon as every gradient of a bucket is there, the bucket is flattened and all-reduced
with ``async_op=True`` (an MPI ``Iallreduce``) while autograd goes on computing the other
gradients; buckets start in index order on every rank (MPI needs the same order everywhere).
When the last gradient arrives, the works are waited for and the averages written back into
``.grad``.  Inside ``no_sync()`` the hooks do nothing, so gradients accumulate locally and the
next synchronized backward averages the sum.  With ``find_unused_parameters=True`` the
reduction waits for the last expected gradient (the set of used parameters is agreed first).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator

import numpy as np

from ember.errors import EmberRuntimeError, EmberValueError
from ember.nn.modules.module import Module
from ember.tensor import Tensor


def _dist() -> Any:
    # ember.distributed is a higher layer: look it up only if something imported it
    dist = sys.modules.get("ember.distributed")
    if dist is None or not dist.is_initialized():
        raise EmberValueError("[DistributedDataParallel] Default process group has not been "
                              "initialized, please make sure to call init_process_group.")
    return dist


class DistributedDataParallel(Module):
    """Wrap ``module`` so that ``loss.backward()`` leaves every rank with the gradients averaged
    over the ranks of ``process_group`` (the default group when ``None``).

    >>> model = DistributedDataParallel(net)            # doctest: +SKIP
    >>> model(x).sum().backward()      # grads averaged over ranks   # doctest: +SKIP
    >>> with model.no_sync():                            # doctest: +SKIP
    ...     model(x).sum().backward()                    # local accumulation only
    """

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: bool = True, init_sync: bool = True,
                 process_group: Any = None, bucket_cap_mb: float | None = None,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False,
                 delay_all_reduce_named_params: Any = None, param_to_hook_all_reduce: Any = None,
                 mixed_precision: Any = None, device_mesh: Any = None,
                 skip_all_reduce_unused_params: bool = False) -> None:
        dist = _dist()
        super().__init__()
        self.module = module
        self.device_ids = None
        self.output_device = None
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024**2)
        self.require_backward_grad_sync = True
        self._params = [p for p in module.parameters() if p.requires_grad]
        self._expected: set[int] = {id(p) for p in self._params}
        self._ready: set[int] = set()
        self._buckets = list(_buckets(self._params, self.bucket_bytes_cap))
        self._bucket_of = {id(p): i for i, b in enumerate(self._buckets) for p in b}
        self._filled = [0] * len(self._buckets)
        self._works: list = []          # (bucket, flat tensor, Work) launched this backward
        self.launch_log: list = []      # (bucket index, gradients still missing) per launch
        if init_sync:
            self._sync_module_states()
        for p in self._params:
            p.register_post_accumulate_grad_hook(self._on_grad)

    # ------------------------------------------------------------------ state broadcast
    def _sync_module_states(self) -> None:
        dist = _dist()
        src = dist.get_global_rank(self.process_group, 0)
        for t in [*self.module.parameters(), *self.module.buffers()]:
            dist.broadcast(t.detach(), src=src, group=self.process_group)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        dist = _dist()
        if self.broadcast_buffers and self.module.training:
            src = dist.get_global_rank(self.process_group, 0)
            for b in self.module.buffers():
                dist.broadcast(b, src=src, group=self.process_group)
        if self._ready and not self.find_unused_parameters:
            raise EmberRuntimeError(
                "[DistributedDataParallel] Expected to have finished reduction in the prior "
                "iteration before starting a new one. This error indicates that your module "
                "has parameters that were not used in producing loss. You can enable unused "
                "parameter detection by passing the keyword argument "
                "`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`; "
                f"parameters that got no gradient: {self._missing()}")
        self._ready.clear()
        out = self.module(*inputs, **kwargs)
        if self.find_unused_parameters:
            self._expected = _reachable_params(out) & {id(p) for p in self._params}
        return out

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Skip the gradient all-reduce for backwards run inside the block."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # ------------------------------------------------------------------ gradient reduction
    def _missing(self) -> list[str]:
        names = {id(p): n for n, p in self.module.named_parameters()}
        return [names.get(id(p), "?") for p in self._params if id(p) not in self._ready]

    def _on_grad(self, param: Any) -> None:
        if not self.require_backward_grad_sync or id(param) in self._ready:
            return
        self._ready.add(id(param))
        if self.find_unused_parameters:
            if self._expected <= self._ready:
                self._ready.clear()
                self._reduce_grads()
            return
        self._filled[self._bucket_of[id(param)]] += 1
        self._launch_ready_buckets()
        for _, _, work in self._works:
            work.is_completed()  # lets MPI progress the reductions already started
        if len(self._ready) == len(self._params):
            self._finish()

    def _launch_ready_buckets(self) -> None:
        """Start every complete bucket whose predecessors have started (same order on every
        rank)."""
        dist = _dist()
        while len(self._works) < len(self._buckets):
            i = len(self._works)
            bucket = self._buckets[i]
            if self._filled[i] < len(bucket):
                return
            t = Tensor._from_array(np.concatenate([_grad_array(p).reshape(-1)
                                                   for p in bucket]))
            work = dist.all_reduce(t, op=dist.ReduceOp.AVG, group=self.process_group,
                                   async_op=True)
            self.launch_log.append((i, len(self._params) - len(self._ready)))
            self._works.append((bucket, t, work))

    def _finish(self) -> None:
        works, self._works = self._works, []
        self._filled = [0] * len(self._buckets)
        self._ready.clear()
        for bucket, t, work in works:
            work.wait()
            _write_back(bucket, t.numpy())

    def _reduce_grads(self) -> None:
        dist = _dist()
        params = self._params  # the same list on every rank, so the buckets match
        if self.find_unused_parameters:
            # a parameter unused on every rank keeps grad None, as in PyTorch
            used = Tensor._from_array(np.array([p.grad is not None for p in params], np.uint8))
            dist.all_reduce(used, op=dist.ReduceOp.MAX, group=self.process_group)
            params = [p for p, u in zip(params, used.numpy()) if u]
        for bucket in _buckets(params, self.bucket_bytes_cap):
            flat = np.concatenate([_grad_array(p).reshape(-1) for p in bucket])
            t = Tensor._from_array(flat)
            dist.all_reduce(t, op=dist.ReduceOp.AVG, group=self.process_group)
            _write_back(bucket, t.numpy())


def _write_back(bucket: list, avg: np.ndarray) -> None:
    off = 0
    for p in bucket:
        k = p.numel()
        values = avg[off:off + k].reshape(tuple(p.shape))
        if p.grad is None:
            p.grad = Tensor._from_array(values.copy())
        else:
            p.grad.numpy(force=True)[...] = values
        off += k


def _grad_array(p: Any) -> np.ndarray:
    if p.grad is None:  # unused on this rank: contributes zeros, as in PyTorch
        return np.zeros(tuple(p.shape), p.detach().numpy().dtype)
    return p.grad.numpy(force=True)


def _buckets(params: list, cap: int) -> Iterator[list]:
    """Parameters in reverse registration order (roughly the order backward produces them),
    grouped by dtype into buckets of at most ``cap`` bytes (a larger parameter gets its own)."""
    by_dtype: dict[Any, list] = {}
    for p in reversed(params):
        by_dtype.setdefault(p.dtype, []).append(p)
    for group in by_dtype.values():
        bucket: list = []
        size = 0
        for p in group:
            nbytes = p.numel() * p.element_size()
            if bucket and size + nbytes > cap:
                yield bucket
                bucket, size = [], 0
            bucket.append(p)
            size += nbytes
        if bucket:
            yield bucket


def _reachable_params(out: Any) -> set[int]:
    """ids of the leaf tensors the autograd graph of ``out`` reaches (find_unused_parameters)."""
    stack = [t.grad_fn for t in _tensors(out) if getattr(t, "grad_fn", None) is not None]
    seen: set[int] = set()
    found: set[int] = set()
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        var = getattr(fn, "variable", None)
        if var is not None:
            found.add(id(var))
        for nxt in getattr(fn, "next_functions", ()) or ():
            if nxt is not None:
                stack.append(nxt[0])
    return found


def _tensors(out: Any) -> list:
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _tensors(o)]
    return [out] if hasattr(out, "grad_fn") else []

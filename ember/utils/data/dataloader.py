"""``DataLoader``: batches from a dataset, in this process or in ``spawn``-ed worker processes.

>>> from ember.utils.data import DataLoader, TensorDataset
>>> ds = TensorDataset(ember.arange(5.0))
>>> [b[0].tolist() for b in DataLoader(ds, batch_size=2)]
[[0.0, 1.0], [2.0, 3.0], [4.0]]
"""

from __future__ import annotations

import itertools
import math
import multiprocessing as mp
import os
import queue
import signal
import time
import warnings
from typing import Any, Callable, Iterable, Iterator

from ember import random as _random
from ember._frontend.random import randint
from ember.utils.data import _worker
from ember.utils.data._collate import default_collate, default_convert
from ember.utils.data.dataset import Dataset, IterableDataset
from ember.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    _InfiniteConstantSampler,
)

__all__ = ["DataLoader"]

_LIVENESS_CHECK_INTERVAL = 1.0  # seconds between checks for dead workers while waiting

_FROZEN_ATTRS = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                 "persistent_workers")


class DataLoader:
    """Iterates over ``dataset`` in batches, with PyTorch's arguments and checks.

    ``num_workers > 0`` loads in that many worker processes (``spawn`` start method; the
    dataset, ``collate_fn`` and ``worker_init_fn`` must pickle).  Batches come back in sampler
    order.  ``pin_memory`` is accepted and does nothing (CPU only).
    """

    def __init__(self, dataset: Dataset, batch_size: int | None = 1,
                 shuffle: bool | None = None, sampler: Sampler | Iterable | None = None,
                 batch_sampler: Sampler | Iterable | None = None, num_workers: int = 0,
                 collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable | None = None, multiprocessing_context: Any = None,
                 generator: _random.Generator | None = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; "
                             "use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.in_order = in_order
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in {False, None}:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)  # type: ignore[arg-type]
            else:
                sampler = SequentialSampler(dataset)  # type: ignore[arg-type]
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self.multiprocessing_context = multiprocessing_context
        self._IterableDataset_len_called: int | None = None
        self._iterator: _BaseIter | None = None
        self.__initialized = True

    def __setattr__(self, attr: str, val: Any) -> None:
        if self.__dict__.get("_DataLoader__initialized") and attr in _FROZEN_ATTRS:
            raise ValueError(f"{attr} attribute should not be set after "
                             f"{self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def multiprocessing_context(self) -> Any:
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, ctx: Any) -> None:
        if ctx is not None:
            if self.num_workers == 0:
                raise ValueError(f"multiprocessing_context can only be used with multi-process "
                                 f"loading (num_workers > 0), but got num_workers="
                                 f"{self.num_workers}")
            if isinstance(ctx, str):
                valid = mp.get_all_start_methods()
                if ctx not in valid:
                    raise ValueError(f"multiprocessing_context option should specify a valid "
                                     f"start method in {valid!r}, but got "
                                     f"multiprocessing_context={ctx!r}")
                ctx = mp.get_context(ctx)
        self.__multiprocessing_context = ctx

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    def _get_iterator(self) -> _BaseIter:
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        return _MultiProcessIter(self)

    def __iter__(self) -> _BaseIter:
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def __len__(self) -> int:
        if self._iterable:
            length = self._IterableDataset_len_called = len(self.dataset)  # type: ignore
            if self.batch_size is not None:
                if self.drop_last:
                    length = length // self.batch_size
                else:
                    length = math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)


class _BaseIter:
    def __init__(self, loader: DataLoader) -> None:
        self._dataset = loader.dataset
        self._iterable = loader._iterable
        self._index_sampler = loader._index_sampler
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._collate_fn = loader.collate_fn
        self._num_workers = loader.num_workers
        self._timeout = loader.timeout
        # PyTorch draws the workers' base seed from the loader's generator (or the default one).
        self._base_seed = int(randint(0, 2**63 - 1, (), generator=loader.generator).item())
        self._sampler_iter: Iterator[Any] | None = None
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def __iter__(self) -> _BaseIter:
        return self

    def _reset(self, loader: DataLoader, first_iter: bool = False) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self) -> Any:
        return next(self._sampler_iter)  # type: ignore[arg-type]

    def _next_data(self) -> Any:
        raise NotImplementedError

    def __next__(self) -> Any:
        data = self._next_data()
        self._num_yielded += 1
        n = self._IterableDataset_len_called
        if self._iterable and n is not None and self._num_yielded > n:
            warnings.warn(f"Length of IterableDataset {self._dataset} was reported to be {n} "
                          f"(when accessing len(dataloader)), but {self._num_yielded} samples "
                          f"have been fetched. ", stacklevel=2)
        return data

    def __len__(self) -> int:
        return len(self._index_sampler)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        self._fetcher = _worker.make_fetcher(self._iterable, self._dataset, self._auto_collation,
                                             self._collate_fn, self._drop_last)
        self._reset(loader, first_iter=True)

    def _next_data(self) -> Any:
        return self._fetcher.fetch(self._next_index())


class _MultiProcessIter(_BaseIter):
    """Workers, one index queue each, one result queue; results re-ordered by task number."""

    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        self._prefetch_factor = loader.prefetch_factor
        ctx = loader.multiprocessing_context or mp.get_context("spawn")
        self._worker_result_queue = ctx.Queue()
        self._workers_done_event = ctx.Event()
        self._index_queues: list[Any] = []
        self._workers: list[Any] = []
        self._shutdown = False
        self._persistent_workers = loader.persistent_workers
        for i in range(self._num_workers):
            index_queue = ctx.Queue()
            index_queue.cancel_join_thread()
            w = ctx.Process(
                target=_worker.worker_loop,
                args=(self._iterable, self._dataset, index_queue, self._worker_result_queue,
                      self._workers_done_event, self._auto_collation, self._collate_fn,
                      self._drop_last, self._base_seed, loader.worker_init_fn, i,
                      self._num_workers, os.getpid()))
            w.daemon = True
            w.start()
            self._index_queues.append(index_queue)
            self._workers.append(w)
        self._reset(loader, first_iter=True)

    def _reset(self, loader: DataLoader, first_iter: bool = False) -> None:
        super()._reset(loader, first_iter)
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info: dict[int, tuple] = {}
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            # Persistent workers: restart every worker's fetcher and wait for the acks.
            for q in self._index_queues:
                q.put(_worker.ResumeIteration())
            remaining = self._num_workers
            while remaining > 0:
                tag, _ = self._get_data()
                if isinstance(tag, _worker.ResumeIteration):
                    remaining -= 1
        for _ in range(self._prefetch_factor * self._num_workers):  # type: ignore[operator]
            self._try_put_index()

    def _try_get_data(self, timeout: float) -> tuple[bool, Any]:
        try:
            return True, self._worker_result_queue.get(timeout=timeout)
        except queue.Empty:
            # Only workers still in use count: a worker told to stop exits normally.
            failed = [w for i, w in enumerate(self._workers)
                      if self._workers_status[i] and not w.is_alive()]
            if failed:
                pids = ", ".join(str(w.pid) for w in failed)
                how = "; ".join(f"worker {self._workers.index(w)}: {_how_it_ended(w)}"
                                for w in failed)
                self._shutdown_workers()  # the others stop too: no orphan processes
                raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited "
                                   f"unexpectedly ({how})") from None
            return False, None

    def _get_data(self) -> Any:
        # Wait in short slices so that a dead worker is noticed within a second, not only
        # after the whole ``timeout``.
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else math.inf
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
            ok, data = self._try_get_data(min(remaining, _LIVENESS_CHECK_INTERVAL))
            if ok:
                return data

    def _next_data(self) -> Any:
        while True:
            # Skip tasks of workers whose IterableDataset copy ran out.
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._workers_status[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                return self._process_data(self._task_info.pop(self._rcvd_idx)[1])
            idx, data = self._get_data()
            self._tasks_outstanding -= 1
            if self._iterable and isinstance(data, _worker.IterableDatasetStopIteration):
                if self._persistent_workers:
                    self._workers_status[data.worker_id] = False
                else:
                    self._mark_worker_as_unavailable(data.worker_id)
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                self._task_info[idx] += (data,)  # early: keep it until its turn
            else:
                del self._task_info[idx]
                return self._process_data(data)

    def _try_put_index(self) -> None:
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_queue_idx_cycle)
            if self._workers_status[worker_id]:
                break
        else:
            return  # every worker is done
        self._index_queues[worker_id].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _process_data(self, data: Any) -> Any:
        self._rcvd_idx += 1
        self._try_put_index()
        if isinstance(data, _worker.ExceptionWrapper):
            data.reraise()
        return data

    def _mark_worker_as_unavailable(self, worker_id: int, shutdown: bool = False) -> None:
        self._index_queues[worker_id].put(None)
        self._workers_status[worker_id] = False

    def _shutdown_workers(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True
        try:
            self._workers_done_event.set()
            status = getattr(self, "_workers_status", [True] * len(self._workers))
            for i in range(len(self._workers)):
                if self._persistent_workers or status[i]:
                    self._mark_worker_as_unavailable(i, shutdown=True)
            for w in self._workers:
                w.join(timeout=_worker.MP_STATUS_CHECK_INTERVAL)
            for q in self._index_queues:
                q.cancel_join_thread()
                q.close()
            self._worker_result_queue.cancel_join_thread()
            self._worker_result_queue.close()
        finally:
            for w in self._workers:
                if w.is_alive():
                    w.terminate()

    def __del__(self) -> None:
        if hasattr(self, "_shutdown"):  # __init__ may have failed before any worker started
            self._shutdown_workers()


def _how_it_ended(w: Any) -> str:
    """``killed by signal SIGKILL`` or ``exit code 3`` for a dead worker process."""
    code = w.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"

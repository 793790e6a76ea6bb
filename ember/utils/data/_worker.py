"""What runs inside a DataLoader worker process, and what the main process reads back.

Workers are started with the ``spawn`` context: a fresh interpreter that imports ember, never a
fork (a forked child would inherit OpenMP thread pools in a broken state).  A worker reads
``(send_idx, index)`` tasks from its own index queue, fetches and collates, and puts
``(send_idx, batch)`` on the shared result queue; ``None`` tells it to exit.
"""

from __future__ import annotations

import os
import queue
import random
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ember import random as _random

__all__ = ["ExceptionWrapper", "WorkerInfo", "get_worker_info"]

MP_STATUS_CHECK_INTERVAL = 5.0  # seconds shutdown waits for each worker to exit
# How often an idle worker looks at the done event.  Shutdown also sends ``None`` on the index
# queue, but when the iterator dies in a reference cycle the queue's feeder thread may be gone
# before ``__del__`` runs, so the event is the signal that always arrives.
WORKER_POLL_INTERVAL = 0.5


class WorkerInfo:
    """``id``, ``num_workers``, ``seed`` and ``dataset`` (this worker's copy) of a worker."""

    id: int
    num_workers: int
    seed: int
    dataset: Any
    __initialized = False

    def __init__(self, **kwargs: Any) -> None:
        for k, v in kwargs.items():
            setattr(self, k, v)
        self.__keys = tuple(kwargs.keys())
        self.__initialized = True

    def __setattr__(self, key: str, val: Any) -> None:
        if self.__initialized:
            raise RuntimeError(f"Cannot assign attributes to {self.__class__.__name__} objects")
        return super().__setattr__(key, val)

    def __repr__(self) -> str:
        items = [f"{k}={getattr(self, k)}" for k in self.__keys]
        return f"{self.__class__.__name__}({', '.join(items)})"


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader worker: its ``WorkerInfo``; in the main process: ``None``."""
    return _worker_info


class KeyErrorMessage(str):
    """A KeyError message that prints its newlines (KeyError reprs its argument)."""

    def __repr__(self) -> str:
        return self


class ExceptionWrapper:
    """An exception caught in a worker, carried to the main process as its type and text."""

    def __init__(self, exc_info: Any = None, where: str = "in background") -> None:
        if exc_info is None:
            exc_info = sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self) -> None:
        """Raise the exception again, its message holding the worker's traceback."""
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = KeyErrorMessage(msg)
        elif getattr(self.exc_type, "message", None):
            raise self.exc_type(message=msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        try:
            raise exception
        finally:
            # Without this the frame and the exception reference each other, and the DataLoader
            # iterator up the traceback would only be freed by the cycle collector.
            del exception


@dataclass(frozen=True)
class IterableDatasetStopIteration:
    """A worker's IterableDataset copy is exhausted."""

    worker_id: int


@dataclass(frozen=True)
class ResumeIteration:
    """Persistent workers: start a new epoch (re-create the fetcher)."""


class MapDatasetFetcher:
    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable,
                 drop_last: bool) -> None:
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn
        getitems = getattr(dataset, "__getitems__", None)
        self.getitems = getitems if callable(getitems) else None

    def fetch(self, index: Any) -> Any:
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        if self.getitems is not None:
            return self.collate_fn(self.getitems(index))
        return self.collate_fn([self.dataset[i] for i in index])


class IterableDatasetFetcher:
    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable,
                 drop_last: bool) -> None:
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.dataset_iter = iter(dataset)
        self.ended = False

    def fetch(self, index: Any) -> Any:
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        data = []
        for _ in index:
            try:
                data.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)


def make_fetcher(iterable: bool, dataset: Any, auto_collation: bool, collate_fn: Callable,
                 drop_last: bool) -> MapDatasetFetcher | IterableDatasetFetcher:
    cls = IterableDatasetFetcher if iterable else MapDatasetFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)


def _seed_worker(seed: int) -> None:
    random.seed(seed)
    _random.manual_seed(seed)
    np.random.seed(seed % (1 << 32))


def worker_loop(iterable: bool, dataset: Any, index_queue: Any, data_queue: Any, done_event: Any,
                auto_collation: bool, collate_fn: Callable, drop_last: bool, base_seed: int,
                init_fn: Callable | None, worker_id: int, num_workers: int,
                parent_pid: int) -> None:
    """The body of worker ``worker_id`` (module docstring)."""
    global _worker_info
    try:
        seed = base_seed + worker_id
        _seed_worker(seed)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed,
                                  dataset=dataset)
        init_exception = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_exception = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
        iteration_end = False
        while os.getppid() == parent_pid:  # exit when the main process is gone
            try:
                r = index_queue.get(timeout=WORKER_POLL_INTERVAL)
            except queue.Empty:
                if done_event.is_set():
                    break
                continue
            if isinstance(r, ResumeIteration):
                data_queue.put((r, None))
                iteration_end = False
                fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
                continue
            if r is None:
                break
            if done_event.is_set() or iteration_end:
                continue
            idx, index = r
            if init_exception is not None:
                data: Any = init_exception
                init_exception = None
            else:
                try:
                    data = fetcher.fetch(index)  # type: ignore[union-attr]
                except Exception as e:
                    if isinstance(e, StopIteration) and iterable:
                        data = IterableDatasetStopIteration(worker_id)
                        iteration_end = True
                    else:
                        data = ExceptionWrapper(
                            where=f"in DataLoader worker process {worker_id}")
            data_queue.put((idx, data))
            del data, idx, index, r
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        data_queue.cancel_join_thread()
        data_queue.close()

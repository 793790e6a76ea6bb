"""Datasets for the multi-process DataLoader tests.  They live in their own module (which does
not import torch) so that ``spawn``-ed workers can unpickle them cheaply."""

from __future__ import annotations

import math
import os
from typing import Any, Iterator

import numpy as np

from ember.utils.data import Dataset, IterableDataset, get_worker_info


class RangeIterable(IterableDataset):
    """``start .. end - 1``, sharded contiguously across workers (the torch docs' recipe)."""

    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end

    def __iter__(self) -> Iterator[int]:
        info = get_worker_info()
        if info is None:
            return iter(range(self.start, self.end))
        per_worker = int(math.ceil((self.end - self.start) / info.num_workers))
        lo = self.start + info.id * per_worker
        return iter(range(lo, min(lo + per_worker, self.end)))


class SquaresDataset(Dataset):
    """``(i, float array [i, i*i], "s<i>")``: a tuple, to exercise collation across processes."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        return i, np.array([i, i * i], dtype=np.float32), f"s{i}"


class FailingDataset(Dataset):
    """Raises ``ValueError`` for index ``bad``."""

    def __init__(self, n: int, bad: int) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if i == self.bad:
            raise ValueError(f"bad sample {i}")
        return i


class WorkerInfoDataset(Dataset):
    """Each sample reports the worker that loaded it and that worker's seed and random draw."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        import ember.random
        from ember._frontend.random import randint

        info = get_worker_info()
        if info is None:   # main process
            return {"i": i}
        return {"i": i, "id": info.id, "num_workers": info.num_workers, "seed": info.seed,
                "same_dataset": isinstance(info.dataset, WorkerInfoDataset),
                "initial_seed": ember.random.initial_seed(),
                "draw": int(randint(0, 1000, ()).item()),
                "init": os.environ.get("EMBER_TEST_WORKER_INIT", "")}


def record_init(worker_id: int) -> None:
    """A ``worker_init_fn`` that sets an environment marker the samples can see."""
    os.environ["EMBER_TEST_WORKER_INIT"] = str(worker_id)


class SlowDataset(Dataset):
    """Every sample takes ``delay`` seconds."""

    def __init__(self, n: int, delay: float) -> None:
        self.n, self.delay = n, delay

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        import time

        time.sleep(self.delay)
        return i


class DyingDataset(Dataset):
    """The worker process exits abruptly on the first sample."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> int:
        os._exit(3)

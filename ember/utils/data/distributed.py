"""``DistributedSampler``: each rank iterates its own slice of a (shuffled) dataset, with
PyTorch's exact index order for a given ``seed`` and ``epoch``."""

from __future__ import annotations

import math
import sys
from typing import Any, Iterator, Sized

import numpy as np

from ember.errors import EmberRuntimeError, EmberValueError
from ember.utils.data.sampler import Sampler


def _torch_randperm(n: int, seed: int) -> list[int]:
    """``torch.randperm(n, generator=torch.Generator().manual_seed(seed))``: PyTorch's CPU
    generator is MT19937 seeded with the low 32 bits (NumPy's legacy ``RandomState`` seeding is
    the same ``init_genrand``), and randperm is a Fisher-Yates shuffle on its 32-bit draws."""
    if n >= (2**32 - 1) // 20:
        raise EmberValueError(f"[DistributedSampler] datasets of {n} samples are too large for "
                              "the 32-bit shuffle PyTorch uses")
    idx = list(range(n))
    if n < 2:
        return idx
    draws = np.random.RandomState(seed & 0xFFFFFFFF).randint(0, 2**32, size=n - 1,
                                                             dtype=np.uint32)
    swaps = (draws.astype(np.int64) % np.arange(n, 1, -1, dtype=np.int64)).tolist()
    for i, z in enumerate(swaps):
        idx[i], idx[z + i] = idx[z + i], idx[i]
    return idx


def _dist_default(what: str) -> int:
    dist = sys.modules.get("ember.distributed")
    if dist is None or not dist.is_available():
        raise EmberRuntimeError("[DistributedSampler] Requires distributed package to be "
                                "available")
    return dist.get_world_size() if what == "world_size" else dist.get_rank()


class DistributedSampler(Sampler):
    """Indices for rank ``rank`` of ``num_replicas`` (defaults: the default process group's):
    a ``seed + epoch`` shuffle of the dataset (when ``shuffle``), padded by repetition to a
    multiple of ``num_replicas`` (or cut, with ``drop_last``), then every ``num_replicas``-th
    index starting at ``rank``.  Call ``set_epoch(e)`` each epoch for a new order.

    >>> s = DistributedSampler(range(10), num_replicas=2, rank=1, shuffle=False)
    >>> list(s)
    [1, 3, 5, 7, 9]
    """

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None:
            num_replicas = _dist_default("world_size")
        if rank is None:
            rank = _dist_default("rank")
        if rank >= num_replicas or rank < 0:
            raise EmberValueError(f"[DistributedSampler] Invalid rank {rank}, rank should be in "
                                  f"the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[Any]:
        n = len(self.dataset)
        indices = _torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the shuffle seed, so every epoch has its own order."""
        self.epoch = epoch

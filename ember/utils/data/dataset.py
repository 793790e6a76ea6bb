"""Map-style and iterable datasets, and ``random_split`` (PyTorch's ``torch.utils.data.dataset``).

>>> ds = TensorDataset(ember.arange(6.0), ember.arange(6))
>>> a, b = random_split(ds, [0.5, 0.5], generator=ember.Generator().manual_seed(0))
>>> len(a), len(b)
(3, 3)
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from typing import Any, Iterable, Iterator, Sequence

from ember import random as _random
from ember._frontend.random import randperm
from ember.tensor import Tensor

__all__ = [
    "ChainDataset", "ConcatDataset", "Dataset", "IterableDataset", "StackDataset", "Subset",
    "TensorDataset", "random_split",
]


class Dataset:
    """A map-style dataset: subclasses implement ``__getitem__`` (and usually ``__len__``)."""

    def __getitem__(self, index: Any) -> Any:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses implement ``__iter__``.  With several DataLoader
    workers each worker iterates its own copy; shard with ``get_worker_info()``."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other: Dataset) -> ChainDataset:
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are ``tuple(t[i] for t in tensors)``; every tensor has the same first dim."""

    def __init__(self, *tensors: Tensor) -> None:
        assert all(tensors[0].size(0) == t.size(0) for t in tensors), \
            "Size mismatch between tensors"
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Zips datasets of equal length: ``StackDataset(a, b)[i] == (a[i], b[i])``,
    ``StackDataset(x=a)[i] == {"x": a[i]}``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args:
            if kwargs:
                raise ValueError("Supported either ``tuple``- (via ``args``) or"
                                 "``dict``- (via ``kwargs``) like input/output, but both types "
                                 "are given.")
            parts: Any = args
            values = list(args)
        elif kwargs:
            parts = kwargs
            values = list(kwargs.values())
        else:
            raise ValueError("At least one dataset should be passed")
        self._length = len(values[0])
        if any(self._length != len(d) for d in values):
            raise ValueError("Size mismatch between datasets")
        self.datasets = parts

    def __getitem__(self, index: Any) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset):
    """The concatenation of map-style datasets."""

    @staticmethod
    def cumsum(sequence: Sequence[Any]) -> list[int]:
        out, total = [], 0
        for d in sequence:
            total += len(d)
            out.append(total)
        return out

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        assert len(self.datasets) > 0, "datasets should not be an empty iterable"
        for d in self.datasets:
            assert not isinstance(d, IterableDataset), \
                "ConcatDataset does not support IterableDataset"
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> Any:
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        sample_idx = idx if which == 0 else idx - self.cumulative_sizes[which - 1]
        return self.datasets[which][sample_idx]


class ChainDataset(IterableDataset):
    """Iterates several iterable datasets one after another."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator[Any]:
        for d in self.datasets:
            assert isinstance(d, IterableDataset), \
                "ChainDataset only supports IterableDataset"
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            assert isinstance(d, IterableDataset), \
                "ChainDataset only supports IterableDataset"
            total += len(d)  # type: ignore[arg-type]
        return total


class Subset(Dataset):
    """``dataset`` seen through ``indices``."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list:
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset: Dataset, lengths: Sequence[int | float],
                 generator: _random.Generator | None = None) -> list[Subset]:
    """Split ``dataset`` into disjoint random subsets of the given ``lengths`` (ints summing to
    ``len(dataset)``, or fractions summing to 1; leftover items go round-robin to the first
    splits).  The permutation is ember's ``randperm`` drawn from ``generator``."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        n = len(dataset)  # type: ignore[arg-type]
        subset_lengths: list[int] = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            subset_lengths.append(int(math.floor(n * frac)))
        remainder = n - sum(subset_lengths)
        for i in range(remainder):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. "
                              f"This might result in an empty dataset.", stacklevel=2)
    if sum(lengths) != len(dataset):  # type: ignore[arg-type]
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = randperm(sum(lengths), generator=generator).tolist()  # type: ignore[arg-type]
    return [Subset(dataset, indices[offset - length:offset])
            for offset, length in zip(itertools.accumulate(lengths), lengths)]  # type: ignore

"""Samplers: iterables of dataset indices (PyTorch's ``torch.utils.data.sampler``).

Random samplers draw from ember's Philox ``Generator``: a seeded generator gives the same
order every run (not PyTorch's numbers).

>>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
[[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence, Sized

from ember import dtypes as _dt
from ember import random as _random
from ember._frontend.creation import as_tensor
from ember._frontend.random import multinomial, randint, randperm

__all__ = [
    "BatchSampler", "RandomSampler", "Sampler", "SequentialSampler", "SubsetRandomSampler",
    "WeightedRandomSampler",
]


def _is_positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


class Sampler:
    """Base class: subclasses implement ``__iter__`` (and ``__len__`` when they can)."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _seeded_generator(generator: _random.Generator | None) -> _random.Generator:
    """``generator``, or a fresh one seeded from the default generator (PyTorch's rule)."""
    if generator is not None:
        return generator
    seed = int(randint(0, 2**63 - 1, ()).item())
    return _random.Generator().manual_seed(seed)


class RandomSampler(Sampler):
    """A random permutation (or, with ``replacement=True``, uniform draws) of the indices;
    ``num_samples`` items per pass (default ``len(data_source)``)."""

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None,
                 generator: _random.Generator | None = None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={self.replacement}")
        if not _is_positive_int(self.num_samples):
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        g = _seeded_generator(self.generator)
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from randint(n, (32,), generator=g).tolist()
            yield from randint(n, (self.num_samples % 32,), generator=g).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from randperm(n, generator=g).tolist()
            yield from randperm(n, generator=g).tolist()[:self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order."""

    def __init__(self, indices: Sequence[int],
                 generator: _random.Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: _random.Generator | None = None) -> None:
        if not _is_positive_int(num_samples):
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        weights_tensor = as_tensor(weights, dtype=_dt.float64)
        if len(weights_tensor.shape) != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights_tensor.shape)}")
        self.weights = weights_tensor
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        draws = multinomial(self.weights, self.num_samples, self.replacement,
                            generator=self.generator)
        yield from iter(draws.tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``."""

    def __init__(self, sampler: Sampler | Iterable[int], batch_size: int,
                 drop_last: bool) -> None:
        if not _is_positive_int(batch_size):
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        it = iter(self.sampler)
        while True:
            batch = []
            for idx in it:
                batch.append(idx)
                if len(batch) == self.batch_size:
                    break
            if len(batch) == self.batch_size:
                yield batch
            else:
                if batch and not self.drop_last:
                    yield batch
                return

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size


class _InfiniteConstantSampler(Sampler):
    """The sampler of an IterableDataset: ``None`` forever (the dataset picks its items)."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None

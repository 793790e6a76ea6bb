"""Datasets, random_split and samplers: behaviour and errors against torch."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.utils import data as D
from tests.utils._compare import assert_same

torch = pytest.importorskip("torch")
from torch.utils import data as TD  # noqa: E402


def _pair(lib):
    x = lib.tensor(np.arange(12, dtype=np.float32).reshape(6, 2))
    y = lib.tensor(np.arange(6))
    return x, y


def test_tensor_dataset_matches_torch():
    ours, theirs = D.TensorDataset(*_pair(ember)), TD.TensorDataset(*_pair(torch))
    assert len(ours) == len(theirs) == 6
    for i in (0, 3, -1):
        assert_same(list(ours[i]), list(theirs[i]))
    assert_same(list(ours[1:4]), list(theirs[1:4]))


def test_tensor_dataset_size_mismatch():
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TD.TensorDataset(torch.zeros(3), torch.zeros(4))
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        D.TensorDataset(ember.zeros(3), ember.zeros(4))


def test_concat_dataset_indexing():
    a, b = list(range(3)), list(range(10, 15))
    ours, theirs = D.ConcatDataset([a, b]), TD.ConcatDataset([a, b])
    assert len(ours) == len(theirs) == 8
    assert ours.cumulative_sizes == theirs.cumulative_sizes
    for i in range(-8, 8):
        assert ours[i] == theirs[i]
    with pytest.raises(ValueError, match="absolute value of index"):
        ours[-9]
    with pytest.raises(AssertionError, match="datasets should not be an empty iterable"):
        D.ConcatDataset([])
    ds = D.TensorDataset(ember.arange(3))
    assert len(ds + ds) == 6


def test_subset_and_stack_dataset():
    base = list(range(100, 110))
    sub = D.Subset(base, [3, 1, 4])
    assert [sub[i] for i in range(3)] == [103, 101, 104]
    assert sub.__getitems__([0, 2]) == [103, 104]
    st = D.StackDataset(base, list(range(10)))
    assert st[2] == (102, 2) and len(st) == 10
    assert D.StackDataset(a=base, b=base)[1] == {"a": 101, "b": 101}
    with pytest.raises(ValueError, match="Size mismatch between datasets"):
        D.StackDataset(base, [1])
    with pytest.raises(ValueError, match="At least one dataset"):
        D.StackDataset()


def test_base_classes_raise_not_implemented():
    with pytest.raises(NotImplementedError, match="should implement __getitem__"):
        D.Dataset()[0]


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.5, 0.25, 0.25], [0.33, 0.33, 0.34],
                                     [10]])
def test_random_split_lengths_match_torch_and_partition(lengths):
    ds = list(range(10))
    ours = D.random_split(ds, lengths, generator=ember.Generator().manual_seed(0))
    theirs = TD.random_split(ds, lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    items = sorted(x for s in ours for x in (s[i] for i in range(len(s))))
    assert items == ds   # disjoint and complete
    again = D.random_split(ds, lengths, generator=ember.Generator().manual_seed(0))
    assert [s.indices for s in ours] == [s.indices for s in again]


def test_random_split_seed_changes_partition_and_errors():
    ds = list(range(20))
    a = D.random_split(ds, [10, 10], generator=ember.Generator().manual_seed(0))
    b = D.random_split(ds, [10, 10], generator=ember.Generator().manual_seed(1))
    assert a[0].indices != b[0].indices
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        D.random_split(ds, [5, 5])
    with pytest.raises(ValueError, match="Fraction at index 0 is not between 0 and 1"):
        D.random_split(ds, [-0.5, 1.5])
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        D.random_split(list(range(2)), [1.0, 0.0])


def test_sequential_and_batch_sampler_match_torch():
    for n, bs, drop in [(10, 3, False), (10, 3, True), (9, 3, True), (1, 4, False)]:
        ours = D.BatchSampler(D.SequentialSampler(range(n)), bs, drop)
        theirs = TD.BatchSampler(TD.SequentialSampler(range(n)), bs, drop)
        assert list(ours) == list(theirs)
        assert len(ours) == len(theirs)


@pytest.mark.parametrize("kwargs", [{}, {"replacement": True}, {"num_samples": 25},
                                    {"replacement": True, "num_samples": 70}])
def test_random_sampler_lengths_and_determinism(kwargs):
    src = range(10)
    ours = D.RandomSampler(src, generator=ember.Generator().manual_seed(3), **kwargs)
    theirs = TD.RandomSampler(src, **kwargs)
    drawn = list(ours)
    assert len(ours) == len(theirs) == len(drawn)
    assert all(0 <= i < 10 for i in drawn)
    if not kwargs.get("replacement"):
        # Without replacement every full pass is a permutation.
        for k in range(len(drawn) // 10):
            assert sorted(drawn[10 * k:10 * k + 10]) == list(range(10))
    again = list(D.RandomSampler(src, generator=ember.Generator().manual_seed(3), **kwargs))
    assert drawn == again


def test_random_sampler_without_generator_uses_default_seed():
    ember.manual_seed(5)
    a = list(D.RandomSampler(range(20)))
    ember.manual_seed(5)
    b = list(D.RandomSampler(range(20)))
    assert a == b and sorted(a) == list(range(20))


def test_subset_and_weighted_samplers():
    idx = [5, 7, 9, 11]
    s = D.SubsetRandomSampler(idx, generator=ember.Generator().manual_seed(0))
    assert sorted(s) == idx and len(s) == 4
    w = D.WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 50,
                                generator=ember.Generator().manual_seed(0))
    drawn = list(w)
    assert len(drawn) == len(w) == 50 and set(drawn) <= {1, 3}
    nr = list(D.WeightedRandomSampler([1.0, 1.0, 1.0], 3, replacement=False))
    assert sorted(nr) == [0, 1, 2]


@pytest.mark.parametrize("make, exc, match", [
    (lambda M: M.RandomSampler(range(3), replacement=1), TypeError,
     "replacement should be a boolean value"),
    (lambda M: M.RandomSampler(range(3), num_samples=0), ValueError,
     "num_samples should be a positive integer value"),
    (lambda M: M.RandomSampler([]), ValueError, "num_samples should be a positive integer"),
    (lambda M: M.BatchSampler(range(3), 0, False), ValueError,
     "batch_size should be a positive integer value"),
    (lambda M: M.BatchSampler(range(3), True, False), ValueError,
     "batch_size should be a positive integer value"),
    (lambda M: M.BatchSampler(range(3), 2, 1), ValueError,
     "drop_last should be a boolean value"),
    (lambda M: M.WeightedRandomSampler([1.0], 0), ValueError,
     "num_samples should be a positive integer value"),
    (lambda M: M.WeightedRandomSampler([[1.0]], 2), ValueError,
     "weights should be a 1d sequence"),
])
def test_sampler_errors_match_torch(make, exc, match):
    with pytest.raises(exc, match=match):
        make(TD)
    with pytest.raises(exc, match=match):
        make(D)

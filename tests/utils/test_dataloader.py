"""DataLoader in the main process (num_workers=0): batches and errors against torch."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.utils import data as D
from tests.utils._compare import assert_same
from tests.utils._datasets import RangeIterable, SquaresDataset

torch = pytest.importorskip("torch")
from torch.utils import data as TD  # noqa: E402


def _tensor_ds(M, lib):
    x = lib.tensor(np.arange(30, dtype=np.float32).reshape(10, 3))
    y = lib.tensor(np.arange(10) % 3)
    return M.TensorDataset(x, y)


class _TorchRange(TD.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


class _EmberRange(D.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def _both(kwargs_fn, ds_fn):
    ours = D.DataLoader(ds_fn(D, ember), **kwargs_fn(D))
    theirs = TD.DataLoader(ds_fn(TD, torch), **kwargs_fn(TD))
    return ours, theirs


@pytest.mark.parametrize("kw", [
    lambda M: {},
    lambda M: {"batch_size": 4},
    lambda M: {"batch_size": 4, "drop_last": True},
    lambda M: {"batch_size": 5, "drop_last": True},
    lambda M: {"batch_size": None},
    lambda M: {"batch_size": 3, "sampler": [9, 0, 4, 4, 2]},
    lambda M: {"batch_sampler": [[0, 1], [5], [9, 8, 7]]},
    lambda M: {"batch_sampler": M.BatchSampler(M.SequentialSampler(range(10)), 3, True)},
    lambda M: {"batch_size": 4, "collate_fn": lambda b: len(b)},
])
def test_map_style_batches_match_torch(kw):
    ours, theirs = _both(kw, _tensor_ds)
    assert len(ours) == len(theirs)
    assert_same(list(ours), list(theirs))


def test_tuple_samples_with_numpy_and_strings_match_torch():
    ours = list(D.DataLoader(SquaresDataset(7), batch_size=3))
    theirs = list(TD.DataLoader(SquaresDataset(7), batch_size=3))
    assert_same(ours, theirs)


@pytest.mark.parametrize("kw", [{"batch_size": 3}, {"batch_size": 3, "drop_last": True},
                                {"batch_size": None}, {"batch_size": 5}])
def test_iterable_dataset_matches_torch(kw):
    ours = D.DataLoader(_EmberRange(11), **kw)
    theirs = TD.DataLoader(_TorchRange(11), **kw)
    assert len(ours) == len(theirs)
    assert_same(list(ours), list(theirs))


def test_iterable_dataset_without_len_in_main_process():
    got = [b.tolist() for b in D.DataLoader(RangeIterable(0, 5), batch_size=2)]
    assert got == [[0, 1], [2, 3], [4]]
    assert D.get_worker_info() is None


def test_shuffle_is_deterministic_for_a_seeded_generator():
    ds = D.TensorDataset(ember.arange(20))

    def run(seed):
        g = ember.Generator().manual_seed(seed)
        return [b[0].tolist() for b in D.DataLoader(ds, batch_size=6, shuffle=True, generator=g)]

    a, b, c = run(0), run(0), run(1)
    assert a == b and a != c
    assert sorted(x for batch in a for x in batch) == list(range(20))
    assert [len(batch) for batch in a] == [6, 6, 6, 2]
    # Successive epochs of one loader reshuffle.
    dl = D.DataLoader(ds, batch_size=20, shuffle=True, generator=ember.Generator().manual_seed(0))
    assert next(iter(dl))[0].tolist() != next(iter(dl))[0].tolist()


def test_pin_memory_is_a_no_op_and_attributes_are_frozen():
    dl = D.DataLoader(_tensor_ds(D, ember), batch_size=5, pin_memory=True)
    assert_same(list(dl), list(TD.DataLoader(_tensor_ds(TD, torch), batch_size=5)))
    for attr in ("batch_size", "sampler", "drop_last", "dataset"):
        with pytest.raises(ValueError, match=f"{attr} attribute should not be set after"):
            setattr(dl, attr, None)


_ERROR_CASES = [
    ({"num_workers": -1}, "num_workers option should be non-negative"),
    ({"timeout": -1}, "timeout option should be non-negative"),
    ({"prefetch_factor": 2}, "prefetch_factor option could only be specified"),
    ({"num_workers": 1, "prefetch_factor": -1}, "prefetch_factor option should be non-negative"),
    ({"persistent_workers": True}, "persistent_workers option needs num_workers > 0"),
    ({"shuffle": True, "sampler": [0, 1]}, "sampler option is mutually exclusive with shuffle"),
    ({"batch_sampler": [[0]], "batch_size": 2}, "batch_sampler option is mutually exclusive"),
    ({"batch_sampler": [[0]], "shuffle": True}, "batch_sampler option is mutually exclusive"),
    ({"batch_sampler": [[0]], "drop_last": True}, "batch_sampler option is mutually exclusive"),
    ({"batch_sampler": [[0]], "sampler": [0]}, "batch_sampler option is mutually exclusive"),
    ({"batch_size": None, "drop_last": True}, "batch_size=None option disables auto-batching"),
    ({"batch_size": 0}, "batch_size should be a positive integer value"),
    ({"multiprocessing_context": "spawn"}, "multiprocessing_context can only be used"),
]


@pytest.mark.parametrize("kw, match", _ERROR_CASES)
def test_argument_errors_match_torch(kw, match):
    with pytest.raises(ValueError, match=match):
        TD.DataLoader(_tensor_ds(TD, torch), **kw)
    with pytest.raises(ValueError, match=match):
        D.DataLoader(_tensor_ds(D, ember), **kw)


@pytest.mark.parametrize("kw, match", [
    ({"shuffle": True}, "expected unspecified shuffle option"),
    ({"sampler": [0]}, "expected unspecified sampler option"),
    ({"batch_sampler": [[0]]}, "expected unspecified batch_sampler option"),
])
def test_iterable_dataset_argument_errors_match_torch(kw, match):
    with pytest.raises(ValueError, match=match):
        TD.DataLoader(_TorchRange(3), **kw)
    with pytest.raises(ValueError, match=match):
        D.DataLoader(_EmberRange(3), **kw)


def test_len_of_iterable_without_len_raises_type_error():
    with pytest.raises(TypeError):
        len(D.DataLoader(RangeIterable(0, 3)))
    with pytest.raises(TypeError):
        len(TD.DataLoader(RangeIterable(0, 3)))

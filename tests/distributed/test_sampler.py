"""DistributedSampler's index order against PyTorch's (no processes needed)."""

from __future__ import annotations

import pytest

from ember.utils.data import DistributedSampler

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("n", [0, 1, 5, 10, 17, 1000])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
@pytest.mark.parametrize("shuffle,drop_last", [(True, False), (True, True), (False, False),
                                               (False, True)])
def test_index_order_matches_torch(n, replicas, shuffle, drop_last):
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    for rank in range(replicas):
        for epoch in (0, 2):
            ours = DistributedSampler(range(n), replicas, rank, shuffle, seed=5,
                                      drop_last=drop_last)
            theirs = TorchSampler(range(n), replicas, rank, shuffle, seed=5, drop_last=drop_last)
            ours.set_epoch(epoch)
            theirs.set_epoch(epoch)
            assert list(ours) == list(theirs)
            assert len(ours) == len(theirs)


def test_bad_rank_raises_like_torch():
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    msg = r"Invalid rank 2, rank should be in the interval \[0, 1\]"
    with pytest.raises(ValueError, match=msg):
        TorchSampler(range(4), 2, 2)
    with pytest.raises(ValueError, match=msg):
        DistributedSampler(range(4), 2, 2)

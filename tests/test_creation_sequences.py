"""Python sequence types PyTorch's tensor constructors accept (found by the real-code corpus:
pygcn writes ``torch.LongTensor(range(140))``)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("data", [range(5), range(2, 9, 3), range(0), [range(3), range(3, 6)]])
def test_tensor_from_range_matches_torch(data):
    got, want = ember.tensor(data), torch.tensor(data)
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_memory_format_names_and_channels_last_contiguity():
    """``torch.channels_last`` exists (milesial/Pytorch-UNet moves its model and inputs to it);
    ember keeps row-major storage, and ``is_contiguous(memory_format=...)`` reads the strides
    as PyTorch does."""
    for name in ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d"):
        assert repr(getattr(ember, name)) == repr(getattr(torch, name))
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    nhwc = np.ascontiguousarray(a.transpose(0, 2, 3, 1))
    e_views = [ember.tensor(a), ember.tensor(nhwc).permute(0, 3, 1, 2)]
    t_views = [torch.tensor(a), torch.tensor(nhwc).permute(0, 3, 1, 2)]
    for e, t in zip(e_views, t_views):
        for fmt in ("contiguous_format", "channels_last", "channels_last_3d"):
            assert e.is_contiguous(memory_format=getattr(ember, fmt)) == t.is_contiguous(
                memory_format=getattr(torch, fmt)), fmt
    moved = ember.tensor(a).to(memory_format=ember.channels_last)
    np.testing.assert_array_equal(moved.numpy(), a)
    conv = ember.nn.Conv2d(3, 2, 1).to(memory_format=ember.channels_last)
    assert tuple(conv.weight.shape) == (2, 3, 1, 1)

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

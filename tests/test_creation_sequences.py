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


@pytest.mark.parametrize("shapes", [((4, 3), (4, 3)), ((4, 3), (3,)), ((5,), (5,)),
                                    ((2, 3, 4), (2, 3, 4))])
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0])
@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance_matches_torch(shapes, p, keepdim):
    """``F.pairwise_distance`` (the siamese example's contrastive loss) with its gradients."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    ea, eb = ember.tensor(a, requires_grad=True), ember.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    got = ember.nn.functional.pairwise_distance(ea, eb, p=p, keepdim=keepdim)
    want = torch.nn.functional.pairwise_distance(ta, tb, p=p, keepdim=keepdim)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(ea.grad.numpy(), ta.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(eb.grad.numpy(), tb.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_pairwise_distance_of_integers_promotes_like_torch():
    a, b = [[1, 2, 3], [4, 5, 6]], [[0, 0, 0], [1, 1, 1]]
    got = ember.nn.functional.pairwise_distance(ember.tensor(a), ember.tensor(b))
    want = torch.nn.functional.pairwise_distance(torch.tensor(a), torch.tensor(b))
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)

"""Top-level functional forms (``torch.conv2d``, ``torch.layer_norm``, ``torch.kl_div`` with
ATen's reduction enum, ...) and channel_shuffle/rrelu against torch."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as EF
from tests.breadth.helpers import compare

torch = pytest.importorskip("torch")
R = np.random.default_rng(1)
X4 = R.standard_normal((2, 4, 5, 5))
X3 = R.standard_normal((2, 4, 7))
W2 = R.standard_normal((3, 4, 3, 3))
W1 = R.standard_normal((3, 4, 3))
A, B = R.standard_normal((4, 6)), R.standard_normal((4, 6))
SIGN = np.array([1.0, -1.0, 1.0, -1.0])
G, BETA = R.standard_normal(4), R.standard_normal(4)
LBL = (R.uniform(size=(4, 6)) > 0.5).astype(np.float64)
PROB = R.uniform(0.1, 1.0, (4, 6))

CASES = {
    "conv1d": ((X3, W1), {"padding": 1}, (0, 1)),
    "conv2d": ((X4, W2), {"stride": 2}, (0, 1)),
    "conv_transpose1d": ((X3, W1.transpose(1, 0, 2).copy()), {}, (0, 1)),
    "conv_transpose2d": ((X4, W2.transpose(1, 0, 2, 3).copy()), {"stride": 2}, (0, 1)),
    "layer_norm": ((A, [6]), {}, (0,)),
    "group_norm": ((X4, 2, G, BETA), {"eps": 1e-3}, (0, 2, 3)),
    "batch_norm": ((X4, G, BETA, None, None, True, 0.1, 1e-5, False), {}, (0, 1, 2)),
    "instance_norm": ((X4, G, BETA, None, None, True, 0.1, 1e-5, False), {}, (0, 1, 2)),
    "celu": ((A,), {"alpha": 0.7}, (0,)),
    "selu": ((A,), {}, (0,)),
    "relu": ((A,), {}, (0,)),
    "threshold": ((A, 0.1, -2.0), {}, (0,)),
    "hardshrink": ((A,), {}, (0,)),
    "prelu": ((X4, G), {}, (0, 1)),
    "cosine_similarity": ((A, B), {}, (0, 1)),
    "pairwise_distance": ((A, B), {}, (0, 1)),
    "pdist": ((A,), {}, (0,)),
    "pixel_shuffle": ((X4, 2), {}, (0,)),
    "pixel_unshuffle": ((R.standard_normal((1, 2, 4, 4)), 2), {}, (0,)),
    "channel_shuffle": ((X4, 2), {}, (0,)),
    "native_channel_shuffle": ((X4, 2), {}, ()),
    "rms_norm": ((A, [6]), {}, (0,)),
    "bilinear": ((A, B, R.standard_normal((3, 6, 6))), {}, (0, 1, 2)),
    "avg_pool1d": ((X3, 3), {}, (0,)),
    "adaptive_avg_pool1d": ((X3, 3), {}, (0,)),
    "max_pool1d": ((X3, 2), {}, (0,)),
    "max_pool2d": ((X4, 2), {}, (0,)),
    "max_pool1d_with_indices": ((X3, 2), {}, (0,)),
    "constant_pad_nd": ((X3, [1, 2]), {"value": 0.5}, (0,)),
    "frobenius_norm": ((X4, [1, 2]), {}, (0,)),
    "native_layer_norm": ((A, [6], G.repeat(2)[:6], None, 1e-5), {}, (0,)),
    "kl_div": ((np.log(PROB), PROB), {"reduction": 2}, (0, 1)),
    "binary_cross_entropy_with_logits": ((A, LBL), {"reduction": 0}, (0,)),
    "hinge_embedding_loss": ((A, np.where(LBL > 0, 1.0, -1.0)), {"reduction": 2}, (0,)),
    "margin_ranking_loss": ((A[:, 0], B[:, 0], SIGN), {"reduction": 1}, (0, 1)),
    "cosine_embedding_loss": ((A, B, SIGN), {"reduction": 0}, (0, 1)),
    "poisson_nll_loss": ((A, LBL, True, False, 1e-8, 1), {}, (0,)),
    "triplet_margin_loss": ((A, B, A[::-1].copy()), {"reduction": 0}, (0, 1, 2)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_top_level_matches_torch(name):
    args, kw, grad = CASES[name]
    compare(getattr(ember, name), getattr(torch, name), args, kw, grad=grad, fd=False)


def test_embedding_aten_order():
    w = R.standard_normal((5, 3))
    idx = np.array([[0, 2], [4, 0]])
    compare(ember.embedding, torch.embedding, (w, idx), {"padding_idx": 0}, grad=(0,), fd=False)
    compare(ember.embedding, torch.embedding, (w, idx), {}, grad=(0,), fd=False)


def test_dropouts_identity_in_eval_and_channelwise_in_train():
    x = ember.ones(2, 3, 4, 4)
    for fn in (ember.feature_dropout, ember.alpha_dropout, ember.feature_alpha_dropout):
        assert ember.equal(fn(x, 0.5, False), x)
    y = ember.feature_dropout(x, 0.5, True).numpy()
    per_channel = y.reshape(2, 3, -1)
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert (per_channel.min(-1) == per_channel.max(-1)).all()  # whole channels dropped


def test_rrelu_eval_and_train():
    compare(ember.rrelu, torch.rrelu, (A,), grad=(0,))
    compare(EF.rrelu, torch.nn.functional.rrelu, (A,), {"lower": 0.1, "upper": 0.2})
    x = ember.tensor(A, requires_grad=True)
    y = EF.rrelu(x, 0.1, 0.3, training=True)
    slope = (y / x).detach().numpy()
    assert ((slope[A < 0] >= 0.1) & (slope[A < 0] <= 0.3)).all()
    assert np.allclose(slope[A > 0], 1.0)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slope, rtol=1e-6)


def test_channel_shuffle_errors():
    with pytest.raises(RuntimeError, match="divisible by groups"):
        EF.channel_shuffle(ember.ones(1, 3, 2), 2)
    with pytest.raises(RuntimeError, match="at least 3D"):
        EF.channel_shuffle(ember.ones(1, 4), 2)

"""Second derivatives of the hot nn.functional ops with ``gradgradcheck`` (finite differences of
the vjp) on tiny float64 samples; the OpInfo table compares them with PyTorch as well."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _t(shape, seed):
    rng = np.random.default_rng(seed)
    return ember.from_numpy(rng.standard_normal(shape)).requires_grad_(True)


CASES = {
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2),
                                        groups=2),
               [(1, 2, 4, 5), (2, 1, 2, 2), (2,)]),
    "conv1d_same": (lambda x, w: F.conv1d(x, w, padding="same"), [(2, 1, 5), (2, 1, 2)]),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=1),
                         [(1, 1, 2, 2), (1, 2, 2, 2)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (3,), w, b), [(2, 3), (3,), (3,)]),
    "rms_norm": (lambda x, w: F.rms_norm(x, (2, 2), w), [(2, 2, 2), (2, 2)]),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                   [(3, 2, 2), (2,), (2,)]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2, 1, 1), [(1, 1, 3, 3)]),
    "pad_reflect": (lambda x: F.pad(x, (2, 1), mode="reflect"), [(1, 2, 3)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradgradcheck(name):
    fn, shapes = CASES[name]
    inputs = tuple(_t(s, i) for i, s in enumerate(shapes))
    assert ember.autograd.gradgradcheck(fn, inputs, atol=1e-5, rtol=1e-4)


def test_batch_norm_eval_running_stats_gradient():
    """ember differentiates eval-mode batch_norm w.r.t. the running statistics too (PyTorch
    refuses); finite differences are the oracle."""
    x, rm, w, b = _t((3, 2, 2), 0), _t((2,), 1), _t((2,), 2), _t((2,), 3)
    rv = ember.from_numpy(np.array([0.5, 1.5])).requires_grad_(True)

    def f(x, rm, rv, w, b):
        return F.batch_norm(x, rm, rv, w, b, training=False, eps=1e-3)

    assert ember.autograd.gradcheck(f, (x, rm, rv, w, b), atol=1e-5, rtol=1e-4)
    assert ember.autograd.gradgradcheck(f, (x, rm, rv, w, b), atol=1e-5, rtol=1e-4)

"""The reduction-length tolerance of the conv/matmul family (``core.dot_tolerance``).

It must hold for every correct float32 result whatever the summation order (a CPU's BLAS or
oneDNN kernels, FMA or not: the AMD machines' OpenBLAS missed the former fixed atol of 1e-5 by
1.1e-5 on one element of conv2d's "larger" sample) and still fail a real bug: a wrong kernel
element or a missing term.  The reference is the exact sum (float64 over float32 products).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.opinfo import ops_nn_conv
from tests.opinfo.core import TOLS, _assert_within, dot_tolerance

torch = pytest.importorskip("torch")

CONV2D = next(op for op in ops_nn_conv.OPINFOS if op.name == "nn.conv2d")


def _larger():
    """conv2d's float32 "larger" sample: x (2, 8, 12, 12), w (6, 8, 3, 3), bias, padding 1:
    K = 8 * 3 * 3 + 1 = 73 terms per interior output, 1,728 outputs."""
    sample = next(s for s in CONV2D.samples("float32", CONV2D.rng("float32"))
                  if s.desc == "larger")
    x, w, b = sample.args
    assert sample.kwargs == {"stride": 1, "padding": 1}, sample.kwargs
    return sample, x, w, b


def _terms(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The float32 products x_i w_i of every output, (n, o, h, w, K) (stride 1, padding 1)."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # n c h w 3 3
    t = win[:, None] * w[None, :, :, None, None]                             # n o c h w 3 3
    return t.transpose(0, 1, 3, 4, 2, 5, 6).reshape(*t.shape[:2], *t.shape[3:5], -1)


def _sum32(terms: np.ndarray, bias: np.ndarray, order: str) -> np.ndarray:
    """float32 sums of the terms in a given order: sequential, reversed, or pairwise."""
    t = terms[..., ::-1] if order == "reversed" else terms
    if order == "pairwise":
        acc = t.astype(np.float32)
        while acc.shape[-1] > 1:
            if acc.shape[-1] % 2:
                acc = np.concatenate([acc, np.zeros_like(acc[..., :1])], axis=-1)
            acc = acc[..., 0::2] + acc[..., 1::2]
        s = acc[..., 0]
    else:
        s = np.zeros(t.shape[:-1], np.float32)
        for k in range(t.shape[-1]):
            s = s + t[..., k]
    return s + bias[None, :, None, None]


def test_bound_counts_terms_and_magnitudes():
    sample, x, w, b = _larger()
    bound = dot_tolerance(CONV2D, sample, torch, "float32")
    s = np.abs(_terms(x.astype(np.float64), w.astype(np.float64))).sum(-1) \
        + np.abs(b)[None, :, None, None]
    u = 2.0 ** -24
    interior = bound[:, :, 1:-1, 1:-1] / s[:, :, 1:-1, 1:-1]
    np.testing.assert_allclose(interior, 2 * 73 * u / (1 - 73 * u), rtol=1e-12)
    corner = bound[:, :, 0, 0] / s[:, :, 0, 0]         # 8 * 2 * 2 + 1 terms: padding counts 0
    np.testing.assert_allclose(corner, 2 * 33 * u / (1 - 33 * u), rtol=1e-12)


@pytest.mark.parametrize("order", ["sequential", "reversed", "pairwise"])
def test_any_summation_order_passes(order):
    """Correct float32 results in other summation orders differ from torch's by up to 2.3e-5
    here, more than the fixed atol of 1e-5 (rtol 1.3e-6 covers it only where |y| is large, not
    where terms cancel); all are within the bound, and within half of it of the exact sum."""
    sample, x, w, b = _larger()
    expected = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                          torch.from_numpy(b), padding=1).numpy()
    ours = _sum32(_terms(x, w), b, order)
    bound = dot_tolerance(CONV2D, sample, torch, "float32")
    _assert_within(ours, expected, bound, order)
    exact = (_terms(x.astype(np.float64), w.astype(np.float64)).sum(-1)
             + b[None, :, None, None])
    _assert_within(ours, exact, bound / 2, order + " vs exact")   # one side: gamma_K * S
    diff = np.abs(ours.astype(np.float64) - expected)
    assert diff.max() > TOLS["float32"][1], "the order changed nothing: the test checks nothing"


@pytest.mark.parametrize("bug", ["wrong kernel element", "missing term", "missing bias"])
def test_real_bugs_fail(bug):
    sample, x, w, b = _larger()
    bound = dot_tolerance(CONV2D, sample, torch, "float32")
    expected = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                          torch.from_numpy(b), padding=1).numpy()
    terms, bias = _terms(x, w), b
    if bug == "wrong kernel element":      # w[o, c, 1, 1] read as its neighbour w[o, c, 1, 2]
        w2 = w.copy()
        w2[:, :, 1, 1] = w[:, :, 1, 2]
        terms = _terms(x, w2)
    elif bug == "missing term":            # the last channel's last tap is skipped
        terms = terms[..., :-1]
    else:
        bias = np.zeros_like(b)
    got = _sum32(terms, bias, "sequential")
    with pytest.raises(AssertionError, match="differ by more than the reduction bound"):
        _assert_within(got, expected, bound, bug)
    # nearly every output the bug changes is flagged (a missing tap changes nothing where it
    # reads padding; a product can be tiny)
    changed = got != _sum32(_terms(x, w), b, "sequential")
    bad = np.abs(got.astype(np.float64) - expected) > bound
    assert changed.mean() > 0.8 and bad[changed].mean() > 0.97, (bug, bad[changed].mean())

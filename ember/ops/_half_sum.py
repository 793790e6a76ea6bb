"""PyTorch's CPU ``nll_loss`` batch reduction in float16/bfloat16, reproduced bit for bit.

``nll_loss_out_frame`` (aten/src/ATen/native/LossNLL.cpp) sums a 2-d input's per-row losses in
the storage dtype, through 8 levels of partial sums: each row is added to level 0 (rounded),
and after row ``b`` (unless its target is ignored) level ``j`` is added into level ``j + 1`` and
cleared while ``b`` is a multiple of ``2^(p (j + 1))`` (``p = max(4, ceil(log2 N) // 8)``).  The
result is ``0 + L0 + L1 + ... + L7``, rounded at each step; ``mean`` then divides by the total
weight (``N - ignored`` cast to the dtype, or the weights summed the same way) and rounds.
Summing in float32 instead differs by an ulp or two of the loss, so ember follows PyTorch here.

Vectorized per level: the rows between two flushes form a segment, summed column by column
across all segments at once (a few Python steps per level, not one per row).
"""

from __future__ import annotations

import numpy as np

_LEVELS = 8


def _r(a: np.ndarray, src: np.dtype) -> np.ndarray:
    return np.asarray(a, np.float32).astype(src).astype(np.float32)


def _segment_sums(seq: np.ndarray, seg: np.ndarray, nseg: int, src: np.dtype) -> np.ndarray:
    """Per segment, ``((0 + s0) + s1) + ...`` with each addition rounded to ``src``."""
    starts = np.searchsorted(seg, np.arange(nseg))
    off = np.arange(seq.shape[0]) - starts[seg]
    mat = np.zeros((nseg, int(off.max()) + 1), np.float32)
    mat[seg, off] = seq
    acc = np.zeros(nseg, np.float32)
    for i in range(mat.shape[1]):  # adding a padding 0 leaves a rounded sum unchanged
        acc = _r(acc + mat[:, i], src)
    return acc


def cascade_sum(vals: np.ndarray, valid: np.ndarray, src: np.dtype) -> np.float32:
    """``vals`` (float32 holding ``src`` values, one per row; ignored rows add nothing and do
    not flush) summed as PyTorch's CPU ``nll_loss`` sums them in ``src``."""
    n = vals.shape[0]
    p = max(4, (int(n - 1).bit_length() if n > 1 else 0) // _LEVELS)
    seq = np.where(valid, vals, np.float32(0)).astype(np.float32)
    pos, flush_ok = np.arange(n), np.asarray(valid, bool)
    partial = []
    for level in range(_LEVELS - 1):
        if seq.shape[0] == 0:
            break
        f = flush_ok & (pos % (1 << (p * (level + 1))) == 0)
        seg = np.concatenate([[0], np.cumsum(f)[:-1]]).astype(np.int64)
        sums = _segment_sums(seq, seg, int(seg[-1]) + 1, src)
        nf = int(f.sum())
        partial.append(sums[nf] if nf < sums.shape[0] else np.float32(0))
        seq, pos = sums[:nf], pos[f]
        flush_ok = np.ones(nf, bool)
    top = np.float32(0)
    for v in seq:  # the last level is never flushed: a plain rounded running sum
        top = _r(top + v, src)[()]
    partial.append(top)
    out = np.float32(0)
    for v in partial:
        out = _r(out + v, src)[()]
    return out


def nll_reduce(picked: np.ndarray, valid: np.ndarray, w_rows: np.ndarray | None,
               reduction: str, src: np.dtype) -> np.ndarray:
    """PyTorch's half ``nll_loss`` of a 2-d input: ``picked`` the rows' log-probabilities at
    their targets (float32 holding ``src`` values), ``w_rows`` the class weight of each row's
    target (or None)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        loss = -picked if w_rows is None else -_r(picked * w_rows, src)
        total = cascade_sum(loss, valid, src)
        if reduction == "sum":
            return np.asarray(total).astype(src)
        denom = (_r(np.count_nonzero(valid), src)[()] if w_rows is None
                 else cascade_sum(w_rows, valid, src))
        return np.asarray(np.float32(total) / np.float32(denom)).astype(src)

"""OpInfo entries for sorting and selection: sort, argsort, msort, topk, kthvalue, median,
unique.  Where PyTorch leaves the index of tied values unspecified (topk, kthvalue), the
samples compare the values exactly and the input gathered at the returned indices."""

from __future__ import annotations

import numpy as np

import ember
from tests.opinfo.core import ALL, FLOATS, INTS, ErrorCase, OpInfo, Sample, make

F32 = np.float32
SORTABLE = INTS + FLOATS


def _gather(lib, x, dim, idx):
    """x at idx along dim (torch.gather; ember's private primitive until gather lands)."""
    if lib is ember:
        from ember.ops.registry import bind
        from ember.ops.sort import GATHER
        return bind(GATHER, x, idx, dim=dim % max(x.ndim, 1))
    return lib.gather(x, dim, idx)


def _vals_and_gathered(lib, x, dim, res):
    v, i = res
    return v, _gather(lib, x, dim, i)


def _keep(t, x, dim):
    """A reduced (values or indices) tensor with ``dim`` restored as size 1."""
    if not x.ndim:
        return t
    shape = list(x.shape)
    shape[dim] = 1
    return t.reshape(shape)


def sort_samples(dtype, rng):
    x = make((3, 5), dtype, rng, -2, 2)   # ints: many ties (sort is stable in both)
    for dim in (0, 1, -1):
        for desc in (False, True):
            yield Sample((x,), {"dim": dim, "descending": desc}, desc=f"dim={dim} desc={desc}")
    yield Sample((make((2, 3, 4), dtype, rng),), {"dim": 1, "stable": True}, desc="3-d stable")
    yield Sample((make((), dtype, rng),), desc="0-d")
    yield Sample((make((0, 3), dtype, rng),), {"dim": 0}, desc="empty")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"descending": True},
                 desc="non-contiguous", noncontig=True)
    if dtype in FLOATS:
        y = make((6,), dtype, rng)
        y[[1, 4]] = np.nan
        yield Sample((y,), desc="nan last", grad=False)
        yield Sample((y,), {"descending": True}, desc="nan first", grad=False)


def topk_samples(dtype, rng):
    x = make((3, 6), dtype, rng, -20, 20)
    for k, dim, largest in ((2, 1, True), (3, 0, False), (6, -1, True), (0, 1, True),
                            (1, 0, False)):
        yield Sample((x, k, dim, largest), desc=f"k={k} dim={dim} largest={largest}")
    yield Sample((make((), dtype, rng), 1, 0, True), desc="0-d")
    yield Sample((make((4, 5), dtype, rng, noncontig=True), 2, 1, True), desc="non-contiguous",
                 noncontig=True)


def topk_ties_samples(dtype, rng):
    x = make((4, 8), dtype, rng, 0, 3)
    for k, largest in ((3, True), (5, False)):
        yield Sample((x, k, 1, largest), desc=f"ties k={k}", grad=False)


def kth_samples(dtype, rng):
    x = make((3, 7), dtype, rng, -20, 20)
    for k, dim, keepdim in ((1, 1, False), (4, 1, True), (7, -1, False), (2, 0, False)):
        yield Sample((x, k, dim), {"keepdim": keepdim}, desc=f"k={k} dim={dim}")
    yield Sample((make((), dtype, rng), 1, 0), desc="0-d")
    yield Sample((make((4, 0), dtype, rng), 2, 0), desc="empty result")


def median_samples(dtype, rng):
    for shape in ((), (5,), (4,), (3, 4), (2, 3, 4)):
        yield Sample((make(shape, dtype, rng, -20, 20),), desc=f"all {shape}")
    yield Sample((make((0,), dtype, rng),), desc="empty: nan", grad=False)
    x = make((3, 4), dtype, rng, -20, 20)
    for dim, keepdim in ((0, False), (1, True), (-1, False)):
        yield Sample((x,), {"dim": dim, "keepdim": keepdim}, desc=f"dim={dim}")
    yield Sample((make((), dtype, rng),), {"dim": 0}, desc="0-d dim")
    yield Sample((make((3, 5), dtype, rng, noncontig=True),), {"dim": 1}, desc="non-contig",
                 noncontig=True)
    if dtype in FLOATS:
        y = make((2, 5), dtype, rng)
        y[0, 2] = np.nan
        yield Sample((y,), desc="nan propagates", grad=False)
        yield Sample((y,), {"dim": 1}, desc="nan propagates by dim", grad=False)


def median_ties_samples(dtype, rng):
    x = make((4, 6), dtype, rng, 0, 3)
    yield Sample((x,), desc="ties all", grad=False)
    yield Sample((x,), {"dim": 1}, desc="ties dim", grad=False)


def median_tie_grad_samples(dtype, rng):
    x = np.array([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, -1.0, -1.0, 2.0]])
    yield Sample((x,), desc="full median, ties split the gradient")


def unique_samples(dtype, rng):
    x = make((4, 5), dtype, rng, -3, 3)
    for kw in ({}, {"return_inverse": True}, {"return_counts": True},
               {"return_inverse": True, "return_counts": True}, {"sorted": True}):
        yield Sample((x,), kw, desc=f"{kw}")
    yield Sample((make((), dtype, rng),), {"return_counts": True}, desc="0-d")
    yield Sample((make((0,), dtype, rng),), {"return_inverse": True}, desc="empty")
    rows = make((3, 4), dtype, rng, -1, 1)
    rows = np.concatenate([rows, rows[:2]], 0)
    yield Sample((rows,), {"dim": 0, "return_inverse": True, "return_counts": True},
                 desc="dim=0 repeated rows")


def mode_samples(dtype, rng):
    x = make((4, 7), dtype, rng, -2, 2)
    if dtype in FLOATS:  # floats: make repeated values
        x = np.round(x.astype(np.float64)).astype(x.dtype)
    for dim, keepdim in ((1, False), (0, True), (-1, False)):
        yield Sample((x,), {"dim": dim, "keepdim": keepdim}, desc=f"dim={dim}", grad=False)
    yield Sample((make((), dtype, rng),), {"dim": 0}, desc="0-d")
    yield Sample((make((2, 0), dtype, rng),), {"dim": 0}, desc="empty result")
    yield Sample((make((3, 5), dtype, rng),), {"dim": 1}, desc="distinct: the smallest")


def unique_nan_samples(dtype, rng):
    x = make((6,), dtype, rng)
    x[[1, 4]] = np.nan
    yield Sample((x,), {"return_inverse": True, "return_counts": True}, desc="NaNs distinct")


def _errors_sort():
    return [ErrorCase((np.zeros((2, 3), F32),), {"dim": 2}, exc=IndexError,
                      match=r"\[sort\] Dimension out of range")]


def _errors_topk():
    return [
        ErrorCase((np.zeros((2, 3), F32), 4), exc=RuntimeError,
                  match=r"\[topk\] selected index k out of range"),
        ErrorCase((np.zeros((2, 3), F32), -1), exc=RuntimeError, match=r"\[topk\]"),
        ErrorCase((np.zeros((2, 3), bool), 1), exc=RuntimeError,
                  match=r"\[topk\] topk does not support bool"),
        ErrorCase((np.zeros((2, 3), F32), 1, 2), exc=IndexError,
                  match=r"Dimension out of range"),
    ]


def _errors_kth():
    return [ErrorCase((np.zeros((2, 3), F32), 4, 1), exc=RuntimeError,
                      match=r"\[kthvalue\] kthvalue\(\): selected number k out of range")]


def _errors_median():
    return [
        ErrorCase((np.zeros((0, 3), F32),), {"dim": 0}, exc=IndexError,
                  match=r"\[median\].*dim 0 to have non-zero size"),
        ErrorCase((np.zeros((2,), bool),), exc=NotImplementedError, match=r"\[median\]"),
    ]


def _topk_fn(lib, x, k, dim=-1, largest=True):
    res = lib.topk(x, k, dim, largest)
    return _vals_and_gathered(lib, x, dim, res)


def _kth_fn(lib, x, k, dim, keepdim=False):
    v, i = lib.kthvalue(x, k, dim, keepdim=keepdim)
    return v, _gather(lib, x, dim, _keep(i, x, dim))


def _median_fn(lib, x, dim=None, keepdim=False):
    if dim is None:
        return lib.median(x)
    v, i = lib.median(x, dim, keepdim=keepdim)
    return v, _gather(lib, x, dim, _keep(i, x, dim))


OPINFOS = [
    OpInfo("sort", lambda t, x, **kw: t.sort(x, **kw), sort_samples, dtypes=ALL,
           errors=_errors_sort),
    OpInfo("argsort", lambda t, x, **kw: t.argsort(x, **kw), sort_samples, dtypes=ALL,
           grad=False),
    OpInfo("msort", lambda t, x: t.msort(x),
           lambda d, r: [Sample((make((4, 3), d, r, -2, 2),)), Sample((make((5,), d, r),))],
           dtypes=ALL),
    OpInfo("topk", _topk_fn, topk_samples, dtypes=SORTABLE, errors=_errors_topk),
    OpInfo("topk_ties", _topk_fn, topk_ties_samples, dtypes=SORTABLE, grad=False),
    OpInfo("topk_indices", lambda t, x, k, dim, largest: t.topk(x, k, dim, largest),
           topk_samples, dtypes=FLOATS[2:]),
    OpInfo("unique", lambda t, x, **kw: t.unique(x, **kw), unique_samples, dtypes=ALL,
           grad=False),
    OpInfo("unique_method", lambda t, x: x.unique(),
           lambda d, r: [Sample((make((6,), d, r, 0, 3),))], dtypes=ALL, grad=False),
    OpInfo("mode", lambda t, x, **kw: t.mode(x, **kw), mode_samples, dtypes=SORTABLE,
           errors=lambda: [ErrorCase((np.zeros((0, 2), F32),), {"dim": 0}, exc=IndexError,
                                     match=r"\[mode\].*non-zero size")]),
    OpInfo("unique_nan", lambda t, x, **kw: t.unique(x, **kw), unique_nan_samples,
           dtypes=FLOATS, grad=False),
    OpInfo("kthvalue", _kth_fn, kth_samples, dtypes=SORTABLE, errors=_errors_kth),
    OpInfo("median", _median_fn, median_samples, dtypes=SORTABLE, errors=_errors_median),
    OpInfo("median_ties", _median_fn, median_ties_samples, dtypes=SORTABLE, grad=False),
    OpInfo("median_full", lambda t, x: t.median(x), lambda d, r: (
        s for s in median_samples(d, r) if not s.kwargs), dtypes=SORTABLE),
    OpInfo("median_full_ties", lambda t, x: x.median(), median_tie_grad_samples,
           fd_check=False),
    OpInfo("median_dim", lambda t, x, **kw: t.median(x, **kw), lambda d, r: (
        s for s in median_samples(d, r) if s.kwargs), dtypes=FLOATS[2:]),
    OpInfo("kthvalue_values", lambda t, x, k, dim, **kw: t.kthvalue(x, k, dim, **kw)[0],
           kth_samples, dtypes=SORTABLE, errors=_errors_kth),
]

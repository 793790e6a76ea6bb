"""OpInfo entries for views and movement."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import ALL, ErrorCase, OpInfo, Sample, make


def _reshape_samples(dtype, rng):
    yield Sample((make((2, 3, 4), dtype, rng),), {"shape": (6, 4)}, desc="(2,3,4)->(6,4)")
    yield Sample((make((2, 3, 4), dtype, rng),), {"shape": (-1,)}, desc="flatten -1")
    yield Sample((make((), dtype, rng),), {"shape": (1, 1)}, desc="0-d")
    yield Sample((make((0, 3), dtype, rng),), {"shape": (3, 0)}, desc="empty")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"shape": (12,)}, desc="noncontig",
                 noncontig=True)


def _view_samples(dtype, rng):
    for s in _reshape_samples(dtype, rng):
        if not s.noncontig:
            yield s


def _expand_samples(dtype, rng):
    yield Sample((make((3, 1), dtype, rng),), {"shape": (3, 4)}, desc="(3,1)->(3,4)")
    yield Sample((make((3,), dtype, rng),), {"shape": (2, 3)}, desc="new lead dim")
    yield Sample((make((), dtype, rng),), {"shape": (2, 2)}, desc="0-d")
    yield Sample((make((1, 4), dtype, rng),), {"shape": (-1, 4)}, desc="-1 keeps size")


def _permute_samples(dtype, rng):
    yield Sample((make((2, 3, 4), dtype, rng),), {"dims": (2, 0, 1)}, desc="3-d")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"dims": (1, 0)}, desc="noncontig")
    yield Sample((make((), dtype, rng),), {"dims": ()}, desc="0-d")


def _view_errors():
    return [
        ErrorCase((np.zeros((2, 3), np.float32),), {"shape": (4,)}, exc=RuntimeError,
                  match=r"\[view\] shape '\[4\]' is invalid for input of size 6"),
    ]


OPINFOS = [
    OpInfo("reshape", lambda t, x, shape: x.reshape(shape), _reshape_samples, dtypes=ALL),
    OpInfo("view", lambda t, x, shape: x.view(shape), _view_samples, dtypes=ALL,
           errors=_view_errors),
    OpInfo("expand", lambda t, x, shape: x.expand(*shape), _expand_samples, dtypes=ALL),
    OpInfo("permute", lambda t, x, dims: x.permute(dims), _permute_samples, dtypes=ALL),
    OpInfo("clone", lambda t, x: x.clone(), lambda d, r: [Sample((make((3, 4), d, r),))],
           dtypes=ALL),
    OpInfo("to_dtype", lambda t, x, dtype: x.to(dtype),
           lambda d, r: [Sample((make((3, 4), d, r),), {"dtype": t})
                         for t in __import__("ember").dtypes.ALL_DTYPES
                         if not (d in ("float16", "bfloat16", "float32", "float64")
                                 and t.category == 1)],
           dtypes=ALL, fd_check=False),
]

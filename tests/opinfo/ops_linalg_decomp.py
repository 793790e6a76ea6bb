"""OpInfo entries for linalg.det/slogdet/cholesky/eigh/svd/qr (ember/ops/linalg_decomp.py).
Decompositions are compared through sign-invariant functions of their factors."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import ErrorCase, OpInfo, Sample, make

DTYPES = ("float32", "float64")


def _square(dtype, rng):
    for shape, desc in [((3, 3), "3x3"), ((2, 4, 4), "batch"), ((1, 1), "1x1")]:
        a = make(shape, dtype, rng, low=-1.0, high=1.0)
        yield Sample(((a + shape[-1] * np.eye(shape[-1])).astype(a.dtype),), desc=desc)


def _spd(dtype, rng):
    for shape, desc in [((3, 3), "3x3"), ((2, 4, 4), "batch")]:
        g = make(shape, dtype, rng, low=-1.0, high=1.0)
        a = g @ np.swapaxes(g, -1, -2) + shape[-1] * np.eye(shape[-1])
        yield Sample((a.astype(g.dtype),), desc=desc)


def _rect(dtype, rng):
    for shape, desc in [((4, 3), "tall"), ((3, 5), "wide"), ((2, 3, 3), "batch")]:
        yield Sample((make(shape, dtype, rng, low=-1.0, high=1.0),), desc=desc)


def _sym(a):
    return (a + a.mT) / 2


def _eigh(t, a):
    w, v = t.linalg.eigh(_sym(a))
    return w, (v * (w * w).unsqueeze(-2)) @ v.mT


def _svd(t, a):
    u, s, vh = t.linalg.svd(a, full_matrices=False)
    return s, (u * s.unsqueeze(-2)) @ vh, u * u, vh * vh


def _qr_errors():
    return [ErrorCase((np.ones((3,), np.float32),), exc=RuntimeError,
                      match=r"at least 2 dimensions")]


def _det_errors():
    return [ErrorCase((np.ones((2, 3), np.float32),), exc=RuntimeError,
                      match=r"linalg.det: A must be batches of square matrices, but they are "
                            r"2 by 3 matrices"),
            ErrorCase((np.eye(2, dtype=np.int64),), exc=RuntimeError,
                      match=r"Expected a floating point or complex tensor as input. Got Long")]


def _chol_errors():
    return [ErrorCase((np.array([[1.0, 2.0], [2.0, 1.0]], np.float32),), exc=RuntimeError,
                      match=r"the leading minor of order 2 is not positive-definite")]


OPINFOS = [
    OpInfo("linalg.det", lambda t, a: t.linalg.det(a), _square, dtypes=DTYPES,
           errors=_det_errors, tols={"float32": (1e-4, 1e-4)}),
    OpInfo("linalg.slogdet", lambda t, a: tuple(t.linalg.slogdet(a)), _square, dtypes=DTYPES,
           tols={"float32": (1e-4, 1e-5)}),
    OpInfo("linalg.cholesky", lambda t, a: t.linalg.cholesky(_sym(a)), _spd, dtypes=DTYPES,
           errors=_chol_errors, tols={"float32": (1e-4, 1e-5)}),
    OpInfo("linalg.eigh", _eigh, _spd, dtypes=DTYPES, tols={"float32": (1e-3, 1e-3)}),
    OpInfo("linalg.svd", _svd, _rect, dtypes=DTYPES, tols={"float32": (1e-4, 1e-4)}),
    OpInfo("linalg.qr", lambda t, a: tuple(t.linalg.qr(a)), _rect, dtypes=DTYPES, grad=False,
           errors=_qr_errors, tols={"float32": (1e-4, 1e-5)}),
]

"""OpInfo entries for linalg.inv / inverse and linalg.solve."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import ErrorCase, OpInfo, Sample, make

F32, F64 = np.float32, np.float64
DTYPES = ("float32", "float64")


def _well_conditioned(shape, dtype, rng, noncontig=False):
    """Random square matrices with a dominant diagonal (condition number ~ a few)."""
    a = make(shape, dtype, rng, low=-1.0, high=1.0, noncontig=noncontig)
    n = shape[-1]
    return (a + np.asarray(n * np.eye(n), dtype=a.dtype)).astype(a.dtype)


def _inv_samples(dtype, rng):
    for shape, desc in [((3, 3), "3x3"), ((1, 1), "1x1"), ((2, 4, 4), "batch"),
                        ((2, 1, 3, 3), "4-d batch"), ((0, 0), "empty"), ((2, 0, 0), "empty batch")]:
        yield Sample((_well_conditioned(shape, dtype, rng),), desc=desc)
    yield Sample((_well_conditioned((4, 4), dtype, rng).T,), desc="transposed")
    yield Sample((_well_conditioned((3, 3), dtype, rng, noncontig=True),), desc="non-contiguous",
                 noncontig=True)


def _solve_samples(dtype, rng):
    a = _well_conditioned
    cases = [((3, 3), (3,), {}, "vector"), ((3, 3), (3, 2), {}, "matrix"),
             ((2, 3, 3), (2, 3), {}, "batch of vectors"), ((2, 3, 3), (3, 4), {}, "broadcast B"),
             ((3, 3), (2, 3, 1), {}, "broadcast A"), ((2, 1, 3, 3), (4, 3, 2), {}, "both"),
             ((2, 3, 3), (3,), {}, "one vector for a batch"),
             ((3, 3), (2, 3), {"left": False}, "left=False"),
             ((2, 3, 3), (2, 4, 3), {"left": False}, "left=False batch"),
             ((3, 3), (3, 0), {}, "no columns"), ((0, 0), (0,), {}, "empty")]
    for sa, sb, kw, desc in cases:
        yield Sample((a(sa, dtype, rng), make(sb, dtype, rng)), kw, desc=desc)
    yield Sample((a((3, 3), dtype, rng).T, make((3, 2), dtype, rng)), desc="transposed A")


def _singular3(dtype=F32):
    return np.array([[1, 2, 3], [2, 4, 6], [1, 1, 1]], dtype)


def _inv_errors():
    z = np.zeros
    return [
        ErrorCase((z((2, 3), F32),), exc=RuntimeError,
                  match=r"linalg.inv: A must be batches of square matrices, but they are 2 by 3"),
        ErrorCase((z((3,), F32),), exc=RuntimeError,
                  match=r"The input tensor A must have at least 2 dimensions"),
        ErrorCase((z((3, 3), np.int64),), exc=RuntimeError,
                  match=r"Expected a floating point or complex tensor as input. Got Long"),
        ErrorCase((np.eye(3, dtype=np.float16),), exc=RuntimeError,
                  match=r"Low precision dtypes not supported. Got Half"),
        ErrorCase((_singular3(),), exc=RuntimeError,
                  match=r"linalg.inv: The diagonal element 3 is zero, the inversion could not be "
                        r"completed because the input matrix is singular"),
        ErrorCase((z((2, 3, 3), F64),), exc=RuntimeError,
                  match=r"\(Batch element 0\): The diagonal element 1 is zero"),
    ]


def _solve_errors():
    z, o = np.zeros, np.ones
    return [
        ErrorCase((np.eye(3, dtype=F32), o((4,), F32)), exc=RuntimeError,
                  match=r"Incompatible shapes of A and B for the equation AX = B \(3x3 and 4x1\)"),
        ErrorCase((np.eye(3, dtype=F32), o((2, 3), F32)), exc=RuntimeError,
                  match=r"Incompatible shapes of A and B for the equation AX = B \(3x3 and 2x3\)"),
        ErrorCase((np.eye(3, dtype=F32), o((3, 2), F64)), exc=RuntimeError,
                  match=r"Expected A and B to have the same dtype, but found A of type Float and "
                        r"B of type Double instead"),
        ErrorCase((z((2, 3, 3), F32), o((2, 3), F32)), exc=RuntimeError,
                  match=r"linalg.solve: \(Batch element 0\): The solver failed because the "
                        r"input matrix is singular"),
        ErrorCase((z((2, 3), F32), o((2,), F32)), exc=RuntimeError,
                  match=r"A must be batches of square matrices"),
    ]


OPINFOS = [
    OpInfo("linalg.inv", lambda t, a: t.linalg.inv(a), _inv_samples, dtypes=DTYPES,
           errors=_inv_errors),
    OpInfo("inverse", lambda t, a: t.inverse(a), _inv_samples, dtypes=DTYPES),
    OpInfo("Tensor.inverse", lambda t, a: a.inverse(), _inv_samples, dtypes=("float64",)),
    OpInfo("linalg.solve", lambda t, a, b, **k: t.linalg.solve(a, b, **k), _solve_samples,
           dtypes=DTYPES, errors=_solve_errors),
]

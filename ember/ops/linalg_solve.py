"""Matrix inverse and linear solves: ``linalg_inv`` and ``linalg_solve`` primitives.

Both call LAPACK through NumPy (``getrf``/``getrs``, as PyTorch's CPU kernels do).  The
primitives are strict: ``linalg_inv`` takes ``(..., n, n)``; ``linalg_solve`` takes
``(..., n, n)`` and ``(..., n, k)`` with equal batch dims (the frontend broadcasts, turns a
vector right-hand side into a column and handles ``left=False``).  float32/float64 only:
PyTorch refuses half precision here too.

A singular matrix raises ``LinAlgError`` (a RuntimeError) naming the first zero pivot of the
LU factorization, in PyTorch's words; the pivot is found by a small LU of the failing matrix
only on that error path.
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.errors import DTypeRuntimeError, EmberRuntimeError, ShapeError
from ember.ops.registry import OpDef, bind, register

# PyTorch's ScalarType names, as its linalg messages print them
_SCALAR = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
           "int32": "Int", "int64": "Long", "int16": "Short", "int8": "Char", "uint8": "Byte",
           "bool": "Bool"}


class LinAlgError(EmberRuntimeError):
    """A linear-algebra routine failed on its input (a singular matrix); PyTorch's
    ``torch.linalg.LinAlgError``, also a RuntimeError."""


def check_float(op: str, d: dt.dtype) -> None:
    """PyTorch's dtype rule for LAPACK-backed functions: float32/float64 only."""
    if d in (dt.float16, dt.bfloat16):
        raise DTypeRuntimeError(f"[{op}] {op}: Low precision dtypes not supported. "
                                f"Got {_SCALAR[d.name]}")
    if not d.is_floating_point:
        raise DTypeRuntimeError(f"[{op}] {op}: Expected a floating point or complex tensor as "
                                f"input. Got {_SCALAR[d.name]}")


def check_square(op: str, shape: tuple, name: str = "A") -> None:
    """``shape`` is a batch of square matrices."""
    if len(shape) < 2:
        raise ShapeError(f"[{op}] {op}: The input tensor {name} must have at least 2 "
                         f"dimensions.")
    if shape[-1] != shape[-2]:
        raise ShapeError(f"[{op}] {op}: {name} must be batches of square matrices, but they "
                         f"are {shape[-2]} by {shape[-1]} matrices")


def _first_zero_pivot(m: np.ndarray) -> int:
    """1-based index of the first zero pivot of ``m``'s partial-pivot LU (LAPACK's ``info``)."""
    a = np.array(m, dtype=np.float64)
    n = a.shape[0]
    for j in range(n):
        p = j + int(np.argmax(np.abs(a[j:, j])))
        if a[p, j] == 0:
            return j + 1
        a[[j, p]] = a[[p, j]]
        a[j + 1:, j] /= a[j, j]
        a[j + 1:, j + 1:] -= np.outer(a[j + 1:, j], a[j, j + 1:])
    return n


def _is_singular(m: np.ndarray) -> bool:
    try:
        np.linalg.inv(m)
    except np.linalg.LinAlgError:
        return True
    return False


def _singular(op: str, a: np.ndarray, solve: bool) -> LinAlgError:
    """The error for the first singular matrix of the batch ``a``, in PyTorch's words."""
    batch = a.reshape((-1,) + a.shape[-2:])
    idx = next((i for i, m in enumerate(batch) if _is_singular(m)), 0)
    where = f"(Batch element {idx}): " if a.ndim > 2 else ""
    if solve:
        return LinAlgError(f"[{op}] torch.{op}: {where}The solver failed because the input "
                           f"matrix is singular.")
    k = _first_zero_pivot(batch[idx])
    return LinAlgError(f"[{op}] {op}: {where}The diagonal element {k} is zero, the inversion "
                       f"could not be completed because the input matrix is singular.")


# ---------------------------------------------------------------------------------- inverse
def _inv_meta(a) -> tuple:  # noqa: ANN001
    check_square("linalg.inv", tuple(a.shape))
    check_float("linalg.inv", a.dtype)
    return tuple(a.shape), a.dtype


def _inv_eager(a: np.ndarray) -> np.ndarray:
    if a.size == 0:
        return np.empty(a.shape, a.dtype)
    try:
        return np.linalg.inv(a).astype(a.dtype, copy=False)
    except np.linalg.LinAlgError:
        raise _singular("linalg.inv", a, solve=False) from None


def _inv_vjp(ctx, g):  # noqa: ANN001
    y = ctx.outputs[0].mT          # d(A^-1) = -A^-1 dA A^-1, so gA = -Y^T g Y^T
    return (-(y @ g @ y),)


LINALG_INV = register(OpDef(
    "linalg_inv", "extern", _inv_meta, _inv_eager, _inv_vjp, save_output=True,
    grad_name="LinalgInvExBackward0",
    doc="Inverse of a batch of square float32/float64 matrices (LAPACK through NumPy).",
))


# ---------------------------------------------------------------------------------- solve
def _solve_meta(a, b) -> tuple:  # noqa: ANN001
    sa, sb = tuple(a.shape), tuple(b.shape)
    check_square("linalg.solve", sa)
    check_float("linalg.solve", a.dtype)
    if b.dtype is not a.dtype:
        raise DTypeRuntimeError(f"[linalg.solve] linalg.solve: Expected A and B to have the "
                                f"same dtype, but found A of type {_SCALAR[a.dtype.name]} and "
                                f"B of type {_SCALAR[b.dtype.name]} instead")
    if len(sb) != len(sa) or sb[:-2] != sa[:-2] or sb[-2] != sa[-1]:
        raise ShapeError(f"[linalg.solve] primitive expects (..., n, n) and (..., n, k) with "
                         f"equal batch dims; got {sa} and {sb}")
    return sb, a.dtype


def _solve_eager(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.size == 0 or b.size == 0:
        return np.zeros(b.shape, b.dtype)
    try:
        return np.linalg.solve(a, b).astype(b.dtype, copy=False)
    except np.linalg.LinAlgError:
        raise _singular("linalg.solve", a, solve=True) from None


def _solve_vjp(ctx, g):  # noqa: ANN001
    a, _ = ctx.inputs
    x = ctx.outputs[0]
    n0, n1 = ctx.needs_input_grad
    gb = bind(LINALG_SOLVE, a.mT, g)    # B = A X: gB = A^-T g, gA = -gB X^T
    return (-(gb @ x.mT) if n0 else None, gb if n1 else None)


LINALG_SOLVE = register(OpDef(
    "linalg_solve", "extern", _solve_meta, _solve_eager, _solve_vjp, save=(0,),
    save_output=True, grad_name="LinalgSolveExBackward0",
    doc="X with A X = B for (..., n, n) A and (..., n, k) B, equal batch dims.",
))

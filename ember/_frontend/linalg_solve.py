"""``linalg.inv``/``inverse`` and ``linalg.solve``: broadcasting and PyTorch's vector rule in
front of the strict primitives of ``ember/ops/linalg_solve.py``."""

from __future__ import annotations

from ember._frontend.core import broadcast_shapes, check_tensor, expand_to
from ember.errors import EmberTypeError, ShapeError
from ember.ops.linalg_solve import LINALG_INV, LINALG_SOLVE, check_float, check_square
from ember.ops.registry import bind
from ember.tensor import Tensor, tensor_method

__all__ = ["inverse"]


def _no_out(op: str, out: object) -> None:
    if out is not None:
        raise EmberTypeError(f"[{op}] out= is not supported by ember; assign the result instead")


def linalg_inv(A: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: N803 (torch's name)
    """The inverse of a square matrix or a batch of them (``torch.linalg.inv``).

    >>> ember.linalg.inv(ember.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    check_tensor(A, "linalg.inv", "A")
    _no_out("linalg.inv", out)
    return bind(LINALG_INV, A)


@tensor_method("inverse")
def inverse(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """``torch.inverse``: an alias of ``linalg.inv``."""
    return linalg_inv(input, out=out)


def _is_vector_rhs(sa: tuple, sb: tuple) -> bool:
    """PyTorch's rule: B is a (batch of) vector(s) if it is 1-d, or has A's batch dims and n."""
    return len(sb) == 1 or (len(sb) == len(sa) - 1 and sb == sa[:-1])


def linalg_solve(A: Tensor, B: Tensor, *, left: bool = True,  # noqa: N803 (torch's names)
                 out: Tensor | None = None) -> Tensor:
    """The solution X of ``A X = B`` (``left=False``: ``X A = B``), batched and broadcast
    (``torch.linalg.solve``).  B may be a vector or a batch of vectors.

    >>> ember.linalg.solve(ember.tensor([[2.0, 0.0], [0.0, 4.0]]), ember.tensor([1.0, 1.0]))
    tensor([0.5000, 0.2500])
    """
    op = "linalg.solve"
    check_tensor(A, op, "A")
    check_tensor(B, op, "B")
    _no_out(op, out)
    sa, sb = tuple(A.shape), tuple(B.shape)
    check_square(op, sa)
    check_float(op, A.dtype)
    vector = _is_vector_rhs(sa, sb)
    if not left:
        if vector:
            raise ShapeError(f"[{op}] {op}: Vector broadcasting of the left hand side is not "
                             f"supported for left=False. In this case linalg.solve is "
                             f"equivalent to B / A.squeeze(-1)")
        return linalg_solve(A.mT, B.mT).mT
    b = B.unsqueeze(-1) if vector else B
    if b.ndim < 2:
        raise ShapeError(f"[{op}] {op}: The input tensor B must have at least 2 dimensions.")
    n = sa[-1]
    if tuple(b.shape)[-2] != n:
        raise ShapeError(f"[{op}] {op}: Incompatible shapes of A and B for the equation AX = B "
                         f"({sa[-2]}x{sa[-1]} and {b.shape[-2]}x{b.shape[-1]})")
    batch = broadcast_shapes(op, sa[:-2], tuple(b.shape)[:-2])
    a = expand_to(A, batch + sa[-2:])
    b = expand_to(b, batch + tuple(b.shape)[-2:])
    x = bind(LINALG_SOLVE, a, b)
    return x.squeeze(-1) if vector else x

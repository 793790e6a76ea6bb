"""View-copy functions (``diagonal_copy``, ``permute_copy``, ...), ``*_scatter`` (the inverse of a
view: a copy of ``input`` with ``src`` written into that view), split spellings
(``split_with_sizes``, ``unsafe_split``, ``hsplit``/``vsplit``/``dsplit``), and the predicates and
identities that PyTorch gives real tensors (``conj``, ``resolve_neg``, ``isreal``, ...).

All are compositions of existing ops (a view then ``clone``; ``clone`` then ``copy_`` into the
view), so gradients and compilation come from those ops."""

from __future__ import annotations

import math
from typing import Any, Sequence

from ember import dtypes as dt
from ember._frontend.core import check_tensor
from ember._frontend.creation import ones_like, zeros_like
from ember._frontend.pointwise_logic import maximum, where
from ember._frontend.pointwise_math import copysign, exp2, log1p
from ember._frontend.shape import clone
from ember.errors import EmberRuntimeError, ShapeError
from ember.tensor import Tensor, tensor_method

__all__ = [
    "adjoint", "alias_copy", "as_strided_copy", "as_strided_scatter", "conj", "conj_physical",
    "detach", "detach_copy", "diagonal_copy", "diagonal_scatter", "dsplit", "expand_copy",
    "get_device", "hsplit", "is_conj", "is_inference", "is_neg", "is_same_size", "isreal",
    "logaddexp2", "narrow_copy", "permute_copy", "real", "resolve_conj", "resolve_neg",
    "select_copy", "select_scatter", "signbit", "slice_copy", "slice_scatter", "split_copy",
    "split_with_sizes", "split_with_sizes_copy", "squeeze_copy", "t_copy", "transpose_copy",
    "unbind_copy", "unfold_copy", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes",
    "unsqueeze_copy", "view_copy", "vsplit",
]


# ------------------------------------------------------------------------------- view copies
def alias_copy(input: Tensor) -> Tensor:
    """A copy of ``input`` (``torch.alias`` returns a view; this its out-of-place form)."""
    return clone(input)


def detach_copy(input: Tensor) -> Tensor:
    """``input.detach().clone()``."""
    return clone(input.detach())


def detach(input: Tensor) -> Tensor:
    """``input.detach()``: a view that autograd does not track."""
    return input.detach()


def as_strided_copy(input: Tensor, size: Sequence[int], stride: Sequence[int],
                    storage_offset: int | None = None) -> Tensor:
    return clone(input.as_strided(size, stride, storage_offset))


def diagonal_copy(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """``input.diagonal(offset, dim1, dim2).clone()``.

    >>> ember.diagonal_copy(ember.eye(2))
    tensor([1., 1.])
    """
    return clone(input.diagonal(offset, dim1, dim2))


def expand_copy(input: Tensor, size: Sequence[int], *, implicit: bool = False) -> Tensor:
    return clone(input.expand(size))


def permute_copy(input: Tensor, dims: Sequence[int]) -> Tensor:
    return clone(input.permute(dims))


def select_copy(input: Tensor, dim: int, index: int) -> Tensor:
    return clone(input.select(dim, index))


def slice_copy(input: Tensor, dim: int = 0, start: int | None = None, end: int | None = None,
               step: int = 1) -> Tensor:
    return clone(_slice(input, dim, start, end, step))


def split_copy(input: Tensor, split_size: Any, dim: int = 0) -> list[Tensor]:
    return [clone(t) for t in input.split(split_size, dim)]


def split_with_sizes_copy(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> list[Tensor]:
    return [clone(t) for t in split_with_sizes(input, split_sizes, dim)]


def squeeze_copy(input: Tensor, dim: Any = None) -> Tensor:
    return clone(input.squeeze() if dim is None else input.squeeze(dim))


def t_copy(input: Tensor) -> Tensor:
    return clone(input.t())


def transpose_copy(input: Tensor, dim0: int, dim1: int) -> Tensor:
    return clone(input.transpose(dim0, dim1))


def unbind_copy(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    return tuple(clone(t) for t in input.unbind(dim))


def unfold_copy(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    return clone(input.unfold(dimension, size, step))


def unsqueeze_copy(input: Tensor, dim: int) -> Tensor:
    return clone(input.unsqueeze(dim))


def view_copy(input: Tensor, size: Any) -> Tensor:
    return clone(input.view(size))


@tensor_method("narrow_copy")
def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    return clone(input.narrow(dim, start, length))


# ---------------------------------------------------------------------------------- scatters
def _slice(input: Tensor, dim: int, start: int | None, end: int | None, step: int) -> Tensor:
    if step <= 0:
        raise EmberRuntimeError("[slice] slice step must be positive")
    idx = [slice(None)] * input.ndim
    d = dim + input.ndim if dim < 0 else dim
    idx[d] = slice(start, end, step)
    return input[tuple(idx)]


def _scatter_into(input: Tensor, view: Tensor, src: Tensor, op: str) -> Tensor:
    if tuple(view.shape) != tuple(src.shape):
        raise ShapeError(f"[{op}] expected src to have a size equal to the slice of self. src "
                         f"size = {list(src.shape)}, slice size = {list(view.shape)}")
    view.copy_(src)
    return input


@tensor_method("diagonal_scatter")
def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0,
                     dim2: int = 1) -> Tensor:
    """A copy of ``input`` whose diagonal is ``src``.

    >>> ember.diagonal_scatter(ember.zeros(2, 2), ember.ones(2))
    tensor([[1., 0.],
            [0., 1.]])
    """
    out = clone(input)
    return _scatter_into(out, out.diagonal(offset, dim1, dim2), src, "diagonal_scatter")


@tensor_method("select_scatter")
def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    out = clone(input)
    return _scatter_into(out, out.select(dim, index), src, "select_scatter")


@tensor_method("slice_scatter")
def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None,
                  end: int | None = None, step: int = 1) -> Tensor:
    out = clone(input)
    return _scatter_into(out, _slice(out, dim, start, end, step), src, "slice_scatter")


@tensor_method("as_strided_scatter")
def as_strided_scatter(input: Tensor, src: Tensor, size: Sequence[int], stride: Sequence[int],
                       storage_offset: int | None = None) -> Tensor:
    """A copy of ``input`` (read as contiguous) with ``src`` written into the strided view."""
    from ember._frontend.creation import arange
    where_ = arange(input.numel()).as_strided(size, stride, storage_offset)
    if tuple(where_.shape) != tuple(src.shape):
        raise ShapeError(f"[as_strided_scatter] expected src to have a size equal to the slice "
                         f"of self. src size = {list(src.shape)}, slice size = "
                         f"{list(where_.shape)}")
    flat = clone(input).reshape(-1)
    flat[where_.reshape(-1)] = src.reshape(-1)
    return flat.reshape(input.shape)


# ------------------------------------------------------------------------------------ splits
@tensor_method("split_with_sizes", "unsafe_split_with_sizes")
def split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> list[Tensor]:
    """Views of ``input`` of the given sizes along ``dim`` (they must add up to its size)."""
    total = input.shape[dim]
    if sum(split_sizes) != total:
        raise EmberRuntimeError(
            f"[split_with_sizes] split_with_sizes expects split_sizes to sum exactly to {total} "
            f"(input tensor's size at dimension {dim}), but got split_sizes="
            f"[{', '.join(str(s) for s in split_sizes)}]")
    return list(input.split(list(split_sizes), dim))


unsafe_split_with_sizes = split_with_sizes


@tensor_method("unsafe_split")
def unsafe_split(input: Tensor, split_size: int, dim: int = 0) -> list[Tensor]:
    return list(input.split(split_size, dim))


@tensor_method("unsafe_chunk")
def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> list[Tensor]:
    return list(input.chunk(chunks, dim))


def _dir_split(op: str, input: Tensor, sections: Any, dim: int, min_dim: int) -> list[Tensor]:
    check_tensor(input, op)
    if input.ndim < min_dim:
        raise EmberRuntimeError(
            f"[{op}] torch.{op} requires a tensor with at least {min_dim} dimension, but got a "
            f"tensor with {input.ndim} dimensions!")
    if isinstance(sections, int) and not isinstance(sections, bool):
        if sections == 0 or input.shape[dim] % sections:
            raise EmberRuntimeError(
                f"[{op}] torch.{op} attempted to split along dimension {dim}, but the size of "
                f"the dimension {input.shape[dim]} is not divisible by the split_size "
                f"{sections}!")
    return list(input.tensor_split(sections, dim))


@tensor_method("hsplit")
def hsplit(input: Tensor, sections: Any) -> list[Tensor]:
    """Split along dim 1 (dim 0 for 1-D input), as ``numpy.hsplit``."""
    return _dir_split("hsplit", input, sections, 1 if input.ndim > 1 else 0, 1)


@tensor_method("vsplit")
def vsplit(input: Tensor, sections: Any) -> list[Tensor]:
    """Split along dim 0 of an input with at least 2 dims."""
    return _dir_split("vsplit", input, sections, 0, 2)


@tensor_method("dsplit")
def dsplit(input: Tensor, sections: Any) -> list[Tensor]:
    """Split along dim 2 of an input with at least 3 dims."""
    return _dir_split("dsplit", input, sections, 2, 3)


# --------------------------------------------------------------- real-tensor identities etc.
@tensor_method("adjoint")
def adjoint(input: Tensor) -> Tensor:
    """``input.transpose(-2, -1)`` (the conjugate is the identity on real tensors)."""
    if input.ndim < 2:
        raise EmberRuntimeError("[adjoint] tensor.adjoint() is only supported on matrices or "
                                "batches of matrices. Got 1-D tensor." if input.ndim == 1 else
                                "[adjoint] tensor.adjoint() is only supported on matrices or "
                                "batches of matrices. Got 0-D tensor.")
    return input.transpose(-2, -1)


@tensor_method("conj", "resolve_conj", "resolve_neg")
def conj(input: Tensor) -> Tensor:
    """The complex conjugate: ``input`` itself for real tensors, as in PyTorch."""
    return input


resolve_conj = resolve_neg = conj


@tensor_method("conj_physical")
def conj_physical(input: Tensor) -> Tensor:
    """A copy of ``input`` (the conjugate of a real tensor)."""
    return clone(input)


@tensor_method("conj_physical_")
def _conj_physical_(input: Tensor) -> Tensor:
    return input


def real(input: Tensor) -> Tensor:
    """``input`` itself for real tensors."""
    return input


@tensor_method("is_conj", "is_neg")
def is_conj(input: Tensor) -> bool:
    """False: real tensors carry no conjugate (or negative) bit."""
    return False


is_neg = is_conj


def is_inference(input: Tensor) -> bool:
    return input.is_inference()


@tensor_method("is_same_size")
def is_same_size(input: Tensor, other: Tensor) -> bool:
    return tuple(input.shape) == tuple(other.shape)


@tensor_method("get_device")
def get_device(input: Tensor) -> int:
    """The device index: -1 for CPU tensors, as PyTorch."""
    return -1 if input.device.type == "cpu" else (input.device.index or 0)


@tensor_method("isreal")
def isreal(input: Tensor) -> Tensor:
    """All True for real dtypes (elementwise ``imag == 0``)."""
    return ones_like(input, dtype=dt.bool)


@tensor_method("signbit")
def signbit(input: Tensor) -> Tensor:
    """True where the sign bit is set (also for -0.0 and negative NaN).

    >>> ember.signbit(ember.tensor([-0.0, 1.0]))
    tensor([ True, False])
    """
    check_tensor(input, "signbit")
    if input.dtype.is_floating_point:
        return copysign(ones_like(input), input.detach()) < 0
    if input.dtype == dt.bool:
        return zeros_like(input, dtype=dt.bool)
    return input < 0


@tensor_method("logaddexp2")
def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """``log2(2**input + 2**other)`` computed without overflow.

    >>> ember.logaddexp2(ember.tensor([1.0]), ember.tensor([1.0]))
    tensor([2.])
    """
    m = maximum(input, other)
    r = m + log1p(exp2(-(input - other).abs())) / math.log(2.0)
    same_inf = (input == other) & m.detach().isinf()
    return where(same_inf, m, r)


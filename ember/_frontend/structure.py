"""Structure frontend: triangular parts (tril/triu and their index lists), broadcasting helpers,
meshgrid, diagonals (diag, diag_embed, trace), repeat_interleave, rot90, diff and kron.

All but tril/triu are compositions of existing ops (expand, flip, transpose, narrow, index,
mul, ...), so their gradients come from those ops."""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from ember import dtypes as dt
from ember._frontend.autocast import autocast_op
from ember._frontend.core import check_tensor
from ember._frontend.movement import cat, flip
from ember._frontend.shape import clone, expand, narrow, reshape, transpose
from ember._frontend.shape import diagonal as _diagonal
from ember.device import check_pin
from ember.errors import (
    EmberIndexError,
    EmberNotImplementedError,
    EmberRuntimeError,
    EmberTypeError,
    EmberValueError,
    ShapeError,
)
from ember.ops import indexing as I
from ember.ops import movement as M
from ember.ops import structure as ST
from ember.ops._util import wrap_dim
from ember.ops.registry import bind
from ember.sym import SymInt
from ember.tensor import Size, Tensor, _wrap, tensor_method

__all__ = ["broadcast_shapes", "broadcast_tensors", "broadcast_to", "diag", "diag_embed",
           "diff", "kron", "meshgrid", "repeat_interleave", "rot90", "trace", "tril",
           "tril_indices", "triu", "triu_indices"]

# PyTorch's names of dtypes in "not implemented for" messages
_TORCH_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short",
                "int32": "Int", "int64": "Long", "float16": "Half", "bfloat16": "BFloat16",
                "float32": "Float", "float64": "Double"}


# ---------------------------------------------------------------------------------- tril/triu
def _tri(op: str, input: Tensor, diagonal: int) -> Tensor:
    check_tensor(input, op)
    if input.ndim < 2:
        raise ShapeError(f"[{op}] {op}: input tensor must have at least 2 dimensions")
    return bind(ST.TRIL if op == "tril" else ST.TRIU, input, diagonal=int(diagonal))


@tensor_method("tril")
def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (elements with ``col - row <= diagonal``)."""
    return _tri("tril", input, diagonal)


@tensor_method("triu")
def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (elements with ``col - row >= diagonal``)."""
    return _tri("triu", input, diagonal)


def _tri_indices(op: str, row: int, col: int, offset: int, dtype: Any) -> Tensor:
    d = dt.int64 if dtype is None else dtype
    if d not in (dt.int32, dt.int64):
        raise EmberNotImplementedError(f"[{op}] \"{op}\" not implemented for "
                                       f"'{_TORCH_NAMES.get(d.name, d.name)}'")
    if row < 0:
        raise EmberRuntimeError(f"[{op}] row must be non-negative, got{row}")
    if col < 0:
        raise EmberRuntimeError(f"[{op}] col must be non-negative, got{col}")
    r, c = np.indices((row, col))
    keep = (c - r <= offset) if op == "tril_indices" else (c - r >= offset)
    # row-major order of the kept positions, as in PyTorch
    return _wrap(np.stack([r[keep], c[keep]]).astype(d.np), d)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None, pin_memory: bool = False) -> Tensor:
    """The (2, N) coordinates of the lower triangle of a ``row x col`` matrix."""
    check_pin(pin_memory, "tril_indices")
    return _tri_indices("tril_indices", int(row), int(col), int(offset), dtype)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None, pin_memory: bool = False) -> Tensor:
    """The (2, N) coordinates of the upper triangle of a ``row x col`` matrix."""
    check_pin(pin_memory, "triu_indices")
    return _tri_indices("triu_indices", int(row), int(col), int(offset), dtype)


# ---------------------------------------------------------------------------------- broadcast
@tensor_method("broadcast_to")
def broadcast_to(input: Tensor, size: Sequence[int]) -> Tensor:
    """``input`` expanded to ``size`` (a view)."""
    check_tensor(input, "broadcast_to")
    return expand(input, tuple(size))


def broadcast_shapes(*shapes: Any) -> Size:
    """The shape that all ``shapes`` (ints or sequences of ints) broadcast to."""
    ss = [(s,) if isinstance(s, (int, np.integer)) else tuple(s) for s in shapes]
    for s in ss:
        if any(n < 0 for n in s):
            raise EmberValueError("[broadcast_shapes] Attempting to broadcast a dimension with "
                                  "negative length!")
    ndim = max((len(s) for s in ss), default=0)
    out = [1] * ndim
    for i, s in enumerate(ss):
        for j, n in reversed(list(enumerate(s, ndim - len(s)))):  # trailing dims first
            if out[j] == 1:
                out[j] = n if isinstance(n, SymInt) else int(n)
            elif n != 1 and n != out[j]:
                raise ShapeError(
                    f"[broadcast_shapes] Attempting to broadcast a dimension of length {n} at "
                    f"{j - ndim}! Mismatching argument at index {i} had {s}; but expected shape "
                    f"should be broadcastable to {out}")
    return Size(out)


def broadcast_tensors(*tensors: Tensor) -> tuple:
    """The tensors expanded to their common broadcast shape (views)."""
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise EmberTypeError(f"[broadcast_tensors] expected Tensor as element {i} in "
                                 f"argument 0, but got {type(t).__name__}")
    ndim = max((t.ndim for t in tensors), default=0)
    out = [1] * ndim
    for t in tensors:
        for j, n in reversed(list(enumerate(t.shape, ndim - t.ndim))):  # trailing dims first
            if out[j] == 1:
                out[j] = n
            elif n != 1 and n != out[j]:
                raise ShapeError(f"[broadcast_tensors] The size of tensor a ({out[j]}) must "
                                 f"match the size of tensor b ({n}) at non-singleton "
                                 f"dimension {j}")
    shape = tuple(out)
    return tuple(t if tuple(t.shape) == shape else expand(t, shape) for t in tensors)


# ---------------------------------------------------------------------------------- meshgrid
def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple:
    """Coordinate grids of 0-d/1-d tensors: output i varies along dim i (``ij``); ``xy`` swaps
    the roles of the first two inputs (output 0 varies along dim 1)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if not tensors:
        raise EmberRuntimeError("[meshgrid] meshgrid expects a non-empty TensorList")
    for i, t in enumerate(tensors):
        check_tensor(t, "meshgrid", f"tensors[{i}]")
        if t.ndim > 1:
            raise ShapeError(f"[meshgrid] torch.meshgrid: Expected 0D or 1D tensor in the tensor "
                             f"list but got a tensor of shape {tuple(t.shape)}")
    if any(t._dtype is not tensors[0]._dtype for t in tensors):
        raise EmberRuntimeError("[meshgrid] meshgrid expects all tensors to have the same dtype")
    if indexing not in ("ij", "xy"):
        raise EmberRuntimeError(f"[meshgrid] torch.meshgrid: indexing must be one of \"xy\" or "
                                f"\"ij\", but received: {indexing}")
    ts = list(tensors)
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    n = len(ts)
    shape = tuple(t.numel() for t in ts)
    outs = []
    for i, t in enumerate(ts):
        view = [1] * n
        view[i] = -1
        outs.append(expand(reshape(t, tuple(view)), shape))
    if swap:
        outs[0], outs[1] = outs[1], outs[0]
    return tuple(outs)


# ---------------------------------------------------------------------------------- diagonals
@tensor_method("diag_embed")
def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """A tensor whose diagonals (dims ``dim1``/``dim2``, ``offset``) hold the last dim of
    ``input``; everything else is zero."""
    check_tensor(input, "diag_embed")
    n = input.ndim + 1
    a, b = wrap_dim(dim1, n, "diag_embed"), wrap_dim(dim2, n, "diag_embed")
    if a == b:
        raise ShapeError(f"[diag_embed] diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = int(offset)
    m = input.shape[-1] + abs(offset)
    rest = iter(input.shape[:-1])
    shape = tuple(m if d in (a, b) else next(rest) for d in range(n))
    return bind(M.DIAGONAL_BACKWARD, input, shape=shape, offset=offset, dim1=a, dim2=b)


@tensor_method("diag")
def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """1-d: a square matrix with ``input`` on diagonal ``diagonal``; 2-d: that diagonal (a
    copy)."""
    check_tensor(input, "diag")
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return clone(_diagonal(input, diagonal))
    raise ShapeError(f"[diag] diag(): Supports 1D or 2D tensors. Got {input.ndim}D")



@tensor_method("trace")
@autocast_op("fp32")
def trace(input: Tensor) -> Tensor:
    """The sum of the main diagonal of a matrix (integers sum to int64)."""
    check_tensor(input, "trace")
    if input.ndim != 2:
        raise ShapeError(f"[trace] trace: expected a matrix, but got tensor with dim "
                         f"{input.ndim}")
    if input._dtype is dt.bool:
        raise EmberNotImplementedError("[trace] \"trace\" not implemented for 'Bool'")
    return _diagonal(input).sum()


# ---------------------------------------------------------------------------------- repeats
def _repeats_array(repeats: Any, n: int) -> np.ndarray:
    """The per-slice repeat counts as an int64 array of length ``n``."""
    if isinstance(repeats, Tensor):
        if repeats._dtype not in (dt.int32, dt.int64):
            raise EmberNotImplementedError(
                f"[repeat_interleave] \"repeat_interleave_cpu\" not implemented for "
                f"'{_TORCH_NAMES.get(repeats._dtype.name, repeats._dtype.name)}'")
        if repeats.ndim > 1:
            raise ShapeError("[repeat_interleave] repeats must be 0-dim or 1-dim tensor")
        r = repeats._data.astype(np.int64).reshape(-1)
        if r.size != 1 and r.size != n:
            raise ShapeError(f"[repeat_interleave] repeats must have the same size as input "
                             f"along dim, but got repeats.size(0) = {r.size} and "
                             f"input.size(0) = {n}")
        if (r < 0).any():
            raise EmberRuntimeError("[repeat_interleave] repeats can not be negative")
        return np.broadcast_to(r, (n,)) if r.size == 1 else r
    if not isinstance(repeats, (int, np.integer)) or isinstance(repeats, bool):
        raise EmberTypeError(f"[repeat_interleave] repeats must be an int or a Tensor, not "
                             f"{type(repeats).__name__}")
    if repeats < 0:
        raise EmberRuntimeError("[repeat_interleave] Repeats must be non-negative")
    return np.full(n, int(repeats), np.int64)


@tensor_method("repeat_interleave")
def repeat_interleave(input: Tensor, repeats: Any = None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Repeat each slice along ``dim`` (the flattened tensor when ``dim`` is None)
    ``repeats`` times; with one argument, the index of each of ``input``'s counts repeated."""
    check_tensor(input, "repeat_interleave")
    if repeats is None:  # repeat_interleave(counts): arange(len(counts)) repeated by counts
        if input._dtype not in (dt.int32, dt.int64):
            raise EmberNotImplementedError(
                f"[repeat_interleave] \"repeat_interleave_cpu\" not implemented for "
                f"'{_TORCH_NAMES.get(input._dtype.name, input._dtype.name)}'")
        if input.ndim != 1:
            raise ShapeError("[repeat_interleave] repeat_interleave only accept 1D vector as "
                             "repeat")
        r = input._data.astype(np.int64)
        if (r < 0).any():
            raise EmberRuntimeError("[repeat_interleave] repeats can not be negative")
        return _wrap(np.repeat(np.arange(r.size), r).astype(input._dtype.np), input._dtype)
    if dim is None:
        x, d = reshape(input, (-1,)), 0
    else:
        d = wrap_dim(dim, input.ndim, "repeat_interleave")
        if input.ndim == 0:  # PyTorch refuses a dim for 0-d input (its message varies)
            raise EmberIndexError(f"[repeat_interleave] Dimension specified as {dim} but "
                                  f"tensor has no dimensions")
        x = input
    n = x.shape[d]
    r = _repeats_array(repeats, n)
    idx = np.repeat(np.arange(n, dtype=np.int64), r)
    if output_size is not None and int(output_size) != idx.size:
        raise EmberRuntimeError(f"[repeat_interleave] allocated size does not match required "
                                f"size; output_size={output_size}, required {idx.size}")
    # a gather along d: its gradient sums the repeated slices back
    return bind(I.INDEX, x, _wrap(idx.reshape(1, -1), dt.int64), dims=(d,))


# ---------------------------------------------------------------------------------- rot90
@tensor_method("rot90")
def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """Rotate by 90 degrees ``k`` times in the plane of ``dims`` (from the first dim towards
    the second)."""
    check_tensor(input, "rot90")
    ds = list(dims)
    if len(ds) != 2:
        raise ShapeError(f"[rot90] expected total rotation dims == 2, but got dims = {len(ds)}")
    n = input.ndim
    if n < 2:
        raise ShapeError(f"[rot90] expected total dims >= 2, but got total dims = {n}")
    if ds[0] == ds[1] or abs(ds[0] - ds[1]) == n:
        raise ShapeError(f"[rot90] expected rotation dims to be different, but got dim0 = "
                         f"{ds[0]} and dim1 = {ds[1]}")
    a, b = wrap_dim(ds[0], n, "rot90"), wrap_dim(ds[1], n, "rot90")
    k = int(k) % 4
    if k == 1:
        return transpose(flip(input, b), a, b)
    if k == 2:
        return flip(input, a, b)
    if k == 3:
        return transpose(flip(input, a), a, b)
    return clone(input, memory_format="contiguous_format")


# ---------------------------------------------------------------------------------- diff
@tensor_method("diff")
def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (``xor`` for bool), after joining
    ``prepend`` and ``append``."""
    check_tensor(input, "diff")
    if input.ndim < 1:
        raise ShapeError("[diff] diff expects input to be at least one-dimensional")
    if n < 0:
        raise ShapeError(f"[diff] order must be non-negative but got {n}")
    d = wrap_dim(dim, input.ndim, "diff")
    for name, extra in (("prepend", prepend), ("append", append)):
        if extra is not None:
            if not isinstance(extra, Tensor):
                raise EmberTypeError(f"[diff] diff(): argument '{name}' must be Tensor, not "
                                     f"{type(extra).__name__}")
            if extra.ndim != input.ndim:
                raise ShapeError("[diff] diff expects prepend or append to be the same "
                                 "dimension as input")
    x = input
    if prepend is not None or append is not None:
        parts = [t for t in (prepend, input, append) if t is not None]
        x = cat(parts, d)
    if n == 0:  # PyTorch returns a copy, never input itself
        return clone(x) if x is input else x
    if n >= x.shape[d]:
        return narrow(x, d, 0, 0).clone()
    for _ in range(n):
        m = x.shape[d] - 1
        hi, lo = narrow(x, d, 1, m), narrow(x, d, 0, m)
        x = hi.logical_xor(lo) if x._dtype is dt.bool else hi - lo
    return x


# ---------------------------------------------------------------------------------- kron
@tensor_method("kron")
def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product: block (i, j, ...) is ``input[i, j, ...] * other``."""
    check_tensor(input, "kron")
    check_tensor(other, "kron", "other")
    n = max(input.ndim, other.ndim)
    sa = (1,) * (n - input.ndim) + tuple(input.shape)
    sb = (1,) * (n - other.ndim) + tuple(other.shape)
    # interleave dims: a as (a0, 1, a1, 1, ...), b as (1, b0, 1, b1, ...)
    a = reshape(input, tuple(v for s in sa for v in (s, 1)))
    b = reshape(other, tuple(v for s in sb for v in (1, s)))
    return reshape(a * b, tuple(x * y for x, y in zip(sa, sb)))


# ---------------------------------------------------------------------------------- in-place
from ember._frontend.inplace import inplace_method  # noqa: E402

for _name, _fn in (("tril_", tril), ("triu_", triu)):
    inplace_method(_name, _fn, "never")

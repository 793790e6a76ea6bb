"""Sparse COO tensors: ``sparse_coo_tensor``, ``Tensor.to_sparse``, ``sparse.mm``/``spmm`` and
the COO accessors (``indices``, ``values``, ``_nnz``, ``coalesce``, ``to_dense``).

A ``SparseCOOTensor`` holds an ``(ndim_sparse, nnz)`` int64 index tensor and a ``(nnz, ...)``
values tensor, both ordinary ember tensors, so gradients reach ``values`` (and the dense
operand of a product) through ember's own autograd: the product ``S @ D`` is
``index_add(0, rows, values[:, None] * D[cols])``, ``to_dense`` an ``index_add`` into zeros.
Only what graph and recommender code uses is supported; every other tensor method raises a
clear error that says to call ``.to_dense()``.  Differences from PyTorch (documented in
docs/ops.md): a sparse tensor is not an ``ember.Tensor`` instance, and indices are checked
against ``size`` when the tensor is made (PyTorch skips that check by default).

>>> i = ember.tensor([[0, 1, 1], [2, 0, 2]])
>>> s = ember.sparse_coo_tensor(i, ember.tensor([3.0, 4.0, 5.0]), (2, 3))
>>> ember.sparse.mm(s, ember.ones(3, 1))
tensor([[3.],
        [9.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes as dt
from ember._frontend.creation import tensor as _tensor
from ember._frontend.creation import zeros
from ember._frontend.movement import cat
from ember.device import check_pin
from ember.errors import EmberRuntimeError, EmberTypeError, ShapeError
from ember.tensor import Tensor, tensor_method

__all__ = ["SparseCOOTensor", "addmm", "mm", "sparse_coo_tensor", "spmm", "sum"]

strided = "strided"
sparse_coo = "sparse_coo"


def _as_index(indices: Any) -> Tensor:
    t = indices if isinstance(indices, Tensor) else _tensor(indices)
    if t.dtype.is_floating_point or t.dtype is dt.bool:
        raise EmberRuntimeError(f"[sparse_coo_tensor] indices must be an integer tensor, got "
                                f"{t.dtype.name}")
    if t.ndim != 2:
        raise ShapeError(f"[sparse_coo_tensor] indices must be sparse_dim x nnz, but got: "
                         f"{list(t.shape)}")
    return t.long()


class SparseCOOTensor:
    """A sparse tensor in coordinate format (``layout == ember.sparse_coo``)."""

    is_sparse = True
    is_cuda = False
    is_cpu = True
    layout = sparse_coo

    def __init__(self, indices: Tensor, values: Tensor, size: tuple, coalesced: bool) -> None:
        self._idx, self._vals, self._size, self._coalesced = indices, values, tuple(size), coalesced

    # ------------------------------------------------------------------ metadata
    @property
    def shape(self) -> Any:
        from ember.tensor import Size
        return Size(self._size)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self._size[dim]

    def dim(self) -> int:
        return len(self._size)

    ndim = property(dim)

    @property
    def dtype(self) -> dt.dtype:
        return self._vals.dtype

    @property
    def device(self) -> Any:
        return self._vals.device

    @property
    def requires_grad(self) -> bool:
        return self._vals.requires_grad

    def requires_grad_(self, requires_grad: bool = True) -> SparseCOOTensor:
        self._vals.requires_grad_(requires_grad)
        return self

    @property
    def grad(self) -> Tensor | None:
        return self._vals.grad

    def sparse_dim(self) -> int:
        return self._idx.shape[0]

    def dense_dim(self) -> int:
        return self._vals.ndim - 1

    def _nnz(self) -> int:
        return self._idx.shape[1]

    def _indices(self) -> Tensor:
        return self._idx

    def _values(self) -> Tensor:
        return self._vals

    def indices(self) -> Tensor:
        self._need_coalesced("indices")
        return self._idx

    def values(self) -> Tensor:
        self._need_coalesced("values")
        return self._vals

    def _need_coalesced(self, what: str) -> None:
        if not self._coalesced:
            raise EmberRuntimeError(f"[sparse.{what}] Cannot get {what} on an uncoalesced "
                                    f"tensor, please call .coalesce() first")

    def is_coalesced(self) -> bool:
        return self._coalesced

    # ------------------------------------------------------------------ conversions
    def _linear(self) -> np.ndarray:
        """Each entry's row-major position over the sparse dims."""
        dims = self._size[:self.sparse_dim()]
        idx = self._idx.numpy()
        return np.ravel_multi_index(tuple(idx), dims) if idx.size else np.zeros(0, np.int64)

    def coalesce(self) -> SparseCOOTensor:
        """Sorted indices with duplicates summed (differentiable in the values)."""
        if self._coalesced:
            return self
        dims = self._size[:self.sparse_dim()]
        uniq, inverse = np.unique(self._linear(), return_inverse=True)
        vals = zeros((len(uniq),) + tuple(self._vals.shape[1:]), dtype=self.dtype)
        vals = vals.index_add(0, _tensor(inverse.reshape(-1)), self._vals)
        idx = np.stack(np.unravel_index(uniq, dims)) if len(dims) else np.zeros((0, len(uniq)))
        return SparseCOOTensor(_tensor(idx.astype(np.int64)).reshape(len(dims), -1), vals,
                               self._size, True)

    def to_dense(self) -> Tensor:
        """The dense tensor (entries with equal indices add up)."""
        nsp = self.sparse_dim()
        flat = zeros((int(np.prod(self._size[:nsp])),) + self._size[nsp:], dtype=self.dtype)
        flat = flat.index_add(0, _tensor(self._linear()), self._vals)
        return flat.reshape(self._size)

    def to(self, *args: Any, **kwargs: Any) -> SparseCOOTensor:
        """``to(device)``/``to(dtype)``: converts the values (CPU only)."""
        return SparseCOOTensor(self._idx, self._vals.to(*args, **kwargs), self._size,
                               self._coalesced)

    def cpu(self) -> SparseCOOTensor:
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> SparseCOOTensor:
        return self.to("cuda")

    def float(self) -> SparseCOOTensor:
        return self.to(dt.float32)

    def double(self) -> SparseCOOTensor:
        return self.to(dt.float64)

    def detach(self) -> SparseCOOTensor:
        return SparseCOOTensor(self._idx, self._vals.detach(), self._size, self._coalesced)

    def clone(self) -> SparseCOOTensor:
        return SparseCOOTensor(self._idx.clone(), self._vals.clone(), self._size,
                               self._coalesced)

    def to_sparse(self) -> SparseCOOTensor:
        return self

    def t(self) -> SparseCOOTensor:
        """The transpose of a 2-d sparse matrix."""
        if self.sparse_dim() != 2 or self.dense_dim():
            raise ShapeError(f"[sparse.t] t() expects a 2-D sparse tensor, got "
                             f"{self.sparse_dim()} sparse and {self.dense_dim()} dense dims")
        return SparseCOOTensor(self._idx.flip(0), self._vals, self._size[::-1], False)

    def transpose(self, dim0: int, dim1: int) -> SparseCOOTensor:
        if {dim0 % 2, dim1 % 2} == {0, 1}:
            return self.t()
        if dim0 % 2 == dim1 % 2:
            return self
        raise ShapeError("[sparse.transpose] only the two dims of a sparse matrix can be swapped")

    # ------------------------------------------------------------------ arithmetic
    def mm(self, mat2: Tensor) -> Tensor:
        return mm(self, mat2)

    def __matmul__(self, other: Tensor) -> Tensor:
        if isinstance(other, Tensor) and other.ndim == 1:
            return mm(self, other.unsqueeze(1)).squeeze(1)
        return mm(self, other)

    def _scaled(self, k: Any) -> SparseCOOTensor:
        if isinstance(k, (SparseCOOTensor, Tensor)) and not (isinstance(k, Tensor)
                                                             and k.ndim == 0):
            raise EmberRuntimeError("[sparse.mul] ember multiplies sparse tensors by scalars "
                                    "only; call .to_dense() first")
        return SparseCOOTensor(self._idx, self._vals * k, self._size, self._coalesced)

    __mul__ = __rmul__ = mul = _scaled

    def __truediv__(self, k: Any) -> SparseCOOTensor:
        return SparseCOOTensor(self._idx, self._vals / k, self._size, self._coalesced)

    def __neg__(self) -> SparseCOOTensor:
        return self._scaled(-1)

    def __add__(self, other: Any) -> Any:
        if isinstance(other, SparseCOOTensor):
            if other._size != self._size:
                raise ShapeError(f"[sparse.add] sizes differ: {self._size} and {other._size}")
            return SparseCOOTensor(cat([self._idx, other._idx], 1),
                                   cat([self._vals, other._vals.to(self.dtype)], 0),
                                   self._size, False)
        raise EmberRuntimeError("[sparse.add] add(sparse, dense) is not supported. Use "
                                "add(dense, sparse) instead.")

    def sum(self, dim: Any = None) -> Any:
        return sum(self, dim)

    # ------------------------------------------------------------------ printing, the rest
    def __repr__(self) -> str:
        pad = " " * 7
        ind = repr(self._idx).replace("\n", "\n" + pad + " " * 8)
        val = repr(self._vals.detach()).replace("\n", "\n" + pad + " " * 7)
        grad = ", requires_grad=True" if self.requires_grad else ""
        return (f"tensor(indices={ind},\n{pad}values={val},\n{pad}size={self._size}, "
                f"nnz={self._nnz()}, layout=torch.sparse_coo{grad})")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise EmberRuntimeError(f"[sparse] Tensor.{name} is not supported for sparse COO "
                                f"tensors in ember; call .to_dense() first")


# ---------------------------------------------------------------------- construction
def sparse_coo_tensor(indices: Any, values: Any, size: Any = None, *, dtype: Any = None,
                      device: Any = None, requires_grad: bool = False,
                      check_invariants: bool | None = None,
                      is_coalesced: bool | None = None,
                      pin_memory: bool = False) -> SparseCOOTensor:
    """A sparse COO tensor from ``(sparse_dim, nnz)`` indices and ``(nnz, ...)`` values
    (``torch.sparse_coo_tensor``); ``size`` defaults to the smallest that holds the indices.

    >>> ember.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2)).to_dense()
    tensor([[0., 2.],
            [3., 0.]])
    """
    check_pin(pin_memory, "sparse_coo_tensor")
    op = "sparse_coo_tensor"
    idx = _as_index(indices)
    vals = values if isinstance(values, Tensor) else _tensor(values, dtype=dtype)
    if dtype is not None:
        vals = vals.to(dtype)
    if device is not None:
        vals = vals.to(device)
    nsp, nnz = idx.shape
    if vals.ndim == 0 or vals.shape[0] != nnz:
        got = vals.shape[0] if vals.ndim else "a 0-d tensor"
        raise ShapeError(f"[{op}] indices and values must have same nnz, but got nnz from "
                         f"indices: {nnz}, nnz from values: {got}")
    ind = idx.numpy()
    if ind.size and ind.min() < 0:
        raise EmberRuntimeError(f"[{op}] found negative index {int(ind.min())} in indices")
    if size is None:
        size = tuple(int(m) + 1 if nnz else 0 for m in (ind.max(1) if nnz else [0] * nsp))
        size = size + tuple(vals.shape[1:])
    size = tuple(int(n) for n in size)
    if len(size) != nsp + vals.ndim - 1:
        raise ShapeError(f"[{op}] number of dimensions must be sparse_dim ({nsp}) + dense_dim "
                         f"({vals.ndim - 1}), but got {len(size)}")
    if tuple(vals.shape[1:]) != size[nsp:]:
        raise ShapeError(f"[{op}] values has incorrect size, expected "
                         f"{[nnz, *size[nsp:]]}, got {list(vals.shape)}")
    for d in range(nsp):
        if nnz and ind[d].max() >= size[d]:
            raise ShapeError(f"[{op}] size is inconsistent with indices: for dim {d}, size is "
                             f"{size[d]} but found index {int(ind[d].max())}")
    if requires_grad:
        vals = vals.detach().requires_grad_(True)
    return SparseCOOTensor(idx, vals, size, bool(is_coalesced) or nnz <= 1)


@tensor_method("to_sparse")
def to_sparse(input: Tensor, sparse_dim: int | None = None, *, layout: Any = None) -> Any:
    """The coalesced COO form of a dense tensor (``Tensor.to_sparse``); differentiable."""
    if layout not in (None, sparse_coo):
        raise EmberTypeError(f"[to_sparse] ember supports layout=sparse_coo only, got {layout}")
    nsp = input.ndim if sparse_dim is None else int(sparse_dim)
    arr = input.detach().numpy()
    mask = arr != 0
    if nsp < input.ndim:
        mask = mask.reshape(arr.shape[:nsp] + (-1,)).any(-1)
    where = np.nonzero(mask)
    idx = _tensor(np.stack(where).astype(np.int64) if where else np.zeros((0, 1), np.int64))
    vals = input[tuple(_tensor(w.astype(np.int64)) for w in where)] if nsp else input.unsqueeze(0)
    return SparseCOOTensor(idx.reshape(nsp, -1), vals, tuple(input.shape), True)


# ---------------------------------------------------------------------- products
def mm(mat1: SparseCOOTensor, mat2: Tensor) -> Tensor:
    """``sparse @ dense`` for a 2-d sparse matrix (``torch.sparse.mm``/``torch.spmm``);
    differentiable in the sparse values and the dense matrix."""
    op = "sparse.mm"
    if not isinstance(mat1, SparseCOOTensor):
        raise EmberTypeError(f"[{op}] mat1 must be a sparse COO tensor, got "
                             f"{type(mat1).__name__}")
    if not isinstance(mat2, Tensor) or mat2.ndim != 2:
        raise ShapeError(f"[{op}] mat2 must be a 2-d dense tensor")
    if mat1.sparse_dim() != 2 or mat1.dense_dim():
        raise ShapeError(f"[{op}] mat1 must be a 2-d sparse matrix with scalar values")
    n, m = mat1._size
    if mat2.shape[0] != m:
        raise ShapeError(f"[{op}] mat1 and mat2 shapes cannot be multiplied ({n}x{m} and "
                         f"{mat2.shape[0]}x{mat2.shape[1]})")
    if mat2.dtype is not mat1.dtype:
        raise EmberRuntimeError(f"[{op}] expected mat1 and mat2 to have the same dtype, but got "
                                f"{mat1.dtype.name} and {mat2.dtype.name}")
    rows, cols = mat1._idx[0], mat1._idx[1]
    contrib = mat1._vals.unsqueeze(1) * mat2.index_select(0, cols)
    return zeros((n, mat2.shape[1]), dtype=mat2.dtype).index_add(0, rows, contrib)


def spmm(input: SparseCOOTensor, mat2: Tensor) -> Tensor:
    """``torch.spmm``: ``sparse.mm``."""
    return mm(input, mat2)


def addmm(mat: Tensor, mat1: SparseCOOTensor, mat2: Tensor, *, beta: float = 1.0,
          alpha: float = 1.0) -> Tensor:
    """``beta * mat + alpha * (mat1 @ mat2)`` with a sparse ``mat1``."""
    return mat * beta + mm(mat1, mat2) * alpha


def sum(input: SparseCOOTensor, dim: Any = None, dtype: Any = None) -> Any:  # noqa: A001
    """Sum of all entries (a dense 0-d tensor), or over ``dim`` (dense result in ember)."""
    dense = input.to_dense() if isinstance(input, SparseCOOTensor) else input
    out = dense.sum() if dim is None else dense.sum(dim)
    return out if dtype is None else out.to(dtype)


def _legacy(name: str, d: dt.dtype) -> type:
    """``torch.sparse.FloatTensor(indices, values, size)`` and friends (legacy constructors)."""

    def new(cls: type, indices: Any, values: Any, size: Any = None) -> SparseCOOTensor:
        return sparse_coo_tensor(indices, values, size, dtype=d)

    return type(name, (), {"__new__": new, "__doc__": f"Legacy sparse {d.name} constructor."})


FloatTensor = _legacy("FloatTensor", dt.float32)
DoubleTensor = _legacy("DoubleTensor", dt.float64)
LongTensor = _legacy("LongTensor", dt.int64)

"""Linear-algebra frontend: matmul and its relatives (mm, bmm, mv, dot, addmm, baddbmm, ...).

Every product lowers to the strict batched ``matmul`` primitive (``addmm``/``addbmm`` for the
fused ``beta * input + alpha * product`` forms, rounded once like PyTorch): vectors become
matrices by reshaping, broadcast batch dims are expanded (their gradients sum back through
``expand``), and an N-d tensor times a matrix is folded into one 2-d product, as PyTorch does.
Errors carry PyTorch's messages.
"""

from __future__ import annotations

from typing import Any, Sequence

from ember import dtypes as dt
from ember._frontend.autocast import autocast_op
from ember._frontend.core import broadcast_shapes, check_tensor, expand_to, scalar_for
from ember._frontend.shape import reshape
from ember.errors import DTypeRuntimeError, EmberNotImplementedError, ShapeError
from ember.ops.linalg import ADDBMM, ADDMM, MATMUL
from ember.ops.registry import bind
from ember.ops.shape import EXPAND, PERMUTE
from ember.tensor import Tensor, tensor_method

__all__ = ["addbmm", "addmm", "addmv", "baddbmm", "bmm", "dot", "ger", "inner", "matmul", "mm",
           "mv", "outer", "tensordot", "vdot"]

# PyTorch's C++ type names, as its matmul/dot messages print them
_CPP = {"float32": "float", "float64": "double", "float16": "c10::Half",
        "bfloat16": "c10::BFloat16", "int32": "int", "int64": "long int", "int16": "short int",
        "int8": "signed char", "uint8": "unsigned char", "bool": "bool"}
_SCALAR = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
           "int32": "Int", "int64": "Long", "int16": "Short", "int8": "Char", "uint8": "Byte",
           "bool": "Bool"}


def _is_sparse(x: Any) -> bool:
    """A sparse COO tensor (``ember.sparse``, same layer: asked by duck type, no import)."""
    # the cheap isinstance first: this runs on every matmul, almost always with a Tensor
    return not isinstance(x, Tensor) and getattr(type(x), "is_sparse", False) is True


def _reshape(x: Tensor, shape: tuple) -> Tensor:
    """A reshape that copies only when the strides demand it."""
    if x._data.shape == shape:
        return x
    return reshape(x, shape)


def _no_bool(op: str, kernel: str, d: dt.dtype) -> None:
    if d is dt.bool:
        raise EmberNotImplementedError(f"[{op}] \"{kernel}\" not implemented for 'Bool'")


def _same_dtype(op: str, a: Tensor, b: Tensor) -> None:
    if a._dtype is not b._dtype:
        raise DTypeRuntimeError(
            f"[{op}] expected m1 and m2 to have the same dtype, but got: {_CPP[a._dtype.name]} "
            f"!= {_CPP[b._dtype.name]}")


def _mm_shapes(op: str, sa: tuple, sb: tuple) -> None:
    if sa[1] != sb[0]:
        raise ShapeError(f"[{op}] mat1 and mat2 shapes cannot be multiplied ({sa[0]}x{sa[1]} and "
                         f"{sb[0]}x{sb[1]})")


def _mv_shapes(op: str, sa: tuple, sb: tuple) -> None:
    if sa[1] != sb[0]:
        raise ShapeError(f"[{op}] size mismatch, got input ({sa[0]}), mat ({sa[0]}x{sa[1]}), "
                         f"vec ({sb[0]})")


def _dot_checks(op: str, a: Tensor, b: Tensor) -> None:
    if a._data.ndim != 1 or b._data.ndim != 1:
        raise ShapeError(f"[{op}] 1D tensors expected, but got {a._data.ndim}D and "
                         f"{b._data.ndim}D tensors")
    if a._dtype is not b._dtype:
        raise DTypeRuntimeError(
            f"[{op}] dot : expected both vectors to have same dtype, but found "
            f"{_SCALAR[a._dtype.name]} and {_SCALAR[b._dtype.name]}")
    n, m = a._data.shape[0], b._data.shape[0]
    if n != m:
        raise ShapeError(
            f"[{op}] inconsistent tensor size, expected tensor [{n}] and src [{m}] to have the "
            f"same number of elements, but got {n} and {m} elements respectively")
    _no_bool(op, "dot", a._dtype)


def _mm(a: Tensor, b: Tensor) -> Tensor:
    return bind(MATMUL, a, b)


# ------------------------------------------------------------------------------ matmul
@tensor_method("matmul")
@autocast_op("lower")
def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with NumPy/PyTorch semantics for 1-d, 2-d and batched operands."""
    if _is_sparse(input):
        return input @ other
    check_tensor(input, "matmul")
    check_tensor(other, "matmul", "other")
    sa, sb = input._data.shape, other._data.shape
    na, nb = len(sa), len(sb)
    if na == 2 and nb == 2 and input._dtype is other._dtype and sa[1] == sb[0]:
        return bind(MATMUL, input, other)  # the hot path
    if na == 0 or nb == 0:
        raise ShapeError(f"[matmul] both arguments to matmul need to be at least 1D, but they "
                         f"are {na}D and {nb}D")
    if na == 1 and nb == 1:
        _dot_checks("matmul", input, other)
        return _reshape(_mm(_reshape(input, (1, sa[0])), _reshape(other, (sb[0], 1))), ())
    _same_dtype("matmul", input, other)
    _no_bool("matmul", "addmm_impl_cpu_", input._dtype)
    if nb <= 2 and na <= 2:
        if nb == 1:
            _mv_shapes("matmul", sa, sb)
            return _reshape(_mm(input, _reshape(other, (sb[0], 1))), (sa[0],))
        _mm_shapes("matmul", (1,) + sa if na == 1 else sa, sb)
        return _reshape(_mm(_reshape(input, (1, sa[0])), other), (sb[1],))
    if nb <= 2:
        # fold the batch into the rows: one 2-d product (and one gemm for the weight's grad)
        rows = input._data.size // sa[-1] if sa[-1] else _prod(sa[:-1])
        a2 = _reshape(input, (rows, sa[-1]))
        if nb == 1:
            _mv_shapes("matmul", (rows, sa[-1]), sb)
            return _reshape(_mm(a2, _reshape(other, (sb[0], 1))), sa[:-1])
        _mm_shapes("matmul", (rows, sa[-1]), sb)
        return _reshape(_mm(a2, other), sa[:-1] + (sb[1],))
    return _batched(input, other, sa, sb)


def _prod(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _batched(a: Tensor, b: Tensor, sa: tuple, sb: tuple) -> Tensor:
    a_vec, b_vec = len(sa) == 1, len(sb) == 1
    if a_vec:
        sa = (1,) + sa
    if b_vec:
        sb = sb + (1,)
    batch = broadcast_shapes("matmul", sa[:-2], sb[:-2])
    if sa[-1] != sb[-2]:
        raise ShapeError(
            f"[matmul] Expected size for first two dimensions of batch2 tensor to be: "
            f"[{_prod(batch)}, {sa[-1]}] but got: [{_prod(batch)}, {sb[-2]}].")
    x = expand_to(_reshape(a, sa), batch + sa[-2:])
    y = expand_to(_reshape(b, sb), batch + sb[-2:])
    out = bind(MATMUL, x, y)
    shape = batch + (() if a_vec else sa[-2:-1]) + (() if b_vec else sb[-1:])
    return _reshape(out, shape)


@tensor_method("mm")
@autocast_op("lower")
def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Product of two matrices (``input`` may be a sparse COO matrix: ``ember.sparse.mm``)."""
    if _is_sparse(input):
        return input.mm(mat2)
    check_tensor(input, "mm")
    check_tensor(mat2, "mm", "mat2")
    if input._data.ndim != 2:
        raise ShapeError("[mm] self must be a matrix")
    if mat2._data.ndim != 2:
        raise ShapeError("[mm] mat2 must be a matrix")
    _same_dtype("mm", input, mat2)
    _no_bool("mm", "addmm_impl_cpu_", input._dtype)
    _mm_shapes("mm", input._data.shape, mat2._data.shape)
    return bind(MATMUL, input, mat2)


def _bmm_checks(op: str, a: Tensor, b: Tensor) -> None:
    if a._data.ndim != 3:
        raise ShapeError(f"[{op}] batch1 must be a 3D tensor")
    if b._data.ndim != 3:
        raise ShapeError(f"[{op}] batch2 must be a 3D tensor")
    sa, sb = a._data.shape, b._data.shape
    if sb[0] != sa[0] or sb[1] != sa[2]:
        raise ShapeError(f"[{op}] Expected size for first two dimensions of batch2 tensor to be: "
                         f"[{sa[0]}, {sa[2]}] but got: [{sb[0]}, {sb[1]}].")
    if a._dtype is not b._dtype:
        raise DTypeRuntimeError(f"[{op}] expected scalar type {_SCALAR[a._dtype.name]} but "
                                f"found {_SCALAR[b._dtype.name]}")
    _no_bool(op, "bmm", a._dtype)


@tensor_method("bmm")
@autocast_op("lower")
def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched product of (b, n, m) and (b, m, p) tensors."""
    check_tensor(input, "bmm")
    check_tensor(mat2, "bmm", "mat2")
    _bmm_checks("bmm", input, mat2)
    return bind(MATMUL, input, mat2)


def _mv_checks(op: str, mat: Tensor, vec: Tensor, ninput: int = 1) -> None:
    if mat._data.ndim != 2 or vec._data.ndim != 1:
        raise ShapeError(f"[{op}] vector + matrix @ vector expected, got {ninput}, "
                         f"{mat._data.ndim}, {vec._data.ndim}")
    _mv_shapes(op, mat._data.shape, vec._data.shape)
    if mat._dtype is not vec._dtype:
        n = {x: _SCALAR[x._dtype.name] for x in (mat, vec)}
        raise DTypeRuntimeError(f"[{op}] addmv input tensors must have the same dtype, but got "
                                f"{n[vec]}, {n[mat]}, and {n[vec]}")
    _no_bool(op, "addmv_impl_cpu", mat._dtype)


@tensor_method("mv")
def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Matrix-vector product."""
    check_tensor(input, "mv")
    check_tensor(vec, "mv", "vec")
    _mv_checks("mv", input, vec)
    n = vec._data.shape[0]
    return _reshape(bind(MATMUL, input, _reshape(vec, (n, 1))), input._data.shape[:1])


@tensor_method("dot")
def dot(input: Tensor, tensor: Tensor) -> Tensor:
    """Inner product of two 1-d tensors of one dtype."""
    check_tensor(input, "dot")
    check_tensor(tensor, "dot", "tensor")
    _dot_checks("dot", input, tensor)
    n = input._data.shape[0]
    return _reshape(_mm(_reshape(input, (1, n)), _reshape(tensor, (n, 1))), ())


@tensor_method("vdot")
def vdot(input: Tensor, other: Tensor) -> Tensor:
    """``dot`` (real tensors need no conjugation)."""
    check_tensor(input, "vdot")
    check_tensor(other, "vdot", "other")
    _dot_checks("vdot", input, other)
    return dot(input, other)


@tensor_method("inner")
def inner(input: Tensor, other: Tensor) -> Tensor:
    """Sum of products over the last dims: shape ``input.shape[:-1] + other.shape[:-1]``."""
    check_tensor(input, "inner")
    check_tensor(other, "inner", "other")
    if input._data.ndim == 0 or other._data.ndim == 0:
        return input * other
    sa, sb = input._data.shape, other._data.shape
    if sa[-1] != sb[-1]:
        raise ShapeError(f"[inner] inner() the last dimension must match on both input tensors "
                         f"but got shapes {list(sa)} and {list(sb)}")
    return tensordot(input, other, ([input._data.ndim - 1], [other._data.ndim - 1]))


@tensor_method("outer", "ger")
def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """Outer product of two 1-d tensors (promotes like ``mul``)."""
    check_tensor(input, "outer")
    check_tensor(vec2, "outer", "vec2")
    for name, t in (("self", input), ("vec2", vec2)):
        if t._data.ndim != 1:
            raise ShapeError(f"[outer] outer: Expected 1-D argument {name}, but got "
                             f"{t._data.ndim}-D")
    return _reshape(input, (input._data.shape[0], 1)) * vec2


ger = outer


@autocast_op("lower")
def tensordot(a: Tensor, b: Tensor, dims: Any = 2) -> Tensor:
    """Contract ``dims`` (a count, or two lists of dims) of ``a`` and ``b``."""
    from ember.ops._util import wrap_dim
    check_tensor(a, "tensordot", "a")
    check_tensor(b, "tensordot", "b")
    na, nb = a._data.ndim, b._data.ndim
    if isinstance(dims, int):
        if dims < 0:
            raise ShapeError(f"[tensordot] tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(na - dims, na)), list(range(dims))
    else:
        da, db = ([dims[0]] if isinstance(dims[0], int) else list(dims[0]),
                  [dims[1]] if isinstance(dims[1], int) else list(dims[1]))
        if len(da) != len(db):
            raise ShapeError("[tensordot] both dimension lists should have same length")
    da = [wrap_dim(int(d), na, "tensordot") for d in da]
    db = [wrap_dim(int(d), nb, "tensordot") for d in db]
    if a._dtype is not b._dtype:
        raise DTypeRuntimeError("[tensordot] both inputs should have same dtype")
    sa, sb = a._data.shape, b._data.shape
    for i, j in zip(da, db):
        if sa[i] != sb[j]:
            raise ShapeError(f"[tensordot] contracted dimensions need to match, but first has "
                             f"size {sa[i]} in dim {i} and second has size {sb[j]} in dim {j}")
    _no_bool("tensordot", "addmm_impl_cpu_", a._dtype)
    fa = [i for i in range(na) if i not in da]
    fb = [j for j in range(nb) if j not in db]
    k = _prod(sa[i] for i in da)
    x = _reshape(_permute(a, fa + da), (_prod(sa[i] for i in fa), k))
    y = _reshape(_permute(b, db + fb), (k, _prod(sb[j] for j in fb)))
    return _reshape(bind(MATMUL, x, y), tuple(sa[i] for i in fa) + tuple(sb[j] for j in fb))


def _permute(x: Tensor, dims: list) -> Tensor:
    if dims == list(range(len(dims))):
        return x
    return bind(PERMUTE, x, dims=tuple(dims))


# ------------------------------------------------------------------------------ add*mm
def _add_scaled(op: str, input: Tensor, a: Tensor, b: Tensor, beta: Any,
                alpha: Any) -> Tensor:
    """``beta * input + alpha * (a @ b)`` in one rounding; beta == 0 ignores input (NaNs
    included).  PyTorch casts alpha and beta to the tensors' kind."""
    check_tensor(input, op)
    if input._dtype is not a._dtype:
        raise DTypeRuntimeError(
            f"[{op}] self and mat2 must have the same dtype, but got "
            f"{_SCALAR[input._dtype.name]} and {_SCALAR[a._dtype.name]}")
    shape = a._data.shape[:-1] + b._data.shape[-1:]
    if input._data.shape != shape:
        input = bind(EXPAND, input, shape=shape)  # raises PyTorch's expand error
    return bind(ADDMM, input, a, b, beta=scalar_for(beta, a._dtype),
                alpha=scalar_for(alpha, a._dtype))


@tensor_method("addmm")
@autocast_op("lower")
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1,
          alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)``."""
    check_tensor(mat1, "addmm", "mat1")
    check_tensor(mat2, "addmm", "mat2")
    for name, t in (("mat1", mat1), ("mat2", mat2)):
        if t._data.ndim != 2:
            raise ShapeError(f"[addmm] {name} must be a matrix, got {t._data.ndim}-D tensor")
    _mm_shapes("addmm", mat1._data.shape, mat2._data.shape)
    _same_dtype("addmm", mat1, mat2)
    _no_bool("addmm", "addmm_impl_cpu_", mat1._dtype)
    return _add_scaled("addmm", input, mat1, mat2, beta, alpha)


@tensor_method("addmv")
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1,
          alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * (mat @ vec)``."""
    check_tensor(mat, "addmv", "mat")
    check_tensor(vec, "addmv", "vec")
    _mv_checks("addmv", mat, vec, input.ndim if isinstance(input, Tensor) else 0)
    check_tensor(input, "addmv")
    m, k = mat._data.shape
    if input._data.shape != (m,):
        input = bind(EXPAND, input, shape=(m,))
    out = _add_scaled("addmv", _reshape(input, (m, 1)), mat, _reshape(vec, (k, 1)), beta, alpha)
    return _reshape(out, (m,))


@tensor_method("baddbmm")
@autocast_op("lower")
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1,
            alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)``."""
    check_tensor(batch1, "baddbmm", "batch1")
    check_tensor(batch2, "baddbmm", "batch2")
    _bmm_checks("baddbmm", batch1, batch2)
    return _add_scaled("baddbmm", input, batch1, batch2, beta, alpha)


@tensor_method("addbmm")
@autocast_op("lower")
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1,
           alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    check_tensor(batch1, "addbmm", "batch1")
    check_tensor(batch2, "addbmm", "batch2")
    _bmm_checks("addbmm", batch1, batch2)
    check_tensor(input, "addbmm")
    if input._dtype is not batch1._dtype:
        raise DTypeRuntimeError(
            f"[addbmm] self and mat2 must have the same dtype, but got "
            f"{_SCALAR[input._dtype.name]} and {_SCALAR[batch1._dtype.name]}")
    shape = (batch1._data.shape[1], batch2._data.shape[2])
    if input._data.shape != shape:
        input = bind(EXPAND, input, shape=shape)
    return bind(ADDBMM, input, batch1, batch2, beta=scalar_for(beta, batch1._dtype),
                alpha=scalar_for(alpha, batch1._dtype))


# ------------------------------------------------------------------------------ operators
def _rmatmul(self: Tensor, other: Any) -> Tensor:
    return matmul(other, self)


Tensor.__matmul__ = matmul  # type: ignore[method-assign]
Tensor.__rmatmul__ = _rmatmul  # type: ignore[method-assign]


# ------------------------------------------------------------------------------ in-place
from ember._frontend.inplace import inplace_method  # noqa: E402

for _name, _fn in (("addmm_", addmm), ("addmv_", addmv), ("baddbmm_", baddbmm),
                   ("addbmm_", addbmm)):
    inplace_method(_name, _fn)

"""View frontend: argument parsing for view, reshape, expand, permute, squeeze, transpose,
narrow, select, split and friends.  Everything here returns views of its input (or a copy where
PyTorch copies: ``reshape``/``flatten`` of a non-viewable layout)."""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from ember._bind_fast import expand_view
from ember._frontend.core import check_tensor
from ember._lazy import LazyArray
from ember.dtypes import dtype as _DType
from ember.errors import EmberIndexError, EmberRuntimeError, EmberTypeError, ShapeError
from ember.ops import shape as S
from ember.ops._util import wrap_dim
from ember.ops.registry import bind
from ember.sym import SymInt, sym_eq_static
from ember.tensor import Tensor, tensor_method

__all__ = ["as_strided", "chunk", "clone", "contiguous", "diagonal", "expand", "expand_as",
           "flatten", "moveaxis", "movedim", "narrow", "permute", "ravel", "reshape", "select",
           "split", "squeeze", "sum_to_size", "swapaxes", "swapdims", "t", "tensor_split",
           "transpose", "unbind", "unflatten", "unsqueeze", "view"]


def size_args(args: tuple, op: str) -> tuple:
    """Accept ``f(2, 3)``, ``f((2, 3))`` and ``f([2, 3])``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    for a in args:  # the common case, plain ints, as they are
        if a.__class__ is not int:
            break
    else:
        return args
    try:
        # symbolic sizes (export) pass through; int() would specialize them
        return tuple(a if isinstance(a, SymInt) else int(a) for a in args)
    except TypeError:
        raise ShapeError(
            f"[{op}] expected a sequence of ints for the shape, got {args!r}") from None


def infer_shape(shape: tuple, numel: int, op: str) -> tuple:
    """Resolve one ``-1`` in ``shape``."""
    if numel.__class__ is int:  # plain non-negative ints without -1: only the count to check
        total = 1
        for s in shape:
            if s.__class__ is not int or s < 0:
                break
            total *= s
        else:
            if total != numel:
                raise ShapeError(
                    f"[{op}] shape '{list(shape)}' is invalid for input of size {numel}")
            return shape
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise ShapeError(f"[{op}] only one dimension can be inferred")
    if any(s < -1 for s in shape):
        raise ShapeError(f"[{op}] invalid shape dimension {min(shape)}")
    if neg:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        if known == 0 or numel % known:
            raise ShapeError(f"[{op}] shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif type(numel) is int and all(type(s) is int for s in shape):  # symbolic: the meta checks
        total = 1
        for s in shape:
            total *= s
        if total != numel:
            raise ShapeError(f"[{op}] shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _kw_sizes(args: tuple, kw: Any, name: str, op: str) -> tuple:
    """PyTorch's ``f(2, 3)`` / ``f((2, 3))`` / ``f(name=(2, 3))`` forms as one args tuple."""
    if kw is None:
        return args
    if args:
        raise EmberTypeError(f"[{op}] got '{name}' both positionally and as a keyword")
    return (kw,)


# ---------------------------------------------------------------------------------- reshaping
@tensor_method("view")
def view(input: Tensor, *shape: Any, size: Any = None) -> Tensor:
    """A view with a new shape (no copy); fails if the strides do not allow it."""
    shape = _kw_sizes(shape, size, "size", "view")
    if len(shape) == 1 and isinstance(shape[0], _DType):
        raise ShapeError("[view] viewing as another dtype is not supported")
    shp = infer_shape(size_args(shape, "view"), input.numel(), "view")
    return bind(S.VIEW, input, shape=shp)


@tensor_method("view_as")
def view_as(input: Tensor, other: Tensor) -> Tensor:
    return view(input, tuple(other.shape))


def _viewable(a: np.ndarray, shape: tuple) -> bool:
    if any(type(d) is SymInt for d in a.shape):
        # export traces values, not layouts: a symbolic tensor counts as contiguous (the
        # exported program's view copies a non-contiguous input when it runs)
        return True
    return S.view_strides(a.shape, S.elem_strides(a), shape) is not None


@tensor_method("reshape")
def reshape(input: Tensor, *args: Any, shape: Any = None) -> Tensor:
    """A view when the strides allow it, otherwise a copy."""
    check_tensor(input, "reshape")
    shape = _kw_sizes(args, shape, "shape", "reshape")
    shp = infer_shape(size_args(shape, "reshape"), input.numel(), "reshape")
    a = input._data
    if shp == a.shape or (a.__class__ is np.ndarray and a.flags.c_contiguous):
        return bind(S.VIEW, input, shape=shp)  # a C-contiguous array views any shape
    if not _viewable(a, shp):
        return bind(S.RESHAPE_COPY, input, shape=shp)
    return bind(S.VIEW, input, shape=shp)


@tensor_method("reshape_as")
def reshape_as(input: Tensor, other: Tensor) -> Tensor:
    return reshape(input, tuple(other.shape))


@tensor_method("flatten")
def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims ``start_dim..end_dim`` into one (a view when possible)."""
    check_tensor(input, "flatten")
    n = input.ndim
    s, e = wrap_dim(start_dim, n, "flatten"), wrap_dim(end_dim, n, "flatten")
    if s > e:
        raise ShapeError("[flatten] flatten() has invalid args: start_dim cannot come after "
                         "end_dim")
    if n == 0:
        return reshape(input, (1,))
    if s == e:
        return input
    shape = input._data.shape
    mid = 1
    for k in range(s, e + 1):
        mid *= shape[k]
    return reshape(input, shape[:s] + (mid,) + shape[e + 1:])


@tensor_method("ravel")
def ravel(input: Tensor) -> Tensor:
    return reshape(input, (-1,))


@tensor_method("unflatten")
def unflatten(input: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """Split dim ``dim`` into ``sizes`` (one of them may be -1)."""
    check_tensor(input, "unflatten")
    d = wrap_dim(dim, input.ndim, "unflatten")
    sizes = size_args((sizes,), "unflatten")
    if not sizes:
        raise ShapeError("[unflatten] unflatten: sizes must be non-empty")
    n = input._data.shape[d] if input.ndim else 1
    inferred = infer_shape(sizes, n, "unflatten") if -1 in sizes else sizes
    prod = 1
    for s in inferred:
        prod *= s
    if prod != n:
        raise ShapeError(f"[unflatten] unflatten: Provided sizes {list(sizes)} don't multiply "
                         f"up to the size of dim {d} ({n}) in the input tensor")
    shape = input._data.shape
    return view(input, shape[:d] + tuple(inferred) + shape[d + 1:])


# ---------------------------------------------------------------------------------- dims
@tensor_method("squeeze")
def squeeze(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """Remove size-1 dims (all, or those in ``dim``; other sizes are left alone)."""
    check_tensor(input, "squeeze")
    n, shape = input.ndim, input._data.shape
    if dim is None:
        dims = tuple(i for i, s in enumerate(shape) if s == 1)
    else:
        ds = (dim,) if isinstance(dim, int) else tuple(dim)
        w = [wrap_dim(int(d), n, "squeeze") for d in ds]
        for d in w:
            if w.count(d) > 1:
                raise ShapeError(f"[squeeze] dim {d} appears multiple times in the list of dims")
        dims = tuple(sorted(w))
        dims = tuple(d for d in dims if n and shape[d] == 1)
    return bind(S.SQUEEZE, input, dims=dims)


@tensor_method("unsqueeze")
def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at ``dim``."""
    check_tensor(input, "unsqueeze")
    return bind(S.UNSQUEEZE_MANY, input, dims=(wrap_dim(dim, input.ndim + 1, "unsqueeze"),))


@tensor_method("expand")
def expand(input: Tensor, *sizes: Any, size: Any = None, implicit: bool = False) -> Tensor:
    """A broadcast view with ``size`` (-1 keeps a dim); ``implicit`` is accepted as PyTorch
    does (it only marks internal broadcasts)."""
    if size is None and len(sizes) == 1 and sizes[0].__class__ is tuple:
        for s in sizes[0]:  # a tuple of non-negative ints (a gradient's ``g.expand(shape)``)
            if s.__class__ is not int or s < 0:
                break
        else:
            if input.__class__ is Tensor:
                t = expand_view(input, sizes[0])
                if t is not None:
                    return t
            return bind(S.EXPAND, input, shape=sizes[0])
    shape = size_args(_kw_sizes(sizes, size, "size", "expand"), "expand")
    lead = len(shape) - input.ndim
    shape = tuple(input.shape[i - lead] if s == -1 and i >= lead else s
                  for i, s in enumerate(shape))
    if any(s < 0 for s in shape):
        raise ShapeError(f"[expand] invalid size {list(shape)}: -1 is only allowed for "
                         f"existing dimensions")
    return bind(S.EXPAND, input, shape=shape)


@tensor_method("expand_as")
def expand_as(input: Tensor, other: Tensor) -> Tensor:
    return expand(input, tuple(other.shape))


@tensor_method("permute")
def permute(input: Tensor, *args: Any, dims: Any = None) -> Tensor:
    d = size_args(_kw_sizes(args, dims, "dims", "permute"), "permute")
    n = input.ndim
    if len(d) != n:
        raise ShapeError(f"[permute] number of dims don't match in permute: got {len(d)} dims "
                         f"for a {n}-d tensor")
    w = tuple(wrap_dim(x, n, "permute") for x in d)
    if len(set(w)) != len(w):
        raise ShapeError(f"[permute] permute(): duplicate dims are not allowed; got {list(d)}")
    return bind(S.PERMUTE, input, dims=w)


@tensor_method("transpose")
def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dims (a view)."""
    check_tensor(input, "transpose")
    n = input.ndim
    a, b = wrap_dim(dim0, n, "transpose"), wrap_dim(dim1, n, "transpose")
    dims = list(range(n))
    if n:
        dims[a], dims[b] = dims[b], dims[a]
    return bind(S.PERMUTE, input, dims=tuple(dims))


@tensor_method("swapaxes")
def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    """``transpose`` under NumPy's name and argument names."""
    return transpose(input, axis0, axis1)


@tensor_method("swapdims")
def swapdims(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """An alias of ``transpose``."""
    return transpose(input, dim0, dim1)


@tensor_method("t")
def t(input: Tensor) -> Tensor:
    """Transpose a matrix; 0-d and 1-d tensors come back as views of themselves."""
    check_tensor(input, "t")
    n = input.ndim
    if n > 2:
        raise ShapeError(f"[t] t() expects a tensor with <= 2 dimensions, but self is {n}D")
    return bind(S.PERMUTE, input, dims=(1, 0) if n == 2 else tuple(range(n)))


def _prop_t_all(self: Tensor) -> Tensor:
    n = self.ndim
    if n > 2:
        warnings.warn(
            "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is "
            "deprecated and it will throw an error in a future release. Consider `x.mT` to "
            "transpose batches of matrices or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` to "
            "reverse the dimensions of a tensor.", UserWarning, stacklevel=2)
    elif n == 0:
        warnings.warn("Tensor.T is deprecated on 0-D tensors. This function is the identity in "
                      "these cases.", UserWarning, stacklevel=2)
    return bind(S.PERMUTE, self, dims=tuple(range(n - 1, -1, -1)))


def _prop_mt(self: Tensor) -> Tensor:
    n = self.ndim
    if n < 2:
        raise ShapeError(f"[mT] tensor.mT is only supported on matrices or batches of matrices. "
                         f"Got {n}-D tensor.")
    return transpose(self, -2, -1)


def _prop_mh(self: Tensor) -> Tensor:
    n = self.ndim
    if n < 2:
        raise ShapeError(f"[mH] tensor.mH is only supported on matrices or batches of matrices. "
                         f"Got {n}-D tensor.")
    return transpose(self, -2, -1)  # real dtypes only: the conjugate is the identity


def _prop_h(self: Tensor) -> Tensor:
    n = self.ndim
    if n not in (0, 2):
        raise ShapeError(f"[H] tensor.H is only supported on matrices (2-D tensors). Got "
                         f"{n}-D tensor.")
    return t(self)


Tensor.T = property(_prop_t_all)  # type: ignore[attr-defined]
Tensor.mT = property(_prop_mt)  # type: ignore[attr-defined]
Tensor.mH = property(_prop_mh)  # type: ignore[attr-defined]
Tensor.H = property(_prop_h)  # type: ignore[attr-defined]


def _dim_list(d: Any, n: int, op: str) -> list:
    ds = [d] if isinstance(d, int) else list(d)
    return [wrap_dim(int(x), n, op) for x in ds]


@tensor_method("movedim", "moveaxis")
def movedim(input: Tensor, source: int | Sequence[int], destination: int | Sequence[int]
            ) -> Tensor:
    """Move dims ``source`` to positions ``destination``; the others keep their order."""
    check_tensor(input, "movedim")
    n = input.ndim
    src, dst = _dim_list(source, n, "movedim"), _dim_list(destination, n, "movedim")
    if len(src) != len(dst):
        raise ShapeError(f"[movedim] movedim: Invalid source or destination dims: source "
                         f"({list(_as_list(source))} dims) should contain the same number of "
                         f"dims as destination ({list(_as_list(destination))} dims)")
    for name, ds, raw in (("source", src, source), ("destination", dst, destination)):
        if len(set(ds)) != len(ds):
            raise ShapeError(f"[movedim] movedim: repeated dim in `{name}` "
                             f"({list(_as_list(raw))})")
    if n == 0:
        return bind(S.PERMUTE, input, dims=())
    order = [-1] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(n) if i not in src)
    order = [next(rest) if o == -1 else o for o in order]
    return bind(S.PERMUTE, input, dims=tuple(order))


def _as_list(d: Any) -> list:
    return [d] if isinstance(d, int) else list(d)


moveaxis = movedim


# ---------------------------------------------------------------------------------- slicing
def _int_arg(v: Any) -> int:
    return int(v.item()) if isinstance(v, Tensor) else int(v)


@tensor_method("narrow")
def narrow(input: Tensor, dim: int, start: int | Tensor, length: int) -> Tensor:
    """Elements ``start .. start+length`` along ``dim`` (a view)."""
    check_tensor(input, "narrow")
    if input.ndim == 0:
        raise EmberRuntimeError("[narrow] narrow() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, input.ndim, "narrow")
    n = input._data.shape[d]
    start, length = _int_arg(start), int(length)
    if not -n <= start <= n:
        raise EmberIndexError(f"[narrow] start out of range (expected to be in range of "
                              f"[{-n}, {n}], but got {start})")
    if start < 0:
        start += n
    if length < 0:
        raise ShapeError("[narrow] narrow(): length must be non-negative.")
    return bind(S.NARROW, input, dim=d, start=start, length=length)


@tensor_method("select")
def select(input: Tensor, dim: int, index: int | Tensor) -> Tensor:
    """The slice at ``index`` along ``dim``, with that dim removed (a view)."""
    check_tensor(input, "select")
    if input.ndim == 0:
        raise EmberIndexError("[select] select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, input.ndim, "select")
    n = input._data.shape[d]
    i = _int_arg(index)
    if not -n <= i < n:
        raise EmberIndexError(f"[select] select(): index {i} out of range for tensor of size "
                              f"{list(input.shape)} at dimension {d}")
    return bind(S.SELECT, input, dim=d, index=i + n if i < 0 else i)


def _split_sizes(input: Tensor, sizes: Sequence[int], d: int) -> tuple:
    return tuple(bind(S.SPLIT_WITH_SIZES, input, dim=d, sizes=tuple(sizes)))


def split(tensor: Tensor, split_size_or_sections: int | Sequence[int] | None = None,
          dim: int = 0, *, split_size: int | Sequence[int] | None = None) -> tuple:
    """Views of consecutive pieces of ``split_size`` (the last may be smaller), or of the given
    section sizes."""
    check_tensor(tensor, "split")
    if split_size_or_sections is None:
        split_size_or_sections = split_size  # Tensor.split's keyword name
    if split_size_or_sections is None:
        raise EmberTypeError("[split] split() missing required argument 'split_size'")
    if tensor.ndim == 0:
        raise EmberRuntimeError("[split] split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, tensor.ndim, "split")
    n = tensor._data.shape[d]
    if isinstance(split_size_or_sections, (int, np.integer, SymInt)):
        # a symbolic size (export) stays symbolic; the number of pieces is guarded
        size = split_size_or_sections if isinstance(split_size_or_sections, SymInt) \
            else int(split_size_or_sections)
        if size < 0:
            raise ShapeError(f"[split] split expects split_size be non-negative, but got "
                             f"split_size={size}")
        if size == 0 and n != 0:
            raise ShapeError(f"[split] split_size can only be 0 if dimension size is 0, but got "
                             f"dimension size of {n}")
        if n == 0:
            return (bind(S.NARROW, tensor, dim=d, start=0, length=0),)
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
        return _split_sizes(tensor, sizes, d)
    sizes = [s if isinstance(s, SymInt) else int(s) for s in split_size_or_sections]
    if sum(sizes) != n or any(s < 0 for s in sizes):
        raise ShapeError(f"[split] split_with_sizes expects split_sizes to sum exactly to {n} "
                         f"(input tensor's size at dimension {d}), but got split_sizes={sizes}")
    return _split_sizes(tensor, sizes, d)


@tensor_method("split")
def _split_method(self: Tensor, split_size: int | Sequence[int], dim: int = 0) -> tuple:
    """``Tensor.split(split_size, dim=0)`` (PyTorch's method names its argument split_size)."""
    return split(self, split_size, dim)


@tensor_method("chunk")
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """At most ``chunks`` views of (nearly) equal size."""
    check_tensor(input, "chunk")
    if input.ndim == 0:
        raise EmberRuntimeError("[chunk] chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise ShapeError(f"[chunk] chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = wrap_dim(dim, input.ndim, "chunk")
    n = input._data.shape[d]
    if n == 0:
        return _split_sizes(input, [0] * chunks, d)
    return split(input, -(-n // chunks), d)


@tensor_method("tensor_split")
def tensor_split(input: Tensor, indices_or_sections: int | Sequence[int], dim: int = 0
                 ) -> tuple:
    """Split into ``sections`` near-equal views, or at the given indices."""
    check_tensor(input, "tensor_split")
    if input.ndim == 0:
        raise EmberRuntimeError("[tensor_split] tensor_split expected at least a 1-dimensional "
                                "tensor, but got a tensor with 0 dims")
    d = wrap_dim(dim, input.ndim, "tensor_split")
    n = input._data.shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, (int, np.integer)):
        s = int(indices_or_sections)
        if s <= 0:
            raise ShapeError(f"[tensor_split] number of sections must be larger than 0, got {s}")
        q, r = divmod(n, s)
        return _split_sizes(input, [q + 1] * r + [q] * (s - r), d)
    bounds = [0] + [min(max(int(i) + n if int(i) < 0 else int(i), 0), n)
                    for i in indices_or_sections] + [n]
    if all(a <= b for a, b in zip(bounds[:-1], bounds[1:])):
        return _split_sizes(input, [b - a for a, b in zip(bounds[:-1], bounds[1:])], d)
    # piece j is input[idx[j-1]:idx[j]] with slice clamping (so pieces may overlap or be empty)
    return tuple(bind(S.NARROW, input, dim=d, start=a, length=max(b - a, 0))
                 for a, b in zip(bounds[:-1], bounds[1:]))


@tensor_method("unbind")
def unbind(input: Tensor, dim: int = 0) -> tuple:
    """All slices along ``dim`` (views)."""
    check_tensor(input, "unbind")
    if input.ndim == 0:
        raise EmberIndexError("[unbind] Dimension specified as 0 but tensor has no dimensions")
    d = wrap_dim(dim, input.ndim, "unbind")
    return tuple(bind(S.UNBIND, input, dim=d))


# ---------------------------------------------------------------------------------- strided
@tensor_method("as_strided")
def as_strided(input: Tensor, size: Sequence[int], stride: Sequence[int],
               storage_offset: int | None = None) -> Tensor:
    """A view with explicit geometry over ``input``'s storage (offset counted from the start
    of the storage, as in PyTorch)."""
    check_tensor(input, "as_strided")
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    off = input.storage_offset() if storage_offset is None else int(storage_offset)
    from ember.ops._layout import storage_root
    nbytes = storage_root(input._data).nbytes
    item = input.element_size()
    need = 0 if 0 in size else (off + 1 + sum((n - 1) * s for n, s in zip(size, stride))) * item
    if need > nbytes and len(size) == len(stride):
        raise ShapeError(f"[as_strided] setStorage: sizes {list(size)}, strides {list(stride)}, "
                         f"storage offset {off}, and itemsize {item} requiring a storage size of "
                         f"{need} are out of bounds for storage of size {nbytes}")
    return bind(S.AS_STRIDED, input, size=size, stride=stride, storage_offset=off)


@tensor_method("unfold")
def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """All windows of ``size`` along ``dimension`` with ``step`` (a view; windows are the new
    last dim)."""
    check_tensor(input, "unfold")
    d = wrap_dim(dimension, input.ndim, "unfold")
    if size < 0:
        raise ShapeError(f"[unfold] size is {size} but must be >= 0")
    return bind(S.UNFOLD, input, dim=d, size=int(size), step=int(step))


@tensor_method("diagonal")
def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of dims ``dim1``/``dim2`` as the new last dim (a view)."""
    check_tensor(input, "diagonal")
    n = input.ndim
    if n < 2:
        raise ShapeError(f"[diagonal] diagonal expects a tensor with at least 2 dims; got {n}")
    a, b = wrap_dim(dim1, n, "diagonal"), wrap_dim(dim2, n, "diagonal")
    if a == b:
        raise ShapeError(f"[diagonal] diagonal dimensions cannot be identical {dim1}, {dim2}")
    return bind(S.DIAGONAL, input, offset=int(offset), dim1=a, dim2=b)


# ---------------------------------------------------------------------------------- copies
@tensor_method("clone")
def clone(input: Tensor, *, memory_format: Any = None) -> Tensor:
    """A copy; keeps the input's layout unless ``memory_format`` asks for contiguous."""
    return bind(S.CLONE, input, contiguous=memory_format is not None
                and "contiguous" in str(memory_format))


@tensor_method("contiguous")
def contiguous(input: Tensor, memory_format: Any = None) -> Tensor:
    if input.is_contiguous():
        return input
    return bind(S.CLONE, input, contiguous=True)


@tensor_method("sum_to_size")
def sum_to_size(input: Tensor, *size: Any) -> Tensor:
    """Sum broadcast dims so the result has ``size`` (the inverse of ``expand``)."""
    shape = size_args(size, "sum_to_size")
    if len(shape) == input.ndim and all(sym_eq_static(a, b) is True
                                        for a, b in zip(input.shape, shape)):
        return input  # (decided without a guard: symbolic sizes under export)
    lead = input.ndim - len(shape)
    if lead < 0:
        raise ShapeError(f"[sum_to_size] size {list(shape)} is not expandable to size "
                         f"{list(input.shape)}")
    dims = list(range(lead))
    for i, n in enumerate(shape):
        if n == 1 and input.shape[lead + i] != 1:
            dims.append(lead + i)
        elif n != input.shape[lead + i]:
            raise ShapeError(f"[sum_to_size] size {list(shape)} is not expandable to size "
                             f"{list(input.shape)}")
    from ember._frontend.reduction import sum as _sum
    out = _sum(input, dims, keepdim=True) if dims else input
    return reshape(out, shape) if lead else out


# ---------------------------------------------------------------------------------- in-place
def _metadata_inplace(name: str, fn: Any) -> None:
    """``Tensor.name``: ``self`` becomes the view ``fn(self, ...)`` (same memory, new
    geometry); its autograd history continues through the view's node."""
    from ember.autograd import grad_mode

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if grad_mode.STATE.grad_enabled and self._requires_grad and self.grad_fn is None:
            raise EmberRuntimeError(f"[{name}] a leaf Variable that requires grad is being used "
                                    "in an in-place operation.")
        v = fn(self, *args, **kwargs)
        self._data = v._data
        if v._data.__class__ is LazyArray:  # realized (and re-read after writes) with the trace
            v._data.trace.register_tensor(self)
        if v.grad_fn is not None:
            self.grad_fn, self._output_nr = v.grad_fn, v._output_nr
        return self

    method.__name__ = name
    method.__doc__ = f"In-place (metadata only) version of ``{fn.__name__}``."
    setattr(Tensor, name, method)


for _name, _fn in (("squeeze_", squeeze), ("unsqueeze_", unsqueeze), ("t_", t),
                   ("transpose_", transpose), ("swapaxes_", transpose), ("swapdims_", transpose),
                   ("as_strided_", as_strided)):
    _metadata_inplace(_name, _fn)

"""View primitives.  View ops (kind ``view``) return NumPy views, so outputs share memory and the
version counter with their input.  Where NumPy's own view functions pick different strides than
PyTorch for size-1 dims (``expand_dims``, ``broadcast_to``), the kernel builds the view with
PyTorch's geometry over the same buffer (``strided_view``), so ``stride()`` matches torch.

Copying layout ops (cat, flip, roll, repeat, gradient scatters) live in ``ops/movement.py``."""

from __future__ import annotations

import numpy as np

from ember.errors import ShapeError
from ember.ops.registry import OpDef, bind, register
from ember.sym import sym_max, sym_min


# ---------------------------------------------------------------------------------- helpers
def storage_root(a: np.ndarray) -> np.ndarray:
    """The array owning ``a``'s memory (follows ``.base`` through NumPy views)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def elem_strides(a: np.ndarray) -> tuple:
    item = a.itemsize
    return tuple(s // item for s in a.strides)


def strided_view(x: np.ndarray, shape: tuple, strides: tuple, offset: int = 0) -> np.ndarray:
    """A view of ``x``'s memory with element ``strides``, starting ``offset`` elements after
    ``x``'s first element.  Built over the storage root so that the result's ``.base`` chain
    (and hence storage_offset / memory sharing) stays intact."""
    item = x.itemsize
    root = storage_root(x)
    start = (x.__array_interface__["data"][0] - root.__array_interface__["data"][0]
             + offset * item)
    bstrides = tuple(s * item for s in strides)
    try:
        v = np.ndarray(shape, x.dtype, buffer=root, offset=start, strides=bstrides)
    except (TypeError, ValueError, BufferError):
        # the root exports no plain buffer (unusual layouts): address x's memory directly
        iface = dict(x.__array_interface__)
        iface.update(data=(iface["data"][0] + offset * item, False), shape=tuple(shape),
                     strides=bstrides)
        v = np.asarray(_Interface(iface, x))
        if v.dtype != x.dtype:  # the interface names bfloat16 (ml_dtypes) as void "|V2"
            v = v.view(x.dtype)
    if not x.flags.writeable:
        v.flags.writeable = False
    return v


class _Interface:
    """Exposes an ``__array_interface__`` (as NumPy's own ``as_strided`` does)."""

    def __init__(self, iface: dict, base: np.ndarray) -> None:
        self.__array_interface__ = iface
        self.base = base


def _numel(shape: tuple) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# ---------------------------------------------------------------------------------- view
def _view_meta(x, *, shape: tuple) -> tuple:  # noqa: ANN001
    m = _numel(tuple(x.shape))
    if _numel(shape) != m:
        raise ShapeError(f"[view] shape '{list(shape)}' is invalid for input of size {m}")
    return tuple(shape), x.dtype


def view_strides(oldshape: tuple, oldstride: tuple, newshape: tuple) -> tuple | None:
    """Element strides of ``newshape`` viewing a tensor of ``oldshape``/``oldstride``, or None
    when no view exists (PyTorch's ``computeStride``, whose strides for size-1 dims we copy)."""
    if not oldshape:
        return (1,) * len(newshape)
    numel = _numel(oldshape)
    if numel == 0 and tuple(oldshape) == tuple(newshape):
        return tuple(oldstride)
    newstride = [0] * len(newshape)
    if numel == 0:
        for d in range(len(newshape) - 1, -1, -1):
            newstride[d] = 1 if d == len(newshape) - 1 else max(newshape[d + 1], 1) * \
                newstride[d + 1]
        return tuple(newstride)
    view_d = len(newshape) - 1
    chunk_base = oldstride[-1]
    tensor_numel = view_numel = 1
    for td in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[td]
        if td == 0 or (oldshape[td - 1] != 1
                       and oldstride[td - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base
                view_numel *= newshape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if td > 0:
                chunk_base = oldstride[td - 1]
                tensor_numel = view_numel = 1
    if view_d != -1:
        return None
    return tuple(newstride)


def _view_eager(x: np.ndarray, *, shape: tuple) -> np.ndarray:
    if x.flags.c_contiguous and x.size and 1 not in x.shape:
        return x.reshape(shape)  # NumPy's fresh C strides equal PyTorch's here
    st = view_strides(x.shape, elem_strides(x), tuple(shape))
    if st is None:
        raise ShapeError(
            "[view] view size is not compatible with input tensor's size and stride (at least "
            "one dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        )
    return strided_view(x, tuple(shape), st)


VIEW = register(OpDef(
    "view", "view", _view_meta, _view_eager,
    lambda ctx, g: (g.reshape(ctx.input_shapes[0]),),
    tags=frozenset({"bijective", "strided_reshape"}),
))


# ---------------------------------------------------------------------------------- expand
def _expand_meta(x, *, shape: tuple) -> tuple:  # noqa: ANN001
    xs = tuple(x.shape)
    if len(shape) < len(xs):
        raise ShapeError(
            f"[expand] the number of sizes provided ({len(shape)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({len(xs)})"
        )
    lead = len(shape) - len(xs)
    for i, n in enumerate(xs):
        if n != 1 and n != shape[lead + i]:
            raise ShapeError(
                f"[expand] The expanded size of the tensor ({shape[lead + i]}) must match the "
                f"existing size ({n}) at non-singleton dimension {lead + i}.  Target sizes: "
                f"{list(shape)}.  Tensor sizes: {list(xs)}"
            )
    return tuple(shape), x.dtype


def _expand_eager(x: np.ndarray, *, shape: tuple) -> np.ndarray:
    if tuple(shape) == x.shape:
        return x.view()  # writable: nothing overlaps
    if 1 not in shape:  # the strides np.broadcast_to gives, as PyTorch when no dim has size 1
        if x.__class__ is np.ndarray and x.flags.c_contiguous and x.size:
            # built directly: np.broadcast_to's Python costs ~4x this (a full reduction's
            # gradient, ``grad.expand(sizes)``, runs this in every backward)
            lead = len(shape) - x.ndim
            xs, st = x.shape, x.strides
            strides = (0,) * lead + tuple(st[j] if xs[j] == shape[lead + j] else 0
                                          for j in range(x.ndim))
            v = np.ndarray(shape, x.dtype, x, 0, strides)
            v.flags.writeable = False
            return v
        return np.broadcast_to(x, shape)
    # PyTorch's inferExpandGeometry: new dims of size 1 get size*stride of the next dim
    st = elem_strides(x)
    lead = len(shape) - x.ndim
    out = [0] * len(shape)
    for i in range(len(shape) - 1, -1, -1):
        j = i - lead
        if j >= 0:
            out[i] = 0 if x.shape[j] != shape[i] else st[j]
        elif shape[i] == 1:
            out[i] = shape[i + 1] * out[i + 1] if i + 1 < len(shape) else 1
    v = strided_view(x, tuple(shape), tuple(out))
    if 0 in out and _numel(tuple(shape)) > 1:
        v.flags.writeable = False  # overlapping memory: in-place writes are refused
    return v


EXPAND = register(OpDef(
    "expand", "view", _expand_meta, _expand_eager,
    lambda ctx, g: (g.sum_to_size(ctx.input_shapes[0]),),
))


# ---------------------------------------------------------------------------------- permute
def _permute_meta(x, *, dims: tuple) -> tuple:  # noqa: ANN001
    shape = tuple(x.shape)
    if sorted(dims) != list(range(len(shape))):
        raise ShapeError(f"[permute] dims {list(dims)} are not a permutation of "
                         f"{len(shape)} dimensions")
    return tuple([shape[d] for d in dims]), x.dtype


def _permute_vjp(ctx, g):  # noqa: ANN001
    inv = [0] * len(ctx.params["dims"])
    for i, d in enumerate(ctx.params["dims"]):
        inv[d] = i
    return (g.permute(inv),)


PERMUTE = register(OpDef(
    "permute", "view", _permute_meta, lambda x, *, dims: x.transpose(dims), _permute_vjp,
    tags=frozenset({"bijective"}),
))


# ---------------------------------------------------------------------------------- squeeze
def _squeeze_meta(x, *, dims: tuple) -> tuple:  # noqa: ANN001
    for d in dims:
        if x.shape[d] != 1:
            raise ShapeError(f"[squeeze] dim {d} has size {x.shape[d]}; expected size 1")
    return tuple(n for i, n in enumerate(x.shape) if i not in dims), x.dtype


SQUEEZE = register(OpDef(
    "squeeze", "view", _squeeze_meta, lambda x, *, dims: np.squeeze(x, axis=dims),
    lambda ctx, g: (bind(UNSQUEEZE_MANY, g, dims=ctx.params["dims"]),),
))


def _unsqueeze_meta(x, *, dims: tuple) -> tuple:  # noqa: ANN001
    shape = list(x.shape)
    for d in sorted(dims):
        if not 0 <= d <= len(shape):
            raise ShapeError(f"[unsqueeze] dim {d} out of range for {len(shape)}-d input")
        shape.insert(d, 1)
    return tuple(shape), x.dtype


def _unsqueeze_eager(x: np.ndarray, *, dims: tuple) -> np.ndarray:
    if x.flags.c_contiguous and x.size and 1 not in x.shape:
        shape = list(x.shape)
        for d in sorted(dims):
            shape.insert(d, 1)
        return x.reshape(shape)  # fresh C strides: what PyTorch gives a contiguous input
    shape, st = list(x.shape), list(elem_strides(x))
    for d in sorted(dims):
        # PyTorch: the new dim's stride is size*stride of the dim it is inserted before
        st.insert(d, shape[d] * st[d] if d < len(shape) else 1)
        shape.insert(d, 1)
    return strided_view(x, tuple(shape), tuple(st))


# dims are positions in the output (sorted), so unsqueeze(dims) undoes squeeze(dims)
UNSQUEEZE_MANY = register(OpDef(
    "unsqueeze", "view", _unsqueeze_meta, _unsqueeze_eager,
    lambda ctx, g: (bind(SQUEEZE, g, dims=tuple(sorted(ctx.params["dims"]))),),
))


# ---------------------------------------------------------------------------------- narrow/select
def _narrow_meta(x, *, dim: int, start: int, length: int) -> tuple:  # noqa: ANN001
    n = x.shape[dim]
    if start < 0 or length < 0 or start + length > n:
        raise ShapeError(f"[narrow] start ({start}) + length ({length}) exceeds dimension size "
                         f"({n}).")
    shape = list(x.shape)
    shape[dim] = length
    return tuple(shape), x.dtype


def _narrow_vjp(ctx, g):  # noqa: ANN001
    from ember.ops.movement import NARROW_BACKWARD
    p = ctx.params
    return (bind(NARROW_BACKWARD, g, shape=tuple(ctx.input_shapes[0]), dim=p["dim"],
                 start=p["start"]),)


def _narrow_eager(x: np.ndarray, *, dim: int, start: int, length: int) -> np.ndarray:
    if length == 0 and x.size:
        # NumPy does not advance the data pointer of an empty slice; PyTorch's offset does
        shape = x.shape[:dim] + (0,) + x.shape[dim + 1:]
        return strided_view(x, shape, elem_strides(x), start * elem_strides(x)[dim])
    return x[(slice(None),) * dim + (slice(start, start + length),)]


NARROW = register(OpDef(
    "narrow", "view", _narrow_meta,
    _narrow_eager, _narrow_vjp,
))


def _select_meta(x, *, dim: int, index: int) -> tuple:  # noqa: ANN001
    n = x.shape[dim]
    if not 0 <= index < n:
        raise ShapeError(f"[select] index {index} out of range for dim {dim} of size {n}")
    return tuple(s for i, s in enumerate(x.shape) if i != dim), x.dtype


def _select_vjp(ctx, g):  # noqa: ANN001
    from ember.ops.movement import SELECT_BACKWARD
    p = ctx.params
    return (bind(SELECT_BACKWARD, g, shape=tuple(ctx.input_shapes[0]), dim=p["dim"],
                 index=p["index"]),)


SELECT = register(OpDef(
    "select", "view", _select_meta,
    # the trailing Ellipsis keeps a 0-d result a view (not a NumPy scalar)
    lambda x, *, dim, index: x[(slice(None),) * dim + (index, Ellipsis)],
    _select_vjp,
))


# ---------------------------------------------------------------------------------- split
# Multi-output views (a variable number of outputs: num_outputs=0) so that one backward node
# gathers all the pieces' gradients, as PyTorch's SplitWithSizesBackward0/UnbindBackward0 do.
def _split_meta(x, *, dim: int, sizes: tuple) -> tuple:  # noqa: ANN001
    n = x.shape[dim]
    if sum(sizes) != n or any(s < 0 for s in sizes):
        raise ShapeError(f"[split_with_sizes] split_with_sizes expects split_sizes to sum "
                         f"exactly to {n} (input tensor's size at dimension {dim}), but got "
                         f"split_sizes={list(sizes)}")
    shape = list(x.shape)
    out = []
    for s in sizes:
        shape[dim] = s
        out.append((tuple(shape), x.dtype))
    return tuple(out)


def _split_eager(x: np.ndarray, *, dim: int, sizes: tuple) -> tuple:
    out, off = [], 0
    for s in sizes:
        out.append(_narrow_eager(x, dim=dim, start=off, length=s))
        off += s
    return tuple(out)


def _split_vjp(ctx, *grads):  # noqa: ANN001, ANN002
    from ember.ops.movement import CAT
    return (bind(CAT, *grads, dim=ctx.params["dim"]),)


SPLIT_WITH_SIZES = register(OpDef(
    "split_with_sizes", "view", _split_meta, _split_eager, _split_vjp, num_outputs=0,
    tags=frozenset({"multi_output"}),
))


def _unbind_meta(x, *, dim: int) -> tuple:  # noqa: ANN001
    shape = tuple(s for i, s in enumerate(x.shape) if i != dim)
    return tuple((shape, x.dtype) for _ in range(x.shape[dim]))


def _unbind_vjp(ctx, *grads):  # noqa: ANN001, ANN002
    from ember.ops.movement import CAT
    d = ctx.params["dim"]
    return (bind(CAT, *[bind(UNSQUEEZE_MANY, g, dims=(d,)) for g in grads], dim=d),)


UNBIND = register(OpDef(
    "unbind", "view", _unbind_meta,
    lambda x, *, dim: tuple(x[(slice(None),) * dim + (i, Ellipsis)] for i in range(x.shape[dim])),
    _unbind_vjp, num_outputs=0, tags=frozenset({"multi_output"}),
))


# ---------------------------------------------------------------------------------- unfold
def _unfold_meta(x, *, dim: int, size: int, step: int) -> tuple:  # noqa: ANN001
    shape = list(x.shape)
    if not shape:
        shape = [1]
    n = shape[dim]
    if size > n:
        raise ShapeError(f"[unfold] maximum size for tensor at dimension {dim} is {n} but size "
                         f"is {size}")
    if step <= 0:
        raise ShapeError(f"[unfold] step is {step} but must be > 0")
    if x.shape == ():
        return (size,), x.dtype
    shape[dim] = (n - size) // step + 1
    return tuple(shape) + (size,), x.dtype


def _unfold_eager(x: np.ndarray, *, dim: int, size: int, step: int) -> np.ndarray:
    if x.ndim == 0:
        return strided_view(x, (size,), (1,))
    st = list(elem_strides(x))
    shape = list(x.shape)
    shape[dim] = (shape[dim] - size) // step + 1
    inner = st[dim]
    st[dim] = inner * step
    return strided_view(x, tuple(shape) + (size,), tuple(st) + (inner,))


def _unfold_vjp(ctx, g):  # noqa: ANN001
    from ember.ops.movement import UNFOLD_BACKWARD
    p = ctx.params
    return (bind(UNFOLD_BACKWARD, g, shape=tuple(ctx.input_shapes[0]), dim=p["dim"],
                 size=p["size"], step=p["step"]),)


UNFOLD = register(OpDef("unfold", "view", _unfold_meta, _unfold_eager, _unfold_vjp))


# ---------------------------------------------------------------------------------- diagonal
def _diagonal_meta(x, *, offset: int, dim1: int, dim2: int) -> tuple:  # noqa: ANN001
    shape = list(x.shape)
    a, b = shape[dim1], shape[dim2]
    # sym_min/sym_max: a symbolic length stays Max/Min instead of guarding which side is less
    n = sym_max(0, sym_min(a, b - offset) if offset >= 0 else sym_min(a + offset, b))
    rest = [s for i, s in enumerate(shape) if i not in (dim1, dim2)]
    return tuple(rest) + (n,), x.dtype


def _diagonal_eager(x: np.ndarray, *, offset: int, dim1: int, dim2: int) -> np.ndarray:
    (shape, _dtype) = _diagonal_meta(x, offset=offset, dim1=dim1, dim2=dim2)
    st = elem_strides(x)
    start = 0
    if shape[-1]:
        start = offset * st[dim2] if offset >= 0 else -offset * st[dim1]
    rest = [s for i, s in enumerate(st) if i not in (dim1, dim2)]
    return strided_view(x, shape, tuple(rest) + (st[dim1] + st[dim2],), start)


def _diagonal_vjp(ctx, g):  # noqa: ANN001
    from ember.ops.movement import DIAGONAL_BACKWARD
    return (bind(DIAGONAL_BACKWARD, g, shape=tuple(ctx.input_shapes[0]), **ctx.params),)


DIAGONAL = register(OpDef("diagonal", "view", _diagonal_meta, _diagonal_eager, _diagonal_vjp))


# ---------------------------------------------------------------------------------- as_strided
def _as_strided_meta(x, *, size: tuple, stride: tuple, storage_offset: int) -> tuple:  # noqa: ANN001
    if len(size) != len(stride):
        raise ShapeError(f"[as_strided] mismatch in length of strides and shape: size "
                         f"{list(size)}, stride {list(stride)}")
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or storage_offset < 0:
        raise ShapeError(f"[as_strided] sizes, strides and storage offset must be "
                         f"non-negative; got {list(size)}, {list(stride)}, {storage_offset}")
    return tuple(size), x.dtype


def _as_strided_eager(x: np.ndarray, *, size: tuple, stride: tuple,
                      storage_offset: int) -> np.ndarray:
    root = storage_root(x)
    here = (x.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // x.itemsize
    return strided_view(x, tuple(size), tuple(stride), storage_offset - here)


def _as_strided_vjp(ctx, g):  # noqa: ANN001
    from ember.ops.movement import AS_STRIDED_BACKWARD
    (x,) = ctx.inputs
    p = ctx.params
    return (bind(AS_STRIDED_BACKWARD, g,
                 src=(tuple(p["size"]), tuple(p["stride"]), p["storage_offset"]),
                 dst=(tuple(x.shape), tuple(x.stride()), x.storage_offset())),)


AS_STRIDED = register(OpDef(
    "as_strided", "view", _as_strided_meta, _as_strided_eager, _as_strided_vjp, save=(0,),
))


# ---------------------------------------------------------------------------------- copies
# reshape of a layout no view can express: a fresh contiguous tensor (not a view), as in torch
RESHAPE_COPY = register(OpDef(
    "reshape_copy", "movement", _view_meta,
    lambda x, *, shape: np.array(x, copy=True, order="C").reshape(shape),
    lambda ctx, g: (g.reshape(ctx.input_shapes[0]),),
    tags=frozenset({"bijective"}),
))

# contiguous=False keeps the input's dim order (PyTorch's preserve_format; NumPy's order "K")
CLONE = register(OpDef(
    "clone", "movement", lambda x, *, contiguous: (tuple(x.shape), x.dtype),
    lambda x, *, contiguous: np.array(x, copy=True, order="C" if contiguous else "K"),
    lambda ctx, g: (g,),
))

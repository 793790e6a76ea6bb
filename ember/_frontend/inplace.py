"""In-place semantics shared by every ``op_`` method.

An in-place op is computed out of place and then committed into the target with
``commit_inplace``: the values are written into the target's memory (so every view sees them),
the shared version counter is bumped (so autograd refuses stale saved tensors), and the
target's autograd history is rebased onto the result.  Writing through a view of a tensor that
is part of a graph rewrites the base's history with a ``CopySlices`` node, as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember._lazy import STATE as _LZ
from ember._lazy import LazyArray
from ember.autograd import grad_mode as _gm
from ember.autograd.graph import Node
from ember.errors import DTypeRuntimeError, EmberRuntimeError, ShapeError
from ember.tensor import Tensor, _wrap


def _geometry(view: Tensor, base: Tensor) -> tuple:
    """(shape, element strides, offset) of ``view`` inside ``base``'s storage."""
    item = view._dtype.itemsize
    strides = tuple(s // item for s in view._data.strides)
    offset = view.storage_offset() - base.storage_offset()
    b = base._data
    if b.__class__ is LazyArray:
        b = b.geometry()  # its layout (a lazy base's own layout is C order)
    if not b.flags.c_contiguous and b.ndim > 1 and b.size > 1:
        # CopySlices reads the geometry in the C order of base's shape (the grad's layout);
        # a base laid out otherwise (the result of an op on a transposed tensor is F-ordered,
        # as NumPy keeps order "K") has memory strides that must be mapped to that order
        dims = sorted(range(b.ndim), key=lambda d: -b.strides[d])
        mem = [b.strides[d] // item for d in dims]
        if all(m > 0 for m in mem) and b.transpose(dims).flags.c_contiguous:
            cst = [1] * b.ndim
            for d in range(b.ndim - 2, -1, -1):
                cst[d] = cst[d + 1] * b.shape[d + 1]

            def to_c(n: int) -> int:
                out = 0
                for d, m in zip(dims, mem):
                    out += (n // m) * cst[d]
                    n %= m
                return out
            strides = tuple(to_c(s) for s in strides)
            offset = to_c(offset)
    return tuple(view._data.shape), strides, offset


def _region(arr: np.ndarray, geom: tuple) -> np.ndarray:
    """The view of ``arr`` (a C-contiguous array shaped like the base) that ``geom`` names."""
    shape, strides, offset = geom
    flat = arr.reshape(-1)
    item = arr.itemsize
    return np.lib.stride_tricks.as_strided(
        flat[offset:], shape=shape, strides=tuple(s * item for s in strides))


class CopySlices(Node):
    """Grad of ``base`` after ``view.op_()``: the view's region comes from the result, the rest
    from the old base."""

    __slots__ = ("geom", "base_shape", "base_dtype", "res_shape")

    def __init__(self, base_edge: tuple | None, result_edge: tuple | None, geom: tuple,
                 base: Tensor, result: Tensor) -> None:
        super().__init__((base_edge, result_edge))
        self.geom = geom
        self.base_shape = tuple(base._data.shape)
        self.base_dtype = base._dtype
        self.res_shape = tuple(result._data.shape)

    def apply(self, grads: tuple, create_graph: bool) -> tuple:
        # written with ember ops (a constant mask and as_strided_backward, a linear map between
        # two geometries) so that double backward through an in-place write works
        from ember.ops.movement import AS_STRIDED_BACKWARD
        from ember.ops.registry import bind
        (g,) = grads
        whole = (self.base_shape, _contiguous_strides(self.base_shape), 0)
        g_result = bind(AS_STRIDED_BACKWARD, g, src=whole, dst=self.geom)
        mask = np.ones(self.base_shape, dtype=g._dtype.np)
        _region(mask, self.geom)[...] = 0
        return (g * _wrap(mask, g._dtype), g_result)


def _contiguous_strides(shape: tuple) -> tuple:
    out = []
    acc = 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


class AsStridedViewBackward(Node):
    """Grad of a view (rebased after an in-place write) flowing into its base."""

    __slots__ = ("geom", "base_shape")

    def __init__(self, base_edge: tuple, geom: tuple, base_shape: tuple) -> None:
        super().__init__((base_edge,))
        self.geom = geom
        self.base_shape = base_shape

    def name(self) -> str:
        return "AsStridedBackward0"

    def apply(self, grads: tuple, create_graph: bool) -> tuple:
        from ember.ops.movement import AS_STRIDED_BACKWARD
        from ember.ops.registry import bind
        (g,) = grads
        # overlapping views accumulate: as_strided_backward sums into storage positions
        whole = (self.base_shape, _contiguous_strides(self.base_shape), 0)
        return (bind(AS_STRIDED_BACKWARD, g, src=self.geom, dst=whole),)


def check_inplace_target(self: Tensor, op: str) -> None:
    if _gm.STATE.grad_enabled and self._requires_grad:
        if self.grad_fn is None and self._base is None:
            raise EmberRuntimeError(
                f"[{op}] a leaf Variable that requires grad is being used in an in-place "
                "operation."
            )
        base = self._base
        if base is not None and base.grad_fn is None and base._requires_grad:
            raise EmberRuntimeError(
                f"[{op}] a view of a leaf Variable that requires grad is being used in an "
                "in-place operation."
            )
    p = self._data
    if p.__class__ is LazyArray:
        p = p.geometry()
    if not p.flags.writeable:
        raise EmberRuntimeError(
            f"[{op}] unsupported operation: more than one element of the written-to tensor "
            "refers to a single memory location. Please clone() the tensor before performing "
            "the operation."
        )


def commit_inplace(self: Tensor, result: Tensor, op: str) -> Tensor:
    """Write ``result`` into ``self`` with PyTorch's in-place semantics; returns ``self``."""
    check_inplace_target(self, op)
    if result._data.shape != self._data.shape:
        if np.broadcast_shapes(result._data.shape, self._data.shape) != self._data.shape:
            raise ShapeError(
                f"[{op}] output with shape {list(self.shape)} doesn't match the broadcast shape "
                f"{list(np.broadcast_shapes(result._data.shape, self._data.shape))}"
            )
        result = result.expand(tuple(self.shape))  # type: ignore[attr-defined]
    if result._dtype is not self._dtype and not dt.can_cast(result._dtype, self._dtype):
        raise DTypeRuntimeError(
            f"[{op}] result type {_type_name(result._dtype)} can't be cast to the desired output "
            f"type {_type_name(self._dtype)}"
        )
    tr = _LZ.trace
    if tr is not None:
        with _gm.no_grad():
            val = result if result._dtype is self._dtype else result.to(self._dtype)
        if tr.write(self, val):
            self._version_counter[0] += 1
            _rebase_history(self, result, op)
            _mark_compiled(self, tr.owner)
            if self._base is not None:
                self._view_version = self._version_counter[0]
            return self
    src = result._data
    if src.dtype != self._data.dtype:
        if self._dtype.category == 1 and src.dtype.kind == "f":
            src = np.trunc(src.astype(np.float64))
        src = src.astype(self._data.dtype) if self._dtype is not dt.bool else (src != 0)
    if not np.shares_memory(src, self._data) or src is self._data:
        self._data[...] = src
    else:
        self._data[...] = src.copy()
    self._version_counter[0] += 1
    _rebase_history(self, result, op)
    if self._base is not None:
        self._view_version = self._version_counter[0]  # its grad_fn is current now
    return self


def _mark_compiled(t: Tensor, owner: object) -> None:
    """Nodes an in-place write made while tracing belong to the compiled call, like the ones
    ``bind`` records (compiled autograd records the backward over them)."""
    for x in (t, t._base):
        if x is not None and x.grad_fn is not None and x.grad_fn._compiled_by is None:
            x.grad_fn._compiled_by = owner


def _type_name(d: dt.dtype) -> str:
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
            "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool"}[d.name]


def _rebase_history(self: Tensor, result: Tensor, op: str) -> None:
    if not _gm.STATE.grad_enabled:
        return
    base = self._base
    base_in_graph = base is not None and (base._requires_grad or result._requires_grad)
    if base is not None and base_in_graph and self._dtype.is_floating_point:
        geom = _geometry(self, base)
        base_edge = base._grad_edge() if base._requires_grad else None
        res_edge = result._grad_edge() if result._requires_grad else None
        node = CopySlices(base_edge, res_edge, geom, base, result)
        base.grad_fn = node
        base._output_nr = 0
        base._requires_grad = True
        view_node = AsStridedViewBackward((node, 0), geom, tuple(base._data.shape))
        self.grad_fn = view_node
        self._output_nr = 0
        self._requires_grad = True
        return
    if result._requires_grad:
        self.grad_fn = result.grad_fn
        self._output_nr = result._output_nr
        self._requires_grad = True
    elif self.grad_fn is not None:
        # overwritten by values that do not depend on the graph
        self.grad_fn = None
        self._requires_grad = False


def inplace_method(name: str, fn, saves_self: str = "always"):  # noqa: ANN001, ANN201
    """Build ``Tensor.name_`` from an out-of-place frontend function ``fn(self, *args)``.

    When autograd records the op and its backward reads ``self``, the op runs on a copy of
    ``self`` (PyTorch saves the original self; the write below would invalidate it).
    ``saves_self`` says when that happens: ``"always"``, ``"never"`` (e.g. ``add_``, or ops
    whose gradient reads the output), or ``"if_other_grad"`` (``mul_``: only the other
    operand's gradient reads self).
    """
    def method(self: Tensor, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        src = self
        if saves_self != "never" and _gm.STATE.grad_enabled:
            other = _any_requires_grad(args, kwargs)
            if other or (self._requires_grad and saves_self == "always"):
                from ember._frontend.shape import clone
                src = clone(self)
        return commit_inplace(self, fn(src, *args, **kwargs), name)
    method.__name__ = name
    method.__doc__ = f"In-place version of ``{fn.__name__}``."
    setattr(Tensor, name, method)
    return method


def _any_requires_grad(args: tuple, kwargs: dict) -> bool:
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor) and a._requires_grad:
            return True
    return False


def _copy_result(self: Tensor, src: object) -> Tensor:
    from ember._frontend.core import broadcast_shapes, expand_to, to_dtype
    if not isinstance(src, Tensor):
        from ember._frontend.creation import tensor as make_tensor
        src = make_tensor(src, dtype=self._dtype)
    if src._data.shape != self._data.shape:
        try:  # ember's broadcasting: symbolic sizes (export) stay symbolic
            shape = tuple(broadcast_shapes("copy_", src._data.shape, self._data.shape))
        except (ValueError, ShapeError):
            shape = None
        if shape != self._data.shape:
            raise ShapeError(f"[copy_] source of shape {list(src.shape)} cannot be broadcast to "
                             f"the destination shape {list(self.shape)}")
    out = expand_to(to_dtype(src, self._dtype), tuple(self._data.shape))
    if out is src:
        from ember._frontend.shape import clone
        out = clone(src)
    return _keep_in_graph(self, out)


def _keep_in_graph(self: Tensor, out: Tensor) -> Tensor:
    """An overwritten tensor that is part of a graph still gets a (zero) gradient, as in
    PyTorch: route ``out`` through a ``where`` that never picks ``self``."""
    if _gm.STATE.grad_enabled and self._requires_grad:
        from ember._frontend.pointwise_logic import where
        never = _wrap(np.zeros((), dtype=np.bool_), dt.bool)
        return where(never, self, out)
    return out


def copy_(self: Tensor, src: object, non_blocking: bool = False) -> Tensor:
    """Copy ``src`` (broadcast and cast) into ``self``; gradients flow to ``src``."""
    return commit_inplace(self, _copy_result(self, src), "copy_")


def fill_(self: Tensor, value: object) -> Tensor:
    """Fill ``self`` with a scalar (or a 0-d tensor)."""
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise EmberRuntimeError(f"[fill_] fill_ only supports 0-dimension value tensor but "
                                    f"got tensor with {value.ndim} dimensions.")
        return copy_(self, value)
    check_inplace_target(self, "fill_")
    if any(type(d) is not int for d in self._data.shape):  # symbolic sizes (export)
        return copy_(self, _wrap(np.asarray(value, self._data.dtype), self._dtype))
    filled = _wrap(np.full(self._data.shape, value, self._data.dtype), self._dtype)
    return commit_inplace(self, _keep_in_graph(self, filled), "fill_")


def zero_(self: Tensor) -> Tensor:
    """Fill ``self`` with zeros."""
    return fill_(self, 0)


Tensor.copy_ = copy_  # type: ignore[attr-defined]
Tensor.fill_ = fill_  # type: ignore[attr-defined]
Tensor.zero_ = zero_  # type: ignore[attr-defined]

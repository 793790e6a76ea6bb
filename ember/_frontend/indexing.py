"""Indexing frontend: ``Tensor.__getitem__``/``__setitem__`` and PyTorch's indexing functions.

A user index is parsed with PyTorch's rules into a *basic* part (ints, slices, ``None``,
``...``; bound as one ``basic_index`` view) and an *advanced* part (integer tensors/lists and
boolean masks, stacked into one int64 index of shape ``(k, *B)``; bound as ``index``).  As in
PyTorch, ints and 0-d integer tensors select (they are not advanced indices), so
``x[0, :, [1, 2]]`` has shape ``(x.shape[1], 2)``.  Boolean masks become their ``nonzero``
indices, the only data-dependent step.

``where(condition)`` (one argument) is ``nonzero_tuple``; the three-argument ``where`` lives in
the pointwise frontend, which dispatches the one-argument form here.

Index tensors are never differentiable, so the stacked index is built from their NumPy data
here (eager).  Under lazy tracing that read needs the index values, like ``nonzero`` does.
"""

from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from ember import dtypes as dt
from ember._frontend.autocast import autocast_op
from ember._frontend.core import broadcast_shapes, check_tensor, expand_to, is_scalar, to_dtype
from ember._frontend.inplace import _type_name, commit_inplace, inplace_method
from ember._lazy import LazyArray
from ember.autograd.grad_mode import is_grad_enabled
from ember.errors import (
    DTypeRuntimeError,
    EmberIndexError,
    EmberNotImplementedError,
    EmberRuntimeError,
    EmberTypeError,
    EmberValueError,
    ShapeError,
)
from ember.ops import indexing as I
from ember.ops._util import wrap_dim
from ember.ops.registry import bind
from ember.sym import SymInt, has_symbolic, sym_eq_static, sym_max, sym_min
from ember.tensor import Tensor, _wrap, tensor_method

__all__ = [
    "argwhere", "gather", "index_add", "index_copy", "index_fill", "index_put", "index_put_",
    "index_select", "masked_fill", "masked_scatter", "masked_select", "nonzero", "scatter",
    "scatter_add", "scatter_reduce", "take", "take_along_dim",
]

_INDEX_DTYPES = (dt.int64, dt.int32)
_BAD_INDEX = "tensors used as indices must be long, int, byte or bool tensors"


_C_NAMES = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int",
            "int64": "long", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
            "float32": "float", "float64": "double"}


def checked_scalar(op: str, value: Any, d: dt.dtype, floats: bool = True) -> Any:
    """``value`` as a Python scalar of ``d``'s kind, refusing values that overflow ``d`` as
    PyTorch does (integers wrap only within the unsigned range of the width)."""
    if isinstance(value, np.generic):
        value = value.item()
    if d is dt.bool:
        return bool(value)
    ok = True
    if d.category == 1:
        info = np.iinfo(d.np)
        if isinstance(value, float):
            ok = info.min <= value <= info.max  # False for nan
            value = int(value) if ok else value
        else:
            v = int(value)
            ok = v <= info.max and (v >= info.min or (info.min == 0 and -v <= info.max))
            value = v
    elif floats and isinstance(value, (int, float)) and np.isfinite(value):
        ok = abs(value) <= float(dt.finfo(d).max)
        value = float(value)
    if not ok:
        raise EmberRuntimeError(f"[{op}] value cannot be converted to type "
                                f"{_C_NAMES[d.name]} without overflow")
    return value


def fill_value(op: str, value: Any, d: dt.dtype) -> Any:
    """A checked Python scalar of ``d``'s kind (negative ints wrap for unsigned dtypes)."""
    v = checked_scalar(op, value, d)
    if d.category == 1:
        return int(np.array(v).astype(d.np))
    return v


# ------------------------------------------------------------------------------ parsing
def _seq_as_tuple(seq: list) -> bool:
    """PyTorch's (deprecated) rule: a short list holding sequences, slices, ``...``, ``None``
    or tensors is a tuple of indices, not one index."""
    if len(seq) >= 32:
        return False
    return any(isinstance(o, (list, tuple, slice, Tensor, np.ndarray)) or o is None
               or o is Ellipsis for o in seq)


def _array_index(obj: Any) -> tuple[str, Any]:
    """A list/ndarray index as ('t', int64 array) or ('m', bool mask Tensor)."""
    arr = np.asarray(obj._data if isinstance(obj, Tensor) else obj)
    if arr.dtype == np.bool_:
        return "m", _wrap(arr, dt.bool)
    if arr.size == 0 and arr.dtype.kind == "f":
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu" or arr.dtype in (np.int8, np.int16, np.uint16):
        raise EmberIndexError(f"[index] {_BAD_INDEX}")
    if arr.dtype == np.uint8:
        return "m", _wrap(arr != 0, dt.bool)
    return "t", arr.astype(np.int64, copy=False)


def _classify(it: Any) -> tuple:
    t = type(it)
    if t is int:
        return ("i", it)
    if t is slice:
        return ("s", it)
    if it is None:
        return ("n",)
    if it is Ellipsis:
        return ("e",)
    if t is bool or t is np.bool_:
        return ("b", bool(it))
    if isinstance(it, np.integer):
        return ("i", int(it))
    if isinstance(it, Tensor):
        d = it._dtype
        if d in _INDEX_DTYPES:
            return ("i", int(it._data)) if it._data.ndim == 0 else ("t", it._data.astype(
                np.int64, copy=False))
        if d is dt.bool or d is dt.uint8:
            if it._data.ndim == 0:
                return ("b", bool(it._data))
            return ("m", it if d is dt.bool else _wrap(it._data != 0, dt.bool))
        raise EmberIndexError(f"[index] {_BAD_INDEX}")
    if isinstance(it, (list, tuple, np.ndarray, range)):
        return _array_index(list(it) if t is range else it)
    raise EmberIndexError(
        "[index] only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
        f"are valid indices (got {t.__name__})")


def _slice_spec(s: slice, n: int) -> tuple:
    step = 1 if s.step is None else operator.index(s.step)
    if step == 0:
        raise EmberValueError("[index] slice step cannot be zero")
    if step < 0:
        raise EmberValueError("[index] step must be greater than zero")
    start = None if s.start is None else _index_or_sym(s.start)
    stop = None if s.stop is None else _index_or_sym(s.stop)
    if has_symbolic((n, start, stop)):
        return _sym_slice_spec(start, stop, step, n)
    start, stop, _ = slice(start, stop, step).indices(n)
    return (start, max(stop, start), step)


def _full_slice(s: tuple, n: Any) -> bool:
    """Whether the slice spec ``s`` is ``(0, n, 1)``, decided without a guard: a symbolic stop
    that may equal the size counts as a real slice."""
    return type(s[0]) is int and s[0] == 0 and s[2] == 1 and sym_eq_static(s[1], n) is True


def _index_or_sym(v: Any) -> Any:
    return v if isinstance(v, SymInt) else operator.index(v)


def _sym_slice_spec(start: Any, stop: Any, step: int, n: Any) -> tuple:
    """``slice.indices`` for symbolic sizes (export): clamps are ``Min``/``Max`` expressions
    unless the ranges decide them, so ``x[:, :s]`` keeps ``s`` symbolic."""
    start = 0 if start is None else start
    stop = n if stop is None else stop
    if start < 0:
        start = start + n
    if stop < 0:
        stop = stop + n
    start = sym_min(sym_max(start, 0), n)
    stop = sym_min(sym_max(stop, 0), n)
    return (start, sym_max(stop, start), step)


def parse_index(x: Tensor, index: Any) -> tuple:
    """``(spec, adv)``: the basic_index spec (``None`` when it is the identity) and the
    advanced indices as ``[(view dim, int64 array)]``."""
    if type(index) is not tuple:
        if isinstance(index, list) and _seq_as_tuple(index):
            index = tuple(index)
        else:
            index = (index,)
    items = [_classify(it) for it in index]
    shape = x._data.shape
    ndim = len(shape)
    used = 0
    for it in items:
        k = it[0]
        if k in "ist":
            used += 1
        elif k == "m":
            used += it[1]._data.ndim
    if used > ndim:
        if ndim == 0 and any(it[0] == "i" for it in items):
            raise EmberIndexError(
                "[index] invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
        raise EmberIndexError(f"[index] too many indices for tensor of dimension {ndim}")
    spec: list = []
    adv: list = []
    d = 0
    ints = 0  # selected dims are gone from the view: view dim = len(spec) - ints
    trivial = True
    ellipses = 0
    for it in items:
        k = it[0]
        if ellipses > 1 and k != "e":
            # PyTorch expands every '...' by the same count: a later one runs past the end
            raise EmberIndexError(f"[index] too many indices for tensor of dimension {ndim}")
        if k == "i":
            n, v = shape[d], it[1]
            if not -n <= v < n:
                raise EmberIndexError(
                    f"[index] index {v} is out of bounds for dimension {d} with size {n}")
            spec.append(v + n if v < 0 else v)
            trivial = False
            d += 1
            ints += 1
        elif k == "s":
            s = _slice_spec(it[1], shape[d])
            # decided without a guard: a symbolic stop that may equal the size is not trivial
            trivial = trivial and _full_slice(s, shape[d])
            spec.append(s)
            d += 1
        elif k == "n" or k == "b":
            if k == "b":
                adv.append((len(spec) - ints, np.zeros(1 if it[1] else 0, np.int64)))
            spec.append(None)
            trivial = False
        elif k == "e":
            if ellipses:
                ellipses += ndim > used
                continue
            ellipses = 1
            for _ in range(ndim - used):
                spec.append((0, shape[d], 1))
                d += 1
        elif k == "t":
            adv.append((len(spec) - ints, it[1]))
            spec.append((0, shape[d], 1))
            d += 1
        else:
            mask = it[1]
            _check_mask(mask, shape, d)
            nz = bind(I.NONZERO, mask)._data
            for j in range(mask._data.ndim):
                adv.append((len(spec) - ints, nz[:, j]))
                spec.append((0, shape[d], 1))
                d += 1
    if trivial and adv:
        return None, adv
    while spec and type(spec[-1]) is tuple and _full_slice(spec[-1], shape[d - 1]):
        spec.pop()
        d -= 1
    return tuple(spec), adv


def _check_mask(mask: Tensor, shape: tuple, d: int) -> None:
    ms = mask._data.shape
    for j, n in enumerate(ms):
        if n != shape[d + j]:
            raise EmberIndexError(
                f"[index] The shape of the mask {list(ms)} at index {j} does not match the shape "
                f"of the indexed tensor {list(shape)} at index {d + j}")


def stack_indices(adv: list) -> tuple[Tensor, tuple]:
    """Broadcast the advanced indices together and stack them: ``(index (k, *B), dims)``."""
    if len(adv) == 1:
        return _wrap(adv[0][1][None], dt.int64), (adv[0][0],)
    arrays = [a for _, a in adv]
    shapes = [a.shape for a in arrays]
    if any(s != shapes[0] for s in shapes):
        try:
            b = np.broadcast_shapes(*shapes)
        except ValueError:
            raise EmberIndexError(
                "[index] shape mismatch: indexing tensors could not be broadcast together with "
                f"shapes {', '.join(str(list(s)) for s in shapes)}") from None
        arrays = [np.broadcast_to(a, b) for a in arrays]
    return _wrap(np.stack(arrays), dt.int64), tuple(v for v, _ in adv)


# ------------------------------------------------------------------------------ getitem
def getitem(self: Tensor, index: Any) -> Tensor:
    """``x[index]``: a view for ints/slices/None/...; a copy for advanced indices."""
    if type(index) is int and self._data.ndim:
        n = self._data.shape[0]
        if -n <= index < n:
            return bind(I.BASIC_INDEX, self, spec=(index + n if index < 0 else index,))
    spec, adv = parse_index(self, index)
    if spec is not None:
        self = bind(I.BASIC_INDEX, self, spec=spec)
    if not adv:
        return self
    idx, dims = stack_indices(adv)
    return bind(I.INDEX, self, idx, dims=dims)


# ------------------------------------------------------------------------------ setitem
def _strip_leading_ones(v: Tensor, ndim: int) -> Tensor:
    """PyTorch drops leading size-1 dims of an assigned value that has too many dims."""
    shape = tuple(v._data.shape)
    k = 0
    while len(shape) - k > ndim and shape[k] == 1:
        k += 1
    return v.reshape(shape[k:]) if k else v  # type: ignore[attr-defined]


def _value_tensor(value: Any, like: Tensor, op: str) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if is_scalar(value):
        v = checked_scalar(op, value, like._dtype, floats=False)
        return _wrap(np.array(v).astype(like._data.dtype), like._dtype)
    kind = type(value)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    raise EmberTypeError(f"[{op}] can't assign a {name} to a "
                         f"ember.{_type_name(like._dtype)}Tensor")


def setitem(self: Tensor, index: Any, value: Any) -> None:
    """``x[index] = value`` (broadcast; a basic target casts, an advanced one index_puts)."""
    if index is False:
        return  # PyTorch: ``x[False] = v`` writes nothing and leaves the version alone
    spec, adv = parse_index(self, index)
    target = self if spec is None else bind(I.BASIC_INDEX, self, spec=spec)
    if not adv:
        v = _value_tensor(value, target, "__setitem__")
        v = _strip_leading_ones(v, target._data.ndim)
        v = to_dtype(v, target._dtype)
        if v._data.shape != target._data.shape:
            v = v.expand(tuple(target._data.shape))  # type: ignore[attr-defined]
        if v is value:
            v = v.clone()  # type: ignore[attr-defined]
        commit_inplace(target, v, "__setitem__")
        return
    idx, dims = stack_indices(adv)
    values = _put_values(target, idx, dims, value)
    commit_inplace(target, bind(I.INDEX_PUT, target, idx, values, dims=dims, accumulate=False),
                   "__setitem__")


def _put_values(target: Tensor, idx: Tensor, dims: tuple, value: Any) -> Tensor:
    """``value`` checked and broadcast to the indexing result's shape."""
    rshape = I.index_shape(tuple(target._data.shape), tuple(idx._data.shape), dims)
    v = _value_tensor(value, target, "index_put")
    if v._dtype is not target._dtype:
        raise DTypeRuntimeError(
            "[index_put] Index put requires the source and destination dtypes match, got "
            f"{_type_name(target._dtype)} for the destination and {_type_name(v._dtype)} for "
            "the source.")
    v = _strip_leading_ones(v, len(rshape))
    if v._data.shape != rshape:
        try:
            ok = np.broadcast_shapes(v._data.shape, rshape) == rshape
        except ValueError:
            ok = False
        if not ok:
            raise ShapeError(f"[index_put] shape mismatch: value tensor of shape {list(v.shape)} "
                             f"cannot be broadcast to indexing result of shape {list(rshape)}")
        v = v.expand(rshape)  # type: ignore[attr-defined]
    return v


Tensor.__getitem__ = getitem  # type: ignore[method-assign]
Tensor.__setitem__ = setitem  # type: ignore[method-assign]


# ------------------------------------------------------------------------------ helpers
def _index_arg(index: Any, op: str, msg: str) -> np.ndarray:
    """An int32/int64 index tensor's data as int64; other dtypes raise PyTorch's error."""
    check_tensor(index, op, "index")
    if index._dtype not in _INDEX_DTYPES:
        raise DTypeRuntimeError(f"[{op}] {msg}")
    return index._data.astype(np.int64, copy=False)


def _index_tensor(arr: np.ndarray, like: Tensor) -> Tensor:
    return like if like._data is arr else _wrap(arr, dt.int64)


def _same_dtype(op: str, x: Tensor, src: Tensor, msg: str | None = None) -> None:
    if src._dtype is not x._dtype:
        raise DTypeRuntimeError(f"[{op}] " + (msg or "Expected self.dtype to be equal to "
                                                     "src.dtype"))


def _check_bounds(op: str, arr: np.ndarray, size: int, dim: int, cls: type,
                  prefix: str = "", negative: bool = True) -> None:
    if arr.size and (arr.min() < (-size if negative else 0) or arr.max() >= size):
        bad = int(arr.max() if arr.max() >= size else arr.min())
        raise cls(f"[{op}] {prefix}index {bad} is out of bounds for dimension {dim} with size "
                  f"{size}")


# ------------------------------------------------------------------------------ gather/scatter
@tensor_method("gather")
def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """``out[i][j] = input[i][index[i][j]]`` for ``dim=1``."""
    check_tensor(input, "gather")
    arr = _index_arg(index, "gather", "gather(): Expected dtype int32/int64 for index")
    d = wrap_dim(dim, input.ndim, "gather")
    return bind(I.GATHER, input, _index_tensor(arr, index), dim=d)


def _scatter_args(op: str, input: Tensor, dim: int, index: Tensor) -> tuple:
    check_tensor(input, op)
    arr = _index_arg(index, op, f"{op}(): Expected dtype int64 for index")
    return wrap_dim(dim, input.ndim, op), _index_tensor(arr, index)


@tensor_method("scatter")
def scatter(input: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None,
            reduce: str | None = None) -> Tensor:
    """``input`` with ``src`` (a tensor or a scalar ``value``) written at ``index`` along
    ``dim``; ``reduce='add'``/``'multiply'`` combines instead."""
    d, idx = _scatter_args("scatter", input, dim, index)
    if src is None:
        src = value
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise EmberRuntimeError("[scatter] reduce argument must be either add or multiply.")
        if not isinstance(src, Tensor):
            src = _wrap(np.full(idx._data.shape, src).astype(input._data.dtype), input._dtype)
        _same_dtype("scatter", input, src, "scatter(): Expected self.dtype to be equal to "
                                           "src.dtype")
        if reduce == "add":
            return bind(I.SCATTER_ADD, input, idx, src, dim=d)
        return bind(I.SCATTER_REDUCE, input, idx, src, dim=d, reduce="prod", include_self=True)
    if isinstance(src, Tensor):
        _same_dtype("scatter", input, src, "scatter(): Expected self.dtype to be equal to "
                                           "src.dtype")
    elif is_scalar(src):
        src = fill_value("scatter", src, input._dtype)
    else:
        raise EmberTypeError(f"[scatter] src must be a Tensor or a number, got "
                             f"{type(src).__name__}")
    return bind(I.SCATTER, input, idx, src, dim=d)


@tensor_method("scatter_add")
def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """``input`` with ``src`` added at ``index`` along ``dim`` (duplicates accumulate)."""
    d, idx = _scatter_args("scatter_add", input, dim, index)
    check_tensor(src, "scatter_add", "src")
    _same_dtype("scatter_add", input, src)
    return bind(I.SCATTER_ADD, input, idx, src, dim=d)


@tensor_method("scatter_reduce")
def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """Reduce ``src`` into ``input`` at ``index`` along ``dim`` (sum/prod/mean/amax/amin)."""
    d, idx = _scatter_args("scatter_reduce", input, dim, index)
    check_tensor(src, "scatter_reduce", "src")
    if reduce not in I.SCATTER_REDUCES:
        raise EmberRuntimeError(f"[scatter_reduce] reduce argument must be either sum, prod, "
                                f"mean, amax or amin, got {reduce}")
    _same_dtype("scatter_reduce", input, src)
    if reduce == "mean" and input._dtype is dt.bool:
        raise EmberNotImplementedError('[scatter_reduce] "scatter_gather_tensor_cpu_reduce_mean" '
                                       "not implemented for 'Bool'")
    return bind(I.SCATTER_REDUCE, input, idx, src, dim=d, reduce=reduce,
                include_self=bool(include_self))


# ------------------------------------------------------------------------------ index_*
@tensor_method("index_select")
def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The slices of ``input`` along ``dim`` at the 1-d ``index``."""
    check_tensor(input, "index_select")
    arr = _index_arg(index, "index_select",
                     "index_select(): Expected dtype int32 or int64 for index")
    if arr.ndim > 1:
        raise EmberIndexError("[index_select] index_select(): Index is supposed to be a vector")
    d = wrap_dim(dim, input.ndim, "index_select")
    x = input if input.ndim else input.reshape(1)  # type: ignore[attr-defined]
    n = x._data.shape[d]
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        if d == 1 and x.ndim > 1:  # PyTorch's dim-1 kernel words it differently
            bad = int(arr.max() if arr.max() >= n else arr.min())
            raise EmberRuntimeError(f"[index_select] INDICES element is out of DATA bounds, "
                                    f"id={bad} axis_dim={n}")
        raise EmberIndexError("[index_select] index out of range in self")
    out = bind(I.INDEX, x, _wrap(arr.reshape(1, -1), dt.int64), dims=(d,))
    return out if input.ndim else out.reshape(())  # type: ignore[attr-defined]


def _dim_put(op: str, input: Tensor, dim: int, index: Tensor, source: Tensor,
             accumulate: bool, bounds: tuple) -> Tensor:
    """index_add/index_copy: ``source`` put at ``index`` along ``dim``."""
    check_tensor(input, op)
    check_tensor(source, op, "source")
    check_tensor(index, op, "index")
    if op == "index_copy" and index._dtype is not dt.int64:
        raise DTypeRuntimeError(f"[{op}] index_copy_(): Expected a long tensor for index, but "
                                f"got {_type_name(index._dtype)}")
    lazy = index._data.__class__ is LazyArray
    if lazy:  # a recorded index (a KV-cache position): its values are checked by the kernel
        if index._dtype not in _INDEX_DTYPES:
            raise DTypeRuntimeError(f"[{op}] {op}(): Expected dtype int32/int64 for index")
        arr = index._data
    else:
        arr = _index_arg(index, op, f"{op}(): Expected dtype int32/int64 for index")
    if arr.ndim > 1:
        raise EmberIndexError(
            f"[{op}] {op}_(): Index is supposed to be a vector, but got dim: {arr.ndim} with "
            f"type: {_type_name(index._dtype)} and size: {list(arr.shape)}")
    d = wrap_dim(dim, input.ndim, op)
    if lazy:
        return _dim_put_lazy(op, input, d, index, source, accumulate)
    x = input if input.ndim else input.reshape(1)  # type: ignore[attr-defined]
    arr = arr.reshape(-1)
    src = source if source.ndim else source.reshape(1)  # type: ignore[attr-defined]
    want = list(x._data.shape)
    want[d] = arr.size
    if list(src._data.shape) != want and not (input.ndim == 0 and source.ndim == 0):
        raise ShapeError(f"[{op}] source tensor shape must match self tensor shape, excluding "
                         f"the specified dimension. Got self.shape = {list(input.shape)} "
                         f"source.shape = {list(source.shape)}")
    _check_bounds(op, arr, x._data.shape[d], d, *bounds)
    out = bind(I.INDEX_PUT, x, _wrap(arr.reshape(1, -1), dt.int64), src, dims=(d,),
               accumulate=accumulate)
    return out if input.ndim else out.reshape(())  # type: ignore[attr-defined]


def _dim_put_lazy(op: str, input: Tensor, d: int, index: Tensor, source: Tensor,
                  accumulate: bool) -> Tensor:
    """``_dim_put`` with an index recorded in a trace: shapes are checked now, the index values
    by the ``index_put`` kernel when it runs (negative values index from the end there)."""
    x = input if input.ndim else input.reshape(1)  # type: ignore[attr-defined]
    n = index._data.size
    src = source if source.ndim else source.reshape(1)  # type: ignore[attr-defined]
    want = list(x._data.shape)
    want[d] = n
    if list(src._data.shape) != want and not (input.ndim == 0 and source.ndim == 0):
        raise ShapeError(f"[{op}] source tensor shape must match self tensor shape, excluding "
                         f"the specified dimension. Got self.shape = {list(input.shape)} "
                         f"source.shape = {list(source.shape)}")
    idx = to_dtype(index, dt.int64).reshape(1, n)  # type: ignore[attr-defined]
    out = bind(I.INDEX_PUT, x, idx, src, dims=(d,), accumulate=accumulate)
    return out if input.ndim else out.reshape(())  # type: ignore[attr-defined]


@tensor_method("index_add")
def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *,
              alpha: Any = 1) -> Tensor:
    """``input`` with ``alpha * source`` added at ``index`` along ``dim``."""
    if isinstance(source, Tensor) and isinstance(input, Tensor):
        _same_dtype("index_add", input, source,
                    f"index_add_(): self ({_type_name(input._dtype)}) and source "
                    f"({_type_name(source._dtype)}) must have the same scalar type")
        if alpha != 1:
            source = to_dtype(source * alpha, input._dtype)
    return _dim_put("index_add", input, dim, index, source, True,
                    (EmberRuntimeError, "", False))


@tensor_method("index_copy")
@autocast_op("promote")
def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """``input`` with the slices of ``source`` copied to ``index`` along ``dim``."""
    if isinstance(source, Tensor) and isinstance(input, Tensor):
        _same_dtype("index_copy", input, source,
                    f"index_copy_(): self and source expected to have the same dtype, but got "
                    f"(self) {_type_name(input._dtype)} and (source) "
                    f"{_type_name(source._dtype)}")
    return _dim_put("index_copy", input, dim, index, source, False,
                    (EmberIndexError, "index_copy_(): ", False))


@tensor_method("index_fill")
def index_fill(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    """``input`` with ``value`` (a scalar or 0-d tensor) at ``index`` along ``dim``."""
    check_tensor(input, "index_fill")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise EmberRuntimeError(
                f"[index_fill] index_fill_ only supports a 0-dimensional value tensor, but got "
                f"tensor with {value.ndim} dimension(s).")
        if input._dtype.category == 1:
            checked_scalar("index_fill", value.item(), input._dtype)
        v = to_dtype(value, input._dtype)
    else:
        checked_scalar("index_fill", value, input._dtype)
        v = _value_tensor(value, input, "index_fill")
    check_tensor(index, "index_fill", "index")
    if index._dtype is not dt.int64:
        raise EmberIndexError("[index_fill] index_fill_(): Expected dtype int64 for index.")
    arr = index._data
    if arr.ndim > 1:
        raise EmberRuntimeError("[index_fill] Index has to be a vector/scalar")
    d = wrap_dim(dim, input.ndim, "index_fill")
    want = list(input._data.shape) or [1]
    want[d] = arr.size
    source = expand_to(v.reshape([1] * len(want)), tuple(want))  # type: ignore[attr-defined]
    if not input.ndim:
        source = source.reshape(())  # type: ignore[attr-defined]
    return _dim_put("index_fill", input, dim, _wrap(arr.reshape(-1), dt.int64), source, False,
                    (EmberIndexError,))


@tensor_method("index_put")
def index_put(input: Tensor, indices: Sequence[Tensor], values: Any,
              accumulate: bool = False) -> Tensor:
    """``input`` with ``values`` put (or added, ``accumulate=True``) at ``indices``."""
    check_tensor(input, "index_put")
    adv = _put_indices(input, indices)
    idx, dims = stack_indices(adv)
    v = _put_values(input, idx, dims, values)
    return bind(I.INDEX_PUT, input, idx, v, dims=dims, accumulate=bool(accumulate))


def _put_indices(input: Tensor, indices: Sequence[Tensor]) -> list:
    if not isinstance(indices, (tuple, list)):
        raise EmberTypeError("[index_put] indices must be a tuple of tensors")
    for i, t in enumerate(indices):
        if not isinstance(t, Tensor):
            raise EmberTypeError(f"[index_put] expected Tensor as element {i} in argument 0, "
                                 f"but got {type(t).__name__}")
    spec, adv = parse_index(input, tuple(indices))
    if spec is not None and any(s is None or type(s) is int for s in spec):
        # 0-d index tensors select in __getitem__; index_put indexes with them
        adv = [(j, t._data.reshape(-1).astype(np.int64) if t._dtype in _INDEX_DTYPES
                else None) for j, t in enumerate(indices)]
        if any(a is None for _, a in adv):
            raise EmberIndexError(f"[index_put] {_BAD_INDEX}")
        for j, a in adv:
            _check_bounds("index_put", a, input._data.shape[j], j, EmberIndexError)
        adv = [(j, a.reshape(t._data.shape)) for (j, a), t in zip(adv, indices)]
    return adv


def index_put_(input: Tensor, indices: Sequence[Tensor], values: Any,
               accumulate: bool = False) -> Tensor:
    """In-place ``index_put``."""
    return commit_inplace(input, index_put(input, indices, values, accumulate), "index_put_")


Tensor.index_put_ = index_put_  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------ masks
def _check_mask_dtype(mask: Any, op: str, msg: str) -> None:
    check_tensor(mask, op, "mask")
    if mask._dtype is not dt.bool:
        raise DTypeRuntimeError(f"[{op}] {msg}")


@tensor_method("masked_fill")
def masked_fill(input: Tensor, mask: Tensor, value: Any) -> Tensor:
    """``input`` with ``value`` (a scalar or 0-d tensor) where ``mask`` is True."""
    check_tensor(input, "masked_fill")
    _check_mask_dtype(mask, "masked_fill", "masked_fill_ only supports boolean masks, but got "
                                           f"mask with dtype {_c_name(mask._dtype)}")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise EmberRuntimeError(
                f"[masked_fill] masked_fill_ only supports a 0-dimensional value tensor, but got "
                f"tensor with {value.ndim} dimension(s).")
        if input._dtype.category == 1:
            checked_scalar("masked_fill", value.item(), input._dtype)
        value = to_dtype(value, input._dtype)
    elif is_scalar(value):
        value = fill_value("masked_fill", value, input._dtype)
    else:
        raise EmberTypeError(f"[masked_fill] value must be a number or a 0-d tensor, got "
                             f"{type(value).__name__}")
    if input._data.shape != mask._data.shape:
        shape = broadcast_shapes("masked_fill", input._data.shape, mask._data.shape)
        input, mask = expand_to(input, shape), expand_to(mask, shape)
    return bind(I.MASKED_FILL, input, mask, value)


def _c_name(d: dt.dtype) -> str:
    return {"int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
            "uint8": "unsigned char", "float32": "float", "float64": "double",
            "float16": "c10::Half", "bfloat16": "c10::BFloat16"}.get(d.name, d.name)


def _mask_indices(mask: Tensor) -> tuple[Tensor, tuple]:
    """The nonzero indices of a mask as a stacked ``(ndim, n)`` index and its dims."""
    nz = bind(I.NONZERO, mask)
    return _wrap(np.ascontiguousarray(nz._data.T), dt.int64), tuple(range(mask._data.ndim))


def _broadcast_mask(op: str, input: Tensor, mask: Tensor) -> tuple:
    if input._data.shape != mask._data.shape:
        shape = broadcast_shapes(op, input._data.shape, mask._data.shape)
        input, mask = expand_to(input, shape), expand_to(mask, shape)
    if input._data.ndim == 0:
        input, mask = input.reshape(1), mask.reshape(1)  # type: ignore[attr-defined]
    return input, mask


@tensor_method("masked_select")
def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``input`` where ``mask`` is True, as a 1-d tensor (data-dependent)."""
    check_tensor(input, "masked_select")
    _check_mask_dtype(mask, "masked_select", "masked_select: expected BoolTensor for mask")
    input, mask = _broadcast_mask("masked_select", input, mask)
    idx, dims = _mask_indices(mask)
    return bind(I.INDEX, input, idx, dims=dims)


@tensor_method("masked_scatter")
def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """``input`` with consecutive elements of ``source`` written where ``mask`` is True."""
    check_tensor(input, "masked_scatter")
    check_tensor(source, "masked_scatter", "source")
    _check_mask_dtype(mask, "masked_scatter", "masked_scatter_ only supports boolean masks, "
                                              f"but got mask with dtype {mask._dtype.name}")
    if source._dtype is not input._dtype:
        raise DTypeRuntimeError(
            f"[masked_scatter] masked_scatter: expected self and source to have same dtypes but "
            f"got{_type_name(input._dtype)} and {_type_name(source._dtype)}")
    zero_d = input._data.ndim == 0 and mask._data.ndim == 0
    x, m = _broadcast_mask("masked_scatter", input, mask)
    idx, dims = _mask_indices(m)
    n = idx._data.shape[1]
    if source.numel() < n:
        raise EmberRuntimeError("[masked_scatter] Number of elements of source < number of "
                                "ones in mask")
    flat = source.reshape(-1)  # type: ignore[attr-defined]
    values = bind(I.BASIC_INDEX, flat, spec=((0, n, 1),))
    out = bind(I.INDEX_PUT, x, idx, values, dims=dims, accumulate=False)
    return out.reshape(()) if zero_d else out  # type: ignore[attr-defined]


@tensor_method("nonzero")
def nonzero(input: Tensor, *, as_tuple: bool = False) -> Any:
    """Indices of the non-zero elements: ``(n, ndim)`` int64, or one 1-d tensor per dim."""
    check_tensor(input, "nonzero")
    if not as_tuple:
        return bind(I.NONZERO, input)
    return nonzero_tuple(input)


def nonzero_tuple(input: Tensor) -> tuple:
    """``nonzero(as_tuple=True)``; also the one-argument ``where(condition)``."""
    x = input if input.ndim else input.reshape(1)  # type: ignore[attr-defined]
    nz = bind(I.NONZERO, x)
    return tuple(bind(I.BASIC_INDEX, nz, spec=((0, nz._data.shape[0], 1), j))
                 for j in range(x.ndim))


@tensor_method("argwhere")
def argwhere(input: Tensor) -> Tensor:
    """``nonzero(input)``."""
    check_tensor(input, "argwhere")
    return bind(I.NONZERO, input)


@tensor_method("take")
def take(input: Tensor, index: Tensor) -> Tensor:
    """``input`` viewed as 1-d, indexed by ``index`` (result has ``index``'s shape)."""
    check_tensor(input, "take")
    check_tensor(index, "take", "index")
    if index._dtype is not dt.int64:
        raise DTypeRuntimeError(f"[take] take(): Expected a long tensor for index, but got "
                                f"{_type_name(index._dtype)}")
    n = input.numel()
    arr = index._data
    if arr.size and (arr.min() < -n or arr.max() >= n):
        bad = int(arr.max() if arr.max() >= n else arr.min())
        raise EmberIndexError(f"[take] out of range: tried to access index {bad} on a tensor "
                              f"of {n} elements.")
    flat = input.reshape(-1)  # type: ignore[attr-defined]
    return bind(I.INDEX, flat, _wrap(arr.reshape((1,) + arr.shape), dt.int64), dims=(0,))


@tensor_method("take_along_dim")
def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """``gather`` with the input and indices broadcast off ``dim`` (flattened if ``dim`` is
    None)."""
    check_tensor(input, "take_along_dim")
    check_tensor(indices, "take_along_dim", "indices")
    if indices._dtype is not dt.int64:
        raise DTypeRuntimeError("[take_along_dim] torch.take_along_dim(): dtype of indices "
                                f"should be Long but got {_type_name(indices._dtype)}")
    if dim is None:
        return gather(input.reshape(-1), 0, indices.reshape(-1))  # type: ignore[attr-defined]
    if input.ndim != indices.ndim:
        raise EmberRuntimeError(
            f"[take_along_dim] torch.take_along_dim(): input and indices should have the same "
            f"number of dimensions, but got {input.ndim} dimensions for input, and "
            f"{indices.ndim} dimensions for indices")
    d = wrap_dim(dim, input.ndim, "take_along_dim")
    if indices._data.size and indices._data.min() < 0:
        # take_along_dim (unlike gather) counts negative indices from the end
        n = input._data.shape[d] if input.ndim else 1
        arr = indices._data.astype(np.int64)
        indices = _wrap(np.where(arr < 0, arr + n, arr), dt.int64)
    xs = list(input._data.shape)
    xs[d] = indices._data.shape[d] if indices.ndim else 1
    shape = list(broadcast_shapes("take_along_dim", tuple(xs), indices._data.shape))
    indices = expand_to(indices, tuple(shape))
    if shape:
        shape[d] = input._data.shape[d]
    return gather(expand_to(input, tuple(shape)), d, indices)


# ------------------------------------------------------------------------------ in-place
def scatter_reduce_(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                    include_self: bool = True) -> Tensor:
    """In-place ``scatter_reduce``.  Its grad reads the old values of ``input``, so (like
    PyTorch) it saves a copy of them rather than the tensor being overwritten."""
    x = input.clone() if input.requires_grad and is_grad_enabled() else input
    return commit_inplace(input, scatter_reduce(x, dim, index, src, reduce,
                                                include_self=include_self), "scatter_reduce_")


Tensor.scatter_reduce_ = scatter_reduce_  # type: ignore[attr-defined]

for _name, _fn in (("scatter_", scatter), ("scatter_add_", scatter_add), ("index_add_", index_add),
                   ("index_copy_", index_copy), ("index_fill_", index_fill),
                   ("masked_fill_", masked_fill), ("masked_scatter_", masked_scatter)):
    inplace_method(_name, _fn)

"""Tensor creation: tensor, as_tensor, from_numpy, zeros/ones/empty/full (+_like), arange,
linspace, eye, and the ``new_*`` methods; conversions (``to``, ``float()``, ...)."""

from __future__ import annotations

import builtins
import functools
import math
import weakref
from typing import Any, Sequence

import numpy as np

from ember import dtypes as dt
from ember._frontend.core import to_dtype
from ember._frontend.shape import size_args
from ember.autograd import grad_mode as _gm
from ember.device import check_device, check_pin
from ember.device import device as Device
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError
from ember.ops.registry import bind
from ember.sym import has_symbolic
from ember.tensor import Tensor, _wrap, tensor_method

__all__ = [
    "arange", "as_tensor", "asarray", "empty", "empty_like", "eye", "from_numpy", "full",
    "full_like", "linspace", "ones", "ones_like", "tensor", "zeros", "zeros_like",
]


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer_array(data: Any, op: str) -> tuple[np.ndarray, dt.dtype]:
    """Convert nested Python data to an array with PyTorch's dtype inference."""
    if isinstance(data, Tensor):
        return data._data, data._dtype
    if isinstance(data, np.ndarray):
        return data, dt.from_numpy_dtype(data.dtype, op)
    if isinstance(data, np.generic):
        return np.asarray(data), dt.from_numpy_dtype(data.dtype, op)
    nested = _unwrap(data, op)
    try:
        arr = np.array(nested)
    except ValueError as e:
        _check_ragged(nested, op)
        raise EmberValueError(f"[{op}] could not build a tensor from the data: {e}") from None
    k = arr.dtype.kind
    if k == "b":
        return arr, dt.bool
    if k in "iu":
        return arr, dt.int64
    if k == "f":
        if arr.dtype in (np.float16, dt.bfloat16.np, np.float32) and _has_arrays(data):
            return arr, dt.from_numpy_dtype(arr.dtype, op)
        return arr, dt.get_default_dtype()
    if arr.dtype == dt.bfloat16.np:
        return arr, dt.bfloat16
    raise EmberTypeError(f"[{op}] can't convert data of type {arr.dtype} to a tensor; expected "
                         f"numbers, bools or nested sequences of them")


def _check_ragged(nested: Any, op: str) -> None:
    """Raise PyTorch's error for ragged nested data: the shape is read off the first element at
    each depth, then every sequence must match it."""
    shape = []
    x = nested
    while isinstance(x, list) or isinstance(x, np.ndarray) and x.ndim > 0:
        shape.append(len(x))
        if not len(x):
            break
        x = x[0]

    def check(x: Any, dim: int) -> None:
        is_seq = isinstance(x, list) or isinstance(x, np.ndarray) and x.ndim > 0
        if dim == len(shape):
            if is_seq:
                raise EmberTypeError(f"[{op}] expected a number at dim {dim}, got a sequence of "
                                     f"length {len(x)}")
            return
        if not is_seq:
            raise EmberTypeError(f"[{op}] not a sequence: expected a sequence of length "
                                 f"{shape[dim]} at dim {dim} (got {type(x).__name__})")
        if len(x) != shape[dim]:
            raise EmberValueError(f"[{op}] expected sequence of length {shape[dim]} at dim {dim} "
                                  f"(got {len(x)})")
        for y in x:
            check(y, dim + 1)

    check(nested, 0)


def _has_arrays(data: Any) -> bool:
    if isinstance(data, (Tensor, np.ndarray, np.generic)):
        return True
    if isinstance(data, (list, tuple)) and data:
        return _has_arrays(data[0])
    return False


def _unwrap(data: Any, op: str) -> Any:
    if isinstance(data, Tensor):
        return data._data
    if isinstance(data, (list, tuple, range)):
        return [_unwrap(d, op) for d in data]
    if isinstance(data, (bool, int, float, np.generic, np.ndarray)):
        return data
    if isinstance(data, complex):
        raise EmberTypeError(f"[{op}] complex numbers are not supported")
    raise EmberTypeError(f"[{op}] can't convert object of type {type(data).__name__} to a tensor")


def tensor(data: Any, *, dtype: dt.dtype | None = None, device: Any = None,
           requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (``ember.tensor([[1., 2.], [3., 4.]])``)."""
    check_device(device, "tensor")
    arr, inferred = _infer_array(data, "tensor")
    d = dtype or inferred
    if dtype is not None and d.category == 1 and arr.size and not isinstance(
            data, (Tensor, np.ndarray)):
        arr = _check_int_range(arr, d, "tensor")
    out = np.array(arr, dtype=d.np, copy=True) if arr.dtype != d.np else np.array(arr, copy=True)
    if arr.dtype != d.np and d.category == 1 and arr.dtype.kind == "f":
        out = np.trunc(arr.astype(np.float64)).astype(d.np)
    return _finish(_wrap(out, d), requires_grad)


def _check_int_range(arr: np.ndarray, d: dt.dtype, op: str) -> np.ndarray:
    """Python numbers going into an integer dtype must fit (PyTorch's ``overflows`` rule:
    integers going into unsigned types may also be down to ``-max``, wrapping); returns them
    as int64."""
    info = dt.iinfo(d)
    a = arr.astype(np.float64) if arr.dtype.kind == "f" else arr
    lo = -info.max if info.min == 0 and a.dtype.kind != "f" else info.min
    if a.dtype.kind == "f" and not np.isfinite(a).all() or a.min() < lo or a.max() > info.max:
        raise EmberRuntimeError(f"[{op}] value cannot be converted to type {d.name} without "
                                f"overflow")
    return np.trunc(a).astype(np.int64) if a.dtype.kind == "f" else a.astype(np.int64)


def as_tensor(data: Any, dtype: dt.dtype | None = None, device: Any = None) -> Tensor:
    """Like ``tensor`` but shares memory with a Tensor or ndarray of the same dtype."""
    check_device(device, "as_tensor")
    if isinstance(data, Tensor):
        return data if dtype is None or data._dtype is dtype else to_dtype(data, dtype)
    if isinstance(data, np.ndarray):
        d = dtype or dt.from_numpy_dtype(data.dtype, "as_tensor")
        if data.dtype == d.np:
            return _wrap(data, d)
        return _wrap(data.astype(d.np), d)
    return tensor(data, dtype=dtype)


def asarray(obj: Any, *, dtype: dt.dtype | None = None, device: Any = None,
            copy: bool | None = None, requires_grad: bool | None = None) -> Tensor:
    """A tensor from ``obj`` sharing memory where it can (``copy=None``), always copying
    (``copy=True``) or never (``copy=False``: a Python sequence cannot be aliased)."""
    check_device(device, "asarray")
    if copy is False and not isinstance(obj, (Tensor, np.ndarray)):
        raise EmberValueError("[asarray] can't alias arbitrary sequence into a tensor.")
    out = as_tensor(obj, dtype=dtype)
    shares = out is obj or (isinstance(obj, np.ndarray) and out._data is obj)
    if copy is False and not shares:
        raise EmberValueError("[asarray] copy=False, but converting to "
                              f"{out.dtype} needs a copy")
    if copy and shares:
        out = out.clone()
    elif copy and isinstance(obj, np.ndarray) and np.shares_memory(out._data, obj):
        out = out.clone()
    return out.requires_grad_(True) if requires_grad else out


def from_numpy(arr: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``arr`` (zero-copy)."""
    if not isinstance(arr, np.ndarray):
        raise EmberTypeError(f"[from_numpy] expected np.ndarray (got {type(arr).__name__})")
    return _wrap(arr, dt.from_numpy_dtype(arr.dtype, "from_numpy"))


def write_out(out: Any, result: Tensor, op: str) -> Tensor:
    """Store ``result`` in ``out`` (resized when its shape differs, as PyTorch does)."""
    if result._dtype is not out._dtype:
        raise EmberRuntimeError(f"[{op}] dtype {_DTYPE_NAMES[result._dtype.name]} does not "
                                f"match dtype of out parameter "
                                f"({_DTYPE_NAMES[out._dtype.name]})")
    if out._data.shape == result._data.shape:
        out._data[...] = result._data
    else:
        out._data = np.ascontiguousarray(result._data)
    out._version_counter[0] += 1
    return out


_DTYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half",
                "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "int16": "Short",
                "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def supports_out(op: str, has_dtype: bool = True) -> Any:
    """Give a creation function PyTorch's ``out=``: the dtype defaults to ``out``'s, the result
    is written into ``out``, and ``out`` is returned."""
    def deco(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, out: Tensor | None = None, **kwargs: Any) -> Tensor:
            if out is None:
                return fn(*args, **kwargs)
            if not isinstance(out, Tensor):
                raise EmberTypeError(f"[{op}] argument 'out' must be a Tensor, not "
                                     f"{type(out).__name__}")
            if out._requires_grad and _gm.STATE.grad_enabled:
                raise EmberRuntimeError(
                    f"[{op}] functions with out=... arguments don't support automatic "
                    "differentiation, but one of the arguments requires grad.")
            if has_dtype and kwargs.get("dtype") is None:
                kwargs["dtype"] = out._dtype
            return write_out(out, fn(*args, **kwargs), op)
        return wrapper
    return deco


# arrays made by ``empty``/``empty_like`` (uninitialized): an ``ember.kernel`` launch that
# stores into one under ``ember.compile`` need not copy its (garbage) value in first
UNINITIALIZED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _filled(op: str, shape: tuple, value: Any, dtype: dt.dtype | None, device: Any,
            requires_grad: bool) -> Tensor:
    check_device(device, op)
    d = dtype or dt.get_default_dtype()
    if any(s < 0 for s in shape):
        raise EmberRuntimeError(f"[{op}] Trying to create tensor with negative dimension "
                                f"{min(shape)}: {list(shape)}")
    if (d.category == 1 and value is not None and value != 0 and value != 1
            and isinstance(value, (builtins.int, builtins.float))):
        # range-checked; negatives wrap into unsigned types like PyTorch
        value = _check_int_range(np.array([value]), d, op).astype(d.np)[0]
    if has_symbolic(shape):  # under export: a recorded broadcast of the value, not an array
        from ember.ops.shape import CLONE, EXPAND
        base = _wrap(np.full((), 0 if value is None else value, dtype=d.np), d)
        out = bind(CLONE, bind(EXPAND, base, shape=tuple(shape)), contiguous=True)
        return _finish(out, requires_grad)
    if value is None:
        arr = np.empty(shape, dtype=d.np)
        UNINITIALIZED[id(arr)] = arr
    elif value == 0:
        arr = np.zeros(shape, dtype=d.np)
    else:
        arr = np.full(shape, value, dtype=d.np)
    return _finish(_wrap(arr, d), requires_grad)


@supports_out("zeros")
def zeros(*args: Any, size: Any = None, dtype: dt.dtype | None = None, device: Any = None,
          requires_grad: bool = False, layout: Any = None, pin_memory: bool = False) -> Tensor:
    check_pin(pin_memory, "zeros")
    size = args if size is None else (size,)
    return _filled("zeros", size_args(size, "zeros"), 0, dtype, device, requires_grad)


@supports_out("ones")
def ones(*args: Any, size: Any = None, dtype: dt.dtype | None = None, device: Any = None,
         requires_grad: bool = False, layout: Any = None, pin_memory: bool = False) -> Tensor:
    check_pin(pin_memory, "ones")
    size = args if size is None else (size,)
    return _filled("ones", size_args(size, "ones"), 1, dtype, device, requires_grad)


@supports_out("empty")
def empty(*args: Any, size: Any = None, dtype: dt.dtype | None = None, device: Any = None,
          requires_grad: bool = False, layout: Any = None,
          memory_format: Any = None, pin_memory: bool = False) -> Tensor:
    check_pin(pin_memory, "empty")
    size = args if size is None else (size,)
    return _filled("empty", size_args(size, "empty"), None, dtype, device, requires_grad)


@supports_out("full")
def full(size: Sequence[int], fill_value: Any, *, dtype: dt.dtype | None = None,
         device: Any = None, requires_grad: bool = False, layout: Any = None,
         pin_memory: bool = False) -> Tensor:
    """A tensor filled with ``fill_value``; the dtype is inferred from the value."""
    check_pin(pin_memory, "full")
    if dtype is None:
        if isinstance(fill_value, Tensor):
            fill_value = fill_value.item()
        dtype = dt.scalar_dtype(fill_value)
    return _filled("full", size_args((size,), "full"), fill_value, dtype, device, requires_grad)


def _like(fn_name: str, input: Tensor, value: Any, dtype: dt.dtype | None, requires_grad: bool,
          device: Any) -> Tensor:
    return _filled(fn_name, tuple(input.shape), value, dtype or input.dtype, device,
                   requires_grad)


def zeros_like(input: Tensor, *, dtype: dt.dtype | None = None, device: Any = None,
               requires_grad: bool = False, layout: Any = None,
               memory_format: Any = None, pin_memory: bool = False) -> Tensor:
    check_pin(pin_memory, "zeros_like")
    return _like("zeros_like", input, 0, dtype, requires_grad, device)


def ones_like(input: Tensor, *, dtype: dt.dtype | None = None, device: Any = None,
              requires_grad: bool = False, layout: Any = None,
              memory_format: Any = None, pin_memory: bool = False) -> Tensor:
    check_pin(pin_memory, "ones_like")
    return _like("ones_like", input, 1, dtype, requires_grad, device)


def empty_like(input: Tensor, *, dtype: dt.dtype | None = None, device: Any = None,
               requires_grad: bool = False, layout: Any = None,
               memory_format: Any = None, pin_memory: bool = False) -> Tensor:
    check_pin(pin_memory, "empty_like")
    return _like("empty_like", input, None, dtype, requires_grad, device)


def full_like(input: Tensor, fill_value: Any, *, dtype: dt.dtype | None = None,
              device: Any = None, requires_grad: bool = False, layout: Any = None,
              memory_format: Any = None, pin_memory: bool = False) -> Tensor:
    check_pin(pin_memory, "full_like")
    return _like("full_like", input, fill_value, dtype, requires_grad, device)


@tensor_method("new_zeros")
def new_zeros(self: Tensor, *args: Any, size: Any = None, dtype: dt.dtype | None = None,
              device: Any = None, requires_grad: bool = False, layout: Any = None,
              pin_memory: bool = False) -> Tensor:
    check_pin(pin_memory, "new_zeros")
    size = args if size is None else (size,)
    return _filled("new_zeros", size_args(size, "new_zeros"), 0, dtype or self._dtype, device,
                   requires_grad)


@tensor_method("new_ones")
def new_ones(self: Tensor, *args: Any, size: Any = None, dtype: dt.dtype | None = None,
             device: Any = None, requires_grad: bool = False, layout: Any = None,
             pin_memory: bool = False) -> Tensor:
    check_pin(pin_memory, "new_ones")
    size = args if size is None else (size,)
    return _filled("new_ones", size_args(size, "new_ones"), 1, dtype or self._dtype, device,
                   requires_grad)


@tensor_method("new_empty")
def new_empty(self: Tensor, *args: Any, size: Any = None, dtype: dt.dtype | None = None,
              device: Any = None, requires_grad: bool = False, layout: Any = None,
              pin_memory: bool = False) -> Tensor:
    check_pin(pin_memory, "new_empty")
    size = args if size is None else (size,)
    return _filled("new_empty", size_args(size, "new_empty"), None, dtype or self._dtype,
                   device, requires_grad)


@tensor_method("new_full")
def new_full(self: Tensor, size: Sequence[int], fill_value: Any, *,
             dtype: dt.dtype | None = None, device: Any = None,
             requires_grad: bool = False, layout: Any = None, pin_memory: bool = False) -> Tensor:
    check_pin(pin_memory, "new_full")
    return _filled("new_full", size_args((size,), "new_full"), fill_value, dtype or self._dtype,
                   device, requires_grad)


@tensor_method("new_tensor")
def new_tensor(self: Tensor, data: Any, *, dtype: dt.dtype | None = None, device: Any = None,
               requires_grad: bool = False, layout: Any = None, pin_memory: bool = False) -> Tensor:
    check_pin(pin_memory, "new_tensor")
    return tensor(data, dtype=dtype or self._dtype, device=device, requires_grad=requires_grad)


def _trunc_div(a: int, b: int) -> int:
    """C integer division (rounds toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _acc_np(d: dt.dtype) -> Any:
    """PyTorch's CPU accumulation type for range kernels: float for half/bfloat16, double for
    float/double, int64 for integers."""
    if d in (dt.float16, dt.bfloat16):
        return np.float32
    return np.float64 if d.is_floating_point else np.int64


@supports_out("arange")
def arange(start: Any, end: Any = None, step: Any = 1, *, dtype: dt.dtype | None = None,
           device: Any = None, requires_grad: bool = False,
           layout: Any = None, pin_memory: bool = False) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step``; int64 unless any argument is a
    float.  Sizes and values follow PyTorch's CPU kernel exactly (including its truncation of
    float bounds for integer dtypes)."""
    check_pin(pin_memory, "arange")
    check_device(device, "arange")
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    start, end, step = vals
    if dtype is None:
        dtype = (dt.get_default_dtype() if any(isinstance(v, float) for v in vals) else dt.int64)
    acc = _acc_np(dtype)
    xstart, xend, xstep = (acc(builtins.int(v)) if acc is np.int64 else acc(v) for v in vals)
    if step == 0:
        raise EmberRuntimeError("[arange] step must be nonzero")
    if dtype is dt.int64 and xstep == 0:
        # PyTorch truncates the step to int64 first and then refuses it with a ValueError
        raise EmberValueError(f"[arange] step must be nonzero (step {step} truncates to 0 for "
                              f"int64)")
    if any(isinstance(v, float) and not math.isfinite(v) for v in vals):
        raise EmberRuntimeError(f"[arange] unsupported range: {start} -> {end}")
    if (end - start) * step < 0:
        raise EmberRuntimeError(
            f"[arange] upper bound and larger bound inconsistent with step sign (start={start}, "
            f"end={end}, step={step})"
        )
    if dtype is dt.int64:
        sgn = builtins.int(xstep > 0) - builtins.int(xstep < 0)
        n = _trunc_div(builtins.int(xend) - builtins.int(xstart) + builtins.int(xstep) - sgn,
                       builtins.int(xstep))
    else:
        n = math.ceil((builtins.float(end) - builtins.float(start)) / builtins.float(step))
    n = max(n, 0)
    arr = (xstart + xstep * np.arange(n, dtype=acc)).astype(dtype.np)
    return _finish(_wrap(arr, dtype), requires_grad)


@supports_out("linspace")
def linspace(start: Any, end: Any, steps: int, *, dtype: dt.dtype | None = None,
             device: Any = None, requires_grad: bool = False,
             layout: Any = None, pin_memory: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    check_pin(pin_memory, "linspace")
    check_device(device, "linspace")
    if steps < 0:
        raise EmberRuntimeError("[linspace] number of steps must be non-negative")
    start = start.item() if isinstance(start, Tensor) else start
    end = end.item() if isinstance(end, Tensor) else end
    d = dtype or dt.get_default_dtype()
    # PyTorch's kernel: start/end in the output dtype; the step in that dtype for floats and
    # in double for integers; the first half counts up from start, the second down from end
    if d.is_floating_point:
        sd = d.np
        lo, hi = np.array(start).astype(sd), np.array(end).astype(sd)
    else:
        sd = np.dtype(np.float64)
        ends = _check_int_range(np.array([start, end]), d, "linspace") if d is not dt.bool \
            else np.array([builtins.bool(start), builtins.bool(end)], np.int64)
        ends = ends.astype(d.np).astype(np.float64)   # wrapped into the dtype, as PyTorch
        lo, hi = ends[0], ends[1]
    if steps == 1:
        arr = np.array([lo], dtype=sd)
    else:
        step = ((hi.astype(sd) - lo.astype(sd)) / sd.type(max(steps - 1, 1))).astype(sd)
        idx = np.arange(steps)
        half = steps // 2
        up = lo + step * idx[:half].astype(sd)
        down = hi - step * (steps - 1 - idx[half:]).astype(sd)
        arr = np.concatenate([up.astype(sd), down.astype(sd)])
    if not d.is_floating_point:
        arr = np.trunc(arr).astype(np.int64)
        if d is dt.bool:
            arr = arr != 0
    return _finish(_wrap(arr.astype(d.np), d), requires_grad)


@supports_out("eye")
def eye(n: int, m: int | None = None, *, dtype: dt.dtype | None = None, device: Any = None,
        requires_grad: bool = False, layout: Any = None, pin_memory: bool = False) -> Tensor:
    check_pin(pin_memory, "eye")
    check_device(device, "eye")
    if n < 0 or (m is not None and m < 0):
        raise EmberRuntimeError(f"[eye] n and m must be non-negative, got n={n}, m={m}")
    d = dtype or dt.get_default_dtype()
    return _finish(_wrap(np.eye(n, m, dtype=d.np), d), requires_grad)


# ------------------------------------------------------------------------------ conversions
@tensor_method("to")
def to(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``; returns ``self``
    when nothing changes (unless ``copy=True``)."""
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise EmberTypeError(f"[to] unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, dt.dtype):
            dtype = a
        elif isinstance(a, (str, Device)):
            device = a
        elif isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, builtins.bool):
            continue  # non_blocking / copy given positionally
        elif a is None:
            continue
        else:
            raise EmberTypeError(f"[to] received an invalid combination of arguments: {a!r}")
    check_device(device, "to")
    out = self if dtype is None or dtype is self._dtype else to_dtype(self, dtype)
    if copy and out is self:
        from ember._frontend.shape import clone
        out = clone(self)
    return out


def _cast_method(name: str, d: dt.dtype) -> None:
    tensor_method(name)(lambda self, memory_format=None: to(self, d))


for _n, _d in (("float", dt.float32), ("double", dt.float64), ("half", dt.float16),
               ("bfloat16", dt.bfloat16), ("long", dt.int64), ("int", dt.int32),
               ("short", dt.int16), ("char", dt.int8), ("byte", dt.uint8), ("bool", dt.bool)):
    _cast_method(_n, _d)


@tensor_method("type_as")
def type_as(self: Tensor, other: Tensor) -> Tensor:
    return to(self, other.dtype)


@tensor_method("cpu")
def cpu(self: Tensor, memory_format: Any = None) -> Tensor:
    return self


@tensor_method("cuda")
def cuda(self: Tensor, device: Any = None, non_blocking: bool = False) -> Tensor:
    check_device("cuda", "cuda")
    return self

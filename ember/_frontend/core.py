"""Frontend helpers: turning user arguments into strict primitive calls.

The frontend broadcasts, promotes (PyTorch's rules, ``ember.dtypes.result_type``), converts
Python scalars and fills defaults, then binds primitives (ARCHITECTURE.md §2).
"""

from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from ember import dtypes as dt
from ember._meta_check import MetaArg, check_results
from ember.config import config
from ember.errors import EmberTypeError, ShapeError
from ember.ops import pointwise as _P
from ember.ops import shape as _S
from ember.ops._parallel import MIN_ELEMENTS as _MIN_ELEMENTS
from ember.ops._util import _LOWP_NUMS
from ember.ops.registry import OpDef, bind
from ember.sym import SymInt, sym_eq_static
from ember.tensor import _LZ, Tensor, _eager_pointwise, _wrap
from ember.tensor import _STATE as _GM

Scalar = (bool, int, float)


def is_scalar(x: Any) -> bool:
    return isinstance(x, (bool, int, float, SymInt)) or isinstance(x, np.generic)


def py_scalar(x: Any) -> Any:
    """A NumPy scalar as the matching Python scalar."""
    if isinstance(x, np.generic):
        return x.item()
    return x


def _is_one(n: Any) -> bool:
    """``n == 1``; for a symbolic size, only when its range says so (no guard), as PyTorch's
    size-oblivious broadcasting assumes a dynamic dim is not 1."""
    if type(n) is int:
        return n == 1
    return sym_eq_static(n, 1) is True


def broadcast_shapes(op: str, *shapes: Sequence[int]) -> tuple:
    """PyTorch/NumPy broadcasting of ``shapes``; the error names the op and the shapes."""
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        lead = ndim - len(s)
        for i, n in enumerate(s):
            j = lead + i
            if _is_one(out[j]):
                out[j] = n
            elif not _is_one(n) and n != out[j]:
                raise ShapeError(
                    f"[{op}] The size of tensor a ({out[j]}) must match the size of tensor b "
                    f"({n}) at non-singleton dimension {j}; shapes {[tuple(x) for x in shapes]} "
                    f"do not broadcast"
                )
    return tuple(out)


def to_dtype(x: Tensor, d: dt.dtype) -> Tensor:
    if x._dtype is d:
        return x
    return bind(_P.CONVERT, x, dtype=d)


def scalar_for(value: Any, d: dt.dtype) -> Any:
    """A Python scalar converted to the kind of ``d`` (int for integer dtypes, ...); a symbolic
    size stays symbolic (export records it as the primitive's scalar)."""
    if isinstance(value, SymInt) and d is not dt.bool:
        return value
    if d is dt.bool:
        return bool(value)
    if d.category == 1:
        v = int(value)
        lo, span = _INT_RANGE[d.name]
        # PyTorch wraps an out-of-range scalar into the dtype like a C cast (uint8: 300 -> 44)
        return v if lo <= v < lo + span else (v - lo) % span + lo
    return float(value)


_INT_RANGE = {d.name: (int(np.iinfo(d.np).min), 1 << (8 * d.itemsize)) for d in dt.INT_DTYPES}


def expand_to(x: Tensor, shape: tuple) -> Tensor:
    if len(x._data.shape) == len(shape) and x._data.shape == shape:
        return x
    return bind(_S.EXPAND, x, shape=shape)


def check_tensor(x: Any, op: str, name: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise EmberTypeError(
            f"[{op}] argument '{name}' must be a Tensor, not {type(x).__name__}"
        )
    return x


def prepare(op: str, args: Sequence[Any], compute: dt.dtype) -> list:
    """Cast tensor args to ``compute``, convert scalars, and broadcast tensors to one shape."""
    shapes = [a._data.shape for a in args if isinstance(a, Tensor)]
    # ranks first: comparing (s0, 6) with (6,) element-wise would guard s0 == 6 under export
    shape = shapes[0] if all(len(s) == len(shapes[0]) and s == shapes[0] for s in shapes) \
        else broadcast_shapes(op, *shapes)
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(expand_to(to_dtype(a, compute), shape))
        elif is_scalar(a):
            out.append(scalar_for(py_scalar(a), compute))
        else:
            raise EmberTypeError(
                f"[{op}] expected Tensor or number arguments, got {type(a).__name__}"
            )
    return out


def binary(op: OpDef, a: Any, b: Any, name: str | None = None,
           compute: dt.dtype | None = None) -> Tensor:
    """Bind a binary pointwise primitive with PyTorch promotion and broadcasting."""
    if getattr(type(a), "ember_sym_scalar", False) or getattr(type(b), "ember_sym_scalar",
                                                               False):
        return _sym_scalar_binary(op, a, b, name, compute)
    if (isinstance(a, Tensor) and isinstance(b, Tensor) and a._dtype is b._dtype
            and len(a._data.shape) == len(b._data.shape) and a._data.shape == b._data.shape
            and compute is None):
        return bind(op, a, b)
    if compute is None and isinstance(a, Tensor) and isinstance(b, Tensor) and \
            a._dtype is b._dtype:
        # one dtype, two shapes (a bias add): nothing to promote; broadcast
        shape = broadcast_shapes(name or op.name, a._data.shape, b._data.shape)
        if _numpy_broadcasts(op, a, b, shape):
            t = _eager_pointwise(op, a, b)
            if config.check_meta:  # meta sees the operands as the general path expands them
                check_results(op, (MetaArg(shape, a._dtype), MetaArg(shape, b._dtype)), {}, (t,))
            return t
        return bind(op, expand_to(a, shape), expand_to(b, shape))
    if compute is None:
        # a floating tensor with a Python int/float keeps its dtype (the common ``x * 0.5``)
        ta, tb = type(a), type(b)
        if issubclass(ta, Tensor) and (tb is float or tb is int) and a._dtype.category == 2:
            return bind(op, a, float(b))
        if issubclass(tb, Tensor) and (ta is float or ta is int) and b._dtype.category == 2:
            return bind(op, float(a), b)
    nm = name or op.name
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise EmberTypeError(f"[{nm}] expected at least one Tensor argument")
    if compute is None:
        compute = dt.result_type(a, b)
    x, y = prepare(nm, (a, b), compute)
    return bind(op, x, y)


def _numpy_broadcasts(op: OpDef, a: Tensor, b: Tensor, shape: tuple) -> bool:
    """Whether ``op(a, b)`` may let the ufunc broadcast instead of binding two ``expand``s:
    eagerly, no gradient to record, a small C-contiguous result of NumPy's ufunc (what the
    expanded operands give, element for element, without the two view tensors); not under
    ``check_meta`` with ``check_fast_paths`` off."""
    if _LZ.trace is not None or op._ufunc is None or a._dtype.np.num in _LOWP_NUMS or \
            (config.check_meta and not config.check_fast_paths):
        return False
    if _GM.grad_enabled and (a._requires_grad or b._requires_grad):
        return False
    x, y = a._data, b._data
    if x.__class__ is not np.ndarray or y.__class__ is not np.ndarray or \
            not (x.flags.c_contiguous and y.flags.c_contiguous):
        return False
    n = 1
    for s in shape:
        n *= s
    return n < _MIN_ELEMENTS


def _sym_scalar_binary(op: OpDef, a: Any, b: Any, name: str | None,
                       compute: dt.dtype | None) -> Tensor:
    """A float only known at run time (export's ``SymFloat`` from ``.item()``) as the scalar
    argument: promotion as for a Python float, the symbolic value passed to the primitive."""
    sym_a = getattr(type(a), "ember_sym_scalar", False)
    pa, pb = (1.0 if sym_a else a), (b if sym_a else 1.0)
    nm = name or op.name
    if not isinstance(pa, Tensor) and not isinstance(pb, Tensor):
        raise EmberTypeError(f"[{nm}] expected at least one Tensor argument")
    if compute is None:
        compute = dt.result_type(pa, pb)
    if not compute.is_floating_point:
        raise EmberTypeError(f"[{nm}] a float from .item() with a {compute} result is not "
                             "supported while exporting")
    x, y = prepare(nm, (pa, pb), compute)
    return bind(op, a if sym_a else x, y if sym_a else b)


def as_tensor_like(value: Any, like: Tensor) -> Tensor:
    return _wrap(np.asarray(value, dtype=like._dtype.np), like._dtype)


def is_number(x: Any) -> bool:
    return isinstance(x, numbers.Number)

"""Shared rule helpers for OpDefs: strict metas and the low-precision kernel wrapper."""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ember import dtypes as dt
from ember.errors import DTypeError, EmberIndexError, ShapeError
from ember.ops import _act_c, _half_c, _parallel
from ember.sym import SymInt

# a SymInt is a scalar too: export records ``x * n`` with n a symbolic size as one node
_NOT_TENSOR = (int, float, bool, complex, type(None), SymInt)


def tensor_inputs(inputs: tuple) -> list:
    # Python scalars stand in for tensors of pointwise primitives; everything else is a tensor
    # (or a stand-in with .shape/.dtype); export's SymFloat (a float known at run time) is a
    # scalar too
    return [x for x in inputs if not isinstance(x, _NOT_TENSOR)
            and not getattr(type(x), "ember_sym_scalar", False)]


def pointwise_meta(name: str, out_dtype: dt.dtype | None = None,
                   accepts: Callable[[dt.dtype], bool] | None = None,
                   accepts_doc: str = "") -> Callable[..., tuple]:
    """Meta of a strict pointwise primitive: tensor inputs share one shape and dtype; the
    output has that shape and ``out_dtype`` (default: the input dtype)."""

    def meta(*inputs: Any, **params: Any) -> tuple:
        ts = tensor_inputs(inputs)
        assert ts, f"[{name}] needs at least one tensor input"
        shape, dtype = ts[0].shape, ts[0].dtype
        for t in ts[1:]:
            if t.shape != shape:
                raise ShapeError(f"[{name}] primitive inputs must share a shape; got "
                                 f"{tuple(shape)} and {tuple(t.shape)}")
            if t.dtype is not dtype:
                raise DTypeError(f"[{name}] primitive inputs must share a dtype; got "
                                 f"{dtype.name} and {t.dtype.name}")
        if accepts is not None and not accepts(dtype):
            raise DTypeError(f"[{name}] does not support dtype {dtype.name}; expected "
                             f"{accepts_doc}")
        return shape, (out_dtype or dtype)

    return meta


def lowp(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """Run a float kernel in float32 for float16/bfloat16 inputs and round the result back to
    the input dtype (PyTorch's CPU semantics: compute in float, round per op)."""

    is_ufunc = isinstance(fn, np.ufunc)

    @functools.wraps(fn)
    def kernel(*arrays: Any, **params: Any) -> Any:
        a0 = arrays[0]
        if isinstance(a0, np.ndarray):
            src = a0.dtype
        else:
            src = next((a.dtype for a in arrays if isinstance(a, np.ndarray)), None)
        if src is None or src.num not in _LOWP_NUMS:
            if is_ufunc and isinstance(a0, np.ndarray) and a0.size >= _parallel.MIN_ELEMENTS:
                out = _parallel.ufunc(fn, arrays, params)
                if out is not None:
                    return out
            return fn(*arrays, **params)
        if is_ufunc and not params:
            out = _act_c.binary(fn, arrays, src)      # add/sub/mul/div in one C pass
            if out is not None:
                return out
        if is_ufunc and not params and isinstance(a0, np.ndarray):
            out = _half_c.ufunc_blocks(fn, arrays, src)
            if out is not None:
                return out
        up = [_up(a) if isinstance(a, np.ndarray) else a for a in arrays]
        out = fn(*up, **params)
        if isinstance(out, tuple):
            return tuple(_down(o, src) if o.dtype == np.float32 else o for o in out)
        return _down(out, src) if out.dtype == np.float32 else out

    # the binder calls the ufunc itself for small float32/float64/integer inputs (the common
    # per-op-overhead case: ``tensor._eager_bind``)
    kernel._ufunc = fn if is_ufunc else None  # type: ignore[attr-defined]
    return kernel


def _up(a: np.ndarray) -> np.ndarray:
    """``a`` in float32 (the C conversion for large contiguous float16/bfloat16 arrays)."""
    return _half_c.widen(a) if a.dtype.num in _LOWP_NUMS else a.astype(np.float32)


def _down(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float32 ``a`` rounded to ``dtype`` (nearest even), as ``a.astype(dtype)``."""
    fast = _half_c.from_float32(a, dtype)
    return a.astype(dtype) if fast is None else fast


_LOWP = (np.dtype(np.float16), dt.bfloat16.np)
_LOWP_NUMS = frozenset(d.num for d in _LOWP)


def wrap_dim(dim: int, ndim: int, op: str) -> int:
    """Normalize a possibly negative dim; a 0-d tensor accepts dims -1 and 0."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise EmberIndexError(
            f"[{op}] Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got "
            f"{dim})"
        )
    return dim + n if dim < 0 else dim


def as_np_scalar(value: Any, dtype: dt.dtype) -> Any:
    """A Python scalar converted to ``dtype``'s NumPy scalar, wrapping integers like C."""
    return np.array(value).astype(dtype.np)[()]

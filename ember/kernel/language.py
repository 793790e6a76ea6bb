"""The kernel language's builtins (``ember.kernel.load``, ``arange``, ``sum``, ...).

Each builtin is at once the interpreter's implementation (``EMBER_KERNEL_INTERPRET=1``: the
kernel's Python runs once per program on NumPy blocks) and the name the C compiler
(``_front.py``) recognizes by identity, so ``import ember.kernel as tl`` and
``from ember.kernel import load`` both work.  Values in the interpreter: blocks are NumPy arrays
(``Block``, an ndarray with Triton's ``.to(dtype)``), scalars NumPy scalars, and a tensor
argument a ``Pointer`` (the tensor's memory plus a block of element offsets).

>>> import ember.kernel as tl
>>> @tl.jit
... def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
...     offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
...     mask = offs < n
...     tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) +
...              tl.load(y_ptr + offs, mask=mask), mask=mask)
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

import numpy as np

from ember import dtypes as _dt
from ember.errors import EmberIndexError, EmberRuntimeError, EmberTypeError

float16, bfloat16, float32, float64 = _dt.float16, _dt.bfloat16, _dt.float32, _dt.float64
int32, int64, int1 = _dt.int32, _dt.int64, _dt.bool
uint8, int8, int16 = _dt.uint8, _dt.int8, _dt.int16


class constexpr:  # noqa: N801 (Triton's name)
    """A compile-time constant parameter: annotate ``BLOCK: tl.constexpr``; each value compiles
    its own specialization (block sizes must be constexpr)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"


class _State:
    """The interpreter's program: its ids, the grid, and the kernel's code objects (to name the
    kernel line in errors)."""

    def __init__(self) -> None:
        self.pid: tuple = (0, 0, 0)
        self.grid: tuple = (1, 1, 1)
        self.code: Any = None
        self.name = ""


STATE = _State()


def kernel_line() -> str:
    """``<kernel> line <n>`` of the innermost frame running the kernel's code."""
    f = sys._getframe(1)
    while f is not None and f.f_code is not STATE.code:
        f = f.f_back
    where = f"line {f.f_lineno}" if f is not None else "?"
    return f"[ember.kernel] {STATE.name} {where} (program {STATE.pid})"


class Block(np.ndarray):
    """A block value of the interpreter: an ndarray with ``.to(dtype)``."""

    def to(self, dtype: Any, bitcast: bool = False) -> Block:
        return _block(np.asarray(self).astype(_np(dtype)))


def _block(a: Any) -> Any:
    return np.asarray(a).view(Block) if np.ndim(a) else np.asarray(a)[()]


def _np(dtype: Any) -> np.dtype:
    return np.dtype(dtype.np if isinstance(dtype, _dt.dtype) else dtype)


class Pointer:
    """A tensor argument (``offsets`` 0) or pointer arithmetic on one (``ptr + offsets``)."""

    def __init__(self, mem: np.ndarray, name: str, offsets: Any = 0) -> None:
        self.mem, self.name, self.offsets = mem, name, offsets

    @property
    def dtype(self) -> Any:
        return _dt._FROM_NP[self.mem.dtype]

    def _shift(self, off: Any) -> Pointer:
        if isinstance(off, Pointer) or not np.issubdtype(np.asarray(off).dtype, np.integer):
            raise EmberTypeError(f"{kernel_line()}: pointer arithmetic needs integer offsets, "
                                 f"got {np.asarray(off).dtype} added to {self.name}")
        return Pointer(self.mem, self.name, self.offsets + np.asarray(off, np.int64))

    def __add__(self, off: Any) -> Pointer:
        return self._shift(off)

    __radd__ = __add__

    def __sub__(self, off: Any) -> Pointer:
        return self._shift(-np.asarray(off))


# -- program -------------------------------------------------------------------------------------
def program_id(axis: int) -> Any:
    """The id of this program along grid ``axis`` (0, 1 or 2)."""
    return np.int64(STATE.pid[axis])


def num_programs(axis: int) -> Any:
    """The grid's size along ``axis``."""
    return np.int64(STATE.grid[axis])


def cdiv(a: Any, b: Any) -> Any:
    """``ceil(a / b)`` for non-negative integers (also usable on the host, for grids)."""
    return (a + b - 1) // b


def arange(start: int, end: int) -> Any:
    """``[start, end)`` as an int64 block (``start``/``end`` constexpr)."""
    return _block(np.arange(start, end, dtype=np.int64))


def zeros(shape: Any, dtype: Any) -> Any:
    """A block of zeros of ``shape`` (constexpr sizes)."""
    return full(shape, 0, dtype)


def full(shape: Any, value: Any, dtype: Any) -> Any:
    """A block of ``shape`` filled with ``value``."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return _block(np.full(shape, value, dtype=_np(dtype)))


# -- memory --------------------------------------------------------------------------------------
def _check(ptr: Any, mask: Any, what: str) -> tuple:
    if not isinstance(ptr, Pointer):
        raise EmberTypeError(f"{kernel_line()}: {what} needs a pointer (a tensor argument plus "
                             f"offsets), got {type(ptr).__name__}")
    off = np.asarray(ptr.offsets, np.int64)
    m = np.ones(off.shape, bool) if mask is None else np.asarray(mask, bool)
    off, m = np.broadcast_arrays(off, m)
    bad = m & ((off < 0) | (off >= ptr.mem.size))
    if bad.any():
        k = np.flatnonzero(bad)[0]
        raise EmberIndexError(f"{kernel_line()}: out-of-bounds {what} of {ptr.name}: offset "
                              f"{int(off.flat[k])} is outside [0, {ptr.mem.size}); "
                              "mask the access (mask=...)")
    return off, m


def load(pointer: Any, mask: Any = None, other: Any = None, **_ignored: Any) -> Any:
    """The elements at ``pointer`` (a pointer block or one pointer); where ``mask`` is false,
    ``other`` (0 when omitted); a masked-off element is never read.  float16/bfloat16 load as
    float32 (stores round back)."""
    off, m = _check(pointer, mask, "load")
    fill = 0 if other is None else other
    dt = np.float32 if pointer.mem.dtype.name in ("float16", "bfloat16") else pointer.mem.dtype
    vals = np.where(m, pointer.mem[np.where(m, off, 0)].astype(dt), np.asarray(fill).astype(dt))
    return _block(vals.astype(dt))


def store(pointer: Any, value: Any, mask: Any = None, **_ignored: Any) -> None:
    """Write ``value`` (broadcast to the pointer block) where ``mask`` is true."""
    off, m = _check(pointer, mask, "store")
    v = np.broadcast_to(np.asarray(value).astype(pointer.mem.dtype), off.shape)
    pointer.mem[off[m]] = v[m]


# -- math ----------------------------------------------------------------------------------------
def _float(fn: Any) -> Any:
    def f(x: Any) -> Any:
        a = np.asarray(x)
        if not np.issubdtype(a.dtype, np.floating):
            a = a.astype(np.float32)
        with np.errstate(all="ignore"):
            return _block(fn(a).astype(a.dtype))
    f.__name__ = fn.__name__
    return f


exp, log, sqrt, sin, cos, tanh = (_float(np.exp), _float(np.log), _float(np.sqrt),
                                  _float(np.sin), _float(np.cos), _float(np.tanh))
exp2, log2, floor, ceil = _float(np.exp2), _float(np.log2), _float(np.floor), _float(np.ceil)


def _rsqrt(a: Any) -> Any:
    return 1 / np.sqrt(a)


def _sigmoid(a: Any) -> Any:
    return 1 / (1 + np.exp(-a))


def _erf(a: Any) -> Any:
    import math
    return np.vectorize(math.erf, otypes=[a.dtype])(a)


rsqrt, sigmoid, erf = _float(_rsqrt), _float(_sigmoid), _float(_erf)


def abs(x: Any) -> Any:  # noqa: A001 (Triton's name)
    return _block(np.abs(x))


def maximum(x: Any, y: Any) -> Any:
    """Elementwise maximum (NaN propagates)."""
    return _block(np.maximum(x, y))


def minimum(x: Any, y: Any) -> Any:
    return _block(np.minimum(x, y))


def where(condition: Any, x: Any, y: Any) -> Any:
    """``x`` where ``condition`` else ``y`` (broadcast)."""
    r = np.where(condition, x, y)
    return _block(r)


def fma(x: Any, y: Any, z: Any) -> Any:
    return _block(np.asarray(x) * y + z)


def cast(x: Any, dtype: Any) -> Any:
    """``x`` converted to ``dtype`` (also ``block.to(dtype)``)."""
    return _block(np.asarray(x).astype(_np(dtype)))


# -- reductions ----------------------------------------------------------------------------------
def _reduce(fn: Any, x: Any, axis: Any) -> Any:
    a = np.asarray(x)
    if axis is not None and not -a.ndim <= axis < builtins.max(a.ndim, 1):
        raise EmberTypeError(f"{kernel_line()}: reduction axis {axis} out of range for a "
                             f"{a.ndim}-d block")
    return _block(fn(a, axis=axis))


def sum(x: Any, axis: Any = None, keep_dims: bool = False) -> Any:  # noqa: A001
    """Sum over ``axis`` (all axes when None); the block's dtype (bool/int sum as int64)."""
    a = np.asarray(x)
    dt = np.int64 if a.dtype.kind in "biu" else a.dtype
    return _keep(_reduce(lambda v, axis: np.sum(v, axis=axis, dtype=dt), a, axis), a, axis,
                 keep_dims)


def _fold(ufunc: Any, init: float) -> Any:
    def fold(a: Any, axis: Any) -> Any:
        a = np.asarray(a)
        if a.dtype.kind == "f":
            start: Any = init
        elif a.dtype.kind == "b":
            start = init > 0
        else:
            start = np.iinfo(a.dtype).min if init < 0 else np.iinfo(a.dtype).max
        flat = a.reshape(-1) if axis is None else a
        return ufunc.reduce(flat, axis=0 if axis is None else axis,
                            initial=np.array(start, a.dtype))
    return fold


def max(x: Any, axis: Any = None, keep_dims: bool = False) -> Any:  # noqa: A001
    """Maximum over ``axis``; NaN are ignored (Triton's default; -inf when all are NaN)."""
    return _keep(_reduce(_fold(np.fmax, -np.inf), x, axis), x, axis, keep_dims)


def min(x: Any, axis: Any = None, keep_dims: bool = False) -> Any:  # noqa: A001
    """Minimum over ``axis``; NaN are ignored."""
    return _keep(_reduce(_fold(np.fmin, np.inf), x, axis), x, axis, keep_dims)


def argmax(x: Any, axis: Any, keep_dims: bool = False) -> Any:
    """Index (int64) of the first maximum along ``axis``."""
    return _keep(_reduce(np.argmax, x, axis).astype(np.int64), x, axis, keep_dims)


def argmin(x: Any, axis: Any, keep_dims: bool = False) -> Any:
    return _keep(_reduce(np.argmin, x, axis).astype(np.int64), x, axis, keep_dims)


def _keep(r: Any, x: Any, axis: Any, keep: bool) -> Any:
    if not keep:
        return r
    if axis is None:
        return _block(np.reshape(r, (1,) * np.ndim(x)))
    return _block(np.expand_dims(r, axis))


def dot(a: Any, b: Any, acc: Any = None, **_ignored: Any) -> Any:
    """The matrix product of two 2-D blocks (plus ``acc``), in float32 for float inputs."""
    x, y = np.asarray(a), np.asarray(b)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[0]:
        raise EmberTypeError(f"{kernel_line()}: dot needs (M, K) and (K, N) blocks, got "
                             f"{x.shape} and {y.shape}")
    dt = np.float32 if x.dtype.kind == "f" and x.dtype.itemsize <= 4 else np.result_type(x, y)
    r = x.astype(dt) @ y.astype(dt)
    return _block(r if acc is None else np.asarray(acc) + r)


def reshape(x: Any, shape: Any) -> Any:
    return _block(np.reshape(x, tuple(shape)))


def broadcast_to(x: Any, shape: Any) -> Any:
    return _block(np.broadcast_to(x, tuple(shape)))


def trans(x: Any) -> Any:
    """The transpose of a 2-D block."""
    return _block(np.asarray(x).T)


def static_range(*args: int) -> range:
    """``range`` whose bounds are constexpr (unrolled by the C compiler's optimizer)."""
    return range(*args)


def device_assert(cond: Any, msg: str = "") -> None:
    if not np.all(cond):
        raise EmberRuntimeError(f"{kernel_line()}: device_assert failed: {msg}")


BUILTINS = {
    "program_id": program_id, "num_programs": num_programs, "cdiv": cdiv, "arange": arange,
    "zeros": zeros, "full": full, "load": load, "store": store, "exp": exp, "log": log,
    "sqrt": sqrt, "rsqrt": rsqrt, "sigmoid": sigmoid, "sin": sin, "cos": cos, "tanh": tanh,
    "exp2": exp2, "log2": log2, "floor": floor, "ceil": ceil, "erf": erf, "abs": abs,
    "maximum": maximum, "minimum": minimum, "where": where, "fma": fma, "cast": cast,
    "sum": sum, "max": max, "min": min, "argmax": argmax, "argmin": argmin, "dot": dot,
    "reshape": reshape, "broadcast_to": broadcast_to, "trans": trans,
    "static_range": static_range, "device_assert": device_assert,
}

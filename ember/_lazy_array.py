"""The lazy payload object and its geometry helpers (split out of ``ember._lazy``).

A ``LazyArray`` answers the metadata questions a NumPy array answers (shape, dtype, ndim, size,
strides) without holding data; anything that needs values asks its trace for a graph break.
``_Storage`` is the functionalized value of one mutated storage.  ``ember._lazy`` re-exports
every name here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

if TYPE_CHECKING:
    from ember._lazy import Trace


class _Storage:
    """The functionalized value of one mutated storage (tensors sharing a version counter)."""

    __slots__ = ("root", "root_shape", "np_dtype", "value", "version")

    def __init__(self, root: np.ndarray | None, root_shape: tuple, np_dtype: Any, value: tuple,
                 version: int) -> None:
        self.root = root              # the concrete array written back at realization (or None)
        self.root_shape = root_shape
        self.np_dtype = np_dtype
        self.value = value            # ref of the storage's current value, shaped root_shape
        self.version = version        # the version counter value that value corresponds to


def _contig_strides(shape: tuple, itemsize: int) -> tuple:
    out = []
    acc = itemsize
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


_SHADOW_BUF: dict = {}


_SHADOWS: dict = {}   # (shape, NumPy dtype) -> its stand-in geometry (``_shadow_for``)


def _shadow_for(shape: tuple, np_dtype: Any) -> np.ndarray:
    """A C-contiguous array geometry over a one-element buffer.  View kernels run on it to
    compute the strides and offset of lazy views; its memory is never read (nor written), so
    one object per (shape, dtype) serves every payload (``Known.vmemo`` relies on that)."""
    key = (shape, np_dtype)
    got = _SHADOWS.get(key)
    if got is not None:
        return got
    buf = _SHADOW_BUF.get(np_dtype)
    if buf is None:
        buf = _SHADOW_BUF[np_dtype] = np.zeros(1, dtype=np_dtype)
    got = np.lib.stride_tricks.as_strided(buf, shape=shape,
                                          strides=_contig_strides(shape, buf.itemsize))
    if len(_SHADOWS) > 4096:   # many distinct shapes (dynamic sizes): start over
        _SHADOWS.clear()
    _SHADOWS[key] = got
    return got


def _dense(a: np.ndarray) -> np.ndarray | None:
    """``a``'s memory as a C-contiguous array (``a`` itself, or ``a`` with its axes permuted
    into memory order, e.g. ``a.T`` for a Fortran-ordered array); None when ``a`` has gaps,
    overlaps or negative strides."""
    if a.flags.c_contiguous:
        return a
    order = sorted(range(a.ndim), key=lambda d: -a.strides[d])
    t = a.transpose(order)
    return t if t.flags.c_contiguous else None


def _ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class LazyArray:
    """The payload of a tensor recorded in a trace: metadata now, values at realization."""

    __slots__ = ("trace", "ref", "shape", "dtype", "shadow", "owner", "vc", "sver", "value",
                 "__weakref__")

    def __init__(self, trace: Trace, ref: tuple, shape: tuple, np_dtype: Any,
                 shadow: np.ndarray | None, owner: Any, vc: list, sver: int) -> None:
        self.trace = trace
        self.ref = ref
        self.shape = shape
        self.dtype = np_dtype
        # geometry in the owner's frame: for a LazyArray owner a view of a stand-in buffer, for
        # a concrete owner the real NumPy view (never read while tracing); None: contiguous
        self.shadow = shadow
        # whose storage this value lives in: None (its own, fresh), the owning LazyArray, or
        # the concrete root array of a tensor that existed before tracing
        self.owner = owner
        self.vc = vc             # the version counter shared by the storage's tensors
        self.sver = sver         # version of the storage this value reflects
        self.value: np.ndarray | None = None

    # metadata a NumPy array answers without data
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def geometry(self) -> np.ndarray:
        if self.shadow is None:
            self.shadow = _shadow_for(self.shape, self.dtype)
        return self.shadow

    @property
    def strides(self) -> tuple:
        return self.geometry().strides

    @property
    def base(self) -> Any:
        return None

    # everything else needs the values: a graph break
    def materialize(self, reason: str) -> np.ndarray:
        if self.value is None:
            self.trace.graph_break(reason)
        assert self.value is not None
        return self.value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        v = self.materialize("a NumPy function read a lazy tensor's values")
        return v if dtype is None else v.astype(dtype)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.materialize(f"NumPy attribute .{name} of a lazy tensor"), name)

    def __getitem__(self, item: Any) -> Any:
        return self.materialize("indexing a lazy tensor's values")[item]

    def __setitem__(self, item: Any, value: Any) -> None:
        self.materialize("writing into a lazy tensor's values")[item] = value

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self) -> Any:
        return iter(self.materialize("iterating over a lazy tensor's values"))

    def __float__(self) -> float:
        return float(self.materialize("float() of a lazy tensor"))

    def __int__(self) -> int:
        return int(self.materialize("int() of a lazy tensor"))

    def __bool__(self) -> bool:
        return bool(self.materialize("bool() of a lazy tensor"))

    def __repr__(self) -> str:
        return f"LazyArray(shape={self.shape}, dtype={self.dtype}, ref={self.ref})"


def _forward_dunder(name: str) -> Callable:
    def method(self: LazyArray, *args: Any) -> Any:
        return getattr(self.materialize(f"NumPy operator {name} on a lazy tensor"), name)(*args)
    method.__name__ = name
    return method


for _n in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
           "__rtruediv__", "__floordiv__", "__mod__", "__pow__", "__neg__", "__abs__",
           "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__or__",
           "__xor__", "__invert__", "__matmul__", "__rmatmul__"):
    setattr(LazyArray, _n, _forward_dunder(_n))
LazyArray.__hash__ = object.__hash__  # type: ignore[method-assign]

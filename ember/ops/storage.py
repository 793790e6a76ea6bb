"""Storage primitives of functionalized in-place writes (ARCHITECTURE.md §4).

When a compiled region writes into a tensor in place, the trace records the new value of the
whole storage instead of mutating memory: ``storage_write`` returns a copy of a storage value
with one strided region replaced, and ``storage_read`` reads a strided region of a storage value
(how a tensor that aliases the storage sees the write).  A geometry is ``(shape, element strides,
element offset)`` into the C-ordered elements of the storage value.  Neither op carries autograd
history: in-place ops rebase gradients on their own (``CopySlices``).
"""

from __future__ import annotations

import numpy as np

from ember.errors import ShapeError
from ember.ops.registry import OpDef, register

_TAGS = frozenset({"nondifferentiable"})


def _region(flat: np.ndarray, geom: tuple) -> np.ndarray:
    shape, strides, offset = geom
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat[offset:] if flat.size else flat, shape=shape,
                                           strides=tuple(s * item for s in strides))


def _check_geom(op: str, storage_shape: tuple, geom: tuple) -> None:
    shape, strides, offset = geom
    n = 1
    for s in storage_shape:
        n *= s
    last = offset + sum((k - 1) * s for k, s in zip(shape, strides)) if 0 not in shape else 0
    if len(shape) != len(strides) or offset < 0 or min(strides, default=0) < 0 or \
            (0 not in shape and last >= n):
        raise ShapeError(f"[{op}] geometry {geom} does not fit a storage of {n} elements")


def _read_meta(storage, *, geom: tuple) -> tuple:  # noqa: ANN001
    _check_geom("storage_read", tuple(storage.shape), geom)
    return tuple(geom[0]), storage.dtype


def _read(storage: np.ndarray, *, geom: tuple) -> np.ndarray:
    flat = np.ascontiguousarray(storage).reshape(-1)
    # a strided view, not a copy: the region has the strides it has in eager (a transposed or
    # sliced input), so reductions and BLAS calls over it run as in eager and match it bit for
    # bit.  Storage values are never mutated inside a graph (storage_write copies), so the view
    # is safe; it is read-only so that no kernel writes through it
    v = _region(flat, geom)
    v.flags.writeable = False
    return v


def _write_meta(storage, src, *, geom: tuple) -> tuple:  # noqa: ANN001
    _check_geom("storage_write", tuple(storage.shape), geom)
    if tuple(src.shape) != tuple(geom[0]) or src.dtype != storage.dtype:
        raise ShapeError(f"[storage_write] source {tuple(src.shape)} {src.dtype} does not match "
                         f"the region {tuple(geom[0])} {storage.dtype}")
    return tuple(storage.shape), storage.dtype


def _write(storage: np.ndarray, src: np.ndarray, *, geom: tuple) -> np.ndarray:
    out = np.array(storage, order="C", copy=True)
    _region(out.reshape(-1), geom)[...] = src
    return out


STORAGE_READ = register(OpDef("storage_read", "movement", _read_meta, _read, tags=_TAGS))
STORAGE_WRITE = register(OpDef("storage_write", "movement", _write_meta, _write, tags=_TAGS))

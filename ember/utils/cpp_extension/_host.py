"""ember's side of the stable C ABI at run time: the C shim (``shim_*.c``, built by the system
compiler on first use and cached, loaded with ``RTLD_GLOBAL`` so extensions resolve their
``ember_stable_*`` symbols in it), the ops it asks ember to compute (``amax``, ``pad``: ctypes
callbacks into ember), and conversions between DLPack-shaped handles and ember tensors."""

from __future__ import annotations

import ctypes
import hashlib
import threading
from ctypes import POINTER, c_char_p, c_double, c_int, c_int32, c_int64, c_uint64, c_void_p
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from ember import dtypes as _dt
from ember.errors import (
    DTypeError,
    EmberIndexError,
    EmberNotImplementedError,
    EmberRuntimeError,
    EmberValueError,
)

HERE = Path(__file__).resolve().parent
INCLUDE = HERE.parents[1] / "include"
SOURCES = ("shim_core.c", "shim_ops.c", "shim_host.c")

# EmberScalarType numbers (PyTorch's c10::ScalarType) <-> ember dtypes
CODE_OF: dict[_dt.dtype, int] = {
    _dt.uint8: 0, _dt.int8: 1, _dt.int16: 2, _dt.int32: 3, _dt.int64: 4, _dt.float16: 5,
    _dt.float32: 6, _dt.float64: 7, _dt.bool: 11, _dt.bfloat16: 15,
}
DTYPE_OF: dict[int, _dt.dtype] = {v: k for k, v in CODE_OF.items()}
CODE_OF_NP: dict[np.dtype, int] = {d.np: c for d, c in CODE_OF.items()}
# numpy type strings to build arrays over C memory (bfloat16 goes through uint16 and a view)
_TYPESTR = {c: (np.dtype(np.uint16) if d is _dt.bfloat16 else np.dtype(d.np)).str
            for d, c in CODE_OF.items()}
_ITEMSIZE = {c: np.dtype(d.np).itemsize for d, c in CODE_OF.items()}

_ERRORS: dict[int, type] = {1: EmberRuntimeError, 2: EmberValueError, 3: EmberIndexError,
                            4: DTypeError, 5: EmberRuntimeError, 6: EmberNotImplementedError}


def error_code(e: BaseException) -> int:
    """The EMBER_STABLE_* code for a Python exception."""
    if isinstance(e, IndexError):
        return 3
    if isinstance(e, TypeError):
        return 4
    if isinstance(e, NotImplementedError):
        return 6
    if isinstance(e, ValueError):
        return 2
    if isinstance(e, MemoryError):
        return 5
    return 1


def raise_error(code: int, op: str) -> None:
    """Raise the calling thread's last stable-ABI error as an ember error naming ``op``."""
    msg = SHIM.lib.ember_stable_get_last_error_message().decode(errors="replace")
    raise _ERRORS.get(code, EmberRuntimeError)(f"[{op}] {msg}")


def _source() -> str:
    return "".join((HERE / name).read_text() for name in SOURCES)


def _headers_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(INCLUDE.rglob("*.h")):
        h.update(p.relative_to(INCLUDE).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


HOST_AMAX = ctypes.CFUNCTYPE(c_int32, c_void_p, POINTER(c_int64), c_int64, c_int32,
                             POINTER(c_void_p))
HOST_PAD = ctypes.CFUNCTYPE(c_int32, c_void_p, POINTER(c_int64), c_int64, c_char_p, c_double,
                            POINTER(c_void_p))


class Shim:
    """The loaded shim library (built on first use; ``lib`` is its ``ctypes.CDLL``)."""

    def __init__(self) -> None:
        self._lib: ctypes.CDLL | None = None
        self.call: Any = None  # ember_stable_py_call through ctypes.PyDLL (GIL held)
        self.release: Any = None  # ember_stable_tensor_release
        self._lock = threading.Lock()
        self._callbacks: tuple = ()

    @property
    def lib(self) -> ctypes.CDLL:
        if self._lib is None:
            with self._lock:
                if self._lib is None:
                    self._lib = self._load()
        return self._lib

    def _load(self) -> ctypes.CDLL:
        from ember.compiler.c.build import toolchain
        path = toolchain.compile_library(
            _source(), name="ember_stable_shim", extra_flags=("-I", str(INCLUDE)),
            version=f"{toolchain.ember_version()}+{_headers_digest()}")
        lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        _declare(lib)
        self.call = ctypes.PyDLL(str(path), mode=ctypes.RTLD_GLOBAL).ember_stable_py_call
        self.release = lib.ember_stable_tensor_release
        self.call.argtypes = [c_void_p, c_void_p, ctypes.py_object, c_void_p, c_void_p]
        self._callbacks = (HOST_AMAX(_host_amax), HOST_PAD(_host_pad))
        lib.ember_stable_py_set_host(*self._callbacks)
        return lib


def _declare(lib: ctypes.CDLL) -> None:
    lib.ember_stable_get_last_error_message.restype = c_char_p
    lib.ember_stable_set_error.argtypes = [c_int32, c_char_p]
    lib.ember_stable_tensor_release.argtypes = [c_void_p]
    lib.ember_stable_empty.argtypes = [POINTER(c_int64), c_int64, c_int32, POINTER(c_void_p)]
    lib.ember_stable_py_describe.argtypes = [c_void_p, POINTER(c_int64)]
    lib.ember_stable_py_describe.restype = c_int64
    lib.ember_stable_py_pending_get.argtypes = [
        c_int, POINTER(c_uint64), POINTER(c_char_p), POINTER(c_char_p), POINTER(c_char_p),
        POINTER(c_char_p), POINTER(ctypes.c_uint32)]
    lib.ember_stable_py_pending_run.argtypes = [c_int, POINTER(c_void_p)]
    lib.ember_stable_py_lib_counts.argtypes = [c_void_p, POINTER(c_int), POINTER(c_int)]
    lib.ember_stable_py_lib_def.argtypes = [c_void_p, c_int]
    lib.ember_stable_py_lib_def.restype = c_char_p
    lib.ember_stable_py_lib_impl.argtypes = [c_void_p, c_int, POINTER(c_char_p),
                                             POINTER(c_void_p), POINTER(c_void_p)]
    lib.ember_stable_py_set_host.argtypes = [HOST_AMAX, HOST_PAD]
    lib.ember_stable_abi_version.restype = c_uint64
    lib.ember_stable_py_list_free.argtypes = [c_void_p]


SHIM = Shim()


def abi_version() -> int:
    """The stable ABI version of this ember (``EMBER_STABLE_ABI_VERSION`` in version.h)."""
    import re
    text = (INCLUDE / "ember" / "stable" / "version.h").read_text()
    m = re.search(r"#define EMBER_STABLE_ABI_VERSION EMBER_STABLE_VERSION_(\d+)", text)
    assert m, "version.h has no EMBER_STABLE_ABI_VERSION"
    return int(m.group(1))


# ------------------------------------------------------------------ memory <-> arrays
class CArray:
    """Keeps what an array over C memory needs: the handle (released with the array) and,
    for memory an argument lent, that argument's array."""

    __slots__ = ("__array_interface__", "handle", "keep")

    def __del__(self) -> None:
        if self.handle:
            SHIM.lib.ember_stable_tensor_release(c_void_p(self.handle))


class _Release:
    __slots__ = ("handle", "release")

    def __del__(self) -> None:
        self.release(self.handle)


_NP_OF = {c: np.dtype(d.np) for d, c in CODE_OF.items()}
_CHARS = ctypes.c_char * 1


def array_of(desc: list, handle: int = 0, keep: Any = None) -> np.ndarray:
    """The array described by ``[data, arg_index, dtype, ndim, base, nbytes, sizes...,
    byte strides...]``; with ``handle`` it owns that handle (released with the array)."""
    data, _, code, nd, base, nbytes = desc[:6]
    if handle and keep is None:
        return owned_array(handle, data, code, nd, base, nbytes, desc[6:6 + 2 * nd])
    holder = CArray()
    holder.handle, holder.keep = handle, keep
    holder.__array_interface__ = {
        "data": (data, False), "shape": tuple(desc[6:6 + nd]), "version": 3,
        "strides": tuple(desc[6 + nd:6 + 2 * nd]), "typestr": _TYPESTR[code]}
    arr = np.asarray(holder)
    return arr.view(ml_dtypes.bfloat16) if code == 15 else arr


def owned_array(handle: int, data: int, code: int, nd: int, base: int, nbytes: int,
                dims: list) -> np.ndarray:
    """An array over memory the shim owns (one buffer over the whole storage), releasing
    ``handle`` when the array goes."""
    buf = (ctypes.c_char * (nbytes or 1)).from_address(base)
    release = _Release()
    release.handle, release.release = handle, SHIM.release
    buf._ember_release = release
    dt = _NP_OF[code]
    shape = tuple(dims[:nd])
    strides = tuple(dims[nd:])
    # NumPy builds a C-contiguous array 3x faster when no strides are given
    step = dt.itemsize
    for n, st in zip(reversed(shape), reversed(strides)):
        if st != step and n != 1:
            return np.ndarray(shape, dt, buf, data - base, strides)
        step *= n
    return np.ndarray(shape, dt, buf, data - base)


def describe(handle: int) -> list:
    buf = (c_int64 * 260)()
    n = SHIM.lib.ember_stable_py_describe(c_void_p(handle), buf)
    return buf[:n]


def tensor_of(handle: int) -> Any:
    """An ember tensor over a handle's memory (borrowed: valid while the handle lives)."""
    from ember.tensor import _wrap
    desc = describe(handle)
    return _wrap(array_of(desc), DTYPE_OF[desc[2]])


def handle_of(t: Any) -> int:
    """A new handle holding a copy of ember tensor ``t`` (memory the shim owns)."""
    if t.dtype not in CODE_OF:
        raise DTypeError(f"[stable ABI] dtype {t.dtype} has no stable scalar type")
    sizes = (c_int64 * max(t.dim(), 1))(*t.shape)
    out = c_void_p()
    code = SHIM.lib.ember_stable_empty(sizes, t.dim(), CODE_OF[t.dtype], ctypes.byref(out))
    if code:
        raise_error(code, "stable ABI")
    np.copyto(array_of(describe(out.value)), t._data, casting="no")
    return out.value


def _host_call(fn: Any, out: Any, what: str) -> int:
    try:
        out[0] = handle_of(fn())
        return 0
    except Exception as e:  # noqa: BLE001 (every error goes back to C as an error code)
        msg = str(e) if str(e).startswith("[") else f"[{what}] {e}"  # ember's own "[op] ..."
        SHIM.lib.ember_stable_set_error(error_code(e), msg.encode())
        return error_code(e)


def _host_amax(handle: int, dims: Any, ndims: int, keepdim: int, out: Any) -> int:
    import ember
    dim = tuple(dims[i] for i in range(ndims))
    return _host_call(lambda: ember.amax(tensor_of(handle), dim, bool(keepdim)), out, "amax")


def _host_pad(handle: int, pad: Any, npad: int, mode: bytes, value: float, out: Any) -> int:
    from ember.nn import functional as F
    widths = tuple(pad[i] for i in range(npad))
    return _host_call(lambda: F.pad(tensor_of(handle), widths, mode.decode(), value), out,
                      "pad")


__all__ = ["CODE_OF", "DTYPE_OF", "INCLUDE", "SHIM", "abi_version", "array_of", "raise_error"]

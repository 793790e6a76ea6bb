"""Loading and calling compiled C libraries (ARCHITECTURE.md §5, last stage).

This module imports only the standard library, NumPy and ember layers 1-3, never the rest of
the compiler: an AOT package loads and runs its library without a C compiler or tracing code.

The entry ABI (version ``ABI_VERSION``) that generated code implements::

    int ember_entry(void **bufs, const int64_t *ints, const double *floats);

``bufs`` are data pointers (inputs first, then outputs), ``ints`` sizes and integer scalars,
``floats`` float scalars.  The function returns 0, or a positive error code.  Negative codes are
reserved for the runtime.  Generated translation units start with ``C_PRELUDE``, which adds the
runtime's exports (thread count, fast argument packing, ABI version).

>>> lib = load(path)                                  # doctest: +SKIP
>>> add = lib.entry()                                 # doctest: +SKIP
>>> add([a, b, out], [a.size], [])                    # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ember.errors import EmberRuntimeError, EmberTypeError
from ember.ops import _parallel

ABI_VERSION = 1

# the runtime's reserved return codes: -_NOT_AN_ARRAY - i means "bufs[i] is not a plain ndarray"
_NOT_AN_ARRAY = 1_000_000

C_PRELUDE = (Path(__file__).with_name("csrc") / "ember_runtime.h").read_text()


def _array_layout() -> tuple[int, int, int] | None:
    """(id(np.ndarray), offset of ob_type, offset of the data pointer) in an ndarray object,
    measured on live arrays, or None when the layout cannot be confirmed."""
    base = np.arange(4, dtype=np.float64)
    view = base[1:]
    words = (ctypes.c_void_p * 8).from_address(id(base))  # ndarray objects exceed 64 bytes
    type_off = data_off = None
    for i, w in enumerate(words):
        if w == id(np.ndarray) and type_off is None:
            type_off = 8 * i
        elif w == base.ctypes.data and data_off is None:
            data_off = 8 * i
    if type_off is None or data_off is None:
        return None
    check = (ctypes.c_void_p * 8).from_address(id(view))
    if (check[type_off // 8] != id(np.ndarray)
            or check[data_off // 8] != view.ctypes.data):
        return None
    return id(np.ndarray), type_off, data_off


def _tuple_items_offset() -> int | None:
    """Offset of the item pointers inside a tuple object (CPython stores them inline)."""
    x, y, z = object(), object(), object()
    t = (x, y, z)
    words = (ctypes.c_void_p * 8).from_address(id(t))  # header + 3 items fit in 8 words
    for i in range(6):
        if words[i] == id(x) and words[i + 1] == id(y) and words[i + 2] == id(z):
            return 8 * i
    return None


class _Call(ctypes.Structure):
    _fields_ = [("fn", ctypes.c_void_p), ("ints", ctypes.c_void_p), ("floats", ctypes.c_void_p),
                ("n", ctypes.c_int64)]


_LAYOUT = _array_layout()
_TUPLE_ITEMS = _tuple_items_offset()


class Entry:
    """A callable entry function of a loaded library (the ABI above).

    ``entry(arrays, ints, floats)`` packs the arrays' data pointers and the scalars into argument
    buffers that are reused between calls of the same arity, then calls the C function.  Nothing
    is checked but the count of arguments: arrays must be C-contiguous ndarrays of the dtypes and
    sizes the generated code expects (the caller, generated with the code, guarantees that).
    """

    __slots__ = ("library", "name", "_fn", "_fn_addr", "_tramp", "_lock", "_nb", "_ni", "_nf",
                 "_bufs", "_ints", "_floats", "_pb", "_pi", "_pf", "_last_ints", "_last_floats",
                 "_call", "_pcall")

    def __init__(self, library: Library, name: str) -> None:
        try:
            fn = getattr(library.dll, name)
        except AttributeError:
            raise EmberRuntimeError(f"[runtime] {library.path} has no function {name!r}; "
                                    f"expected an entry point of the ember ABI") from None
        fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        fn.restype = ctypes.c_int
        self.library = library
        self.name = name
        self._fn = fn
        self._fn_addr = ctypes.cast(fn, ctypes.c_void_p).value
        self._tramp = library._call_arrays if _TUPLE_ITEMS is not None else None
        self._lock = threading.Lock()
        self._call = _Call()
        self._pcall = ctypes.addressof(self._call)
        self._resize(0, 0, 0)

    def _resize(self, nb: int, ni: int, nf: int) -> None:
        self._nb, self._ni, self._nf = nb, ni, nf
        self._bufs = (ctypes.c_void_p * nb)()
        self._ints = (ctypes.c_int64 * ni)()
        self._floats = (ctypes.c_double * nf)()
        self._pb = ctypes.addressof(self._bufs)
        self._pi = ctypes.addressof(self._ints)
        self._pf = ctypes.addressof(self._floats)
        self._last_ints = self._last_floats = None
        self._call.fn, self._call.ints, self._call.floats = self._fn_addr, self._pi, self._pf
        self._call.n = nb

    def _pack_scalars(self, ints: Sequence[int], floats: Sequence[float]) -> None:
        # sizes and scalars rarely change between calls: refill only when they do
        if ints != self._last_ints:
            self._ints[:] = ints
            self._last_ints = ints if type(ints) is tuple else list(ints)
        if floats != self._last_floats:
            self._floats[:] = floats
            self._last_floats = floats if type(floats) is tuple else list(floats)

    def __call__(self, arrays: Sequence[np.ndarray], ints: Sequence[int] = (),
                 floats: Sequence[float] = ()) -> None:
        lock = self._lock
        if not lock.acquire(False):  # another thread is inside this entry: pack privately
            return self._call_slow(arrays, ints, floats)
        try:
            if len(arrays) != self._nb or len(ints) != self._ni or len(floats) != self._nf:
                self._resize(len(arrays), len(ints), len(floats))
            if ints != self._last_ints or floats != self._last_floats:
                self._pack_scalars(ints, floats)
            if self._tramp is not None:
                # C reads the array objects straight out of the tuple (which keeps them alive)
                objs = arrays if type(arrays) is tuple else tuple(arrays)
                rc = self._tramp(self._pcall, id(objs) + _TUPLE_ITEMS)
                if rc == 0:
                    return None
                if rc > -_NOT_AN_ARRAY:
                    return self._fail(rc)
            self._bufs[:] = _addresses(arrays)
            rc = self._fn(self._pb, self._pi, self._pf)
        finally:
            lock.release()
        if rc:
            self._fail(rc)
        return None

    def _call_slow(self, arrays: Sequence[np.ndarray], ints: Sequence[int],
                   floats: Sequence[float]) -> None:
        bufs = (ctypes.c_void_p * len(arrays))(*_addresses(arrays))
        cints = (ctypes.c_int64 * len(ints))(*ints)
        cfloats = (ctypes.c_double * len(floats))(*floats)
        rc = self._fn(ctypes.addressof(bufs), ctypes.addressof(cints), ctypes.addressof(cfloats))
        if rc:
            self._fail(rc)

    def _fail(self, rc: int) -> None:
        message = self.library.error_message(rc)
        raise EmberRuntimeError(f"[runtime] {self.name} in {self.library.path} returned error "
                                f"code {rc}" + (f": {message}" if message else ""))

    def __repr__(self) -> str:
        return f"Entry({self.name!r} in {self.library.path!r})"


def _addresses(arrays: Sequence[np.ndarray]) -> list[int]:
    out = []
    for i, a in enumerate(arrays):
        if not isinstance(a, np.ndarray):
            raise EmberTypeError(f"[runtime] argument {i} is {type(a).__name__}; expected a "
                                 f"numpy.ndarray")
        out.append(a.__array_interface__["data"][0])
    return out


class Library:
    """A loaded shared library (``load(path)``); ``entry(name)`` gives its callable entries."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.dll = _dlopen(path)
        self._entries: dict[str, Entry] = {}
        self._call_arrays = None
        self.abi_version = None
        if self.has("ember_abi_version"):
            fn = self.dll.ember_abi_version
            fn.restype = ctypes.c_int
            self.abi_version = fn()
            if self.abi_version != ABI_VERSION:
                raise EmberRuntimeError(f"[runtime] {path} was built for ember C ABI "
                                        f"{self.abi_version}; this runtime speaks {ABI_VERSION}")
        if _LAYOUT is not None and self.has("ember_runtime_init") and self.has(
                "ember_call_arrays"):
            init = self.dll.ember_runtime_init
            init.argtypes = (ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
            init.restype = None
            init(*_LAYOUT)
            tramp = self.dll.ember_call_arrays
            tramp.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
            tramp.restype = ctypes.c_int
            self._call_arrays = tramp
        if self.has("ember_set_num_threads"):
            setter = self.dll.ember_set_num_threads
            setter.argtypes = (ctypes.c_int,)
            setter.restype = None
            _THREADS.add(setter)

    def has(self, symbol: str) -> bool:
        """Whether the library exports ``symbol``."""
        try:
            getattr(self.dll, symbol)
        except AttributeError:
            return False
        return True

    def entry(self, name: str = "ember_entry") -> Entry:
        """The entry function ``name`` (ABI above), cached per name."""
        e = self._entries.get(name)
        if e is None:
            e = self._entries[name] = Entry(self, name)
        return e

    def error_message(self, code: int) -> str:
        """The library's text for an error code (its optional ``ember_error_message``)."""
        if not self.has("ember_error_message"):
            return ""
        fn = self.dll.ember_error_message
        fn.argtypes = (ctypes.c_int,)
        fn.restype = ctypes.c_char_p
        text = fn(code)
        return text.decode(errors="replace") if text else ""

    def __repr__(self) -> str:
        return f"Library({self.path!r})"


class _ThreadCount:
    """Pushes ``ember.set_num_threads`` into every loaded library that exports
    ``ember_set_num_threads``.

    In a ``fork()``ed child the count is 1 for good, whatever ``set_num_threads`` says: GNU
    libgomp's thread pool does not survive ``fork`` (a multi-thread region in the child waits
    forever for the parent's workers), while a one-thread region never touches the pool
    (tests/compiler/test_cbackend_threads.py forks after a parallel region to check it).  Eager
    kernels and BLAS keep ``ember.get_num_threads()``: their pools are fork-safe."""

    def __init__(self) -> None:
        self._setters: list = []
        self._hooked = False
        self.forked = False

    def count(self) -> int:
        """The thread count generated code uses in this process."""
        return 1 if self.forked else _parallel.get_num_threads()

    def add(self, setter: ctypes._CFuncPtr) -> None:
        if not self._hooked:
            _parallel.on_num_threads_change(self.broadcast)
            self._hooked = True
        self._setters.append(setter)
        setter(self.count())

    def broadcast(self, n: int) -> None:
        for setter in self._setters:
            setter(1 if self.forked else n)

    def after_fork_in_child(self) -> None:
        self.forked = True
        for setter in self._setters:
            setter(1)


_THREADS = _ThreadCount()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_THREADS.after_fork_in_child)


class _Libraries:
    """Loaded libraries by path (a library is loaded once per process; ``clear()`` only forgets
    the Python objects, the code stays mapped)."""

    def __init__(self) -> None:
        self._libs: dict[str, Library] = {}
        self._lock = threading.Lock()

    def get(self, path: str) -> Library:
        lib = self._libs.get(path)
        if lib is None:
            with self._lock:
                lib = self._libs.get(path)
                if lib is None:
                    lib = self._libs[path] = Library(path)
        return lib

    def clear(self) -> None:
        self._libs.clear()


LIBRARIES = _Libraries()


def load(path: str | os.PathLike) -> Library:
    """Load the shared library at ``path`` (once per process) and return it."""
    return LIBRARIES.get(os.fspath(path))


def _dlopen(path: str) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        if "undefined symbol" in str(e) and load_blas() is not None:
            try:  # generated code calling BLAS resolves it from the global namespace
                return ctypes.CDLL(path)
            except OSError as e2:
                e = e2
        raise EmberRuntimeError(f"[runtime] cannot load {path}: {e}") from e


# ---------------------------------------------------------------------------------------------
# BLAS: NumPy's bundled OpenBLAS (or scipy-openblas32/64), made global so generated code can call
# it by name.

_SGEMM = ("scipy_cblas_sgemm64_", "scipy_cblas_sgemm", "cblas_sgemm64_", "cblas_sgemm")
_DGEMM = ("scipy_cblas_dgemm64_", "scipy_cblas_dgemm", "cblas_dgemm64_", "cblas_dgemm")
_THREADS_FN = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
               "openblas_set_num_threads64_", "openblas_set_num_threads")
_CONFIG_FN = ("scipy_openblas_get_config64_", "scipy_openblas_get_config",
              "openblas_get_config64_", "openblas_get_config")


@dataclass(frozen=True)
class BlasLibrary:
    """An OpenBLAS loaded with RTLD_GLOBAL.  ``sgemm``/``dgemm`` are the exported CBLAS symbol
    names; ``int64`` says whether their integer arguments are 64-bit (ILP64)."""

    path: str
    sgemm: str | None
    dgemm: str | None
    int64: bool
    set_num_threads: str | None
    config: str
    dll: ctypes.CDLL = field(compare=False, repr=False)


def blas_candidates() -> list[str]:
    """Paths of OpenBLAS libraries to try, NumPy's own first."""
    paths: list[str] = []
    site = os.path.dirname(os.path.dirname(np.__file__))
    # NumPy's bundled copy before any other OpenBLAS mapped into this process (torch or scipy
    # may have loaded one with other symbol names): a fresh process that only imports NumPy
    # must resolve the same symbols as the process that generated the code
    for pattern in (os.path.join(site, "numpy.libs", "*openblas*.so*"),
                    os.path.join(os.path.dirname(np.__file__), ".libs", "*openblas*.so*"),
                    os.path.join(os.path.dirname(np.__file__), ".dylibs", "*openblas*.dylib")):
        paths.extend(sorted(glob.glob(pattern)))
    try:  # copies already loaded into this process
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1]
                if "openblas" in os.path.basename(p) and p.startswith("/"):
                    paths.append(p)
    except OSError:
        pass
    for pkg in ("scipy_openblas64", "scipy_openblas32"):
        if importlib.util.find_spec(pkg) is not None:
            mod = __import__(pkg)
            paths.extend(sorted(glob.glob(os.path.join(mod.get_lib_dir(), "*openblas*.so*"))))
    if importlib.util.find_spec("threadpoolctl") is not None:
        import threadpoolctl
        paths.extend(i["filepath"] for i in threadpoolctl.threadpool_info()
                     if i.get("internal_api") == "openblas")
    seen: dict[str, None] = {}
    for p in paths:
        seen.setdefault(os.path.realpath(p), None)
    return list(seen)


def _first(dll: ctypes.CDLL, names: Sequence[str]) -> str | None:
    for n in names:
        if hasattr(dll, n):
            return n
    return None


def _open_blas(path: str) -> BlasLibrary | None:
    try:
        dll = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return None
    sgemm, dgemm = _first(dll, _SGEMM), _first(dll, _DGEMM)
    if sgemm is None and dgemm is None:
        return None
    config = ""
    cfg = _first(dll, _CONFIG_FN)
    if cfg is not None:
        fn = getattr(dll, cfg)
        fn.restype = ctypes.c_char_p
        config = (fn() or b"").decode(errors="replace")
    int64 = (sgemm or dgemm or "").endswith("64_") or "USE64BITINT" in config
    return BlasLibrary(path, sgemm, dgemm, int64, _first(dll, _THREADS_FN), config, dll)


_BLAS: dict[str, BlasLibrary | None] = {}


def load_blas() -> BlasLibrary | None:
    """Find an OpenBLAS with CBLAS gemm (NumPy's bundled one first), load it with RTLD_GLOBAL so
    generated code resolves its symbols, and describe it; None when there is none.  Cached."""
    if "blas" not in _BLAS:
        found = None
        for path in blas_candidates():
            found = _open_blas(path)
            if found is not None:
                break
        _BLAS["blas"] = found
    return _BLAS["blas"]

"""Small fixed C kernels for eager ops: built once per machine with the system C compiler
(``config.cc``) on first use, cached in ``config.cache_dir/eager`` (the file name hashes the
source, the flags, the compiler and the CPU) and called through ctypes, which releases the GIL,
so callers split work over ``ember/ops/_parallel``'s threads (no OpenMP: eager stays fork-safe).

Eager must run without a C compiler: when a build fails (no compiler, no ctypes, a read-only
cache) ``Native.lib()`` returns None once and for all and the caller keeps its NumPy path, which
gives the same bits.  ``config.eager_c`` (EMBER_EAGER_C=0) turns every eager C kernel off; each
kernel may have its own switch too (EMBER_EAGER_C_FMA=0); tests use ``set_enabled``.  The
kernels are compiled with ``-ffp-contract=off`` so that ``a * b + c`` rounds twice, as NumPy's
separate multiply and add do.

>>> k = Native("doc", "int ember_doc_add(int a, int b) { return a + b; }",
...            {"ember_doc_add": (ctypes.c_int, [ctypes.c_int, ctypes.c_int])})
>>> lib = k.lib()
>>> lib is None or lib.ember_doc_add(2, 3) == 5
True
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess
import tempfile
import threading
from typing import Any

from ember.config import config

FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared")
_HERE = os.path.dirname(os.path.abspath(__file__))


def csrc(name: str) -> str:
    """The text of ``ember/ops/csrc/<name>`` (C sources of eager kernels, package data)."""
    with open(os.path.join(_HERE, "csrc", name)) as f:
        return f.read()


def compiler_csrc(name: str) -> str:
    """The text of the C backend's ``ember/compiler/c/codegen/csrc/<name>`` (its prelude and
    float16 block helpers), read as a file so that eager kernels run the same C math without
    importing the compiler (a higher layer)."""
    with open(os.path.join(_HERE, os.pardir, "compiler", "c", "codegen", "csrc", name)) as f:
        return f.read()


def wide_vectors() -> tuple:
    """``-mprefer-vector-width=512`` where the CPU has AVX-512F (gcc 12 prefers 256-bit
    vectors there; the C backend's ``toolchain.machine_flags`` makes the same choice), for
    eager kernels that rely on gcc's vectorizer."""
    feats = _cpu_flags().split()
    if "avx512f" in feats and platform.machine() in ("x86_64", "AMD64"):
        return ("-mprefer-vector-width=512",)
    return ()


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln for ln in f if ln.startswith(("flags", "Features"))), "")
    except OSError:
        return ""


def _build(path: str, source: str, flags: tuple = ()) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
    os.close(fd)
    try:
        src = tmp[:-3] + ".c"
        with open(src, "w") as f:
            f.write(source)
        try:
            subprocess.run([*config.cc.split(), *FLAGS, *flags, src, "-o", tmp, "-lm"],
                           check=True, capture_output=True, timeout=120)
        finally:
            os.unlink(src)
        os.replace(tmp, path)     # atomic: concurrent processes never load a partial file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class Native:
    """One eager C library: ``name`` (the cache file's prefix), its C ``source`` and
    ``symbols`` (``{function: (restype, argtypes)}``); ``enabled``: its own switch (ANDed with
    ``config.eager_c``)."""

    def __init__(self, name: str, source: str, symbols: dict, enabled: bool = True,
                 flags: tuple = ()) -> None:
        self.name, self.source, self.symbols, self.flags = name, source, symbols, tuple(flags)
        # read and patched by tests: enabled / tried / lib
        self.state: dict[str, Any] = {"enabled": bool(enabled), "lib": None, "tried": False}
        self._lock = threading.Lock()

    def set_enabled(self, flag: bool) -> bool:
        """Use the C kernel (True) or the NumPy path (False); returns the previous setting."""
        old = self.state["enabled"]
        self.state["enabled"] = bool(flag)
        return old

    def path(self) -> str:
        key = "\0".join((self.source, " ".join(FLAGS + self.flags), config.cc,
                         platform.machine(), _cpu_flags()))
        digest = hashlib.sha256(key.encode()).hexdigest()[:24]
        return os.path.join(config.cache_dir, "eager", f"{self.name}-{digest}.so")

    def _load(self) -> Any:
        with self._lock:
            if not self.state["tried"]:
                self.state["tried"] = True
                try:
                    path = self.path()
                    if not os.path.exists(path):
                        _build(path, self.source, self.flags)
                    lib = ctypes.CDLL(path)
                    for fname, (restype, argtypes) in self.symbols.items():
                        fn = getattr(lib, fname)
                        fn.restype = restype
                        fn.argtypes = argtypes
                    self.state["lib"] = lib
                except (OSError, subprocess.SubprocessError, AttributeError, ValueError):
                    self.state["lib"] = None
        return self.state["lib"]

    def lib(self) -> Any:
        """The loaded ctypes library, or None (turned off, or the build failed)."""
        if not (self.state["enabled"] and config.eager_c):
            return None
        return self.state["lib"] if self.state["tried"] else self._load()


def ptr(arr: Any) -> int:
    """The address of a C-contiguous array's data (``ctypes.c_char.from_buffer`` takes a third
    of ``arr.ctypes.data``'s time; it needs a writable buffer)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(arr))
    except (TypeError, ValueError, BufferError):
        return arr.ctypes.data


__all__ = ["FLAGS", "Native", "compiler_csrc", "csrc", "ptr", "wide_vectors"]

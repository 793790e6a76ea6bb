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
import re
import subprocess
import tempfile
import threading
from typing import Any

from ember.config import config
from ember.errors import EmberValueError

FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared")
"""The eager kernels' flags for the default target (``build_flags()`` puts ``march_flags()``
in place of ``-march=native``)."""
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


_MARCH_VALUE = re.compile(r"^[A-Za-z0-9_.+-]{1,40}$")
_M_FLAG = re.compile(r"^-m(no-)?[a-z0-9][a-z0-9_.-]{0,40}$")


def march_flags(spec: str | None = None) -> tuple[str, ...]:
    """The target flags of every C build, eager kernels and compiled code alike:
    ``-march=native``, or ``config.c_march`` (EMBER_C_MARCH; or ``spec``): a ``-march`` value
    and optional ``-m`` feature flags, so that this machine can build (and, where it has the
    instructions, run) the code another CPU would get.  The flags are part of every cache key.

    >>> march_flags("x86-64-v3")
    ('-march=x86-64-v3',)
    >>> march_flags("sapphirerapids -mno-amx-tile -mno-amx-bf16")
    ('-march=sapphirerapids', '-mno-amx-tile', '-mno-amx-bf16')
    """
    words = (config.c_march if spec is None else spec).split()
    if not words:
        return ("-march=native",)
    march, extra = words[0], words[1:]
    if march.startswith("-march="):
        march = march[len("-march="):]
    bad = [w for w in extra if not _M_FLAG.match(w)]
    if not _MARCH_VALUE.match(march) or march.startswith("-") or bad:
        raise EmberValueError(
            f"[EMBER_C_MARCH] {' '.join(words)!r} is not a -march value followed by -m feature "
            f"flags (e.g. 'x86-64-v3', 'x86-64-v4 -mavx512bf16', 'native -mno-amx-tile "
            f"-mno-amx-bf16')")
    return (f"-march={march}", *extra)


# gcc's predefined macros -> /proc/cpuinfo flags: the features a build may use (and what an
# AOT package built with -march=X needs, ember/aot/_package.py)
MACRO_FLAGS = {
    "__SSE3__": "pni", "__SSSE3__": "ssse3", "__SSE4_1__": "sse4_1", "__SSE4_2__": "sse4_2",
    "__POPCNT__": "popcnt", "__AVX__": "avx", "__AVX2__": "avx2", "__FMA__": "fma",
    "__F16C__": "f16c", "__BMI__": "bmi1", "__BMI2__": "bmi2", "__LZCNT__": "abm",
    "__MOVBE__": "movbe", "__AVX512F__": "avx512f", "__AVX512BW__": "avx512bw",
    "__AVX512CD__": "avx512cd", "__AVX512DQ__": "avx512dq", "__AVX512VL__": "avx512vl",
    "__AVX512VNNI__": "avx512_vnni", "__AVX512BF16__": "avx512_bf16",
    "__AVX512FP16__": "avx512_fp16", "__AVXVNNI__": "avx_vnni", "__AVX512VBMI__": "avx512vbmi",
    "__AVX512IFMA__": "avx512ifma", "__AVX512VPOPCNTDQ__": "avx512_vpopcntdq",
    "__AVX512BITALG__": "avx512_bitalg", "__AVX512VBMI2__": "avx512_vbmi2",
    "__GFNI__": "gfni", "__VAES__": "vaes", "__VPCLMULQDQ__": "vpclmulqdq",
}
_TARGETS: dict = {}   # (cc, flags) -> features


def target_features(flags: tuple[str, ...] | None = None) -> frozenset:
    """The CPU features (``/proc/cpuinfo`` names) code built with ``march_flags()`` (or
    ``flags``) may use: the host's for ``-march=native`` alone, else what the compiler's
    predefined macros say (asked once per process and target)."""
    flags = march_flags() if flags is None else tuple(flags)
    if flags == ("-march=native",):
        return frozenset(_cpu_flags().partition(":")[2].split())
    key = (config.cc, flags)
    got = _TARGETS.get(key)
    if got is None:
        cmd = [*config.cc.split(), *flags, "-dM", "-E", "-x", "c", os.devnull]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            out = None
        if out is None or out.returncode != 0:
            raise EmberValueError(f"[EMBER_C_MARCH] the compiler rejects {' '.join(flags)!r}: "
                                  f"{(out.stderr.strip()[-300:] if out else cmd[0])}")
        macros = {ln.split()[1] for ln in out.stdout.splitlines() if ln.startswith("#define")}
        got = _TARGETS[key] = frozenset(f for m, f in MACRO_FLAGS.items() if m in macros)
    return got


def build_flags() -> tuple[str, ...]:
    """``FLAGS`` with the target of ``march_flags()`` (EMBER_C_MARCH)."""
    march = march_flags()
    return tuple(x for f in FLAGS for x in (march if f == "-march=native" else (f,)))


def wide_vectors() -> tuple:
    """``-mprefer-vector-width=512`` where the build's target has AVX-512F (gcc 12 prefers
    256-bit vectors there; the C backend's ``toolchain.machine_flags`` makes the same
    choice), for eager kernels that rely on gcc's vectorizer."""
    try:
        feats = target_features()
    except EmberValueError:   # a bad EMBER_C_MARCH: raised by the build itself, not at import
        return ()
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
            subprocess.run([*config.cc.split(), *build_flags(), *flags, src, "-o", tmp, "-lm"],
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
        key = "\0".join((self.source, " ".join(build_flags() + self.flags), config.cc,
                         platform.machine(), _cpu_flags()))
        digest = hashlib.sha256(key.encode()).hexdigest()[:24]
        return os.path.join(config.cache_dir, "eager", f"{self.name}-{digest}.so")

    def _load(self) -> Any:
        with self._lock:
            if not self.state["tried"]:
                path = self.path()   # a bad EMBER_C_MARCH raises here, never silently
                self.state["tried"] = True
                try:
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


__all__ = ["FLAGS", "Native", "build_flags", "compiler_csrc", "csrc", "march_flags", "ptr",
           "target_features", "wide_vectors"]

"""Building generated C into shared libraries, with a content-addressed on-disk cache.

``compile_library(source)`` returns the path of a shared library built from ``source`` with
``gcc -O3 -march=native -fPIC -shared -ffp-contract=off`` (never ``-ffast-math``: with gcc 12 it
sets flush-to-zero for the whole process and removes ``isnan``; ``-ffp-contract=off`` keeps
``a*b+c`` from becoming an FMA, so results match NumPy's).  ``compile_many`` builds several
small translation units in parallel.

The cache (``config.cache_dir``, EMBER_CACHE_DIR) is keyed by the sha256 of the source, the
flags, the compiler's version, the CPU features ``-march=native`` sees and ember's version.  An
entry is ``<name>-<key>.c`` (the source, kept for debugging), ``.so`` and ``.json`` (a manifest
with the library's sha256).  Libraries are compiled into a temporary file in the same directory
and renamed into place (``os.replace`` is atomic), so a concurrent process never sees a partial
library; the manifest's checksum rejects a damaged one, which is then rebuilt.  Within a process
a hit costs one dictionary lookup.

>>> from ember.compiler.toolchain import compile_library    # doctest: +SKIP
>>> path = compile_library("int ember_entry(void **b, const long *i, const double *f) "
...                        "{ return 0; }", name="noop")    # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

from ember.config import config
from ember.errors import CompileError, EmberValueError

FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-ffp-contract=off")
"""Fixed compiler flags of every library."""

OPENMP_FLAG = "-fopenmp"
"""Added with ``openmp=True``.  GNU libgomp hangs in a ``fork()``ed child that enters a
multi-thread region once the parent has run one: generated code guards its regions with
``if(ember_num_threads > 1 ...)`` and the runtime sets that count to 1 in a forked child
(``runtime._ThreadCount``); hand-written OpenMP code must do the same."""

LIBS = ("-lm",)

# flags that change floating-point semantics (and, for -ffast-math, the whole process's FPU mode)
_FORBIDDEN = ("-ffast-math", "-Ofast", "-funsafe-math-optimizations", "-ffinite-math-only",
              "-fassociative-math", "-freciprocal-math", "-ffp-contract=fast", "-ffp-contract=on")

# /proc/cpuinfo flags that decide which instructions -march=native may emit
_ISA_FLAG = re.compile(
    r"^(mmx|sse\w*|ssse3|avx\w*|fma\w*|f16c|bmi\d|popcnt|abm|lzcnt|movbe|aes|vaes|pclmulqdq|"
    r"vpclmulqdq|sha_ni|adx|rdrand|rdseed|xsave\w*|amx\w*|gfni|clflushopt|clwb|cx16|lahf_lm|"
    r"fsgsbase|xop|tbm|3dnowprefetch|prefetchw|serialize|movdiri|movdir64b|waitpkg|cldemote|"
    r"hle|rtm|rdpid|vnni)$")

SourceSpec = Union[str, tuple[str, str]]


def _debug(level: int, message: str) -> None:
    if config.debug >= level:
        print(f"[ember.toolchain] {message}", file=sys.stderr)


@dataclass(frozen=True)
class Compiler:
    """The C compiler command (``config.cc``, EMBER_CC), its executable and version line."""

    command: tuple[str, ...]
    executable: str
    version: str


def cpu_features() -> str:
    """The machine and the ISA extensions ``-march=native`` can use (part of the cache key)."""
    feats: list[str] = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    words = value.split()
                    feats = sorted(w for w in words if _ISA_FLAG.match(w)) \
                        if key.strip() == "flags" else sorted(words)
                    break
    except OSError:
        feats = [platform.processor()]
    return f"{platform.machine()}:" + ",".join(feats)


def ember_version() -> str:
    """ember's version, read without importing the package's upper layers."""
    mod = sys.modules.get("ember")
    version = getattr(mod, "__version__", None)
    if version:
        return str(version)
    init = Path(__file__).resolve().parents[1] / "__init__.py"
    m = re.search(r'^__version__\s*=\s*["\']([^"\']+)', init.read_text(), re.M)
    return m.group(1) if m else "unknown"


class BuildCache:
    """The in-process memo in front of the on-disk cache (``clear()`` forgets the memo;
    ``purge()`` also deletes the cached libraries on disk)."""

    def __init__(self) -> None:
        self._paths: dict[tuple, Path] = {}
        self._compilers: dict[tuple, Compiler] = {}
        self._cpu: str | None = None
        self._lock = threading.Lock()
        self._building: dict[tuple, threading.Lock] = {}

    def clear(self) -> None:
        with self._lock:
            self._paths.clear()
            self._compilers.clear()
            self._cpu = None

    def purge(self) -> None:
        self.clear()
        shutil.rmtree(Path(config.cache_dir) / "c", ignore_errors=True)

    def cpu(self) -> str:
        if self._cpu is None:
            self._cpu = cpu_features()
        return self._cpu

    def compiler(self) -> Compiler:
        command = tuple(shlex.split(config.cc)) or ("gcc",)
        cc = self._compilers.get(command)
        if cc is None:
            cc = self._compilers[command] = _find_compiler(command)
        return cc

    def key_lock(self, memo_key: tuple) -> threading.Lock:
        with self._lock:
            lock = self._building.get(memo_key)
            if lock is None:
                lock = self._building[memo_key] = threading.Lock()
            return lock

    def release(self, memo_key: tuple) -> None:
        with self._lock:
            self._building.pop(memo_key, None)


CACHE = BuildCache()


def _find_compiler(command: tuple[str, ...]) -> Compiler:
    exe = shutil.which(command[0])
    if exe is None:
        raise CompileError(
            f"[compile] C compiler {command[0]!r} not found (EMBER_CC={config.cc!r}); ember's C "
            f"backend needs gcc: install it (apt-get install gcc) or set EMBER_CC to a C "
            f"compiler")
    st = os.stat(exe)
    # the version is cached on disk under the executable's identity, so a warm process does
    # not run the compiler at all
    ident = hashlib.sha256(repr((command, os.path.realpath(exe), st.st_mtime_ns,
                                 st.st_size)).encode()).hexdigest()[:32]
    memo = Path(config.cache_dir) / "compilers" / f"{ident}.txt"
    try:
        version = memo.read_text().strip()
    except OSError:
        version = ""
    if not version:
        t0 = time.perf_counter()
        try:
            out = subprocess.run([*command, "--version"], capture_output=True, text=True,
                                 timeout=60)
        except (OSError, subprocess.SubprocessError) as e:
            raise CompileError(f"[compile] C compiler {exe!r} does not run: {e}") from e
        lines = (out.stdout or out.stderr).splitlines()
        if out.returncode != 0 or not lines:
            raise CompileError(f"[compile] `{shlex.join(command)} --version` failed (exit "
                               f"{out.returncode}); is EMBER_CC={config.cc!r} a C compiler?",
                               log=_tail(out.stdout + out.stderr))
        version = lines[0].strip()
        _debug(5, f"{shlex.join(command)} --version: {version} "
                  f"({time.perf_counter() - t0:.3f}s)")
        _atomic_write(memo, version.encode())
    return Compiler(command, exe, version)


def _flags(extra_flags: Sequence[str], openmp: bool) -> tuple[str, ...]:
    extra = tuple(extra_flags)
    bad = [f for f in extra if f in _FORBIDDEN or f.startswith("-Ofast")]
    if bad:
        raise EmberValueError(f"[compile] flags {bad} change floating-point semantics; ember "
                              f"never compiles with them")
    return FLAGS + ((OPENMP_FLAG,) if openmp else ()) + extra


def cache_key(source: str, flags: Sequence[str], compiler_version: str, cpu: str,
              version: str) -> str:
    """sha256 over everything that decides the bytes of a built library."""
    h = hashlib.sha256()
    for part in ("ember-c-cache-v1", version, compiler_version, cpu, " ".join(flags), source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def compile_library(source: str, *, name: str = "graph", extra_flags: Sequence[str] = (),
                    openmp: bool = False, version: str | None = None) -> Path:
    """Build ``source`` into a shared library (or find it in the cache) and return its path.

    ``openmp=True`` adds ``-fopenmp`` (see ``OPENMP_FLAG`` about ``fork``).  ``version``
    overrides ember's version in the cache key.  Raises ``CompileError`` (with ``c_path`` and the
    compiler's last lines in ``log``) when the compiler fails or is missing.
    """
    flags = _flags(extra_flags, openmp)
    memo_key = (source, name, flags, config.cc, config.cache_dir, version)
    path = CACHE._paths.get(memo_key)
    if path is not None:
        return path
    with CACHE.key_lock(memo_key):  # threads asking for the same library build it once
        path = CACHE._paths.get(memo_key)
        if path is None:
            try:
                path = CACHE._paths[memo_key] = _build(source, name, flags, version)
            finally:
                CACHE.release(memo_key)
    return path


def compile_many(sources: Sequence[SourceSpec], *, extra_flags: Sequence[str] = (),
                 openmp: bool = False, max_workers: int | None = None) -> list[Path]:
    """``compile_library`` for several sources (strings or ``(source, name)`` pairs) at once,
    one compiler process per core; paths come back in order.  The first failure is raised after
    every build has finished."""
    specs = [(s, "graph") if isinstance(s, str) else (s[0], s[1]) for s in sources]
    if len(specs) <= 1:
        return [compile_library(s, name=n, extra_flags=extra_flags, openmp=openmp)
                for s, n in specs]
    workers = max(1, min(len(specs), max_workers or os.cpu_count() or 1))
    with ThreadPoolExecutor(workers, thread_name_prefix="ember-cc") as pool:
        futures = [pool.submit(compile_library, s, name=n, extra_flags=extra_flags,
                               openmp=openmp) for s, n in specs]
        errors = [f.exception() for f in futures]
    for e in errors:
        if e is not None:
            raise e
    return [f.result() for f in futures]


def _build(source: str, name: str, flags: tuple[str, ...], version: str | None) -> Path:
    cc = CACHE.compiler()
    key = cache_key(source, flags, cc.version, CACHE.cpu(), version or ember_version())
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name)[:64] or "lib"
    folder = Path(config.cache_dir) / "c" / key[:2]
    stem = folder / f"{safe}-{key[:40]}"
    so, c_path, manifest = (stem.with_suffix(s) for s in (".so", ".c", ".json"))
    if _valid(so, manifest):
        _debug(5, f"cache hit {so}")
        return so
    folder.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(folder)
    _atomic_write(c_path, source.encode())
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{stem.name}.", suffix=".so.tmp")
    os.close(fd)
    cmd = [*cc.command, *flags, "-o", tmp, str(c_path), *LIBS]
    _debug(5, "compile: " + shlex.join(cmd))
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        os.unlink(tmp)
        raise CompileError(f"[compile] cannot run {cc.executable!r}: {e}", str(c_path)) from e
    seconds = time.perf_counter() - t0
    if out.returncode != 0:
        os.unlink(tmp)
        log = _tail(out.stderr + out.stdout)
        _atomic_write(stem.with_suffix(".log"), (out.stderr + out.stdout).encode())
        raise CompileError(f"[compile] {cc.executable} failed (exit {out.returncode}) on "
                           f"{c_path}; last lines of its output:\n{log}\ncommand: "
                           f"{shlex.join(cmd)}", str(c_path), log)
    digest = _sha256_file(tmp)
    os.replace(tmp, so)
    _atomic_write(manifest, json.dumps({
        "sha256": digest, "key": key, "name": name, "compiler": cc.version,
        "cc": list(cc.command), "flags": list(flags), "seconds": round(seconds, 4),
    }, indent=1).encode())
    _debug(1, f"compiled {name} in {seconds:.3f}s")
    _debug(5, f"built {so} ({seconds:.3f}s)")
    return so


STALE_SECONDS = 3600.0


def _remove_stale_temporaries(folder: Path) -> None:
    """Delete temporary files that processes killed mid-build left behind (an hour old: far
    older than any build still running)."""
    now = time.time()
    for tmp in folder.glob(".*.tmp"):
        try:
            if now - tmp.stat().st_mtime > STALE_SECONDS:
                tmp.unlink()
        except OSError:
            pass


def _valid(so: Path, manifest: Path) -> bool:
    """A cached library is used only if its bytes match the manifest's checksum."""
    try:
        expected = json.loads(manifest.read_bytes())["sha256"]
        ok = _sha256_file(so) == expected
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not ok:
        _debug(1, f"cache entry {so} does not match its checksum; rebuilding")
    return ok


def _sha256_file(path: str | Path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def describe() -> dict[str, str]:
    """Cache directory, compiler and CPU features, for ``ember info``."""
    try:
        cc = CACHE.compiler()
        compiler = f"{cc.version} ({cc.executable})"
    except CompileError as e:
        compiler = str(e)
    return {"cache": str(Path(config.cache_dir)), "compiler": compiler,
            "flags": " ".join(FLAGS), "cpu": CACHE.cpu()}

"""Building generated C into shared libraries, with a content-addressed on-disk cache.

``compile_library(source)`` returns the path of a shared library built from ``source`` with
``gcc -O3 -march=native -fPIC -shared -ffp-contract=off`` plus ``machine_flags()``
(``-mprefer-vector-width=512`` with AVX-512); EMBER_C_MARCH (``config.c_march``) puts
another target in place of ``-march=native`` (``base_flags()``: e.g. ``x86-64-v3`` builds
what an AVX2-only CPU runs), for compiled code and eager C kernels alike.  Never
``-ffast-math`` (with gcc 12 it sets flush-to-zero for the whole process and removes
``isnan``); ``-ffp-contract=off`` keeps ``a*b+c`` from becoming an FMA, so results match
NumPy's.  ``compile_many`` builds several
small translation units in parallel.

The cache (``config.cache_dir``, EMBER_CACHE_DIR) is keyed by the sha256 of the source, the
flags, the compiler's version, the CPU features ``-march=native`` sees and ember's version.  An
entry is ``<name>-<key>.c`` (the source, kept for debugging), ``.so`` and ``.json`` (a manifest
with the library's sha256).  Libraries are compiled into a temporary file in the same directory
and renamed into place (``os.replace`` is atomic), so a concurrent process never sees a partial
library; the manifest's checksum rejects a damaged one, which is then rebuilt.  Within a process
a hit costs one dictionary lookup.  Faults (docs/reliability.md): an interrupted build (Ctrl-C)
removes its temporary file and leaves no entry; a write that fails (a full disk) raises
``CompileError`` and leaves no entry; a cache directory that cannot be written is replaced, for
this process, by a temporary directory (with a ``RuntimeWarning``).

>>> from ember.compiler.c.build.toolchain import compile_library    # doctest: +SKIP
>>> path = compile_library("int ember_entry(void **b, const long *i, const double *f) "
...                        "{ return 0; }", name="noop")    # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import errno
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
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

from ember.config import config
from ember.errors import CompileError, EmberValueError
from ember.ops import _native

FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-ffp-contract=off")
"""Fixed compiler flags of every library (``-march=native`` unless EMBER_C_MARCH names
another target: ``base_flags()``)."""

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


_MARCH_NEEDS = {"x86-64": (), "x86-64-v2": ("sse4_2", "popcnt"),
                "x86-64-v3": ("avx2", "fma", "f16c", "bmi2"),
                "x86-64-v4": ("avx512f", "avx512bw", "avx512vl", "avx512dq")}


def host_can_run(march: str) -> bool:
    """Whether this CPU runs code built with ``-march=<march>`` (an x86-64 level): tests build
    each ISA's code path explicitly and run those the host can.

    >>> host_can_run("x86-64")    # doctest: +SKIP
    True
    """
    feats = cpu_features()
    machine, _, flags = feats.partition(":")
    if machine not in ("x86_64", "AMD64"):
        return False
    have = set(flags.split(","))
    return all(f in have for f in _MARCH_NEEDS[march])


def ember_version() -> str:
    """ember's version, read without importing the package's upper layers."""
    mod = sys.modules.get("ember")
    version = getattr(mod, "__version__", None)
    if version:
        return str(version)
    init = Path(__file__).resolve().parents[3] / "__init__.py"
    m = re.search(r'^__version__\s*=\s*["\']([^"\']+)', init.read_text(), re.M)
    return m.group(1) if m else "unknown"


class BuildCache:
    """The in-process memo in front of the on-disk cache (``clear()`` forgets the memo;
    ``purge()`` also deletes the cached libraries on disk)."""

    def __init__(self) -> None:
        self._paths: dict[tuple, Path] = {}
        self._units: dict[tuple, Unit] = {}
        self._bundles: dict[Path, str | bool] = {}
        self._compilers: dict[tuple, Compiler] = {}
        self._cpu: str | None = None
        self._lock = threading.Lock()
        self._building: dict[tuple, threading.Lock] = {}

    def clear(self) -> None:
        with self._lock:
            self._paths.clear()
            self._units.clear()
            self._bundles.clear()
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

_ROOTS: dict[str, Path] = {}  # config.cache_dir -> the directory actually used
_ROOTS_LOCK = threading.Lock()


def cache_root() -> Path:
    """``config.cache_dir``, or (with a warning, once per directory) a temporary directory for
    this process when that one cannot be written (read-only, not a directory, no permission)."""
    d = config.cache_dir
    root = _ROOTS.get(d)
    if root is None:
        with _ROOTS_LOCK:
            root = _ROOTS.get(d)
            if root is None:
                root = _ROOTS[d] = _usable_root(Path(d))
    return root


def _probe(d: Path) -> None:
    """Raise ``OSError`` unless files can be created in ``d`` (made if missing)."""
    d.mkdir(parents=True, exist_ok=True)
    fd, probe = tempfile.mkstemp(dir=d, prefix=".probe.", suffix=".tmp")
    os.close(fd)
    os.unlink(probe)


def _usable_root(d: Path) -> Path:
    try:
        _probe(d)
        return d
    except OSError as e:
        tmp = Path(tempfile.mkdtemp(prefix="ember-cache-"))
        atexit.register(shutil.rmtree, tmp, True)
        warnings.warn(f"[compile] the cache directory {str(d)!r} cannot be written "
                      f"({e.strerror or e}); this process caches compiled code in {str(tmp)!r} "
                      f"instead (set EMBER_CACHE_DIR to a writable directory to keep it)",
                      RuntimeWarning, stacklevel=3)
        return tmp


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
    memo = cache_root() / "compilers" / f"{ident}.txt"
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
        try:
            _atomic_write(memo, version.encode())
        except OSError:
            pass  # a memo that cannot be written only costs the next process a `--version`
    return Compiler(command, exe, version)


def base_flags() -> tuple[str, ...]:
    """``FLAGS`` with the build's target: ``-march=native``, or what EMBER_C_MARCH
    (``config.c_march``) names (``ember.ops._native.march_flags``), e.g. ``-march=x86-64-v3``.
    The flags are part of the cache key, so each target has its own libraries.

    >>> base_flags()[:2]    # doctest: +SKIP
    ('-O3', '-march=native')
    """
    march = _native.march_flags()
    return tuple(x for f in FLAGS for x in (march if f == "-march=native" else (f,)))


def target_features() -> frozenset:
    """The CPU features (``/proc/cpuinfo`` names) the build's target may use: the host's, or
    those of EMBER_C_MARCH's target as the compiler reports them."""
    if _native.march_flags() == ("-march=native",):
        return frozenset(CACHE.cpu().partition(":")[2].split(","))
    return _native.target_features()


def machine_flags() -> tuple[str, ...]:
    """Flags chosen for the target, added to ``FLAGS`` in every build (so part of the cache
    key): ``-mprefer-vector-width=512`` on x86 with AVX-512F (gcc 12 otherwise prefers 256-bit
    vectors there; 16-lane loops run the prelude's math ~1.3x faster).  The vector width
    changes which instructions run, never a result: each lane rounds as the scalar code."""
    if "avx512f" in target_features() and platform.machine() in ("x86_64", "AMD64"):
        return ("-mprefer-vector-width=512",)
    return ()


def _flags(extra_flags: Sequence[str], openmp: bool) -> tuple[str, ...]:
    extra = tuple(extra_flags)
    bad = [f for f in extra if f in _FORBIDDEN or f.startswith("-Ofast")]
    if bad:
        raise EmberValueError(f"[compile] flags {bad} change floating-point semantics; ember "
                              f"never compiles with them")
    return base_flags() + machine_flags() + ((OPENMP_FLAG,) if openmp else ()) + extra


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


@dataclass(frozen=True)
class Unit:
    """A built translation unit: the library that holds it and the prefix of its symbols there
    (``""`` for a library of its own; ``"eb3_"`` when it was built inside a bundle, where its
    ``ember_entry`` is exported as ``eb3_ember_entry``)."""

    path: Path
    prefix: str = ""

    def symbol(self, name: str) -> str:
        """The exported name of the unit's function ``name``."""
        return self.prefix + name


def compile_unit(source: str, *, name: str = "graph", extra_flags: Sequence[str] = (),
                 openmp: bool = False, version: str | None = None) -> Unit:
    """``compile_library`` that also finds ``source`` inside a bundle (``compile_bundle``):
    returns a ``Unit`` (library path and symbol prefix).  Lookup order: the in-process memo, a
    library of its own on disk, an alias entry on disk naming a valid bundle, else a build of
    ``source`` alone."""
    flags = _flags(extra_flags, openmp)
    memo_key = (source, name, flags, config.cc, config.cache_dir, version)
    unit = CACHE._units.get(memo_key)
    if unit is not None:
        return unit
    path = CACHE._paths.get(memo_key)
    if path is not None:
        return Unit(path)
    with CACHE.key_lock(memo_key):
        try:
            unit = CACHE._units.get(memo_key) or _find_unit(source, name, flags, version)
            if unit is None:
                path = CACHE._paths.get(memo_key)
                if path is None:
                    path = CACHE._paths[memo_key] = _build(source, name, flags, version)
                unit = Unit(path)
            CACHE._units[memo_key] = unit
        finally:
            CACHE.release(memo_key)
    return unit


def _find_unit(source: str, name: str, flags: tuple[str, ...], version: str | None
               ) -> Unit | None:
    """A unit already on disk: its own library, or its alias into a valid bundle."""
    _, stem = _entry_stem(source, name, flags, version)
    so = stem.with_suffix(".so")
    if _valid(so, stem.with_suffix(".json")):
        _debug(5, f"cache hit {so}")
        return Unit(so)
    alias = stem.parent / (stem.name + ".alias.json")
    try:
        entry = json.loads(alias.read_bytes())
        lib = cache_root() / "c" / entry["library"]
        prefix = str(entry["prefix"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not _valid_bundle(lib, entry.get("sha256")):
        return None
    _debug(5, f"cache hit {alias} -> {lib} ({prefix}*)")
    return Unit(lib, prefix)


def _valid_bundle(lib: Path, sha256: str | None) -> bool:
    """A bundle library is valid when its bytes match its manifest (checked once per process:
    a bundle serves many aliases)."""
    known = CACHE._bundles.get(lib)
    if known is None:
        manifest = lib.with_suffix(".json")
        known = _valid(lib, manifest)
        if known:
            try:
                known = json.loads(manifest.read_bytes())["sha256"]
            except (OSError, ValueError, KeyError, TypeError):
                known = False
        CACHE._bundles[lib] = known
    return bool(known) and (sha256 is None or known == sha256)


# file-scope definitions a bundle renames: `static ...` and `EMBER_EXPORT ...` at column 0
# file-scope names a unit defines: static/exported functions and variables (also with a leading
# attribute: shared kernels are ``__attribute__((noinline)) static``) and typedef'd structs
# (``} name;`` at column 0)
_DEFINITION = re.compile(r"^(?:(?:__attribute__\(\([^)]*\)\)\s*)?static|EMBER_EXPORT)\b"
                         r"[^(\[=;{]*?\b([A-Za-z_]\w*)\s*[(\[=;]|^\}\s*([A-Za-z_]\w*)\s*;", re.M)
_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)

BUNDLE_BYTES = 64_000
"""Default size of a bundle's units, in bytes of C after the shared prelude: ~100 graphs of the
conformance table (48 KB of prelude, ~700 B a graph).  Measured on 1,000 of them, one core:
alone 195 ms a graph; bundles of 100: 9 ms a graph; of 250-500: 12 ms; one of 1000: 14 ms."""


def bundle_unit(body: str, prefix: str) -> str:
    """A unit's text (without the shared prelude) made safe to share one translation unit with
    others: every file-scope ``static``/``EMBER_EXPORT`` definition gets ``prefix`` (in the whole
    body, so calls follow), and its ``#define``s are undone at its end."""
    names = sorted({a or b for a, b in _DEFINITION.findall(body)}, key=len, reverse=True)
    if names:
        pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b")
        body = pattern.sub(lambda m: prefix + m.group(1), body)
    undefs = "".join(f"#undef {m}\n" for m in dict.fromkeys(_MACRO.findall(body)))
    return f"/* ---- bundled unit {prefix} ---- */\n{body}\n{undefs}"


def compile_bundle(sources: Sequence[SourceSpec], *, prelude: str,
                   extra_flags: Sequence[str] = (), openmp: bool = False,
                   version: str | None = None, bundle_bytes: int = BUNDLE_BYTES,
                   max_workers: int | None = None) -> list[Unit]:
    """Build many translation units with few compiler runs and return their ``Unit``s in order.

    Each source must start with ``prelude`` (text shared by all, e.g. the runtime and math
    preludes); sources already built (their own library, or an alias) are skipped, the others
    are concatenated into bundles of about ``bundle_bytes`` bytes each (one copy of the prelude,
    each unit renamed with ``bundle_unit``) that are compiled in parallel, one compiler per core.
    For every bundled unit an alias entry (``<name>-<key>.alias.json``: the bundle library and
    the unit's prefix) is written atomically, so a later ``compile_unit`` of the same source, in
    any process, finds it without running the compiler.  A source that does not start with
    ``prelude``, or whose bundle fails to compile, is built alone; the first failure is raised
    after every build has finished.
    """
    flags = _flags(extra_flags, openmp)
    specs = [(s, "graph") if isinstance(s, str) else (s[0], s[1]) for s in sources]
    found: dict[tuple[str, str], Unit] = {}
    pending: dict[tuple[str, str], None] = {}
    alone: list[tuple[str, str]] = []
    for spec in specs:
        if spec in found or spec in pending:
            continue
        memo_key = (spec[0], spec[1], flags, config.cc, config.cache_dir, version)
        unit = CACHE._units.get(memo_key)
        if unit is None and memo_key in CACHE._paths:
            unit = Unit(CACHE._paths[memo_key])
        if unit is None:
            unit = _find_unit(spec[0], spec[1], flags, version)
        if unit is not None:
            found[spec] = CACHE._units[memo_key] = unit
        elif spec[0].startswith(prelude) and prelude:
            pending[spec] = None
        else:
            alone.append(spec)
    groups: list[list[tuple[str, str]]] = []
    current: list[tuple[str, str]] = []
    size = 0
    for spec in pending:
        body = len(spec[0]) - len(prelude)
        if current and size + body > bundle_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(spec)
        size += body
    if current:
        groups.append(current)
    errors: list[BaseException] = []

    def build_group(group: list[tuple[str, str]]) -> None:
        if len(group) == 1:
            alone.append(group[0])
            return
        bodies = [bundle_unit(s[len(prelude):], f"eb{k}_") for k, (s, _) in enumerate(group)]
        source = prelude + "\n" + "\n".join(bodies)
        try:
            lib = _build(source, "bundle", flags, version)
        except CompileError as e:  # build them one by one: the faulty unit reports its error
            _debug(1, f"bundle of {len(group)} units failed; building them alone: {e}")
            alone.extend(group)
            return
        sha = json.loads(lib.with_suffix(".json").read_bytes())["sha256"]
        CACHE._bundles[lib] = sha
        rel = lib.relative_to(cache_root() / "c").as_posix()
        for k, (s, n) in enumerate(group):
            _, stem = _entry_stem(s, n, flags, version)
            try:  # an alias only spares a later process a build: a full disk skips it
                _atomic_write(stem.parent / (stem.name + ".alias.json"), json.dumps(
                    {"library": rel, "prefix": f"eb{k}_", "sha256": sha}).encode())
            except OSError:
                pass
            memo_key = (s, n, flags, config.cc, config.cache_dir, version)
            found[(s, n)] = CACHE._units[memo_key] = Unit(lib, f"eb{k}_")

    workers = max(1, min(len(groups) or 1, max_workers or os.cpu_count() or 1))
    if groups:
        with ThreadPoolExecutor(workers, thread_name_prefix="ember-cc") as pool:
            errors += [e for e in (f.exception() for f in
                                   [pool.submit(build_group, g) for g in groups]) if e]
    if alone:
        with ThreadPoolExecutor(workers, thread_name_prefix="ember-cc") as pool:
            futures = {spec: pool.submit(compile_unit, spec[0], name=spec[1],
                                         extra_flags=extra_flags, openmp=openmp, version=version)
                       for spec in dict.fromkeys(alone)}
        for spec, f in futures.items():
            if f.exception() is not None:
                errors.append(f.exception())
            else:
                found[spec] = f.result()
    if errors:
        raise errors[0]
    return [found[spec] for spec in specs]


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


def _entry_stem(source: str, name: str, flags: tuple[str, ...], version: str | None
                ) -> tuple[str, Path]:
    """The cache key of a source and the path stem of its entry (``c/<kk>/<name>-<key>``)."""
    key = cache_key(source, flags, CACHE.compiler().version, CACHE.cpu(),
                    version or ember_version())
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name)[:64] or "lib"
    return key, cache_root() / "c" / key[:2] / f"{safe}-{key[:40]}"


def _build(source: str, name: str, flags: tuple[str, ...], version: str | None) -> Path:
    try:
        return _build_entry(source, name, flags, version)
    except OSError as e:  # a full disk, a directory gone read-only: no entry is left behind
        why = " (the disk is full)" if e.errno == errno.ENOSPC else ""
        raise CompileError(f"[compile] cannot write the compiler cache {str(cache_root())!r}"
                           f"{why}: {e}; free space or set EMBER_CACHE_DIR to another "
                           f"directory") from e


def _build_entry(source: str, name: str, flags: tuple[str, ...], version: str | None) -> Path:
    cc = CACHE.compiler()
    key, stem = _entry_stem(source, name, flags, version)
    folder = stem.parent
    so, c_path, manifest = (stem.with_suffix(s) for s in (".so", ".c", ".json"))
    if _valid(so, manifest):
        _debug(5, f"cache hit {so}")
        return so
    folder.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(folder)
    _atomic_write(c_path, source.encode())
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{stem.name}.", suffix=".so.tmp")
    os.close(fd)
    try:  # the temporary library goes on any failure, Ctrl-C included: no partial entry
        out, seconds = _run_compiler(cc, flags, tmp, c_path)
        if out.returncode != 0:
            log = _tail(out.stderr + out.stdout)
            _atomic_write(stem.with_suffix(".log"), (out.stderr + out.stdout).encode())
            raise CompileError(f"[compile] {cc.executable} failed (exit {out.returncode}) on "
                               f"{c_path}; last lines of its output:\n{log}\ncommand: "
                               f"{shlex.join(out.args)}", str(c_path), log)
        digest = _sha256_file(tmp)
        os.replace(tmp, so)
        # a library whose manifest is missing (this write failed) or names other bytes is
        # never loaded: it is rebuilt
        _atomic_write(manifest, json.dumps({
            "sha256": digest, "key": key, "name": name, "compiler": cc.version,
            "cc": list(cc.command), "flags": list(flags), "seconds": round(seconds, 4),
        }, indent=1).encode())
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _debug(1, f"compiled {name} in {seconds:.3f}s")
    _debug(5, f"built {so} ({seconds:.3f}s)")
    return so


def _run_compiler(cc: Compiler, flags: tuple[str, ...], tmp: str, c_path: Path
                  ) -> tuple[subprocess.CompletedProcess, float]:
    cmd = [*cc.command, *flags, "-o", tmp, str(c_path), *LIBS]
    _debug(5, "compile: " + shlex.join(cmd))
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise CompileError(f"[compile] cannot run {cc.executable!r}: {e}", str(c_path)) from e
    return out, time.perf_counter() - t0


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
            "flags": " ".join(base_flags() + machine_flags()), "cpu": CACHE.cpu()}

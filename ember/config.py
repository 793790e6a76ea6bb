"""The only place that reads environment variables (CONVENTIONS.md habit 5)."""

from __future__ import annotations

import os
from dataclasses import dataclass


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        return default


def _cache_dir() -> str:
    """EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember, else ~/.cache/ember."""
    explicit = os.environ.get("EMBER_CACHE_DIR", "")
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    base = os.environ.get("XDG_CACHE_HOME", "") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "ember")


@dataclass
class Config:
    """Process-wide settings read once from the environment.

    ``debug``: EMBER_DEBUG level (0 = quiet).  ``check_meta``: when true, every eager op also
    checks its output against the OpDef's ``meta`` rule (EMBER_CHECK_META=1; tests set it).
    ``check_fast_paths``: under ``check_meta``, eager's fast paths (``ember/_bind_fast.py``)
    run as they do without it and their results are checked the same way (the default);
    EMBER_CHECK_FAST_PATHS=0 makes them step aside for the general path instead (their own
    tests compare the two that way).  Without ``check_meta`` it is not read.
    ``logs``: compiler events to print (EMBER_LOGS=recompiles,graph_breaks,graphs).
    ``malloc_tuning``: raise glibc's mmap/trim thresholds at import (EMBER_MALLOC_TUNING=0 to
    disable).
    ``cache_dir``: where compiled C libraries are cached (EMBER_CACHE_DIR; default
    $XDG_CACHE_HOME/ember or ~/.cache/ember).  ``cc``: the C compiler command (EMBER_CC; default
    ``gcc``; may carry arguments, e.g. ``"ccache gcc"``).  ``c_openmp``: the C backend splits
    kernels' outer loops over ``ember.get_num_threads()`` OpenMP threads (EMBER_C_OPENMP=0 turns
    it off; a fork()ed child always runs them on one thread).  ``c_profile``: the C backend
    builds its entries with a timer around every kernel call (EMBER_C_PROFILE=1; a separate
    build: the timers are part of the source, hence of the cache key; see
    ``ember.compiler.c.backend.profile``).  ``c_gemm``: how compiled float products run
    outside max-autotune (EMBER_C_GEMM): ``"auto"`` (a choice max-autotune stored for the
    kernel, else BLAS when loaded, else the generated template), ``"template"`` or ``"blas"``.
    ``verify_ir``: the C backend checks its loop IR (``Program.verify``) after lowering, after
    scheduling and before codegen (EMBER_VERIFY_IR=1; tests set it); otherwise once, before
    codegen.
    ``warn_fallbacks``: a compiled graph that runs an op as an eager extern (no C lowering)
    warns once per op per process (EMBER_WARN_FALLBACKS=0 turns it off; also
    ``ember.compiler.config.warn_fallbacks``).
    ``compile_backend``: the backend ``ember.compile`` uses when none is named
    (EMBER_COMPILE_BACKEND; default ``"inductor"``, the C backend; ``"eager"`` runs graphs with
    the reference interpreter).
    ``eager_c_fma``: eager's single-rounding ``a * b + c`` (``add(alpha=)``, ``addcmul``,
    ``lerp``, the optimizers' NumPy paths) runs a small C kernel built with ``cc`` and cached in
    ``cache_dir`` (EMBER_EAGER_C_FMA=0 keeps the NumPy emulation; so does a missing compiler).
    ``eager_c``: eager may use small fixed C kernels built with ``cc`` (``ember/ops/_native.py``:
    the fma above, ``F.interpolate``'s resampling); EMBER_EAGER_C=0 turns all of them off and
    eager runs its NumPy paths, which give the same bits.
    ``inject_bug_testing_only``: TESTS ONLY. The C backend miscompiles one pointwise op so that
    the minifier's tests have a failure to find (EMBER_INJECT_BUG_TESTING_ONLY=``kind[:op]``,
    kind ``compile_error`` / ``runtime_error`` / ``accuracy``, op default ``relu``; PyTorch's
    ``inject_relu_bug_TESTING_ONLY``).  Empty (the default): no injection.
    ``c_march``: the ISA every C build targets, compiled C and eager C kernels alike
    (EMBER_C_MARCH; default ``""``: ``-march=native``): a ``-march`` value, optionally followed
    by ``-m`` feature flags, e.g. ``"x86-64-v3"`` (AVX2 + FMA + F16C: what an AVX2-only CPU
    runs), ``"x86-64-v4"``, ``"native -mno-amx-tile -mno-amx-bf16"`` (this CPU without AMX).
    Part of every build's cache key (``ember/ops/_native.py``, ``march_flags``).
    ``kernel_interpret``: ``ember.kernel`` kernels run in the NumPy interpreter, which checks
    every access, instead of being compiled to C (EMBER_KERNEL_INTERPRET=1).
    ``freezing``: PyTorch's ``torch._inductor.config.freezing`` (also
    ``ember._inductor.config.freezing``; EMBER_FREEZING=1): a compiled inference graph packs
    the nn.Parameters that are B operands of its products once and reuses the copies while the
    weights are unchanged (docs/compiler.md, "Frozen weights packed once").
    """

    debug: int = _env_int("EMBER_DEBUG", 0)
    check_meta: bool = os.environ.get("EMBER_CHECK_META", "") not in ("", "0")
    check_fast_paths: bool = os.environ.get("EMBER_CHECK_FAST_PATHS", "1") != "0"
    # keep freed large blocks in the heap (see ember/_memory.py); EMBER_MALLOC_TUNING=0 disables
    malloc_tuning: bool = os.environ.get("EMBER_MALLOC_TUNING", "1") != "0"
    # compiler logs (EMBER_LOGS=recompiles,graph_breaks,graphs), printed to stderr
    logs: frozenset = frozenset(
        p.strip() for p in os.environ.get("EMBER_LOGS", "").split(",") if p.strip())
    # the C backend's toolchain (ember/compiler/c/build/toolchain.py)
    cache_dir: str = _cache_dir()
    cc: str = os.environ.get("EMBER_CC", "") or "gcc"
    c_openmp: bool = os.environ.get("EMBER_C_OPENMP", "1") != "0"
    compile_backend: str = os.environ.get("EMBER_COMPILE_BACKEND", "") or "inductor"
    c_profile: bool = os.environ.get("EMBER_C_PROFILE", "") not in ("", "0")
    verify_ir: bool = os.environ.get("EMBER_VERIFY_IR", "") not in ("", "0")
    warn_fallbacks: bool = os.environ.get("EMBER_WARN_FALLBACKS", "1") != "0"
    # eager fma through a small C kernel (ember/ops/_fma_c.py); NumPy emulation when off
    eager_c_fma: bool = os.environ.get("EMBER_EAGER_C_FMA", "1") != "0"
    # every eager C kernel (ember/ops/_native.py); NumPy paths of the same bits when off
    eager_c: bool = os.environ.get("EMBER_EAGER_C", "1") != "0"
    # TESTS ONLY: a deliberate miscompile of one op (ember/compiler/c/lower/pointwise.py)
    inject_bug_testing_only: str = os.environ.get("EMBER_INJECT_BUG_TESTING_ONLY", "")
    # ember.kernel: run @jit kernels in the NumPy interpreter instead of compiling them to C
    kernel_interpret: bool = os.environ.get("EMBER_KERNEL_INTERPRET", "") not in ("", "0")
    # how the C backend runs float products outside max-autotune: "auto" (a measured rule per
    # shape: codegen/gemm.py's template or BLAS), "template" or "blas" (EMBER_C_GEMM)
    c_gemm: str = os.environ.get("EMBER_C_GEMM", "auto")
    # the -march (and -m feature flags) of every C build; "" = native (EMBER_C_MARCH)
    c_march: str = os.environ.get("EMBER_C_MARCH", "").strip()
    # the compiled flex_attention backward: "single_pass" (default) or "two_pass"
    flex_backward: str = os.environ.get("EMBER_FLEX_BWD", "single_pass")
    # ember.compile inference graphs pack their weights once (ember/compiler/c/freeze.py)
    freezing: bool = os.environ.get("EMBER_FREEZING", "") not in ("", "0")


config = Config()


def dist_env() -> dict[str, str]:
    """The launcher's variables for ``ember.distributed`` (torchrun's names, and the PMI ones
    ``mpiexec`` sets), read when a process group is created, not at import."""
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "PMI_RANK",
             "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "EMBER_RUN_DIR",
             "PMI_FD", "PMI_PORT", "PMIX_RANK", "HYDRA_CONTROL_FD")
    return {n: os.environ[n] for n in names if n in os.environ}


def symm_mem_backend() -> str | None:
    """EMBER_SYMM_MEM_BACKEND: the symmetric heap's transport (``shm``/``MPI_SHM`` or
    ``rma``/``MPI_RMA``; unset: automatic), read at the first ``symm_mem.empty``."""
    value = os.environ.get("EMBER_SYMM_MEM_BACKEND", "").strip().upper()
    return {"SHM": "MPI_SHM", "MPI_SHM": "MPI_SHM", "RMA": "MPI_RMA",
            "MPI_RMA": "MPI_RMA"}.get(value)


def dist_shm_max_bytes() -> int:
    """EMBER_DIST_SHM_MAX_BYTES: the largest ``all_reduce`` (bytes per rank) that groups on
    one node run through their shared-memory staging window (``ember.distributed._shm``); 0
    turns the window off.  Read when a process group is created."""
    return max(0, _env_int("EMBER_DIST_SHM_MAX_BYTES", 1 << 20))


def minifier_env() -> dict[str, str]:
    """The minifier's variables (``ember.compiler.minifier``), read at each compile rather than
    at import, so a script can set them late: EMBER_MINIFIER (``1``: dump a launcher on a
    failure), EMBER_MINIFIER_DIR (where; default ``./minifier``), EMBER_REPRO_LEVEL (which
    failures: PyTorch's ``repro_level`` numbers)."""
    names = ("EMBER_MINIFIER", "EMBER_MINIFIER_DIR", "EMBER_REPRO_LEVEL")
    return {n: os.environ[n] for n in names if n in os.environ}

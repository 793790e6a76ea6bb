"""``mode="max-autotune"`` for the C backend: pick how each GEMM runs by timing candidates.

The candidates of a ``GemmKernel`` are BLAS (sgemm/dgemm then a fused epilogue pass) and the
generated template's variants (``codegen.gemm.TEMPLATES``, the micro-tiles for this CPU's
vector ISA; the epilogue applied per finished block).  Each candidate is the kernel's own C
(same shape, layout and epilogue) built into one small library and run on random data of the
kernel's buffer sizes; the fastest (best of a few rounds) wins.  Choices are keyed by the
kernel's canonical C (``codegen.gemm.canonical_source``: shape, dtype, layout, epilogue), the
CPU and the candidate list, and kept in ``<config.cache_dir>/gemm_autotune.json`` (written
atomically): a later process reads the choice without timing, and default-mode compiles reuse
it (``default_impl``).  Dynamic sizes keep BLAS (one library serves every size).
``EMBER_LOGS=autotune`` or ``EMBER_DEBUG>=3`` prints the timings and choices.

>>> f = ember.compile(fn, backend="c", mode="max-autotune")   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from ember.compiler.c.build import runtime, toolchain
from ember.compiler.c.build.runtime import C_PRELUDE
from ember.compiler.c.codegen import gemm as gemm_codegen
from ember.compiler.c.codegen.gemm import canonical_source, gemm_prelude
from ember.compiler.c.codegen.unit import PRELUDE, _entry, _kernel
from ember.compiler.c.ir.kernels import (
    GemmKernel,
)
from ember.compiler.c.ir.loop_ir import (
    Program,
    Segment,
)
from ember.config import config
from ember.errors import EmberValueError

FILE_NAME = "gemm_autotune.json"
MODES = frozenset({"max-autotune", "max-autotune-no-cudagraphs"})
_VERSION = "ember-gemm-autotune-v1"


class _Choices(dict):
    """The in-process memo of choices (key -> impl); ``clear()`` forgets it."""


CHOICES = _Choices()
STATS = {"timed": 0, "cached": 0}   # kernels timed / choices read back (tests, debugging)
FORCE: str | None = None            # tests: use this candidate without timing


def _log(kind: str, message: str, level: int = 1) -> None:
    if kind in config.logs or config.debug >= level:
        print(f"[ember.compiler {kind}] {message}", file=sys.stderr)


def candidates(k: GemmKernel) -> list[str]:
    """BLAS and the template variants of a float product; an integer product has one way
    (codegen.gemm's plain loop, whatever ``impl`` says), so nothing to time."""
    if k.half:   # float16/bfloat16 operands: only the template reads them
        return [gemm_codegen.half_impl()]
    return ["blas"] + list(gemm_codegen.TEMPLATES.get(k.dtype.np.name, ()))


def default_impl(k: GemmKernel, program: Program, has_blas: bool = True) -> str:
    """How a product runs outside max-autotune (``config.c_gemm``): "blas", the template
    ("template": the ISA's first tile), or "auto": the choice max-autotune made for this very
    kernel when one is cached (memo or ``gemm_autotune.json``; nothing is timed here), else
    the template where ``codegen.gemm.template_wins`` (the rule measured in
    benchmarks/RESULTS.md) says so, and always when the process has no BLAS (the alternative is
    the reference triple loop)."""
    if config.c_gemm not in ("auto", "template", "blas"):
        raise EmberValueError(f"[compile] config.c_gemm (EMBER_C_GEMM) is {config.c_gemm!r}; "
                              f"expected 'auto', 'template' or 'blas'")
    if k.half:
        return gemm_codegen.half_impl()
    tiles = gemm_codegen.TEMPLATES.get(k.dtype.np.name)
    if not tiles or config.c_gemm == "blas":
        return "blas"
    if config.c_gemm == "template" or not has_blas:
        return tiles[0]
    sizes = [k.m, k.n, k.k, *k.batch]
    if all(type(x) is int for x in sizes):
        key = _key(k, program)
        got = CHOICES.get(key) or _read().get(key, {}).get("choice")
        if got in candidates(k):
            return got
    return gemm_codegen.default_tile(k) if gemm_codegen.template_wins(k) else "blas"


def default_program(program: Program) -> None:
    """Set ``impl`` of every GemmKernel of ``program`` by ``default_impl``."""
    kernels = [k for k in program.kernels() if isinstance(k, GemmKernel)]
    if not kernels:
        return
    from ember.compiler.c.build import blas
    has_blas = blas.load_blas() is not None
    for k in kernels:
        k.impl = default_impl(k, program, has_blas)


def tune_program(program: Program, extra_flags: tuple = ()) -> None:
    """Set ``impl`` of every GemmKernel of ``program`` to its chosen candidate."""
    for seg in program.segments():
        for k in seg.kernels:
            if isinstance(k, GemmKernel):
                k.impl = choose(k, program, extra_flags)


def choose(k: GemmKernel, program: Program, extra_flags: tuple = ()) -> str:
    if FORCE is not None and FORCE in candidates(k):
        return FORCE
    if len(candidates(k)) == 1:
        return candidates(k)[0]
    sizes = [k.m, k.n, k.k, *k.batch] + [x for b in _buffers(k) for x in b.shape]
    if any(type(x) is not int for x in sizes):
        _log("autotune", f"{k.name}: dynamic sizes, BLAS", 3)
        return "blas"
    key = _key(k, program)
    got = CHOICES.get(key)
    if got is None:
        got = _read().get(key, {}).get("choice")
        if got is not None:
            CHOICES[key] = got
    if got is not None:
        STATS["cached"] += 1
        _log("autotune", f"{k.name} ({' '.join(k.ops)}, m={k.m} n={k.n} k={k.k}): cached "
             f"choice {got}", 3)
        return got
    timings = _time(k, program, extra_flags)
    got = min(timings, key=timings.get)
    STATS["timed"] += 1
    CHOICES[key] = got
    _write(key, {"choice": got, "timings": timings,
                 "shape": [list(k.batch), k.m, k.n, k.k], "dtype": k.dtype.name,
                 "ops": list(k.ops)})
    shown = ", ".join(f"{c} {t * 1e6:.1f} us" for c, t in timings.items())
    _log("autotune", f"{k.name} ({' '.join(k.ops)}, {k.dtype.name} m={k.m} n={k.n} k={k.k}): "
         f"{shown} -> {got}", 3)
    return got


def _key(k: GemmKernel, program: Program) -> str:
    h = hashlib.sha256()
    for part in (_VERSION, toolchain.CACHE.cpu(),
                 " ".join(toolchain.base_flags() + toolchain.machine_flags()),
                 ",".join(candidates(k)), k.dtype.name,
                 canonical_source(dataclasses.replace(k, impl="blas"), program)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _buffers(k: GemmKernel) -> list:
    loads, stores = k.buffers()
    return stores + [b for b in loads if b not in stores]


def _time(k: GemmKernel, program: Program, extra_flags: tuple) -> dict:
    """Seconds per call of each candidate (best of a few rounds), all built in one library."""
    cands = candidates(k)
    segs = [Segment(f"ember_tune_{j}", [dataclasses.replace(k, name=f"tune{j}", impl=c)])
            for j, c in enumerate(cands)]
    fake = Program(segs, [], list(program.int_names), program.num_scalars)
    parts = [C_PRELUDE, PRELUDE, gemm_prelude(fake)]
    for seg in segs:
        parts.append(_kernel(seg.kernels[0], fake))
        parts.append(_entry(seg, {}))
    path = toolchain.compile_library("\n".join(parts), name="autotune", extra_flags=extra_flags)
    lib = runtime.load(path)
    rng = np.random.default_rng(0)
    arrays = []
    for b in segs[0].buffers():
        n = 1
        for x in b.shape:
            n *= x
        dt = np.dtype(b.dtype.np)
        arrays.append(rng.standard_normal(n).astype(dt) if dt.kind == "f" else np.zeros(n, dt))
    ints = [0] * len(program.int_names)
    floats = [0.0] * program.num_scalars
    entries = [lib.entry(s.entry) for s in segs]
    for e in entries:  # warm up (page faults, BLAS threads)
        e(arrays, ints, floats)
    best = [float("inf")] * len(cands)
    for _ in range(5):
        for j, e in enumerate(entries):
            reps, t0 = 0, time.perf_counter()
            while True:
                e(arrays, ints, floats)
                reps += 1
                dt_ = time.perf_counter() - t0
                if dt_ > 2e-3 or reps >= 50:
                    break
            best[j] = min(best[j], dt_ / reps)
    return dict(zip(cands, best))


def _path() -> Path:
    return Path(config.cache_dir) / FILE_NAME


def _read() -> dict:
    try:
        data = json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(key: str, entry: dict) -> None:
    """Add one choice to the JSON file (read, merge, atomic replace: concurrent writers each
    leave a whole file; at worst one's new entry is timed again later)."""
    data = _read()
    data[key] = entry
    toolchain._atomic_write(_path(), json.dumps(data, indent=1, sort_keys=True).encode())


__all__ = ["CHOICES", "FILE_NAME", "MODES", "STATS", "candidates", "choose", "default_impl",
           "default_program", "tune_program"]

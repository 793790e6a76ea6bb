"""Threads kept awake across one entry call (``csrc/ember_pool.h``).

A decode step (one token of a KV-cache generation) is one C call whose time is its one-row
products: each reads a weight matrix once (a GEMV, 20-60 µs for the char GPT's).  Two threads
read memory ~1.5x faster than one, but only if the second is already running: a sleeping
OpenMP worker (``OMP_WAIT_POLICY=PASSIVE``) takes as long to wake as the product takes.  So a
unit whose products have at most ``SMALL_M`` rows carries a small pthread pool of its own:
each entry that runs such a product calls ``ember_pool_begin_()`` first (the workers wake and
spin) and ``ember_pool_end_()`` on return (they sleep at once), and ``ember_gemm_<s>`` splits
the product over its columns on those threads (``csrc/gemm_blas.h.in``).  With one thread
(``ember.set_num_threads(1)``, a ``fork()``ed child) nothing starts, wakes or spins.

``ENABLED`` (``EMBER_C_POOL``, default 1) turns it off for A/B measurements.

>>> from ember.compiler.c.codegen import awake
>>> awake.SMALL_M
4
"""

from __future__ import annotations

import os

from ember.compiler.c.codegen import csrc
from ember.compiler.c.ir.kernels import GemmKernel
from ember.compiler.c.ir.loop_ir import Program, Segment

ENABLED = os.environ.get("EMBER_C_POOL", "1") != "0"
"""Whether units split one-row products over awake threads (read at code generation)."""

SMALL_M = 4
"""Products of at most this many rows are split (over columns) on the awake threads."""

MIN_COLS = 64
"""Each part is at least this many columns (and a multiple of 16)."""

MIN_MACS = 65536
"""Products below this many multiply-adds (a 256 KiB float32 matrix) stay on one thread."""

PARTS = 2
"""Parts per thread: claimed dynamically, so a late worker costs at most one part."""

EXIT_S = 10
"""Seconds after which the workers of a library that is not called end (restarted on use)."""

_POOL = "\n" + csrc("ember_pool.h")


def settings() -> str:
    """What of this module decides the generated code (part of the run-plan digest)."""
    return f"awake={ENABLED},{SMALL_M},{MIN_COLS},{MIN_MACS},{PARTS},{EXIT_S}"


def splits(k: object) -> bool:
    """Whether kernel ``k`` is a product whose BLAS call the pool splits: float32/float64,
    at most ``SMALL_M`` rows known at compile time, BLAS impl (the template's small path and
    the half and integer products stay on one thread), and not known to be too small
    (``MIN_MACS``, two parts of ``MIN_COLS``; the C checks runtime sizes again)."""
    if not ENABLED or not isinstance(k, GemmKernel) or k.half or k.impl != "blas":
        return False
    if k.dtype.np.name not in ("float32", "float64") or type(k.m) is not int or k.m > SMALL_M:
        return False
    n, kk = k.n, k.k
    if type(n) is int and n < 2 * MIN_COLS:
        return False
    return not (type(n) is int and type(kk) is int and k.m * n * kk < MIN_MACS)


def prelude(program: Program) -> str:
    """The pool and its settings, where a kernel of ``program`` ``splits`` ("" otherwise);
    goes before the GEMM helpers."""
    if not any(splits(k) for k in program.kernels()):
        return ""
    return (f"\n#define EMBER_POOL_SMALL_M {SMALL_M}\n#define EMBER_POOL_MIN_COLS {MIN_COLS}\n"
            f"#define EMBER_POOL_MIN_MACS {MIN_MACS}.0\n#define EMBER_POOL_PARTS {PARTS}\n"
            f"#define EMBER_POOL_EXIT_S {EXIT_S}" + _POOL)


def uses_pool(seg: Segment) -> bool:
    """Whether the segment's entry brackets its kernels with the pool's begin and end."""
    return any(splits(k) for k in seg.kernels)


def wrap_entry(lines: list, entry: str) -> list:
    """The entry's lines (``EMBER_EXPORT int <entry>(...) {`` ... ``}``) turned into a static
    ``<entry>_body_`` and an exported ``<entry>`` that wakes the pool around it (every return
    of the body, the input checks' included, passes through the end)."""
    head = lines[0].replace(f"EMBER_EXPORT int {entry}(", f"static int {entry}_body_(", 1)
    return [head, *lines[1:],
            lines[0],
            "  ember_pool_begin_();",
            f"  const int rc_ = {entry}_body_(bufs, ints, floats);",
            "  ember_pool_end_();",
            "  return rc_;",
            "}"]


__all__ = ["ENABLED", "EXIT_S", "MIN_COLS", "MIN_MACS", "PARTS", "SMALL_M", "prelude",
           "settings", "splits", "uses_pool", "wrap_entry"]

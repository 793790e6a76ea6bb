"""Per-kernel C times of graphs built with ``EMBER_C_PROFILE=1``: ``profile``,
``reset_profile``, ``format_profile`` (re-exported by ``ember.compiler.c.backend``) and the
table printed at exit.  ``backend.CompiledGraph`` registers each profiled graph in
``_PROFILED`` (weak references)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ember.compiler.c.build import runtime
from ember.config import config

_PROFILED: list = []  # weak references to the CompiledGraphs built with EMBER_C_PROFILE=1


def _profile_lib(cg: Any) -> tuple:
    """(ctypes library, symbol prefix) of a profiled graph, or (None, "")."""
    if cg.path is None:
        return None, ""
    lib = runtime.load(cg.path)
    if not lib.has(cg.prefix + "ember_profile_size"):
        return None, ""
    return lib.dll, cg.prefix


def _graphs(cg: Any) -> list:
    if cg is not None:
        return [cg]
    return [g for g in (r() for r in _PROFILED) if g is not None]


def profile(cg: Any = None) -> list:
    """Per-kernel times of graphs built with ``EMBER_C_PROFILE=1`` (``cg``, else every live
    profiled graph): one dict per kernel call site of the entries, in order, with ``graph``
    (the library's file name), ``name`` (``<entry>:<kernel> <ops> (<kind>)``), ``calls``,
    ``ms`` (wall time of all its calls on the calling thread, its OpenMP region and GEMM
    threads included) and ``blas_ms`` (the part spent in its BLAS calls).  A graph built
    without the timers gives no rows."""
    import ctypes
    rows = []
    for g in _graphs(cg):
        dll, prefix = _profile_lib(g)
        if dll is None:
            continue
        size = getattr(dll, prefix + "ember_profile_size")
        size.restype = ctypes.c_int64
        n = int(size())
        name = getattr(dll, prefix + "ember_profile_name")
        name.argtypes, name.restype = (ctypes.c_int64,), ctypes.c_char_p
        ns, blas_ns = (ctypes.c_double * max(n, 1))(), (ctypes.c_double * max(n, 1))()
        calls = (ctypes.c_int64 * max(n, 1))()
        getattr(dll, prefix + "ember_profile_read")(ns, blas_ns, calls)
        for i in range(n):
            rows.append({"graph": Path(g.path).name, "name": name(i).decode(),
                         "calls": int(calls[i]), "ms": ns[i] / 1e6, "blas_ms": blas_ns[i] / 1e6})
    return rows


def reset_profile(cg: Any = None) -> None:
    """Zero the timers of ``cg`` (else of every live profiled graph)."""
    for g in _graphs(cg):
        dll, prefix = _profile_lib(g)
        if dll is not None:
            getattr(dll, prefix + "ember_profile_reset")()


def format_profile(rows: list, per: int | None = None) -> str:
    """``profile()``'s rows as a table, slowest first; with ``per`` (e.g. the number of steps
    run) the times are divided by it (times per step)."""
    if not rows:
        return "(no profiled C kernels: build with EMBER_C_PROFILE=1)"
    idle = sum(1 for r in rows if not r["calls"])
    rows = [r for r in rows if r["calls"]] or rows
    div = per or 1
    total = sum(r["ms"] for r in rows)
    head = "ms" if per is None else f"ms/{per}"
    out = [f"{head:>9} {'BLAS':>8} {'%':>5} {'calls':>6}  kernel"]
    for r in sorted(rows, key=lambda r: -r["ms"]):
        out.append(f"{r['ms'] / div:9.3f} {r['blas_ms'] / div:8.3f} "
                   f"{100 * r['ms'] / (total or 1.0):5.1f} {r['calls']:6d}  {r['name']}")
    blas = sum(r["blas_ms"] for r in rows)
    out.append(f"{total / div:9.3f} {blas / div:8.3f} {100.0:5.1f} {'':6}  total of "
               f"{len(rows)} kernels (outside BLAS {(total - blas) / div:.3f})"
               + (f"; {idle} kernels never called left out" if idle else ""))
    return "\n".join(out)


def _report_at_exit() -> None:
    rows = profile()
    if rows:
        print(f"[ember.compiler profile] C kernel times of this process (EMBER_C_PROFILE=1)\n"
              f"{format_profile(rows)}", file=sys.stderr)


if config.c_profile:
    import atexit
    atexit.register(_report_at_exit)

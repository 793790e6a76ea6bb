"""Process settings: malloc's thresholds, and the thread pools' wait policy (at the end).

Large NumPy results are allocated with ``malloc``; glibc serves allocations above its mmap
threshold with fresh ``mmap`` pages and unmaps them on free, so every large temporary pays a page
fault per 4 KiB page — on these machines that costs 2-3x the arithmetic of a large elementwise op
(``exp`` of 2^23 floats: 14 ms with fresh pages, 5 ms with reused ones).  PyTorch avoids the cost
with its caching allocator.  ember instead raises glibc's mmap and trim thresholds once, so
freed blocks stay in the heap and are reused.  The heap then stays at its peak size (like a
caching allocator).  Set ``EMBER_MALLOC_TUNING=0`` to keep glibc's defaults.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 1 << 30   # allocations below 1 GiB come from the heap
_TRIM_THRESHOLD = 1 << 30   # give memory back only when 1 GiB at the heap's top is free

_applied = [False]


def tune_malloc() -> bool:
    """Apply the thresholds (glibc only); returns whether they were applied."""
    if _applied[0]:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    ok = mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) == 1 and ok
    _applied[0] = ok
    return ok


# The thread pools' wait policy.  A compiled step alternates BLAS products (OpenBLAS's own
# pthreads pool) with C kernels split over OpenMP threads (libgomp's pool).  Left alone, both
# keep their idle threads polling after their work: libgomp ~300k spins (a fraction of a
# millisecond), OpenBLAS 2^28 cycles (~0.1 s) of sched_yield, so after a product OpenBLAS's
# idle threads hold the cores the next OpenMP region needs.  ember makes OpenBLAS's threads
# sleep at once (OPENBLAS_THREAD_TIMEOUT=4: 2^4 cycles, its minimum) and leaves libgomp's short
# spin, which keeps the many short parallel regions of a step from paying a wake-up each
# (OMP_WAIT_POLICY=PASSIVE measured slower, ACTIVE 4x slower: docs/performance.md, "Thread
# pools: who waits how").  OpenBLAS reads the variable once, when NumPy loads it, so
# ``ember/__init__.py`` calls this before importing NumPy (a NumPy imported earlier keeps its
# setting).  A value the user set is kept; ``EMBER_WAIT_POLICY=keep`` sets nothing.
WAIT_POLICY = {"OPENBLAS_THREAD_TIMEOUT": "4"}


def tune_wait_policy() -> dict:
    """Set the pools' wait policy (``WAIT_POLICY``) where the environment does not; returns
    what was set."""
    import os
    if os.environ.get("EMBER_WAIT_POLICY", "").lower() == "keep":
        return {}
    done = {}
    for k, v in WAIT_POLICY.items():
        if k not in os.environ:
            os.environ[k] = done[k] = v
    return done

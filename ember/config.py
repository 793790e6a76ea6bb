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


@dataclass
class Config:
    """Process-wide settings read once from the environment.

    ``debug``: EMBER_DEBUG level (0 = quiet).  ``check_meta``: when true, every eager op also
    checks its output against the OpDef's ``meta`` rule (EMBER_CHECK_META=1; tests set it).
    ``logs``: compiler events to print (EMBER_LOGS=recompiles,graph_breaks,graphs).
    ``malloc_tuning``: raise glibc's mmap/trim thresholds at import (EMBER_MALLOC_TUNING=0 to
    disable).
    """

    debug: int = _env_int("EMBER_DEBUG", 0)
    check_meta: bool = os.environ.get("EMBER_CHECK_META", "") not in ("", "0")
    # keep freed large blocks in the heap (see ember/_memory.py); EMBER_MALLOC_TUNING=0 disables
    malloc_tuning: bool = os.environ.get("EMBER_MALLOC_TUNING", "1") != "0"
    # compiler logs (EMBER_LOGS=recompiles,graph_breaks,graphs), printed to stderr
    logs: frozenset = frozenset(
        p.strip() for p in os.environ.get("EMBER_LOGS", "").split(",") if p.strip())


config = Config()

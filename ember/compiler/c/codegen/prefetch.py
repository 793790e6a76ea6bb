"""Prefetching the next row in row-wise kernels (reductions over a contiguous last dim).

A 4 KiB row (1024 floats) is one page, and the hardware's stream prefetcher stops at page
boundaries, so a kernel that makes several passes over each row in cache would otherwise wait
on memory, line by line, at the start of every row.  The kernels' last pass over a row (the
softmax exp pass in ``unit.py``'s row kernel) fetches the next row's lines instead.
"""

from __future__ import annotations

from typing import Any

from ember.compiler.c.ir.loop_ir import Index, Load, Op

PREFETCH_ROW_BYTES = 64 * 1024
"""Rows up to this size (the reduced elements of one kept index) have the next row
prefetched: a few rows stay in L1/L2, and longer rows stream well without it."""


def _row_loads(e: Any) -> list:
    if isinstance(e, Load):
        return [e]
    if isinstance(e, Op):
        return [x for a in e.args for x in _row_loads(a)]
    return []


def next_row_prefetch(body: list, ov: str, on: str, iv: str, row: str,
                      lanes: int) -> tuple:
    """Lines (a block head for ``lane_loop``) prefetching, for each buffer that ``body`` reads
    along unit-stride ``iv`` in rows indexed by the kept loop ``ov`` (range ``on``), the
    cache lines of the next row that match the block (``lanes`` elements from ``{iv}_b``),
    and the line declaring their guard ``pf_``, or ``((), "")``.  The pass runs from cache
    while the next row arrives; ``row`` is the row's element count (rows longer than
    PREFETCH_ROW_BYTES are left to the hardware).  No effect on any result."""
    seen: dict = {}
    for st in body:
        for ld in _row_loads(getattr(st, "expr", None)):
            terms = dict(ld.index.terms)
            if terms.get(iv) == 1 and terms.get(ov, 0) != 0:
                seen.setdefault((ld.buf.name, str(ld.index)), ld)
    lines = []
    for ld in seen.values():
        size = ld.buf.dtype.np.itemsize
        idx = Index(ld.index.offset, tuple((f"({v} + 1)" if v == ov else f"{v}_b" if v == iv
                                            else v, st) for v, st in ld.index.terms))
        for off in range(0, lanes * size, 64):
            lines.append(f"if (pf_) __builtin_prefetch({ld.buf.name} + ({idx}) + "
                         f"{off // size}, 0, 3);")
    size = max((ld.buf.dtype.np.itemsize for ld in seen.values()), default=0)
    fits = fits_prefetch(row, size)
    if not lines or fits is None:
        return (), ""
    return tuple(lines), f"const int pf_ = {ov} + 1 < ({on}){fits};"


def fits_prefetch(row: str, size: int) -> str | None:
    """The condition that rows of ``row`` elements of ``size`` bytes are prefetched: ``""``
    (no condition: they fit), ``" && ..."`` (a runtime size), or None (too long)."""
    if row.isdigit():
        return "" if int(row) * size <= PREFETCH_ROW_BYTES else None
    return f" && ({row}) * {size} <= {PREFETCH_ROW_BYTES}"


__all__ = ["PREFETCH_ROW_BYTES", "fits_prefetch", "next_row_prefetch"]

"""Software prefetches: the next row in row-wise kernels, and the inputs of streamed
pointwise kernels a few KiB ahead.

A 4 KiB row (1024 floats) is one page, and the hardware's stream prefetcher stops at page
boundaries, so a kernel that makes several passes over each row in cache would otherwise wait
on memory, line by line, at the start of every row.  The kernels' last pass over a row (the
softmax exp pass in ``unit.py``'s row kernel) fetches the next row's lines instead.

A flat pointwise kernel whose output streams (``stream.py``: outputs of 16 MiB and more, so
inputs from memory) and whose arithmetic is long (exact GELU: ~0.6 ns an element in cache)
depends on the hardware prefetchers just as much: measured on the AVX-512 Xeon VM of these
sessions, exact GELU over 2^24 floats ran at 1.0-2.3 ns an element depending only on where the
input starts within a 4 KiB page relative to the tile it is computed into (1.5-1.9x the
in-cache cost at the best offsets), and at 0.69-0.72 ns at every offset with each input line
prefetched ``STREAM_PREFETCH_BYTES`` ahead (``stream_prefetch``; RESULTS.md, "Exact GELU at
its compute bound").  The lines are issued per block of ``STREAM_BLOCK_BYTES`` of output (a
loop with a prefetch inside would not vectorize; one burst per tile measured 0.95-1.05 ns).
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


STREAM_PREFETCH_BYTES = 4096
"""How far ahead of the block being computed a streamed pointwise kernel prefetches its inputs
(one page: past the boundary where the hardware's stream prefetcher stops)."""

STREAM_BLOCK_ELEMS = 64
"""Elements per prefetch block of a streamed pointwise kernel (4 cache lines of float32)."""


def stream_prefetch(loads: list, first: str, block: int = STREAM_BLOCK_ELEMS) -> list:
    """Prefetch lines for one block of ``block`` elements starting at flat element
    ``first`` (a C expression) of a flat pointwise kernel: for each buffer read at unit stride
    (``loads``: the kernel's Loads whose index is the loop's element plus a constant offset),
    the cache lines of the block ``STREAM_PREFETCH_BYTES`` ahead.  A prefetch never faults, so
    the lines past the end of a buffer are harmless.  No effect on any result."""
    seen: dict = {}
    for ld in loads:
        if tuple(ld.index.terms) == (("i", 1),):
            seen.setdefault((ld.buf.name, str(ld.index.offset)), ld)
    lines = []
    for (name, off), ld in seen.items():
        size = ld.buf.dtype.np.itemsize
        ahead = STREAM_PREFETCH_BYTES // size
        start = f"{first}" if off in ("0", "") else f"({off}) + {first}"
        for line in range(0, block * size, 64):
            lines.append(f"__builtin_prefetch({name} + {start} + {ahead + line // size}, 0, 3);")
    return lines


FLAT_PREFETCH_MIN_BYTES = 1 << 22
"""A flat pointwise kernel whose output does not stream prefetches its unit-stride inputs too
when one of them is at least this large (twice these machines' 2 MiB L2): GELU of 2^21 floats
(8 MiB) ran 1.3-1.4x the eager kernel's time without."""


def walk_loads(e: Any, out: list) -> None:
    """Append the Loads in expression ``e`` to ``out``."""
    if isinstance(e, Load):
        out.append(e)
    elif isinstance(e, Op):
        for a in e.args:
            walk_loads(a, out)


def unit_loads(body: list) -> list:
    """The Loads of a flat kernel's ``body`` (its statements' expressions)."""
    out: list = []
    for st in body:
        walk_loads(getattr(st, "expr", None), out)
    return out


def big_inputs(k: Any) -> bool:
    """Whether flat kernel ``k`` (of a known size) reads an input of at least
    ``FLAT_PREFETCH_MIN_BYTES`` at unit stride."""
    n = k.loop_ranges()[0]
    if type(n) is not int:
        return False
    return any(tuple(ld.index.terms) == (("i", 1),) and
               n * ld.buf.dtype.np.itemsize >= FLAT_PREFETCH_MIN_BYTES
               for ld in unit_loads(k.body))


def flat_prefetched(k: Any, openmp: bool, head: list) -> list | None:
    """The lines of flat pointwise kernel ``k`` (``head``: its signature lines) in blocks of
    ``STREAM_BLOCK_ELEMS`` that prefetch its large inputs a page ahead, or None where that does
    not apply (small or symbolic sizes, input checks, no unit-stride input)."""
    from ember.compiler.c.codegen.omp import omp_for
    if not k.flat or not k.ranges or k.has_checks() or not big_inputs(k):
        return None
    pf = stream_prefetch(unit_loads(k.body), "b_")
    if not pf:
        return None
    n, blk = k.loop_ranges()[0], STREAM_BLOCK_ELEMS
    lines = list(head) + [f"  const int64_t n_ = {n};"]
    if openmp:
        lines.append("  " + omp_for("n_"))
    lines += [f"  for (int64_t b_ = 0; b_ < n_; b_ += {blk}) {{",
              f"    const int64_t e_ = n_ - b_ < {blk} ? n_ - b_ : {blk};"]
    lines += ["    " + p for p in pf]
    if openmp:
        lines.append("    #pragma omp simd")
    lines.append("    for (int64_t i = b_; i < b_ + e_; i++) {")
    lines += [f"      {st}" for st in k.body]
    return lines + ["    }", "  }", "}"]


def fits_prefetch(row: str, size: int) -> str | None:
    """The condition that rows of ``row`` elements of ``size`` bytes are prefetched: ``""``
    (no condition: they fit), ``" && ..."`` (a runtime size), or None (too long)."""
    if row.isdigit():
        return "" if int(row) * size <= PREFETCH_ROW_BYTES else None
    return f" && ({row}) * {size} <= {PREFETCH_ROW_BYTES}"


__all__ = ["FLAT_PREFETCH_MIN_BYTES", "PREFETCH_ROW_BYTES", "STREAM_BLOCK_ELEMS",
           "STREAM_PREFETCH_BYTES", "big_inputs", "fits_prefetch", "flat_prefetched",
           "next_row_prefetch", "stream_prefetch", "unit_loads", "walk_loads"]

"""Non-temporal (streaming) stores for large outputs that are not re-read soon.

A plain store to a line that is not in cache first reads the line (read for ownership): a
kernel that reads one array and writes another moves three arrays' bytes, not two.  A
non-temporal store writes whole lines straight to memory without reading them.  It pays only
when the output does not fit in cache anyway (then the next kernel reads it from memory either
way); for an output that fits, it evicts data the next kernel would have found in cache
(measured on the AVX-512 Xeon VM of these sessions: a 1 MiB copy 5x slower with streaming
stores, 16-64 MiB copies 1.2-1.4x faster, and 16-32 MiB written then read back no slower;
the crossover is between 4 and 16 MiB of output although the VM reports 480 MiB of L3: the
host's cache, shared).  So a kernel streams its
output when the output is at least ``STREAM_MIN_BYTES`` (16 MiB; ``EMBER_STREAM_STORE_BYTES``
overrides it, ``0`` turns streaming off).

How a kernel streams: it computes a tile of its output (a few KiB, or one row of a row
kernel) into a buffer on the stack, in L1, with the same vectorized loop as before, then
``ember_stream_store`` copies the tile to the output with 64-byte (AVX-512) or 32-byte
(AVX) non-temporal stores; the bytes before the first 64-byte boundary and after the last
whole vector are copied with ``memcpy`` (unaligned heads and tails: outputs that are views
into an arena, odd sizes).  Streaming stores are weakly ordered, so each thread ends its part
of the loop with ``sfence`` before the OpenMP region's barrier (``region``).  The values
written are the tile's: no result changes.  On a target without AVX the helper is a
``memcpy``.

Which kernels: flat pointwise kernels whose one store is the loop's own element (the gelu
chain, large elementwise ops), softmax/log_softmax row kernels (``unit._row_kernel``) and
reductions whose last pass writes a row of a per-element result (layer_norm), both with rows
of at most ``ROW_MAX_BYTES``.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ember.compiler.c.codegen import csrc
from ember.compiler.c.codegen.prefetch import STREAM_BLOCK_ELEMS, stream_prefetch, unit_loads
from ember.compiler.c.ir.loop_ir import Index, Kernel, Store, numel, store_expr

STREAM_MIN_BYTES = int(os.environ.get("EMBER_STREAM_STORE_BYTES", str(16 << 20)))
"""Outputs of at least this many bytes are written with non-temporal stores (0: never)."""

TILE_BYTES = 8192
"""A pointwise kernel's tile: computed into L1, then streamed to the output."""

ROW_MAX_BYTES = 32768
"""Row kernels stream rows up to this size (the row's scratch lives on the stack)."""

HELPERS = csrc("stream_store.h")
"""The streaming-store helpers (``csrc/stream_store.h``), inserted where a kernel streams."""


def streams(nbytes: Any) -> bool:
    """Whether an output of ``nbytes`` (an int, or a symbolic size: never) is streamed."""
    return STREAM_MIN_BYTES > 0 and type(nbytes) is int and nbytes >= STREAM_MIN_BYTES


def pointwise_store(k: Any) -> Store | None:
    """The one Store of a flat pointwise kernel that streams (its index is the loop's own
    element, its output large), or None."""
    if type(k) is not Kernel or not k.flat or k.has_checks():
        return None
    st = [s for s in k.body if isinstance(s, Store)]
    if len(st) != 1 or st[0].buf.strides is not None or str(st[0].index) != "i":
        return None
    n = numel(k.ranges)
    return st[0] if type(n) is int and streams(n * st[0].buf.dtype.np.itemsize) else None


def row_store(stores: list, var: str, outer: list, n: Any) -> tuple | None:
    """For the last pass of a reduction (its per-element ``stores``, inner loop ``var`` of
    ``n`` elements, kept loops ``outer``: (var, range) pairs): (the Store, the C index of its
    row's first element) when that one store writes rows contiguous in ``var`` into a large
    output, else None."""
    if len(stores) != 1 or type(n) is not int or not outer:
        return None
    st = stores[0]
    size = st.buf.dtype.np.itemsize
    terms = dict(st.index.terms)
    if terms.get(var) != 1 or n * size > ROW_MAX_BYTES or st.buf.strides is not None:
        return None
    total = numel(st.buf.shape)
    if not streams(total * size if type(total) is int else None):
        return None
    base = Index(st.index.offset, tuple((v, s) for v, s in st.index.terms if v != var))
    return st, str(base)


def region(pragma: str | None, ind: str) -> tuple:
    """(lines opening, lines closing) a loop whose stores stream: ``pragma`` (``omp_for``'s
    line, or None without OpenMP) becomes a parallel region whose work-shared loop does not
    wait, and every thread fences its streaming stores before the region's barrier."""
    if pragma is None:
        return [f"{ind}{{"], [f"{ind}  ember_stream_fence();", f"{ind}}}"]
    head = re.sub(r"#pragma omp parallel for( simd)?", "#pragma omp parallel", pragma.strip())
    return ([f"{ind}{head}", f"{ind}{{", f"{ind}#pragma omp for schedule(static) nowait"],
            [f"{ind}  ember_stream_fence();", f"{ind}}}"])


def pointwise_source(k: Kernel, st: Store, params: list, openmp: bool, ints: str) -> list:
    """Lines of flat pointwise kernel ``k`` whose store ``st`` streams: tiles of TILE_BYTES
    computed into a stack buffer by the usual vectorized loop (in blocks that prefetch the
    inputs ahead: ``prefetch.stream_prefetch``), each then streamed."""
    from ember.compiler.c.codegen import half
    from ember.compiler.c.codegen.omp import omp_for
    ct = st.buf.ctype
    tile = TILE_BYTES // st.buf.dtype.np.itemsize
    n = numel(k.ranges)
    lines = [f"/* {' '.join(k.ops)} (streaming stores) */",
             f"static void {k.name}({', '.join(params)}) {{", ints,
             "  (void)ints; (void)floats;", f"  const int64_t n_ = {n};"]
    opened, closed = region(omp_for("n_") if openmp else None, "  ")
    lines += opened
    lines += [f"  for (int64_t i0_ = 0; i0_ < n_; i0_ += {tile}) {{",
              f"    {ct} tile_[{tile}] __attribute__((aligned(64)));",
              f"    const int64_t m_ = n_ - i0_ < {tile} ? n_ - i0_ : {tile};"]
    blocks = half.plan(k)
    loads = unit_loads(k.body)
    if blocks is not None:  # float16/bfloat16 at unit stride: converted in blocks (half.py)
        lines += ["    for (int64_t ib_ = i0_; ib_ < i0_ + m_; ib_ += EMBER_HB) {",
                  "      const int64_t nb_ = i0_ + m_ - ib_ < EMBER_HB ? "
                  "i0_ + m_ - ib_ : EMBER_HB;"]
        lines += ["      " + p for p in stream_prefetch(loads, "ib_", half.BLOCK)]
        lines += half.block_body(k, blocks, "      ", (st, "tile_", "i0_"))
        lines.append("    }")
    else:
        # blocks of STREAM_BLOCK_ELEMS, each prefetching its inputs ahead (prefetch.py)
        pf = stream_prefetch(loads, "i0_ + b_")
        step = STREAM_BLOCK_ELEMS if pf else tile
        lines += [f"    for (int64_t b_ = 0; b_ < m_; b_ += {step}) {{",
                  f"      const int64_t e_ = m_ - b_ < {step} ? m_ - b_ : {step};"]
        lines += ["      " + p for p in pf]
        if openmp:
            lines.append("      #pragma omp simd")
        lines += ["      for (int64_t j_ = b_; j_ < b_ + e_; j_++) {",
                  "        const int64_t i = i0_ + j_;"]
        for s in k.body:
            lines.append(f"        tile_[j_] = {store_expr(s.buf.dtype, str(s.expr))};"
                         if s is st else f"        {s}")
        lines += ["      }", "    }"]
    lines += [f"    ember_stream_store({st.buf.name} + i0_, tile_, (size_t)m_ * sizeof({ct}));",
              "  }"]
    lines += closed
    lines.append("}")
    return lines


__all__ = ["HELPERS", "ROW_MAX_BYTES", "STREAM_MIN_BYTES", "TILE_BYTES", "pointwise_source",
           "pointwise_store", "region", "row_store", "streams"]

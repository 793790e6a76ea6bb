"""Row gathers and scatter-adds -> ``IndexKernel``s; ``basic_index_backward`` -> copy kernels.

* ``embedding`` (``out[r, :] = weight[idx[r], :]``, the token lookup of a language model) is a
  gather over the rows of ``idx`` (any static layout of ``idx`` and of the 2-D weight), rows
  split over the threads.  An index outside ``[0, num_weights)`` makes the entry return 1 and the
  graph rerun eagerly, which raises eager's ``EmberIndexError``.  Lowered when the op does not
  scale its rows (``masked=False``, or ``masked`` without ``padding_idx`` and
  ``scale_grad_by_freq``); values are copied exactly (any storage dtype).
* ``embedding_backward`` (``out = zeros(num_weights, D); out[idx[r], :] += g[r, :]``) is a
  scatter-add: column blocks are split over the threads and each block adds the rows in index
  order, so every element sums exactly as eager's ``np.add.at`` does (same order, same dtype:
  the result is bit-identical).  float32/float64 without ``padding_idx``/``scale_grad_by_freq``
  (eager accumulates float16/bfloat16 in float32 and rounds once: those stay eager).
* ``basic_index_backward`` (zeros of the input's shape with the gradient written at the basic
  index, the backward of ``weight[:t]``) is two plain copy kernels: zeros over the output, then
  the gradient stored through the region's geometry.

Static sizes only; anything else stays an extern (a logged fallback).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ember.compiler.c.ir.loop_ir import (
    COMPUTE_CTYPES,
    STORAGE_CTYPES,
    Buffer,
    Const,
    Geometry,
    Index,
    Kernel,
    Let,
    Load,
    Local,
    Store,
    contiguous_strides,
)

INDEX_OPS = frozenset({"embedding", "embedding_backward", "basic_index_backward"})
# column block of a scatter-add: one thread's share of every row (a multiple of 64 bytes)
SCATTER_BLOCK = 64


@dataclass(eq=False)
class IndexKernel:
    """``scatter=False``: ``out[r, c] = src[idx[r] * src_rs + c * src_cs]`` (a gather of rows
    of the 2-D ``src``); ``scatter=True``: ``out`` (``num x cols``, C-contiguous) zeroed, then
    ``out[idx[r], c] += src[r, c]`` for ``r`` in order (``src`` rows through ``src_geom``).
    ``idx_geom``: the index tensor's geometry (its elements are the rows ``r``, C order)."""

    name: str
    scatter: bool
    src: Buffer
    src_geom: Geometry
    idx: Buffer
    idx_geom: Geometry
    out: Buffer
    num: int
    cols: int
    ops: list = field(default_factory=list)

    @property
    def rows(self) -> int:
        n = 1
        for s in self.idx_geom.shape:
            n *= s
        return n

    def buffers(self) -> tuple[list, list]:
        return [self.src, self.idx], [self.out]

    def has_checks(self) -> bool:
        return True  # returns 1 for an index out of range

    def __str__(self) -> str:
        what = "scatter_add" if self.scatter else "gather"
        return (f"kernel {self.name}  // {' '.join(self.ops)} ({what} of {self.rows} rows x "
                f"{self.cols}, {self.num} weights)\n  {self.out.name} = {what}("
                f"{self.src.name}{list(self.src_geom.strides)}+{self.src_geom.offset}, "
                f"{self.idx.name}{list(self.idx_geom.strides)}+{self.idx_geom.offset})")


# ------------------------------------------------------------------------------ lowering
def lower(lw: Any, i: int, n: Any) -> str | None:
    """Lower node ``i`` into ``lw``'s open segment; None, or why not."""
    if n.op.name == "basic_index_backward":
        return _basic_backward(lw, i, n)
    return _embedding(lw, i, n)


def _static(*geoms: Geometry) -> bool:
    return all(type(x) is int for g in geoms
               for x in tuple(g.shape) + tuple(g.strides) + (g.offset,))


def _embedding(lw: Any, i: int, n: Any) -> str | None:
    from ember.compiler.c.lower import context as L
    from ember.compiler.c.lower.gemm import _materialize

    scatter = n.op.name == "embedding_backward"
    if any(not L._is_ref(a) for a in n.args):
        return "a non-tensor operand"
    p = n.params
    if p.get("padding_idx") is not None or p.get("scale_grad_by_freq"):
        if scatter or p.get("masked"):
            return "padding_idx or scale_grad_by_freq scales the rows"
    src_r, idx_r = n.args
    out_shape, dt = n.specs[0]
    out_shape = tuple(out_shape)
    if lw._dtype(idx_r).name != "int64":
        return "index dtype is not int64"
    if scatter and dt.np.name not in ("float32", "float64"):
        return f"dtype {dt.name} (eager accumulates it in float32)"
    if dt.np.name not in STORAGE_CTYPES or lw._dtype(src_r) != dt:
        return f"dtype {dt.name}"
    src, idx = _materialize(lw, src_r), _materialize(lw, idx_r)
    if src is None or idx is None:
        return "an operand is not in memory"
    if not _static(src.geom, idx.geom) or any(type(x) is not int for x in out_shape):
        return "dynamic sizes"
    if scatter:
        num, cols = out_shape
        if tuple(src.geom.shape) != tuple(idx.geom.shape) + (cols,):
            return "gradient shape"
    else:
        if len(src.geom.shape) != 2:
            return "weight is not 2-D"
        num, cols = src.geom.shape
    lw._close_group()
    lw._open_segment()
    out = lw._buffer(dt, out_shape, "temp")
    kname = lw._kernel_name()
    lw.segment.kernels.append(IndexKernel(kname, scatter, src.buf, src.geom, idx.buf, idx.geom,
                                          out, int(num), int(cols), [n.op.name]))
    lw.stats.kernels += 1
    lw._bind(i, 0, out, Geometry.contiguous(out_shape), dt)
    L._log("fusion", f"{kname}: {n.op.name} as one {'scatter-add' if scatter else 'gather'} "
           f"kernel", 3)
    return None


def _region(shape: tuple, spec: tuple) -> Geometry | None:
    """The geometry (element offset and strides into C-contiguous ``shape``) that the basic
    index ``spec`` selects, as eager's view of it; None when it cannot be computed."""
    from ember.ops.indexing import np_basic_key
    try:
        probe = np.lib.stride_tricks.as_strided(
            np.zeros(1, np.int64), shape=shape,
            strides=tuple(8 * s for s in contiguous_strides(shape)))
        v = probe[np_basic_key(spec)]
    except Exception:  # noqa: BLE001 - a key we cannot replay stays an extern
        return None
    offset = (v.__array_interface__["data"][0] - probe.__array_interface__["data"][0]) // 8
    return Geometry(tuple(v.shape), tuple(s // 8 for s in v.strides), offset)


def _basic_backward(lw: Any, i: int, n: Any) -> str | None:
    from ember.compiler.c.lower import context as L
    from ember.compiler.c.lower.gemm import _materialize

    out_shape, dt = n.specs[0]
    out_shape = tuple(out_shape)
    if not L._is_ref(n.args[0]) or dt.np.name not in STORAGE_CTYPES:
        return f"dtype {dt.name} (no C storage type)"
    if any(type(x) is not int for x in out_shape) or 0 in out_shape:
        return "dynamic sizes or an empty result"
    g = _materialize(lw, n.args[0])
    if g is None:
        return "an operand is not in memory"
    region = _region(out_shape, n.params["spec"])
    if region is None or tuple(region.shape) != tuple(g.geom.shape) or not _static(g.geom):
        return "index region not computable"
    lw._close_group()
    lw._open_segment()
    out = lw._buffer(dt, out_shape, "temp")
    ct = COMPUTE_CTYPES[dt.np.name]
    nk = sum(len(s.kernels) for s in lw._segments())
    loop_vars = [f"i{d}" for d in range(len(out_shape))]
    zero = Store(out, Index(0, tuple(zip(loop_vars, contiguous_strides(out_shape)))),
                 Const(f"({ct})0"))
    lw.segment.kernels.append(Kernel(f"kernel{nk}", out_shape, [zero], False, [n.op.name]))
    shape = tuple(g.geom.shape)
    if 0 not in shape:
        loop_vars = [f"i{d}" for d in range(len(shape))]
        dst = Index(region.offset, tuple((v, s) for v, s, k in zip(loop_vars, region.strides,
                                                                     shape) if k != 1))
        body = [Let("t0", ct, Load(g.buf, L._index(g.geom, loop_vars, False))),
                Store(out, dst, Local("t0"))]
        lw.segment.kernels.append(Kernel(f"kernel{nk + 1}", shape, body, False, [n.op.name]))
    lw.stats.kernels += 1 + (0 not in shape)
    lw._bind(i, 0, out, Geometry.contiguous(out_shape), dt)
    L._log("fusion", f"{n.op.name} as zeros and a copy kernel", 3)
    return None


# ------------------------------------------------------------------------------ C
def _offset_expr(geom: Geometry, flat: str) -> str:
    """C expression: the element offset of flat (C-order) position ``flat`` of ``geom``."""
    shape, strides = tuple(geom.shape), tuple(geom.strides)
    if strides == contiguous_strides(shape) or len(shape) == 0:
        return f"({geom.offset} + {flat})" if shape else str(geom.offset)
    terms, inner = [], 1
    for n, s in reversed(list(zip(shape, strides))):
        if n != 1 and s != 0:
            terms.append(f"(({flat}) / {inner} % {n}) * {s}")
        inner *= n
    return "(" + " + ".join([str(geom.offset)] + terms) + ")"


def kernel_source(k: IndexKernel, openmp: bool) -> str:
    """The C function of one IndexKernel (stores, then loads, then ints/floats)."""
    from ember.compiler.c.codegen.unit import _omp_for

    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    t = k.out.ctype
    lines = [f"/* {' '.join(k.ops)} ({'scatter-add' if k.scatter else 'gather'} of rows) */",
             f"static int {k.name}({', '.join(params)}) {{",
             "  (void)ints; (void)floats;",
             "  int bad_ = 0;"]
    rows, cols, num = k.rows, k.cols, k.num
    at = _offset_expr(k.idx_geom, "r")
    if not k.scatter:
        g = k.src_geom
        rs, cs = g.strides
        if openmp:
            lines.append("  " + _omp_for(str(rows * cols)) + " reduction(|: bad_)")
        lines += [f"  for (int64_t r = 0; r < {rows}; r++) {{",
                  f"    const int64_t w_ = {k.idx.name}[{at}];",
                  f"    if (w_ < 0 || w_ >= {num}) {{ bad_ = 1; continue; }}",
                  f"    const {t} *restrict s_ = {k.src.name} + {g.offset} + w_ * {rs};",
                  f"    {t} *restrict d_ = {k.out.name} + r * {cols};",
                  "    #pragma omp simd",
                  f"    for (int64_t c = 0; c < {cols}; c++) d_[c] = s_[c * {cs}];",
                  "  }"]
    else:
        g = k.src_geom
        rs, cs = _row_strides(g, cols)
        blocks = -(-cols // SCATTER_BLOCK)
        lines += [f"  memset({k.out.name}, 0, sizeof({t}) * {num * cols});",
                  f"  for (int64_t r = 0; r < {rows}; r++) {{  /* checked first: eager raises "
                  "before writing */",
                  f"    const int64_t w_ = {k.idx.name}[{at}];",
                  f"    if (w_ < 0 || w_ >= {num}) return 1;",
                  "  }"]
        if openmp:
            lines.append("  " + _omp_for(str(rows * cols)))
        lines += [f"  for (int64_t b_ = 0; b_ < {blocks}; b_++) {{",
                  f"    const int64_t c0 = b_ * {SCATTER_BLOCK}, "
                  f"c1 = c0 + {SCATTER_BLOCK} < {cols} ? c0 + {SCATTER_BLOCK} : {cols};",
                  f"    for (int64_t r = 0; r < {rows}; r++) {{  /* in order, as np.add.at */",
                  f"      {t} *restrict d_ = {k.out.name} + {k.idx.name}[{at}] * {cols};",
                  f"      const {t} *restrict s_ = {k.src.name} + {_src_row(g, 'r', rs)};",
                  "      #pragma omp simd",
                  f"      for (int64_t c = c0; c < c1; c++) d_[c] += s_[c * {cs}];",
                  "    }",
                  "  }"]
    lines += ["  return bad_;", "}"]
    return "\n".join(lines) + "\n"


def _row_strides(g: Geometry, cols: int) -> tuple:
    """(row stride or None, column stride) of the gradient rows ``(..., cols)``: the row stride
    when the leading dims fold into one (else ``_src_row`` unravels them)."""
    shape, st = tuple(g.shape), tuple(g.strides)
    lead = shape[:-1]
    fold = all(st[d] == st[d + 1] * shape[d + 1] for d in range(len(lead) - 1)
               if shape[d] != 1) if lead else True
    return (st[-2] if lead and fold else None), st[-1]


def _src_row(g: Geometry, r: str, rs: Any) -> str:
    if rs is not None:
        return f"{g.offset} + {r} * {rs}"
    lead = Geometry(tuple(g.shape)[:-1], tuple(g.strides)[:-1], g.offset)
    return _offset_expr(lead, r)


__all__ = ["INDEX_OPS", "IndexKernel", "kernel_source", "lower"]

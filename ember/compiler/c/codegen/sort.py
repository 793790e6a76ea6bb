"""C of ``SortKernel`` (``ir/kernels.py``): a stable bottom-up merge sort of each slice's
keys (in the compute type; NaN largest), its first ``count`` values and indices stored.  The
lowering: ``lower/sort.py``."""

from __future__ import annotations

from ember.compiler.c.codegen.index import _dot
from ember.compiler.c.codegen.omp import omp_for
from ember.compiler.c.ir.kernels import SortKernel
from ember.compiler.c.ir.loop_ir import compute_ctype, contiguous_strides, load_expr


def sort_source(k: SortKernel, openmp: bool) -> str:
    """The C functions (comparison, then kernel) of one SortKernel."""
    vals, idx = k.outs
    ct = compute_ctype(k.dtype)
    xs, st = tuple(k.x_geom.shape), tuple(k.x_geom.strides)
    n, dim = xs[k.dim], k.dim
    oshape = xs[:dim] + (k.count,) + xs[dim + 1:]
    ost = contiguous_strides(oshape)
    rshape = xs[:dim] + xs[dim + 1:]
    rows = 1
    for m in rshape:
        rows *= m
    xrow = _dot("r", rshape, st[:dim] + st[dim + 1:])
    orow = _dot("r", rshape, ost[:dim] + ost[dim + 1:])
    # "a strictly before b": NaN is the largest key; equal keys are never swapped (stable)
    before = ("(a > b) || (a != a && b == b)" if k.descending else
              "(a < b) || (b != b && a == a)")
    lines = [f"static inline int {k.name}_before({ct} a, {ct} b) {{ return {before}; }}",
             f"/* {' '.join(k.ops)} (stable sort along dim {dim}) */",
             f"static int {k.name}({vals.ctype} *restrict {vals.name}, "
             f"{idx.ctype} *restrict {idx.name}, const {k.x.ctype} *restrict {k.x.name}, "
             "const int64_t *restrict ints, const double *restrict floats) {",
             "  (void)ints; (void)floats;",
             "  int bad_ = 0;"]
    if openmp:
        lines.append("  " + omp_for(str(rows * n)) + " reduction(|: bad_)")
    lines += [
        f"  for (int64_t r = 0; r < {rows}; r++) {{",
        f"    int64_t *m_ = (int64_t *)malloc(sizeof(int64_t) * {2 * n});",
        f"    {ct} *k_ = ({ct} *)malloc(sizeof({ct}) * {n});",
        "    if (!m_ || !k_) { free(m_); free(k_); bad_ = 1; continue; }",
        f"    int64_t *p_ = m_, *q_ = m_ + {n};",
        f"    const int64_t xb_ = {k.x_geom.offset} + {xrow}, ob_ = {orow};",
        f"    for (int64_t j = 0; j < {n}; j++) {{ "
        f"k_[j] = {load_expr(k.dtype, f'{k.x.name}[xb_ + j * {st[dim]}]')}; p_[j] = j; }}",
        f"    for (int64_t w = 1; w < {n}; w *= 2) {{",
        f"      for (int64_t lo = 0; lo < {n}; lo += 2 * w) {{",
        f"        const int64_t mid = lo + w < {n} ? lo + w : {n}, "
        f"hi = lo + 2 * w < {n} ? lo + 2 * w : {n};",
        "        int64_t i = lo, j = mid, t = lo;",
        "        while (t < hi) {",
        f"          if (j < hi && (i >= mid || {k.name}_before(k_[p_[j]], k_[p_[i]]))) "
        "q_[t++] = p_[j++];",
        "          else q_[t++] = p_[i++];",
        "        }",
        "      }",
        "      int64_t *s_ = p_; p_ = q_; q_ = s_;",
        "    }",
        f"    for (int64_t t = 0; t < {k.count}; t++) {{",
        f"      {vals.name}[ob_ + t * {ost[dim]}] = {k.x.name}[xb_ + p_[t] * {st[dim]}];",
        f"      {idx.name}[ob_ + t * {ost[dim]}] = p_[t];",
        "    }",
        "    free(m_); free(k_);",
        "  }",
        "  return bad_;", "}"]
    return "\n".join(lines) + "\n"


__all__ = ["sort_source"]

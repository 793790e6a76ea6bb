"""C of ``SortKernel`` (``ir/kernels.py``): a stable bottom-up merge sort of each slice's
keys (in the compute type; NaN largest), its first ``count`` values and indices stored.  The
lowering: ``lower/sort.py``."""

from __future__ import annotations

from ember.compiler.c.codegen.index import _dot
from ember.compiler.c.codegen.omp import omp_for
from ember.compiler.c.ir.kernels import SearchKernel, SortKernel
from ember.compiler.c.ir.loop_ir import (
    compute_ctype,
    contiguous_strides,
    load_expr,
    store_expr,
)


def sort_source(k: SortKernel, openmp: bool) -> str:
    """The C functions (comparison, then kernel) of one SortKernel."""
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
    outs = [f"{b.ctype} *restrict {b.name}" for b in k.outs if b is not None]
    lines = [f"static inline int {k.name}_before({ct} a, {ct} b) {{ return {before}; }}",
             f"/* {' '.join(k.ops)} (stable sort along dim {dim}) */",
             f"static int {k.name}({', '.join(outs)}, const {k.x.ctype} *restrict {k.x.name}, "
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
    ] + (_store_all(k, ost, st) if k.pick is None else _store_pick(k, n, st)) + [
        "    free(m_); free(k_);",
        "  }",
        "  return bad_;", "}"]
    return "\n".join(lines) + "\n"


def _store_all(k: SortKernel, ost: tuple, st: tuple) -> list:
    vals, idx = k.outs
    return [f"    for (int64_t t = 0; t < {k.count}; t++) {{",
            f"      {vals.name}[ob_ + t * {ost[k.dim]}] = {k.x.name}[xb_ + p_[t] * {st[k.dim]}];",
            f"      {idx.name}[ob_ + t * {ost[k.dim]}] = p_[t];",
            "    }"]


def _store_pick(k: SortKernel, n: int, st: tuple) -> list:
    """Sorted position ``pick`` of the slice into element ``r`` (NaN sorts last: a slice holds
    NaN when its last sorted key is NaN, its first NaN is position ``n - (NaNs)``)."""
    vals, idx = k.outs
    lines = [f"    int64_t t_ = {k.pick};"]
    if k.nan and k.dtype.is_floating_point:
        lines += [f"    if (k_[p_[{n - 1}]] != k_[p_[{n - 1}]]) {{",
                  f"      int64_t f_ = {n - 1};",
                  "      while (f_ > 0 && k_[p_[f_ - 1]] != k_[p_[f_ - 1]]) f_--;",
                  "      t_ = f_;",
                  "    }"]
    lines.append(f"    {vals.name}[r] = {k.x.name}[xb_ + p_[t_] * {st[k.dim]}];")
    if k.nan == "value" and k.dtype.is_floating_point:
        lines.append(f"    if (k_[p_[t_]] != k_[p_[t_]]) {vals.name}[r] = "
                     f"{store_expr(k.dtype, 'NAN')};")
    if idx is not None:
        lines.append(f"    {idx.name}[r] = p_[t_];")
    return lines


def search_source(k: SearchKernel, openmp: bool) -> str:
    """The C function of one SearchKernel (PyTorch's binary search, its exact comparisons:
    NaN and unsorted rows give its answers)."""
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    ct = compute_ctype(k.dtype)
    ss, sst = tuple(k.seq_geom.shape), tuple(k.seq_geom.strides)
    vs, vst = tuple(k.values_geom.shape), tuple(k.values_geom.strides)
    n, lead = ss[-1], ss[:-1]
    total = 1
    for m in vs:
        total *= m
    per = vs[-1] if lead else max(total, 1)
    rows = max(total // per, 1) if per else 1
    row = f"{k.seq_geom.offset} + {_dot('(p / ' + str(per) + ')', lead, sst[:-1])}"
    at = f"{k.seq.name}[row_ + (j_) * {sst[-1]}]"
    lines = [f"/* {' '.join(k.ops)} (binary search) */",
             f"static int {k.name}({', '.join(params)}) {{",
             "  (void)ints; (void)floats;"]
    if k.sorter is not None:
        g = k.sorter_geom
        sshape, sstr = tuple(g.shape), tuple(g.strides)
        cnt = rows * n
        lines += [f"  for (int64_t q = 0; q < {cnt}; q++) {{  /* eager checks every index */",
                  f"    const int64_t s_ = {k.sorter.name}[{g.offset} + "
                  f"{_dot('q', sshape, sstr)}];",
                  f"    if (s_ < 0 || s_ >= {n}) return 1;",
                  "  }"]
        srow = f"{g.offset} + {_dot('(p / ' + str(per) + ')', lead, sstr[:-1])}"
        at = (f"{k.seq.name}[row_ + {k.sorter.name}[srow_ + (j_) * {sstr[-1]}] * "
              f"{sst[-1]}]")
    cmp = "mv_ > v_" if k.right else "mv_ >= v_"
    if openmp:
        lines.append("  " + omp_for(str(total)))
    lines += [f"  for (int64_t p = 0; p < {total}; p++) {{",
              f"    const int64_t row_ = {row};"]
    if k.sorter is not None:
        lines.append(f"    const int64_t srow_ = {srow};")
    val = f"{k.values.name}[{k.values_geom.offset} + {_dot('p', vs, vst)}]"
    lines += [f"    const {ct} v_ = {load_expr(k.dtype, val)};",
              f"    int64_t lo_ = 0, hi_ = {n};",
              "    while (lo_ < hi_) {",
              "      const int64_t j_ = lo_ + ((hi_ - lo_) >> 1);",
              f"      const {ct} mv_ = {load_expr(k.dtype, at)};",
              f"      if (!({cmp})) lo_ = j_ + 1; else hi_ = j_;",
              "    }",
              f"    {k.out.name}[p] = lo_;",
              "  }", "  return 0;", "}"]
    return "\n".join(lines) + "\n"


__all__ = ["search_source", "sort_source"]

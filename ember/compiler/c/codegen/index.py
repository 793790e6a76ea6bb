"""C of ``IndexKernel`` (``ir/kernels.py``): a gather of rows split over the threads, or a
scatter-add whose column blocks are split over the threads (each block adds the rows in index
order, as ``np.add.at``).  The lowering: ``lower/index.py``."""

from __future__ import annotations

from typing import Any

from ember.compiler.c.codegen.omp import omp_for
from ember.compiler.c.ir.kernels import AdvIndexKernel, DimIndexKernel, IndexKernel
from ember.compiler.c.ir.loop_ir import (
    Geometry,
    compute_ctype,
    contiguous_strides,
    load_expr,
    round_expr,
    s_mul,
    store_expr,
)

# column block of a scatter-add: one thread's share of every row (a multiple of 64 bytes)
SCATTER_BLOCK = 64


def _offset_expr(geom: Geometry, flat: str) -> str:
    """C expression: the element offset of flat (C-order) position ``flat`` of ``geom``."""
    shape, strides = tuple(geom.shape), tuple(geom.strides)
    if strides == contiguous_strides(shape) or len(shape) == 0:
        return f"({geom.offset} + {flat})" if shape else str(geom.offset)
    terms, inner = [], 1
    for n, s in reversed(list(zip(shape, strides))):
        if n != 1 and s != 0:
            terms.append(f"(({flat}) / {inner} % {n}) * {s}")
        inner = s_mul(inner, n)
    return "(" + " + ".join([str(geom.offset)] + terms) + ")"


def kernel_source(k: IndexKernel, openmp: bool, ints: str = "") -> str:
    """The C function of one IndexKernel (stores, then loads, then ints/floats); ``ints``: the
    line where the runtime-integer declarations go (the unit fills it)."""
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    lines = [f"/* {' '.join(k.ops)} ({'scatter-add' if k.scatter else 'gather'} of rows) */",
             f"static int {k.name}({', '.join(params)}) {{",
             "  (void)ints; (void)floats;"] + ([ints] if ints else []) + ["  int bad_ = 0;"]
    at = _offset_expr(k.idx_geom, "r")
    lines += _gather_lines(k, at, openmp) if not k.scatter else _scatter_lines(k, at, openmp)
    lines += ["  return bad_;", "}"]
    return "\n".join(lines) + "\n"


def _scaled(k: IndexKernel) -> bool:
    return k.padding_idx is not None or k.scale_freq


def _factor(k: IndexKernel) -> str:
    """C text of a row's double factor (eager's ``_grad_scale``): 0 at padding_idx, else
    1/count of its index when scale_freq, else 1."""
    one = "1.0 / (double)cnt_[w_]" if k.scale_freq else "1.0"
    return one if k.padding_idx is None else f"(w_ == {k.padding_idx} ? 0.0 : {one})"


def _count_lines(k: IndexKernel, at: str) -> list:
    """Index counts for scale_freq (eager's bincount), the indices checked first."""
    if not k.scale_freq:
        return []
    return [f"  int64_t *cnt_ = (int64_t *)calloc({k.num}, sizeof(int64_t));",
            "  if (!cnt_) return 1;",
            f"  for (int64_t r = 0; r < {k.rows}; r++) {{",
            f"    const int64_t w_ = {k.idx.name}[{at}];",
            f"    if (w_ < 0 || w_ >= {k.num}) {{ free(cnt_); return 1; }}",
            "    cnt_[w_]++;",
            "  }"]


def _gather_lines(k: IndexKernel, at: str, openmp: bool) -> list:
    g = k.src_geom
    rs, cs = g.strides
    t = k.out.ctype
    rows, cols, num = k.rows, k.cols, k.num
    dt = k.src.dtype
    # eager's masked gather: (row * factor) in double, rounded to the dtype
    elem = f"s_[c * {cs}]"
    copy = store_expr(dt, f"(double){load_expr(dt, elem)} * f_") if _scaled(k) else elem
    lines = _count_lines(k, at)
    if openmp:
        lines.append("  " + omp_for(str(s_mul(rows, cols))) + " reduction(|: bad_)")
    lines += [f"  for (int64_t r = 0; r < {rows}; r++) {{",
              f"    const int64_t w_ = {k.idx.name}[{at}];",
              f"    if (w_ < 0 || w_ >= {num}) {{ bad_ = 1; continue; }}",
              f"    const {t} *restrict s_ = {k.src.name} + {g.offset} + w_ * {rs};",
              f"    {t} *restrict d_ = {k.out.name} + r * {cols};",
              f"    const double f_ = {_factor(k)}; (void)f_;" if _scaled(k) else "",
              "    #pragma omp simd",
              f"    for (int64_t c = 0; c < {cols}; c++) d_[c] = {copy};",
              "  }"]
    if k.scale_freq:
        lines.append("  free(cnt_);")
    return [ln for ln in lines if ln]


def _scatter_lines(k: IndexKernel, at: str, openmp: bool) -> list:
    g = k.src_geom
    rs, cs = _row_strides(g, cols := k.cols)
    t, dt = k.out.ctype, k.out.dtype
    ct = compute_ctype(dt)
    rows, num = k.rows, k.num
    blocks = -(-cols // SCATTER_BLOCK)
    acc = k.out.name if ct == t else "acc_"
    lines = [f"  for (int64_t r = 0; r < {rows}; r++) {{  /* checked first: eager raises "
             "before writing */",
             f"    const int64_t w_ = {k.idx.name}[{at}];",
             f"    if (w_ < 0 || w_ >= {num}) return 1;",
             "  }"] + _count_lines(k, at)
    # eager scales the rows in the dtype (the factor rounded to it), then accumulates
    val = load_expr(dt, f"s_[c * {cs}]")
    if _scaled(k):
        val = round_expr(dt, f"{val} * {round_expr(dt, f'({ct})f_')}")
    if acc == k.out.name:
        lines.insert(0, f"  memset({k.out.name}, 0, sizeof({t}) * {num * cols});")
    else:  # float16/bfloat16: eager accumulates in float32 and rounds once
        lines += [f"  {ct} *acc_ = ({ct} *)calloc({num * cols}, sizeof({ct}));",
                  "  if (!acc_) return 1;"]
    if openmp:
        lines.append("  " + omp_for(str(s_mul(rows, cols))))
    lines += [f"  for (int64_t b_ = 0; b_ < {blocks}; b_++) {{",
              f"    const int64_t c0 = b_ * {SCATTER_BLOCK}, "
              f"c1 = c0 + {SCATTER_BLOCK} < {cols} ? c0 + {SCATTER_BLOCK} : {cols};",
              f"    for (int64_t r = 0; r < {rows}; r++) {{  /* in order, as np.add.at */",
              f"      const int64_t w_ = {k.idx.name}[{at}];",
              f"      {ct} *restrict d_ = {acc} + w_ * {cols};",
              f"      const {t} *restrict s_ = {k.src.name} + {_src_row(g, 'r', rs)};",
              f"      const double f_ = {_factor(k)}; (void)f_;" if _scaled(k) else "",
              "      #pragma omp simd",
              f"      for (int64_t c = c0; c < c1; c++) d_[c] += {val};",
              "    }",
              "  }"]
    if acc != k.out.name:
        lines += [f"  for (int64_t e = 0; e < {num * cols}; e++) "
                  f"{k.out.name}[e] = {store_expr(dt, 'acc_[e]')};",
                  "  free(acc_);"]
    if k.scale_freq:
        lines.append("  free(cnt_);")
    return [ln for ln in lines if ln]


def _row_strides(g: Geometry, cols: int) -> tuple:
    """(row stride or None, column stride) of the gradient rows ``(..., cols)``: the row stride
    when the leading dims fold into one (else ``_src_row`` unravels them)."""
    shape, st = tuple(g.shape), tuple(g.strides)
    lead = shape[:-1]
    fold = all(st[d] == s_mul(st[d + 1], shape[d + 1]) for d in range(len(lead) - 1)
               if shape[d] != 1) if lead else True
    return (st[-2] if lead and fold else None), st[-1]


def _src_row(g: Geometry, r: str, rs: Any) -> str:
    if rs is not None:
        return f"{g.offset} + {r} * {rs}"
    lead = Geometry(tuple(g.shape)[:-1], tuple(g.strides)[:-1], g.offset)
    return _offset_expr(lead, r)


def _dot(flat: str, shape: tuple, strides: tuple, skip: int = -1) -> str:
    """C expression: sum over dims ``d != skip`` of (coordinate ``d`` of flat C-order position
    ``flat`` in ``shape``) times ``strides[d]``."""
    terms, inner = [], 1
    for d in reversed(range(len(shape))):
        n, s = shape[d], strides[d]
        if d != skip and n != 1 and s != 0:
            terms.append(f"(({flat}) / {inner} % {n}) * ({s})" if inner != 1 else
                         f"(({flat}) % {n}) * ({s})")
        inner = s_mul(inner, n)
    return " + ".join(terms) or "0"


def _geom1(g: Geometry) -> tuple:
    """(shape, strides) of ``g``, a 0-d geometry as one element of 1-D (as eager reshapes)."""
    return (tuple(g.shape), tuple(g.strides)) if g.shape else ((1,), (0,))


def _params(k: Any) -> str:
    """The C parameters of a kernel: its stores, its loads, then the runtime scalars."""
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    return ", ".join(params + ["const int64_t *restrict ints", "const double *restrict floats"])


def dim_index_source(k: DimIndexKernel, openmp: bool) -> str:
    """The C function of one DimIndexKernel (gather, scatter or scatter_add along a dim)."""
    ishape, istr = _geom1(k.idx_geom)
    xshape, xstr = _geom1(k.x_geom)
    n_idx = 1
    for m in ishape:
        n_idx *= m
    size, dim = xshape[k.dim], k.dim
    at = f"{k.idx_geom.offset} + {_dot('p', ishape, istr)}"
    lines = [f"/* {' '.join(k.ops)} ({k.mode} along dim {dim}) */",
             f"static int {k.name}({_params(k)}) {{",
             "  (void)ints; (void)floats;",
             "  int bad_ = 0;"]
    if k.mode == "gather":
        src = f"{k.x_geom.offset} + {_dot('p', ishape, xstr, dim)} + w_ * {xstr[dim]}"
        if openmp:
            lines.append("  " + omp_for(str(n_idx)) + " reduction(|: bad_)")
        lines += [f"  for (int64_t p = 0; p < {n_idx}; p++) {{",
                  f"    const int64_t w_ = {k.idx.name}[{at}];",
                  f"    if (w_ < 0 || w_ >= {size}) {{ bad_ = 1; continue; }}",
                  f"    {k.out.name}[p] = {k.x.name}[{src}];",
                  "  }",
                  "  return bad_;", "}"]
        return "\n".join(lines) + "\n"
    n_x = 1
    for m in xshape:
        n_x *= m
    cst = contiguous_strides(xshape)
    lines += [f"  for (int64_t p = 0; p < {n_idx}; p++) {{  /* checked first: eager raises "
              "before writing */",
              f"    const int64_t w_ = {k.idx.name}[{at}];",
              f"    if (w_ < 0 || w_ >= {size}) return 1;",
              "  }"]
    if openmp:
        lines.append("  " + omp_for(str(n_x), simd=True))
    init = ("0" if k.x is None else   # None: zeros (the sort gradients' scatter-add)
            f"{k.x.name}[{k.x_geom.offset} + {_dot('p', xshape, xstr)}]")
    lines += [f"  for (int64_t p = 0; p < {n_x}; p++) {k.out.name}[p] = {init};"]
    dst = f"{k.out.name}[{_dot('p', ishape, cst, dim)} + {k.idx.name}[{at}] * {cst[dim]}]"
    if k.src is not None:
        sshape, sstr = _geom1(k.src_geom)
        val = f"{k.src.name}[{k.src_geom.offset} + {_dot('p', ishape, sstr)}]"
    else:
        val = store_expr(k.dtype, k.value)
    src_val = val
    if k.mode == "scatter_add":
        val = store_expr(k.dtype, f"{load_expr(k.dtype, dst)} + {load_expr(k.dtype, val)}")
    if k.combine:
        val = store_expr(k.dtype, k.combine.format(a="a_", b="b_"))
        val = (f"{{ const {compute_ctype(k.dtype)} a_ = {load_expr(k.dtype, dst)}, b_ = "
               f"{load_expr(k.dtype, src_val)}; {dst} = {val}; }}")
    if k.identity is not None:
        lines += [f"  for (int64_t p = 0; p < {n_idx}; p++) {dst} = "
                  f"{store_expr(k.dtype, k.identity)};"]
    lines += [f"  for (int64_t p = 0; p < {n_idx}; p++) {{  /* in index order, as eager */",
              f"    {val}" if k.combine else f"    {dst} = {val};",
              "  }"]
    if k.mean_self is not None:
        lines += _mean_lines(k, n_x, n_idx, dst[len(k.out.name) + 1:-1])
    lines += ["  return bad_;", "}"]
    return "\n".join(lines) + "\n"


def _mean_lines(k: DimIndexKernel, n_x: int, n_idx: int, at: str) -> list:
    """scatter_reduce mean: the sums divided by each element's count (at least 1), the count
    converted to the dtype first; integers floor-divided (eager's NumPy)."""
    t = compute_ctype(k.dtype)
    out = f"{k.out.name}[p]"
    c = store_expr(k.dtype, f"({t})c_")
    if k.dtype.is_floating_point:
        div = store_expr(k.dtype, f"{load_expr(k.dtype, out)} / {load_expr(k.dtype, c)}")
        body = [f"    {out} = {div};"]
    else:
        body = [f"    const {t} d_ = ({t})c_, a_ = {out};",
                f"    {out} = ({t})(a_ / d_ - ((a_ % d_ != 0) && ((a_ < 0) != (d_ < 0))));"]
    return [f"  int64_t *cnt_ = (int64_t *)calloc({max(n_x, 1)}, sizeof(int64_t));",
            "  if (!cnt_) return 1;",
            f"  for (int64_t p = 0; p < {n_idx}; p++) cnt_[{at}]++;",
            f"  for (int64_t p = 0; p < {n_x}; p++) {{",
            f"    int64_t c_ = cnt_[p] + {k.mean_self};",
            "    if (c_ < 1) c_ = 1;"] + body + ["  }", "  free(cnt_);"]


def _coord(flat: str, shape: tuple, r: int) -> str:
    inner = 1
    for m in shape[r + 1:]:
        inner *= m
    return f"(({flat}) / {inner} % {shape[r]})" if inner > 1 else f"(({flat}) % {shape[r]})"


# index_put copies a contiguous x of fewer elements than this with one memcpy
PUT_MEMCPY_BELOW = 1 << 22


def adv_index_source(k: AdvIndexKernel, openmp: bool) -> str:
    """The C function of one AdvIndexKernel (advanced indexing, or index_put)."""
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    res, xshape = tuple(k.result), tuple(k.x_geom.shape)
    n_res = 1
    for m in res:
        n_res *= m
    ist = tuple(k.idx_geom.strides)
    # the x dims (coordinate of the result) and the index dims (one int64 per indexed dim)
    xst = tuple(k.x_geom.strides) if k.put is None else contiguous_strides(xshape)
    base = " + ".join([str(k.x_geom.offset if k.put is None else 0)] + [
        f"{_coord('p', res, r)} * {xst[d]}" for r, (w, d) in enumerate(k.layout)
        if w == "x" and res[r] != 1 and xst[d] != 0])
    reads = []
    for j, d in enumerate(k.dims):
        at = " + ".join([str(k.idx_geom.offset + j * ist[0])] + [
            f"{_coord('p', res, r)} * {ist[b + 1]}" for r, (w, b) in enumerate(k.layout)
            if w == "b" and res[r] != 1 and ist[b + 1] != 0])
        reads += [f"    int64_t w{j}_ = {k.idx.name}[{at}];",
                  f"    if (w{j}_ < 0) w{j}_ += {xshape[d]};",
                  f"    if (w{j}_ < 0 || w{j}_ >= {xshape[d]}) {{ bad_ = 1; continue; }}"]
    where = " + ".join([f"({base})"] + [f"w{j}_ * {xst[d]}" for j, d in enumerate(k.dims)])
    lines = [f"/* {' '.join(k.ops)} ({'index' if k.put is None else 'index_put'}) */",
             f"static int {k.name}({', '.join(params)}) {{",
             "  (void)ints; (void)floats;",
             "  int bad_ = 0;"]
    if k.put is None:
        if openmp:
            lines.append("  " + omp_for(str(n_res)) + " reduction(|: bad_)")
        lines += [f"  for (int64_t p = 0; p < {n_res}; p++) {{"] + reads + [
            f"    {k.out.name}[p] = {k.x.name}[{where}];", "  }", "  return bad_;", "}"]
        return "\n".join(lines) + "\n"
    lines += [f"  for (int64_t p = 0; p < {n_res}; p++) {{  /* checked first */"] + reads + [
        "  }", "  if (bad_) return 1;"]
    n_x = 1
    for m in xshape:
        n_x *= m
    contiguous = tuple(k.x_geom.strides) == contiguous_strides(xshape)
    if contiguous:
        # the output computed in x's own memory (a KV cache written in place,
        # compiler/c/inplace.py): x is not read, only the indexed elements are written
        lines.append(f"  if ((uintptr_t){k.out.name} != (uintptr_t)({k.x.name} + "
                     f"{k.x_geom.offset})) {{")
    if contiguous and n_x < PUT_MEMCPY_BELOW:
        # a straight copy (a KV-cache buffer): memcpy on the calling thread; waking the
        # OpenMP team costs more than the copy (~30 µs for 400 KB), on a loaded machine ms
        lines.append(f"  memcpy({k.out.name}, {k.x.name} + {k.x_geom.offset}, "
                     f"(size_t){n_x} * sizeof(*{k.out.name}));")
    else:
        if openmp:
            lines.append("  " + omp_for(str(n_x), simd=True))
        lines.append(f"  for (int64_t p = 0; p < {n_x}; p++) {k.out.name}[p] = {k.x.name}["
                     f"{k.x_geom.offset} + {_dot('p', xshape, tuple(k.x_geom.strides))}];")
    if contiguous:
        lines.append("  }")
    vg = k.values_geom
    val = f"{k.values.name}[{vg.offset} + {_dot('p', res, tuple(vg.strides))}]"
    dst = f"{k.out.name}[{where}]"
    if k.put == "add":
        val = store_expr(k.dtype, f"{load_expr(k.dtype, dst)} + {load_expr(k.dtype, val)}")
    lines += [f"  for (int64_t p = 0; p < {n_res}; p++) {{  /* in order, as eager */"]
    lines += [x.replace("{ bad_ = 1; continue; }", "continue;") for x in reads]
    lines += [f"    {dst} = {val};", "  }", "  return 0;", "}"]
    return "\n".join(lines) + "\n"


__all__ = ["PUT_MEMCPY_BELOW", "SCATTER_BLOCK", "adv_index_source", "dim_index_source",
           "kernel_source"]

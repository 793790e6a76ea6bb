"""C of ``PoolKernel`` (``ir/kernels.py``): max pooling (values and flat indices) and its
backward (a per-row scatter-add in double).  The lowering: ``lower/pool.py``."""

from __future__ import annotations

from ember.compiler.c.codegen.index import _dot
from ember.compiler.c.codegen.omp import omp_for
from ember.compiler.c.ir.kernels import PoolKernel
from ember.compiler.c.ir.loop_ir import (
    SizeExpr,
    compute_ctype,
    load_expr,
    numel,
    s_mul,
    store_expr,
)

_prod = numel  # sizes may be runtime ones (C text over the lifted ints)


def _coord(flat: str, shape: tuple, r: int) -> str:
    """C expression: coordinate ``r`` of C-order position ``flat`` in ``shape``."""
    inner: SizeExpr = _prod(tuple(shape[r + 1:]))
    return f"(({flat}) / {inner} % {shape[r]})" if inner != 1 else f"(({flat}) % {shape[r]})"


def pool_source(k: PoolKernel, openmp: bool, ints: str = "") -> str:
    """The C function of one PoolKernel; ``ints``: the line where the runtime-integer
    declarations go (the unit fills it)."""
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    lines = [f"/* {' '.join(k.ops)} (max_pool{' backward' if k.scatter else ''}) */",
             f"static int {k.name}({', '.join(params)}) {{",
             *([ints] if ints else []), "  (void)ints; (void)floats;"]
    body = _backward(k, openmp) if k.scatter else _forward(k, openmp)
    return "\n".join(lines + body + ["}"]) + "\n"


def _forward(k: PoolKernel, openmp: bool) -> list:
    xs = tuple(k.x_geom.shape)
    lead = xs[:2]
    oshape = lead + tuple(k.out)
    n_out = _prod(oshape)
    st = tuple(k.x_geom.strides)
    ct = compute_ctype(k.dtype)
    d = len(k.out)
    lines = []
    if openmp:
        lines.append("  " + omp_for(str(n_out)))
    lines += [f"  for (int64_t q = 0; q < {n_out}; q++) {{",
              f"    const int64_t row_ = {k.x_geom.offset} + "
              f"{_coord('q', oshape, 0)} * ({st[0]}) + {_coord('q', oshape, 1)} * ({st[1]});",
              f"    {ct} best_ = 0; int64_t bpos_ = 0; int first_ = 1;"]
    ind = "    "
    for i in range(d):
        lines.append(f"{ind}for (int64_t k{i} = 0; k{i} < {k.kernel[i]}; k{i}++) {{")
        ind += "  "
        lines.append(f"{ind}const int64_t p{i} = {_coord('q', oshape, 2 + i)} * {k.stride[i]}"
                     f" - {k.padding[i]} + k{i} * {k.dilation[i]};")
    valid = " && ".join(f"p{i} >= 0 && p{i} < {k.spatial[i]}" for i in range(d))
    at = " + ".join(["row_"] + [f"p{i} * ({st[2 + i]})" for i in range(d)])
    pos = "p0"
    for i in range(1, d):
        pos = f"({pos}) * ({k.spatial[i]}) + p{i}"
    lines += [f"{ind}const {ct} v_ = ({valid}) ? {load_expr(k.dtype, f'{k.x.name}[{at}]')} "
              f": ({ct}){k.fill};",
              f"{ind}if (first_ || v_ != v_ || (best_ == best_ && v_ > best_)) "
              f"{{ best_ = v_; bpos_ = {pos}; first_ = 0; }}"]
    for _ in range(d):
        ind = ind[:-2]
        lines.append(f"{ind}}}")
    vals, idx = k.outs
    lines += [f"    {vals.name}[q] = {store_expr(k.dtype, 'best_')};",
              f"    {idx.name}[q] = bpos_;",
              "  }", "  return 0;"]
    return lines


def _backward(k: PoolKernel, openmp: bool) -> list:
    gshape = tuple(k.x_geom.shape)
    rows = _prod(gshape[:2])
    per = _prod(gshape[2:])
    size = _prod(tuple(k.spatial))
    gat = f"{k.x_geom.offset} + {_dot('q', gshape, tuple(k.x_geom.strides))}"
    iat = f"{k.idx_geom.offset} + {_dot('q', gshape, tuple(k.idx_geom.strides))}"
    out = k.outs[0]
    lines = ["  int bad_ = 0;"]
    if openmp:
        lines.append("  " + omp_for(str(s_mul(rows, per))) + " reduction(|: bad_)")
    lines += [f"  for (int64_t r = 0; r < {rows}; r++) {{",
              f"    double *acc_ = (double *)calloc({size}, sizeof(double));",
              "    if (!acc_) { bad_ = 1; continue; }",
              f"    for (int64_t j = 0; j < {per}; j++) {{  /* in order, as eager's bincount */",
              f"      const int64_t q = r * {per} + j;",
              f"      const int64_t w_ = {k.idx.name}[{iat}];",
              f"      if (w_ >= 0 && w_ < {size}) "
              f"acc_[w_] += (double){load_expr(k.dtype, f'{k.x.name}[{gat}]')};",
              "    }",
              f"    for (int64_t t = 0; t < {size}; t++) "
              f"{out.name}[r * {size} + t] = {store_expr(k.dtype, 'acc_[t]')};",
              "    free(acc_);",
              "  }", "  return bad_;"]
    return lines


__all__ = ["pool_source"]

"""C of ``QLinearKernel`` (``ir/qlinear.py``): the prelude is the eager int8 kernel
(``ember/ops/csrc/qlinear_eager.c``: packed weight, fused input quantization, AVX512-VNNI /
AVX-VNNI ``vpdpbusd`` or AVX-512BW / AVX2 ``vpmaddubsw`` tiles chosen by the unit's ``-march``)
with its names prefixed ``ember_q8_`` and its macros scoped (``push_macro``/``pop_macro``, so
nothing leaks into the rest of the unit), then the driver ``csrc/qlinear_graph.h``; each
kernel is one call of the driver.  The lowering: ``lower/qlinear.py``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ember.compiler.c.codegen import csrc
from ember.compiler.c.ir.qlinear import QLinearKernel

_EAGER = (Path(__file__).resolve().parents[3] / "ops" / "csrc" / "qlinear_eager.c").read_text()
_DRIVER = csrc("qlinear_graph.h")
_FUNCS = ("wvec", "quantize_row", "load4", "epilogue", "tile", "vacc",
          "ember_eager_qlinear_packed", "ember_eager_minmax", "ember_eager_minmax_rows",
          "ember_eager_quantize_u8")


def _scoped_source() -> str:
    """The eager kernel as static functions with prefixed names and scoped macros."""
    body = re.sub(r"^(int|int64_t|void) (ember_eager_\w+\()",
                  r"__attribute__((unused)) static \1 \2", _EAGER, flags=re.M)
    macros = sorted(set(re.findall(r"^#define (\w+)", body, flags=re.M)))
    names = sorted(set(macros) | set(_FUNCS))
    push = "".join(f'#pragma push_macro("{x}")\n#undef {x}\n' for x in names)
    rename = "".join(f"#define {f} ember_q8_{f.removeprefix('ember_eager_')}\n"
                     for f in _FUNCS)
    pop = "".join(f'#pragma pop_macro("{x}")\n' for x in names)
    # the driver calls the eager entry points by their eager names, renamed the same way
    return f"{push}{rename}{body}\n{_DRIVER}\n{pop}"


_SOURCE = _scoped_source()


def prelude(program: Any) -> str:
    """The int8 kernel and its driver when ``program`` has a QLinearKernel ("" otherwise)."""
    if not any(isinstance(k, QLinearKernel) for k in program.kernels()):
        return ""
    return _SOURCE


# rows a thread takes at a time (their scales, product, epilogue): a multiple of every register
# tile's row count (8, 6, 4), small enough that the block's rows and outputs stay in L2
EPI_ROWS = 48


def kernel_source(k: QLinearKernel, ints_marker: str) -> list:
    """The lines of the C function of one QLinearKernel (stores, then loads, then ints and
    floats; returns 1 on a NaN input): the plan (``ember_q8_begin``), then each thread's part
    of the product; with per-row scales or an epilogue, block by block of ``EPI_ROWS`` rows:
    the block's scales (one min/max read per row, then the product quantizes the rows while
    they are in cache), its product, its epilogue."""
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    scheme = "per row" if k.per_row else "per tensor"
    bias = k.bias.name if k.has_bias else "NULL"
    x = f"{k.x.name} + {k.x_offset}"
    n = f"(int64_t)({k.n})"
    block = EPI_ROWS if k.epilogue or k.per_row else n
    call = (f"ember_q8_qlinear_packed({x}, {k.ldx}, r0_, r1_, {k.k}, pl_.rinv, pl_.rzp, "
            f"pl_.rscale, pl_.qmax, {k.wdata.name}, {k.kp}, {k.colsum.name}, "
            f"{k.wscale.name}, {bias}, {k.out.name}, {k.m}, m0_, m1_)")
    lines = [f"/* {' '.join(k.ops)} (int8 dynamic linear, {scheme}) */",
             f"static int {k.name}({', '.join(params)}) {{", ints_marker,
             "  (void)ints; (void)floats;",
             f"  const int64_t n_ = {n};",
             "  if (n_ <= 0) return 0;",
             "  ember_q8_plan pl_;",
             f"  if (ember_q8_begin(&pl_, {x}, n_, {k.k}, {k.ldx}, {int(k.per_row)}, "
             f"{int(k.reduce_range)}, {k.m}, {k.mp})) return 1;",
             "  int fails_ = 0;",
             "#ifdef _OPENMP",
             "#pragma omp parallel for num_threads(pl_.threads) if(pl_.parts > 1) "
             "reduction(+:fails_)",
             "#endif",
             "  for (int64_t p_ = 0; p_ < pl_.parts; p_++) {",
             "    int64_t n0_, n1_, m0_, m1_;",
             f"    ember_q8_part(&pl_, p_, n_, {k.m}, &n0_, &n1_, &m0_, &m1_);",
             "    if (n0_ >= n1_ || m0_ >= m1_) continue;",
             f"    for (int64_t r0_ = n0_; r0_ < n1_; r0_ += {block}) {{",
             f"      const int64_t r1_ = n1_ - r0_ < {block} ? n1_ : r0_ + {block};"]
    if k.per_row:  # the block's scales, read while its rows are in cache for the product
        lines.append(f"      if (pl_.rows_inline) fails_ += ember_q8_rows(&pl_, {x}, {k.ldx}, "
                     f"{k.k}, r0_, r1_);")
    lines.append(f"      fails_ += {call} != 0;")
    lines += [f"      {ln}" for ln in _block_epilogue(k)]
    lines += ["    }", "  }", "  free(pl_.rp);", "  return fails_ != 0;", "}"]
    return lines


def _block_epilogue(k: QLinearKernel) -> list:
    """The epilogue over rows ``r0_ .. r1_`` and columns ``m0_ .. m1_`` of the output (its
    loop variables rebuilt from the row: the leading dims are the rows)."""
    if not k.epilogue:
        return []
    shape = k.epi_ranges()
    r = len(shape)
    out = ["for (int64_t row = r0_; row < r1_; row++) {"]
    if k.epi_flat:
        out.append(f"  for (int64_t i = row * {k.m} + m0_; i < row * {k.m} + m1_; i++) {{")
    else:
        out.append("  int64_t rest_ = row; (void)rest_;")
        for d in range(r - 2, -1, -1):
            if d:
                out.append(f"  const int64_t i{d} = rest_ % ({shape[d]}); rest_ /= ({shape[d]});")
            else:
                out.append("  const int64_t i0 = rest_;")
        out.append(f"  for (int64_t i{r - 1} = m0_; i{r - 1} < m1_; i{r - 1}++) {{")
    out += [f"    {st}" for st in k.epilogue]
    out += ["  }", "}"]
    return out


__all__ = ["EPI_ROWS", "kernel_source", "prelude"]

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


def kernel_source(k: QLinearKernel, ints_marker: str) -> list:
    """The lines of the C function of one QLinearKernel (stores, then loads, then ints and
    floats; returns 1 on a NaN input)."""
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    scheme = "per row" if k.per_row else "per tensor"
    bias = k.bias.name if k.has_bias else "NULL"
    return [f"/* {' '.join(k.ops)} (int8 dynamic linear, {scheme}) */",
            f"static int {k.name}({', '.join(params)}) {{", ints_marker,
            "  (void)ints; (void)floats;",
            f"  return ember_q8_linear({k.x.name} + {k.x_offset}, {k.n}, {k.k}, {k.ldx}, "
            f"{int(k.per_row)}, {int(k.reduce_range)}, {k.wdata.name}, {k.kp}, "
            f"{k.colsum.name}, {k.wscale.name}, {bias}, {k.out.name}, {k.m}, {k.mp});",
            "}"]


__all__ = ["kernel_source", "prelude"]

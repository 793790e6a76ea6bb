"""Build a compiled kernel into a library of its own (eager launches) and call it.

The unit is the C backend's runtime and math preludes, the kernel's program and grid
functions, and ``ek_launch(bufs, ints, floats)`` (the runtime's entry ABI: ``ints`` holds the
grid then the int arguments, ``floats`` the float arguments).  It is built by the C backend's
toolchain (same flags, cache and OpenMP thread count as compiled graphs)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.compiler.c.build import runtime, toolchain
from ember.compiler.c.codegen.prelude import PRELUDE
from ember.config import config


def unit_source(ck: Any) -> str:
    """The whole translation unit of ``ck``'s eager library."""
    args = ["g[0]", "g[1]", "g[2]"]
    nb = ni = nf = 0
    for _name, kind, dt in ck.params:
        if kind == "tensor":
            st = "uint16_t" if dt in ("float16", "bfloat16") else _ctype(dt)
            args.append(f"({st} *)bufs[{nb}]")
            nb += 1
        elif kind == "int":
            args.append(f"ints[{3 + ni}]")
            ni += 1
        else:
            args.append(f"(float)floats[{nf}]")
            nf += 1
    entry = ["EMBER_EXPORT int ek_launch(void **bufs, const int64_t *ints, "
             "const double *floats) {",
             "  const int64_t *g = ints; (void)bufs; (void)floats;",
             f"  {ck.grid_fn}({', '.join(args)});",
             "  return 0;", "}", ""]
    return "\n".join([runtime.C_PRELUDE, PRELUDE, ck.source] + entry)


def _ctype(dt: str) -> str:
    from ember.kernel._values import CTYPES
    return CTYPES[dt]


def library(ck: Any) -> Any:
    """The loaded library of ``ck`` (built or found in the cache once)."""
    if ck.unit is None:
        path = toolchain.compile_library(unit_source(ck), name=f"kernel_{ck.name}",
                                         openmp=config.c_openmp)
        ck.unit = runtime.load(str(path))
    return ck.unit


def call(ck: Any, bound: list, grid: tuple, arrays: list) -> None:
    """Run ``ck`` over ``grid`` on ``arrays`` (the tensor arguments' memory), in place."""
    if 0 in grid:
        return
    ints = list(grid)
    floats = []
    for a in bound:
        if a.kind == "int":
            ints.append(int(a.value))
        elif a.kind == "float":
            floats.append(float(a.value))
    arrs = tuple(a if isinstance(a, np.ndarray) else np.asarray(a) for a in arrays)
    library(ck).entry("ek_launch")(arrs, ints, floats)


__all__ = ["call", "library", "unit_source"]

"""``ember.kernel``: a Triton-shaped kernel language (ARCHITECTURE.md §7, docs/extensions.md).

``@jit`` functions are written over blocks (``program_id``, ``arange``, ``load``/``store`` with
masks, reductions, ``dot``, math) and launched as ``kernel[grid](args...)``.  They compile to C
(the grid an OpenMP loop; ``_front.py``) or run on NumPy in an interpreter that checks every
access (``EMBER_KERNEL_INTERPRET=1``).  ``ember.library.triton_op``/``wrap_triton`` make a
kernel an op that ``ember.compile`` places inside the graph's C.

>>> import ember, ember.kernel as tl
>>> @tl.jit
... def scale(x_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
...     offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
...     mask = offs < n
...     tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s, mask=mask)
>>> x = ember.arange(10.0); out = ember.empty_like(x)
>>> scale[(tl.cdiv(10, 4),)](x, out, 10, 2.0, BLOCK=4)
"""

from __future__ import annotations

from ember.kernel._jit import JITFunction, jit
from ember.kernel.language import (
    abs,
    arange,
    argmax,
    argmin,
    bfloat16,
    broadcast_to,
    cast,
    cdiv,
    ceil,
    constexpr,
    cos,
    device_assert,
    dot,
    erf,
    exp,
    exp2,
    float16,
    float32,
    float64,
    floor,
    fma,
    full,
    int1,
    int8,
    int16,
    int32,
    int64,
    load,
    log,
    log2,
    max,
    maximum,
    min,
    minimum,
    num_programs,
    program_id,
    reshape,
    rsqrt,
    sigmoid,
    sin,
    sqrt,
    static_range,
    store,
    sum,
    tanh,
    trans,
    uint8,
    where,
    zeros,
)

__all__ = ["JITFunction", "abs", "arange", "argmax", "argmin", "bfloat16", "broadcast_to",
           "cast", "cdiv", "ceil", "constexpr", "cos", "device_assert", "dot", "erf", "exp",
           "exp2", "float16", "float32", "float64", "floor", "fma", "full", "int1", "int8",
           "int16", "int32", "int64", "jit", "load", "log", "log2", "max", "maximum", "min",
           "minimum", "num_programs", "program_id", "reshape", "rsqrt", "sigmoid", "sin",
           "sqrt", "static_range", "store", "sum", "tanh", "trans", "uint8", "where", "zeros"]

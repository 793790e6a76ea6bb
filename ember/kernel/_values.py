"""Typed values of the kernel compiler (``_front.py``) and the C expressions they stand for.

A ``Val`` is a scalar (shape ``()``) or a block (a static shape), of a dtype, possibly a
pointer (``ptr``: the tensor parameter it points into; then ``fn`` gives the element offset).
``fn(idx)`` renders the value's C expression at the block position given by the C index
expressions ``idx`` (one per dim of the value's own shape).  Index arithmetic (``arange``,
``program_id``, comparisons on them) stays symbolic, so ``x_ptr + row * stride + arange(0, B)``
loads contiguously; loaded and computed blocks are stored into local arrays when named
(``Gen.materialize``).  ``const`` holds a compile-time value (constexprs and literals);
``weak`` marks a Python literal, which takes the other operand's type (Triton's rule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ember.compiler.c.codegen.prelude import c_literal

# dtypes a value may have (storage dtypes float16/bfloat16 load as float32)
CTYPES = {"bool": "bool", "int32": "int32_t", "int64": "int64_t", "float32": "float",
          "float64": "double", "uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t"}
RANK = {"bool": 0, "uint8": 1, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "float32": 6,
        "float64": 7}
TENSOR_DTYPES = set(CTYPES) | {"float16", "bfloat16"}


def compute_dtype(storage: str) -> str:
    return "float32" if storage in ("float16", "bfloat16") else storage


def is_float(dt: str) -> bool:
    return dt in ("float32", "float64")


@dataclass
class Val:
    """A typed kernel value (see the module docstring)."""

    dtype: str
    shape: tuple
    fn: Callable[[list], str]
    ptr: str | None = None
    const: Any = None
    weak: bool = False
    cheap: bool = True        # index arithmetic: kept symbolic when named
    storage: str | None = None   # the C variable/array holding it (materialized values)
    extra: dict = field(default_factory=dict)

    @property
    def ctype(self) -> str:
        return CTYPES[self.dtype]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def at(self, idx: list) -> str:
        """The expression at the positions ``idx`` of a larger (broadcast) shape."""
        nd = len(self.shape)
        own = idx[len(idx) - nd:] if nd else []
        return self.fn([i if n != 1 else "0" for i, n in zip(own, self.shape)])

    def type_str(self) -> str:
        kind = f"pointer to {self.dtype}" if self.ptr else self.dtype
        return f"{kind} block{list(self.shape)}" if self.shape else f"{kind} scalar"


def literal(value: Any) -> Val:
    """A Python literal (weak type)."""
    if isinstance(value, bool):
        return Val("bool", (), lambda i: c_literal(value), const=value, weak=True)
    if isinstance(value, int):
        return Val("int64", (), lambda i: c_literal(value), const=value, weak=True)
    if isinstance(value, float):
        return Val("float32", (), lambda i: render_float(value, "float32"), const=value,
                   weak=True)
    raise TypeError(value)


def render_float(v: float, dt: str) -> str:
    text = c_literal(float(v))
    if dt == "float32" and math.isfinite(v):
        return f"((float){text})"
    return text if dt == "float64" else f"((float){text})"


def cast_expr(v: Val, dt: str, idx: list) -> str:
    """``v`` at ``idx`` converted to ``dt``."""
    if v.const is not None and not isinstance(v.const, str):
        c = v.const
        if is_float(dt):
            return render_float(float(c), dt)
        if dt == "bool":
            return "1" if c else "0"
        return c_literal(int(c))
    e = v.at(idx)
    return e if v.dtype == dt else f"(({CTYPES[dt]})({e}))"


def promote(a: Val, b: Val) -> str:
    """The result dtype of arithmetic on ``a`` and ``b`` (Triton's rules, simplified: a weak
    literal takes the other side's type, unless it is a float meeting an integer)."""
    if a.weak and not b.weak:
        a, b = b, a
    if b.weak and not a.weak:
        if is_float(b.dtype) and not is_float(a.dtype):
            return "float32"
        if b.dtype == "int64" and a.dtype == "bool":
            return "int64"
        return a.dtype
    return a.dtype if RANK[a.dtype] >= RANK[b.dtype] else b.dtype


def broadcast(s1: tuple, s2: tuple) -> tuple | None:
    """NumPy's broadcast of two shapes; None when they do not broadcast."""
    n = max(len(s1), len(s2))
    a = (1,) * (n - len(s1)) + tuple(s1)
    b = (1,) * (n - len(s2)) + tuple(s2)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(out)


def flat_index(idx: list, shape: tuple) -> str:
    """C flat (row-major) index of ``idx`` into ``shape``."""
    if not shape:
        return "0"
    terms = []
    stride = 1
    for i, n in zip(reversed(idx), reversed(shape)):
        if n != 1:
            terms.append(i if stride == 1 else f"({i}) * {stride}")
        stride *= n
    return " + ".join(reversed(terms)) or "0"


BINOPS = {"Add": "+", "Sub": "-", "Mult": "*", "Div": "/", "FloorDiv": "//", "Mod": "%",
          "BitAnd": "&", "BitOr": "|", "BitXor": "^", "LShift": "<<", "RShift": ">>"}
CMPOPS = {"Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">=", "Eq": "==", "NotEq": "!="}

# C functions of the math builtins (the prelude's branch-free, vectorizable versions)
MATH = {"exp": "ember_exp({0})", "log": "ember_log({0})", "sqrt": "ember_sqrt({0})",
        "sin": "ember_sin({0})", "cos": "ember_cos({0})", "tanh": "ember_tanh({0})",
        "exp2": "ember_exp2({0})", "log2": "ember_log2({0})", "floor": "ember_floor({0})",
        "ceil": "ember_ceil({0})", "erf": "ember_erf({0})", "sigmoid": "ember_sigmoid({0})",
        "rsqrt": "(1 / ember_sqrt({0}))"}


__all__ = ["BINOPS", "CMPOPS", "CTYPES", "MATH", "RANK", "TENSOR_DTYPES", "Val", "broadcast",
           "cast_expr", "compute_dtype", "flat_index", "is_float", "literal", "promote",
           "render_float"]

"""The loop IR: what a Graph lowers to before C (ARCHITECTURE.md §5).

A ``Program`` is a list of steps run in order by the C backend's driver:

* ``Segment``: one C entry function (``ember_entry``, ``ember_entry_1``, ...) that runs its
  ``Kernel``s back to back (one Python->C call);
* ``Extern``: a graph node run with its eager NumPy kernel between segments (a logged, counted
  fallback).

A ``Kernel`` loops over an index space (``ranges``, one loop variable ``i<d>`` per dim, or one
flat variable ``i`` when every access is contiguous) and runs a straight-line body of ``Let``
(a typed local, kept in a register) and ``Store`` statements.  Expressions are trees of
``Load`` (a buffer at an ``Index``: ``offset + sum(stride_d * i_d)``), ``Local``, ``Const`` and
``Op`` (a C template such as ``"({0} + {1})"`` applied to sub-expressions).

Sizes (``SizeExpr``) are ints or C expressions over runtime integer names (``s0`` = lifted
scalar 0, ``e<k>_<d>`` = dim ``d`` of extern output ``k``): the same library serves every size.
``str(program)`` prints C-like text; ``verify()`` checks the invariants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from ember.errors import EmberRuntimeError

SizeExpr = Union[int, str]

# numpy dtype name -> C type (dtypes stored and computed in the same type)
CTYPES = {"float32": "float", "float64": "double", "int64": "int64_t", "int32": "int32_t",
          "int16": "int16_t", "int8": "int8_t", "uint8": "uint8_t", "bool": "bool"}

# float16/bfloat16 are stored as their bits (uint16_t), loaded exactly into float, computed in
# float and stored with one round-to-nearest-even (the prelude's helpers, bit for bit with
# NumPy / ml_dtypes casts).  (load, store) helper per dtype:
LOWP = {"float16": ("ember_f16_to_f32", "ember_to_f16"),
        "bfloat16": ("ember_bf16_to_f32", "ember_to_bf16")}
STORAGE_CTYPES = {**CTYPES, "float16": "uint16_t", "bfloat16": "uint16_t"}
COMPUTE_CTYPES = {**CTYPES, "float16": "float", "bfloat16": "float"}


def _dname(dtype: Any) -> str:
    """The NumPy name of an ember dtype (or a name)."""
    return dtype if type(dtype) is str else dtype.np.name


def is_lowp(dtype: Any) -> bool:
    """float16 or bfloat16: stored in 16 bits, computed in float."""
    return _dname(dtype) in LOWP


def storage_ctype(dtype: Any) -> str:
    """The C type a buffer of ``dtype`` holds (``uint16_t`` for float16/bfloat16)."""
    return STORAGE_CTYPES[_dname(dtype)]


def compute_ctype(dtype: Any) -> str:
    """The C type values of ``dtype`` are computed in (``float`` for float16/bfloat16)."""
    return COMPUTE_CTYPES[_dname(dtype)]


def load_expr(dtype: Any, ref: str) -> str:
    """C text reading the element ``ref`` (an lvalue of the storage type) in its compute type.
    Every kernel's loads go through here, so a new kernel kind gets float16/bfloat16 for free."""
    lowp = LOWP.get(_dname(dtype))
    return f"{lowp[0]}({ref})" if lowp else ref


def store_expr(dtype: Any, value: str) -> str:
    """C text converting ``value`` (compute type, or double) to ``dtype``'s storage: one
    rounding for float16/bfloat16; the value itself otherwise (the target converts)."""
    lowp = LOWP.get(_dname(dtype))
    return f"{lowp[1]}({value})" if lowp else value


def round_expr(dtype: Any, value: str) -> str:
    """``value`` rounded to ``dtype`` and kept in the compute type (float16/bfloat16: what a
    store then a load give; other dtypes: unchanged)."""
    lowp = LOWP.get(_dname(dtype))
    return f"{lowp[0]}({lowp[1]}({value}))" if lowp else value


# ------------------------------------------------------------------------------ size algebra
def s_mul(a: SizeExpr, b: SizeExpr) -> SizeExpr:
    if type(a) is int and type(b) is int:
        return a * b
    if a == 1:
        return b
    if b == 1:
        return a
    if a == 0 or b == 0:
        return 0
    return f"({a} * {b})"


def s_add(a: SizeExpr, b: SizeExpr) -> SizeExpr:
    if type(a) is int and type(b) is int:
        return a + b
    if a == 0:
        return b
    if b == 0:
        return a
    return f"({a} + {b})"


def contiguous_strides(shape: tuple) -> tuple:
    out: list = []
    acc: SizeExpr = 1
    for n in reversed(shape):
        out.append(acc)
        acc = s_mul(acc, n)
    return tuple(reversed(out))


def numel(shape: tuple) -> SizeExpr:
    acc: SizeExpr = 1
    for n in shape:
        acc = s_mul(acc, n)
    return acc


def eval_size(e: SizeExpr, env: dict) -> int:
    """The value of a size expression given the runtime integer names."""
    if type(e) is int:
        return e
    return int(eval(e, {"__builtins__": {}}, env))  # noqa: S307 - our own +,* over names


# ------------------------------------------------------------------------------ buffers
@dataclass(eq=False)
class Buffer:
    """A materialized array: a graph input, an extern's output or a stored kernel value.
    C-contiguous in ``shape`` unless ``strides`` (element strides, a permutation of a
    contiguous layout: a stored value keeps the memory order eager would give it)."""

    name: str
    dtype: Any          # ember dtype
    shape: tuple        # SizeExprs
    role: str           # "input" | "extern" | "temp"
    strides: Any = None

    @property
    def ctype(self) -> str:
        """The C type of an element in memory (``uint16_t`` for float16/bfloat16)."""
        return storage_ctype(self.dtype)

    @property
    def compute_ctype(self) -> str:
        """The C type an element is computed in (``float`` for float16/bfloat16)."""
        return compute_ctype(self.dtype)

    def load(self, index: Any) -> str:
        """C text of element ``index`` in the compute type."""
        return load_expr(self.dtype, f"{self.name}[{index}]")

    def store(self, index: Any, value: str) -> str:
        """C statement storing ``value`` (compute type) at ``index``."""
        return f"{self.name}[{index}] = {store_expr(self.dtype, value)};"


@dataclass(frozen=True)
class Geometry:
    """How a value sits in its buffer (a view): element strides and offset, SizeExprs."""

    shape: tuple
    strides: tuple
    offset: SizeExpr = 0

    @staticmethod
    def contiguous(shape: tuple) -> Geometry:
        return Geometry(tuple(shape), contiguous_strides(tuple(shape)), 0)

    def is_contiguous(self) -> bool:
        return self.offset == 0 and self.strides == contiguous_strides(self.shape)


# ------------------------------------------------------------------------------ expressions
class Expr:
    __slots__ = ()


@dataclass(frozen=True)
class Index:
    """``offset + sum(stride * var)`` (terms with stride 0 are dropped)."""

    offset: SizeExpr
    terms: tuple        # ((var, stride), ...)

    def __str__(self) -> str:
        parts = [v if s == 1 else f"{s} * {v}" for v, s in self.terms]
        if self.offset != 0 or not parts:
            parts.append(str(self.offset))
        return " + ".join(parts)


@dataclass(frozen=True)
class Load(Expr):
    buf: Buffer
    index: Index

    def __str__(self) -> str:
        return self.buf.load(self.index)


@dataclass(frozen=True)
class Local(Expr):
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Const(Expr):
    """C text of a constant or runtime scalar (already cast to its C type)."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Op(Expr):
    """``template.format(*args, **params)``: an op's ``c_expr``."""

    name: str
    template: str
    args: tuple
    params: tuple = ()   # ((name, C text), ...)

    def __str__(self) -> str:
        return self.template.format(*(str(a) for a in self.args), **dict(self.params))


@dataclass(frozen=True)
class Let:
    name: str
    ctype: str
    expr: Expr

    def __str__(self) -> str:
        return f"const {self.ctype} {self.name} = ({self.ctype})({self.expr});"


@dataclass(frozen=True)
class Store:
    buf: Buffer
    index: Index
    expr: Expr

    def __str__(self) -> str:
        return self.buf.store(self.index, str(self.expr))


# ------------------------------------------------------------------------------ kernels, steps
@dataclass(eq=False)
class Kernel:
    """Loops over ``ranges`` (flat: one loop over their product) running ``body``."""

    name: str
    ranges: tuple
    body: list = field(default_factory=list)
    flat: bool = False
    ops: list = field(default_factory=list)      # names of the graph ops fused here
    order: tuple = ()   # dims from outermost to innermost loop (empty: 0, 1, ...)

    def loop_vars(self) -> list:
        return ["i"] if self.flat else [f"i{d}" for d in range(len(self.ranges))]

    def loop_ranges(self) -> list:
        return [numel(self.ranges)] if self.flat else list(self.ranges)

    def loops(self) -> list:
        """(variable, range) per loop, outermost first: the memory order of the stores, so
        the innermost loop walks unit stride."""
        pairs = list(zip(self.loop_vars(), self.loop_ranges()))
        if self.flat or not self.order:
            return pairs
        return [pairs[d] for d in self.order]

    def buffers(self) -> tuple[list, list]:
        """(loaded buffers, stored buffers), each in first-use order."""
        loads: list = []
        stores: list = []

        def walk(e: Any) -> None:
            if isinstance(e, Load):
                if e.buf not in loads:
                    loads.append(e.buf)
            elif isinstance(e, Op):
                for a in e.args:
                    walk(a)
        for st in self.body:
            walk(st.expr)
            if isinstance(st, Store) and st.buf not in stores:
                stores.append(st.buf)
        return loads, stores

    def __str__(self) -> str:
        lines = [f"kernel {self.name}  // {' '.join(self.ops)}"]
        ind = ""
        for v, n in self.loops():
            lines.append(f"{ind}for {v} in 0..{n}:")
            ind += "  "
        ind = ind or "  "
        lines.extend(f"{ind}{st}" for st in self.body)
        return "\n".join(lines)


@dataclass(eq=False)
class RowKernel:
    """A row-wise reduction kernel over the last dim of a contiguous ``rows x cols`` value:
    ``softmax`` (max, exp and sum, divide) or ``log_softmax`` (max, sum of exp, subtract the
    log), one pass per row in cache; the row sum accumulates in double."""

    name: str
    op: str
    rows: SizeExpr
    cols: SizeExpr
    src: Any            # Buffer, or None when ``prologue`` computes the row
    offset: SizeExpr
    dst: Buffer
    ops: list = field(default_factory=list)
    # fused pointwise producers: Lets indexed by the row's (i0, ..) and c; ``value`` is
    # the local holding x[c] (computed once, into the output row, then reduced in cache)
    prologue: list = field(default_factory=list)
    value: str = ""
    lead: tuple = ()    # the leading dims (``rows`` is their product): loads index i0, i1, .., c

    def buffers(self) -> tuple[list, list]:
        if not self.prologue:
            return [self.src], [self.dst]
        loads: list = []
        for st in self.prologue:
            for b in _loaded(st.expr):
                if b not in loads:
                    loads.append(b)
        return loads, [self.dst]

    def __str__(self) -> str:
        head = [f"kernel {self.name}  // {' '.join(self.ops)} ({self.op} over the last dim)",
                f"for r in 0..{self.rows}:"]
        if self.prologue:
            lead = ", ".join(f"i{d}" for d in range(len(self.lead)))
            head.append(f"  ({lead}) = unravel(r, {list(self.lead)})")
            head.append(f"  for c in 0..{self.cols}:")
            head.extend(f"    {st}" for st in self.prologue)
            head.append(f"    x[c] = {self.dst.name}[r * {self.cols} + c] = {self.value}")
        else:
            off = f"{self.offset} + " if self.offset != 0 else ""
            head.append(f"  x[c] = {self.src.name}[{off}r * {self.cols} + c] "
                        f"for c in 0..{self.cols}")
        last = ("e[c] / sum" if self.op == "softmax" else "(x[c] - m) - log(sum)")
        head.append("  m = max(x[c]) (NaN propagates); sum = sum(exp(x[c] - m)) in double")
        head.append(f"  {self.dst.name}[r * {self.cols} + c] = {last}")
        return "\n".join(head)


@dataclass(eq=False)
class Segment:
    """One C entry function: its kernels, run in order."""

    entry: str
    kernels: list = field(default_factory=list)

    def buffers(self) -> list:
        """Every buffer the segment touches, in first-use order (the entry's ``bufs``)."""
        out: list = []
        for k in self.kernels:
            loads, stores = k.buffers()
            for b in loads + stores:
                if b not in out:
                    out.append(b)
        return out

    def __str__(self) -> str:
        bufs = ", ".join(b.name for b in self.buffers())
        return f"entry {self.entry}({bufs}):\n" + "\n".join(str(k) for k in self.kernels)


@dataclass(eq=False)
class Extern:
    """Graph node ``index`` run eagerly; its tensor outputs land in ``outs`` (Buffers)."""

    index: int
    node: Any
    outs: list
    reason: str

    def __str__(self) -> str:
        outs = ", ".join(b.name for b in self.outs)
        return f"extern {outs} = {self.node.op.name}(...)  // eager NumPy: {self.reason}"


@dataclass(eq=False)
class Program:
    steps: list
    inputs: list                 # Buffers of the graph's tensor inputs, in order
    int_names: list              # runtime integer names, in ``ints`` order
    num_scalars: int

    def kernels(self) -> list:
        return [k for s in self.steps if isinstance(s, Segment) for k in s.kernels]

    def segments(self) -> list:
        return [s for s in self.steps if isinstance(s, Segment)]

    def externs(self) -> list:
        return [s for s in self.steps if isinstance(s, Extern)]

    def __str__(self) -> str:
        return "\n".join(str(s) for s in self.steps) + "\n"

    def verify(self) -> None:
        """Locals are defined before use and once; stores go to non-input buffers, each at most
        once per kernel; no kernel loads a buffer it stores; buffers are defined before use."""
        known = set(id(b) for b in self.inputs)
        for step in self.steps:
            if isinstance(step, Extern):
                known.update(id(b) for b in step.outs)
                continue
            for k in step.kernels:
                defined: set = set()
                loads, stores = k.buffers()
                if isinstance(k, RowKernel):
                    if any(id(b) not in known for b in loads) or k.dst.role == "input" \
                            or k.dst in loads:
                        raise EmberRuntimeError(f"[loop_ir.verify] {k.name}: bad buffers")
                    known.add(id(k.dst))
                    continue
                for b in loads:
                    if id(b) not in known:
                        raise EmberRuntimeError(f"[loop_ir.verify] {k.name} loads {b.name} "
                                                f"before it is written")
                for b in stores:
                    if b.role == "input" or b in loads:
                        raise EmberRuntimeError(f"[loop_ir.verify] {k.name} stores {b.name}, "
                                                f"which is an input or loaded by the kernel")
                n_vars = len(k.loop_vars())
                for st in k.body:
                    for name in _locals(st.expr):
                        if name not in defined:
                            raise EmberRuntimeError(f"[loop_ir.verify] {k.name}: {name} used "
                                                    f"before its definition")
                    for v, _ in _indices(st):
                        if v not in k.loop_vars():
                            raise EmberRuntimeError(f"[loop_ir.verify] {k.name}: unknown loop "
                                                    f"variable {v} ({n_vars} loops)")
                    if isinstance(st, Let):
                        if st.name in defined:
                            raise EmberRuntimeError(f"[loop_ir.verify] {k.name}: {st.name} "
                                                    f"defined twice")
                        defined.add(st.name)
                known.update(id(b) for b in stores)


def _loaded(e: Any) -> list:
    if isinstance(e, Load):
        return [e.buf]
    if isinstance(e, Op):
        return [b for a in e.args for b in _loaded(a)]
    return []


def _locals(e: Any) -> list:
    if isinstance(e, Local):
        return [e.name]
    if isinstance(e, Op):
        return [n for a in e.args for n in _locals(a)]
    return []


def _indices(st: Any) -> list:
    out: list = []

    def walk(e: Any) -> None:
        if isinstance(e, Load):
            out.extend(e.index.terms)
        elif isinstance(e, Op):
            for a in e.args:
                walk(a)
    walk(st.expr)
    if isinstance(st, Store):
        out.extend(st.index.terms)
    return out


__all__ = ["Buffer", "COMPUTE_CTYPES", "CTYPES", "Const", "Extern", "Geometry", "Index", "Kernel",
           "LOWP", "Let", "Load", "Local", "Op", "Program", "RowKernel", "STORAGE_CTYPES",
           "Segment", "SizeExpr", "Store", "compute_ctype", "contiguous_strides", "eval_size",
           "is_lowp", "load_expr", "numel", "round_expr", "storage_ctype", "store_expr"]

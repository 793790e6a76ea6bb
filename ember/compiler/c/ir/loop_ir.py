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


def order_strides(shape: tuple, order: tuple) -> tuple:
    """The element strides of ``shape`` allocated C-contiguous in dim order ``order`` (slowest
    dim first), as eager allocates a result in its inputs' memory order."""
    out: list = [0] * len(shape)
    acc: SizeExpr = 1
    for d in reversed(order):
        out[d] = acc
        acc = s_mul(acc, shape[d])
    return tuple(out)


def numel(shape: tuple) -> SizeExpr:
    acc: SizeExpr = 1
    for n in shape:
        acc = s_mul(acc, n)
    return acc


def eval_size(e: SizeExpr, env: dict) -> int:
    """The value of a size expression given the runtime integer names (C's ``/`` of
    non-negative sizes, as convolution's output size uses it, is Python's ``//``)."""
    if type(e) is int:
        return e
    # our own +, -, *, / over names
    return int(eval(e.replace("/", "//"), {"__builtins__": {}}, env))  # noqa: S307


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


@dataclass(frozen=True)
class PointCheck:
    """An input check in a pointwise kernel: where ``expr`` is true the kernel returns 1 and
    the driver reruns the graph eagerly, which raises eager's exact error (bernoulli's
    probabilities outside [0, 1])."""

    expr: Expr

    def __str__(self) -> str:
        return f"err_ |= ({self.expr}) != 0;"


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

    def has_checks(self) -> bool:
        return any(isinstance(st, PointCheck) for st in self.body)

    def buffers(self) -> tuple[list, list]:
        """(loaded buffers, stored buffers), each in first-use order."""
        loads: list = []
        stores: list = []
        for st in self.body:
            for b in loaded_buffers(st.expr):
                if b not in loads:
                    loads.append(b)
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
            for b in loaded_buffers(st.expr):
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


@dataclass(frozen=True)
class Accum:
    """A reduction accumulator: ``value`` (an expression of the pass's locals) folded with
    ``kind`` (sum, max, min, prod, any, all) in C type ``ctype`` from ``init``; after its
    pass, the local ``name`` holds the result.  Codegen folds in independent lanes, so the
    loop vectorizes without reassociating (combined in a fixed order at the end)."""

    name: str
    kind: str
    ctype: str
    init: str
    value: Expr
    # argmax/argmin: the element's flat index; after the pass ``name_i`` (int64_t) holds the
    # index of the first extreme (a NaN wins), ``name`` its value
    index: Any = None

    def __str__(self) -> str:
        if self.index is not None:
            return (f"{self.name}, {self.name}_i = {self.kind}({self.value}, at {self.index})"
                    f"  // {self.ctype} lanes, first occurrence")
        return f"{self.name} = {self.kind}({self.value})  // {self.ctype} lanes"


@dataclass(frozen=True)
class ColumnAccum:
    """``buf[index] += value`` across the kernel's kept (outer) loop: a reduction over the
    rows of a row kernel (layer_norm backward's weight and bias gradients).  ``index`` uses
    the reduced (``r``) variables; the sums run in a zeroed double scratch of ``buf``'s size
    and are rounded into ``buf`` once, after the last row."""

    buf: Buffer
    index: Index
    expr: Expr
    final: str = ""     # C template of the stored value from the double sum ``{0}``

    def __str__(self) -> str:
        return f"{self.buf.name}[{self.index}] += {self.expr};  // double scratch, all rows"


@dataclass(frozen=True)
class Check:
    """An input check at the kept (outer) level: when ``expr`` is true the kernel reports an
    error and the driver reruns the graph eagerly, which raises eager's exact error (a target
    class index out of range)."""

    expr: Expr

    def __str__(self) -> str:
        return f"check not ({self.expr})"


@dataclass(eq=False)
class ReducePass:
    """One sweep over the reduced dims: ``body`` (Lets, and Stores of per-element results)
    runs per element, ``accums`` fold, then ``finals`` (Lets over the accumulators and earlier
    finals) run once per kept index."""

    body: list = field(default_factory=list)
    accums: list = field(default_factory=list)
    finals: list = field(default_factory=list)


@dataclass(eq=False)
class ReduceKernel:
    """A reduction nest: kept dims ``outer`` (loop variables ``o0, o1, ..``) outside, one or
    more ``passes`` over the reduced dims ``inner`` (``r0, r1, ..``) inside, then ``stores``
    of reduced values (indexed by the ``o`` variables).  Several reductions over the same
    input and dims share one nest (horizontal fusion); a pass's ``body`` holds the fused
    pointwise producers; a last pass without accumulators writes per-element results that
    use the reduced values (layer_norm's normalized output)."""

    name: str
    outer: tuple
    inner: tuple
    passes: list = field(default_factory=list)
    stores: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    order: tuple = ()   # kept dims from outermost to innermost loop (empty: 0, 1, ..)
    # the input's unit-stride dim is kept (x.sum(0) of a C-order matrix): a single-pass kernel
    # then runs the reduced loops outside and the kept ones inside, into per-output
    # accumulators (contiguous loads, vectorized across outputs)
    kept_inner: bool = False
    # a sweep over the kept dims before the main nest (a global count the rows need:
    # cross_entropy backward's mean divisor); its accumulators and finals are kernel-level
    pre: Any = None

    def interchanged(self) -> bool:
        """Whether codegen runs the reduced loops outside (see ``kept_inner``)."""
        if not self.kept_inner or len(self.passes) != 1 or self.pre is not None:
            return False
        p = self.passes[0]
        return bool(p.accums) and all(isinstance(st, Let) for st in p.body + p.finals) and \
            all(isinstance(st, Store) for st in self.stores)

    def outer_vars(self) -> list:
        return [f"o{d}" for d in range(len(self.outer))]

    def inner_vars(self) -> list:
        return [f"r{d}" for d in range(len(self.inner))]

    def statements(self) -> list:
        out: list = []
        for p in ([self.pre] if self.pre is not None else []) + self.passes:
            out += p.body + [a for a in p.accums] + p.finals
        return out + self.stores

    def buffers(self) -> tuple[list, list]:
        loads: list = []
        stores: list = []
        for st in self.statements():
            for b in loaded_buffers(st.value if isinstance(st, Accum) else st.expr):
                if b not in loads:
                    loads.append(b)
            if isinstance(st, (Store, ColumnAccum)) and st.buf not in stores:
                stores.append(st.buf)
        return loads, stores

    def column_accums(self) -> list:
        return [st for p in self.passes for st in p.body if isinstance(st, ColumnAccum)] + [
            st for st in self.stores if isinstance(st, ColumnAccum)]

    def has_checks(self) -> bool:
        return any(isinstance(st, Check) for p in self.passes for st in p.finals)

    def __str__(self) -> str:
        lines = [f"kernel {self.name}  // {' '.join(self.ops)} (reduction"
                 f"{', reduced loops outside' if self.interchanged() else ''})"]
        ind = ""
        outer = list(zip(self.outer_vars(), self.outer))
        if self.order:
            outer = [outer[d] for d in self.order]
        if self.pre is not None:
            rng = ", ".join(f"{v} in 0..{n}" for v, n in outer)
            lines.append(f"pre: for {rng}:")
            lines.extend(f"  {st}" for st in self.pre.body + self.pre.accums)
            lines.extend(str(st) for st in self.pre.finals)
        for v, n in outer:
            lines.append(f"{ind}for {v} in 0..{n}:")
            ind += "  "
        for k, p in enumerate(self.passes):
            rng = ", ".join(f"{v} in 0..{n}" for v, n in zip(self.inner_vars(), self.inner))
            lines.append(f"{ind}pass {k}: for {rng or '()'}:")
            lines.extend(f"{ind}  {st}" for st in p.body + p.accums)
            lines.extend(f"{ind}{st}" for st in p.finals)
        lines.extend(f"{ind}{st}" for st in self.stores)
        return "\n".join(lines)

    def verify(self, known: set) -> None:
        """Locals defined before use (pass bodies are their own scopes, so a producer chain
        recomputed in each pass may reuse its names); loop variables in range."""
        outer_defined: set = set()
        ov, iv = set(self.outer_vars()), set(self.inner_vars())
        loads, stores = self.buffers()
        for b in loads:
            if id(b) not in known:
                raise EmberRuntimeError(f"[loop_ir.verify] {self.name} loads {b.name} before "
                                        f"it is written")
        for b in stores:
            if b.role == "input" or b in loads:
                raise EmberRuntimeError(f"[loop_ir.verify] {self.name} stores {b.name}, which "
                                        f"is an input or loaded by the kernel")

        def check(st: Any, defined: set, vars_: set) -> None:
            expr = st.value if isinstance(st, Accum) else st.expr
            for name in locals_read(expr):
                if name not in defined:
                    raise EmberRuntimeError(f"[loop_ir.verify] {self.name}: {name} used "
                                            f"before its definition")
            terms = index_terms(Let("", "", expr)) if isinstance(st, (Accum, ColumnAccum)) \
                else index_terms(st)
            if isinstance(st, ColumnAccum):
                terms = terms + list(st.index.terms)
            for v, _ in terms:
                if v not in vars_:
                    raise EmberRuntimeError(f"[loop_ir.verify] {self.name}: loop variable "
                                            f"{v} out of scope")
        if self.pre is not None:
            for st in self.pre.body + self.pre.accums:
                check(st, outer_defined, ov)
                if isinstance(st, Let):
                    outer_defined.add(st.name)
            outer_defined.update(a.name for a in self.pre.accums)
            for st in self.pre.finals:
                check(st, outer_defined, set())
                outer_defined.add(st.name)
        for p in self.passes:
            defined = set(outer_defined)
            for st in p.body + p.accums:
                check(st, defined, (ov | iv) if not isinstance(st, ColumnAccum) else iv | ov)
                if isinstance(st, Let):
                    if st.name in defined:
                        raise EmberRuntimeError(f"[loop_ir.verify] {self.name}: {st.name} "
                                                f"defined twice")
                    defined.add(st.name)
            for a in p.accums:
                outer_defined.add(a.name)
                if a.index is not None:
                    outer_defined.add(a.name + "_i")
            for st in p.finals:
                check(st, outer_defined, ov)
                if isinstance(st, Let):
                    outer_defined.add(st.name)
        for st in self.stores:
            check(st, outer_defined, ov)


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
                if not isinstance(k, Kernel):  # a kernel kind with its own checks, or generic
                    check = getattr(k, "verify", None)
                    if check is not None:
                        check(known)
                    elif any(id(b) not in known for b in loads) or any(
                            b.role == "input" or b in loads for b in stores):
                        raise EmberRuntimeError(f"[loop_ir.verify] {k.name}: bad buffers")
                    known.update(id(b) for b in stores)
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
                    for name in locals_read(st.expr):
                        if name not in defined:
                            raise EmberRuntimeError(f"[loop_ir.verify] {k.name}: {name} used "
                                                    f"before its definition")
                    for v, _ in index_terms(st):
                        if v not in k.loop_vars():
                            raise EmberRuntimeError(f"[loop_ir.verify] {k.name}: unknown loop "
                                                    f"variable {v} ({n_vars} loops)")
                    if isinstance(st, Let):
                        if st.name in defined:
                            raise EmberRuntimeError(f"[loop_ir.verify] {k.name}: {st.name} "
                                                    f"defined twice")
                        defined.add(st.name)
                known.update(id(b) for b in stores)


def loads_of(e: Any, buf: Buffer) -> list:
    if isinstance(e, Load):
        return [e.index] if e.buf is buf else []
    if isinstance(e, Op):
        return [x for a in e.args for x in loads_of(a, buf)]
    return []


def loaded_buffers(e: Any) -> list:
    """The buffers ``e`` loads, in order (repeats kept)."""
    if isinstance(e, Load):
        return [e.buf]
    if isinstance(e, Op):
        # expressions are immutable: the answer is kept on the Op (lowering asks a kernel for
        # its buffers thousands of times while it fuses)
        got = e.__dict__.get("_loads")
        if got is None:
            got = tuple(b for a in e.args for b in loaded_buffers(a))
            object.__setattr__(e, "_loads", got)
        return list(got)
    return []


def locals_read(e: Any) -> list:
    if isinstance(e, Local):
        return [e.name]
    if isinstance(e, Op):
        return [n for a in e.args for n in locals_read(a)]
    return []


def index_terms(st: Any) -> list:
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


class FlatIndex:
    """The C-order flat index of the element a pointwise kernel's loop is at (an operand of a
    random op's ``Op``): its C text is set when the group closes into a plain kernel (``i`` in a
    flat loop, ``sum(i_d * stride_d)`` otherwise), so a kernel holding one is never merged into
    a loop nest with other loop variables (a reduction, a row kernel, a GEMM epilogue)."""

    __slots__ = ("shape", "text")

    def __init__(self, shape: tuple) -> None:
        self.shape, self.text = shape, None

    def __str__(self) -> str:
        if self.text is None:
            raise RuntimeError("[lower_random] flat index used outside a plain pointwise kernel")
        return self.text

    def bind(self, flat: bool) -> None:
        if flat:
            self.text = "((uint64_t)(i))"
            return
        terms = tuple((f"i{d}", s) for d, (s, m) in
                      enumerate(zip(contiguous_strides(self.shape), self.shape)) if m != 1)
        self.text = f"((uint64_t)({Index(0, terms)}))"


def reads_flat_index(body: list) -> bool:
    """True when a statement of ``body`` computes with a ``FlatIndex`` (a random op)."""
    def walk(e: Any) -> bool:
        if isinstance(e, FlatIndex):
            return True
        if isinstance(e, Op):
            return any(walk(a) for a in e.args)
        return False
    return any(walk(getattr(st, "expr", None)) for st in body)


__all__ = ["Accum", "Buffer", "COMPUTE_CTYPES", "CTYPES", "Check", "ColumnAccum", "Const",
           "Extern", "FlatIndex", "Geometry", "Index", "Kernel", "LOWP", "Let", "Load", "Local",
           "Op", "Program", "ReduceKernel", "ReducePass", "RowKernel", "STORAGE_CTYPES",
           "Segment", "SizeExpr", "Store", "compute_ctype", "contiguous_strides", "eval_size",
           "index_terms", "is_lowp", "load_expr", "loaded_buffers", "loads_of", "locals_read",
           "numel", "reads_flat_index", "round_expr", "storage_ctype", "store_expr"]

"""Kernel kinds beyond loop_ir's loop nests, as data: matrix products (``GemmKernel``, with
``MatOperand``s) and convolution's ``Im2colKernel``, scans, attention, and a row
gather/scatter-add.  Their C comes from ``codegen/`` (``gemm.py``, ``scan.py``, ``attention.py``,
``index.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ember.compiler.c.ir.loop_ir import (
    Buffer,
    Geometry,
    Let,
    SizeExpr,
    Store,
    index_terms,
    loaded_buffers,
    loads_of,
    locals_read,
    numel,
)
from ember.errors import EmberRuntimeError


@dataclass(frozen=True)
class MatOperand:
    """One GEMM operand: matrix ``b`` of a batch is ``buf[offset + sum(batch_strides * b) +
    rs * row + cs * col]`` (element strides, SizeExprs; a transposed view just swaps rs/cs)."""

    buf: Buffer
    offset: SizeExpr
    batch_strides: tuple
    rs: SizeExpr
    cs: SizeExpr

    def __str__(self) -> str:
        bs = "".join(f" + {s} * b{d}" for d, s in enumerate(self.batch_strides) if s != 0)
        return f"{self.buf.name}[{self.offset}{bs}; rs={self.rs}, cs={self.cs}]"


@dataclass(eq=False)
class GemmKernel:
    """``out[b] = a[b] @ b[b]`` (``m x k`` times ``k x n``) for every index ``b`` of ``batch``
    into the C-contiguous ``out`` (its shape is ``batch + (m, n)`` with ``m`` possibly split
    into several dims: linear's leading dims), then ``epilogue``: Let/Store statements over
    ``out``'s index space (loop variables ``i0..``, or one flat ``i`` when
    ``epi_flat``) that may load ``out`` at the element they store (fused pointwise consumers:
    bias, activation, residual; they run in place, in one pass, while the output is in cache).
    ``impl`` is how the product runs: ``"blas"`` (sgemm/dgemm) or a template variant
    ``"tmpl_<mr>x<nr>"`` (codegen/gemm.py)."""

    name: str
    a: MatOperand
    b: MatOperand
    out: Buffer
    batch: tuple
    m: SizeExpr
    n: SizeExpr
    k: SizeExpr
    ops: list = field(default_factory=list)
    epilogue: list = field(default_factory=list)
    epi_flat: bool = False
    impl: str = "blas"
    prepack: int = -1   # AOT: slot of B's packed copy (B is a package constant), -1: none
    # float16/bfloat16 operands converted while packed (codegen/gemm.py, "half"): per operand
    # (a, b) "h" float16, "b" bfloat16, "r"/"q" float32 rounded to bfloat16/float16 as it is
    # packed (autocast's cast fused), "" when the product is float32/float64/integer
    half: tuple = ()

    @property
    def dtype(self) -> Any:
        return self.out.dtype

    def epi_ranges(self) -> tuple:
        return tuple(self.out.shape)

    def epi_vars(self) -> list:
        return ["i"] if self.epi_flat else [f"i{d}" for d in range(len(self.epi_ranges()))]

    def buffers(self) -> tuple[list, list]:
        """(loaded buffers, stored buffers); ``out`` counts as stored only."""
        loads: list = []
        stores: list = [self.out]
        for b in (self.a.buf, self.b.buf):
            if b not in loads:
                loads.append(b)
        for st in self.epilogue:
            for b in loaded_buffers(st.expr):
                if b not in loads and b is not self.out:
                    loads.append(b)
            if isinstance(st, Store) and st.buf not in stores:
                stores.append(st.buf)
        return loads, stores

    def verify(self, known: set) -> None:
        """Operands are written before the product; ``out`` is a fresh C-contiguous buffer that is
        not an operand; the epilogue defines locals before use, loads ``out`` only at the element
        it stores, and uses only its loop variables."""
        where = f"[loop_ir.verify] {self.name}"
        loads, stores = self.buffers()
        bad = [b.name for b in loads if id(b) not in known]
        if bad:
            raise EmberRuntimeError(f"{where} loads {', '.join(bad)} before they are written")
        if self.out.role == "input" or self.out in (self.a.buf, self.b.buf) or \
                self.out.strides is not None:
            raise EmberRuntimeError(f"{where}: bad GEMM output {self.out.name}")
        here = None
        defined: set = set()
        for st in self.epilogue:
            for name in locals_read(st.expr):
                if name not in defined:
                    raise EmberRuntimeError(f"{where}: {name} used before its definition")
            for v, _ in index_terms(st):
                if v not in self.epi_vars():
                    raise EmberRuntimeError(f"{where}: unknown loop variable {v}")
            for idx in loads_of(st.expr, self.out):
                if here is None:
                    here = idx
                if idx != here:
                    raise EmberRuntimeError(f"{where}: the epilogue loads {self.out.name} at two "
                                            f"places ({here} and {idx})")
            if isinstance(st, Store):
                if st.buf.role == "input" or st.buf in loads:
                    raise EmberRuntimeError(f"{where} stores {st.buf.name}, which is an input or "
                                            f"loaded by the kernel")
                if st.buf is self.out and here is not None and st.index != here:
                    raise EmberRuntimeError(f"{where}: in-place epilogue store at {st.index}, "
                                            f"load at {here}")
            if isinstance(st, Let):
                if st.name in defined:
                    raise EmberRuntimeError(f"{where}: {st.name} defined twice")
                defined.add(st.name)

    def __str__(self) -> str:
        head = f"kernel {self.name}  // {' '.join(self.ops)} (GEMM, {self.impl})"
        lines = [head]
        ind = "  "
        for d, n in enumerate(self.batch):
            lines.append(f"{ind}for b{d} in 0..{n}:")
            ind += "  "
        lines.append(f"{ind}{self.out.name}[b] = {self.a} @ {self.b}  "
                     f"// m={self.m} n={self.n} k={self.k}")
        if self.epilogue:
            lines.append("  epilogue:")
            ind = "    "
            rng = [numel(self.epi_ranges())] if self.epi_flat else self.epi_ranges()
            for v, n in zip(self.epi_vars(), rng):
                lines.append(f"{ind}for {v} in 0..{n}:")
                ind += "  "
            lines.extend(f"{ind}{st}" for st in self.epilogue)
        return "\n".join(lines)


@dataclass(eq=False)
class Im2colKernel:
    """Convolution's im2col: ``dst[n, c, k..., o...] = src[n, c, o * stride - pad_lo + k *
    dilation]`` (0 outside the input), ``dst`` C-contiguous ``(N, C, prod(kernel),
    prod(out))``, which is ``(N, G, Cg * prod(kernel), prod(out))`` for the GEMM that
    follows.  Static sizes; ``src`` is read through ``geom`` (a view of its buffer)."""

    name: str
    src: Buffer
    geom: Geometry
    dst: Buffer
    kernel: tuple
    stride: tuple
    pad_lo: tuple
    dilation: tuple
    out: tuple
    ops: list = field(default_factory=list)
    # the adjoint (col2im, conv_input_grad): ``src`` is the columns, ``dst`` the C-contiguous
    # image ``geom`` describes; each pixel adds its windows' values in kernel-offset order,
    # starting from 0, as eager's strided adds do
    col2im: bool = False

    def buffers(self) -> tuple[list, list]:
        return [self.src], [self.dst]

    def __str__(self) -> str:
        if self.col2im:
            return (f"kernel {self.name}  // col2im of {self.src.name} {list(self.src.shape)} "
                    f"into {self.dst.name} {list(self.geom.shape)}: kernel "
                    f"{list(self.kernel)}, stride {list(self.stride)}, padding "
                    f"{list(self.pad_lo)}, dilation {list(self.dilation)}")
        return (f"kernel {self.name}  // im2col of {self.src.name} {list(self.geom.shape)} "
                f"(strides {list(self.geom.strides)}): kernel {list(self.kernel)}, stride "
                f"{list(self.stride)}, padding {list(self.pad_lo)}, dilation "
                f"{list(self.dilation)} -> {self.dst.name} {list(self.dst.shape)}")


@dataclass(eq=False)
class ScanKernel:
    """A scan along ``dim`` of ``src`` seen through ``geom`` (strided loads, no copy):
    ``cumsum`` (from the end when ``reverse``), ``cumprod``, ``cummax``/``cummin`` (running
    extreme into ``dst`` and the index of its latest occurrence into ``idx``) and
    ``logcumsumexp``.  Each line along ``dim`` is a sequential scan, in the order eager's
    NumPy accumulate adds (so float results equal eager's bit for bit); the dims before
    ``dim`` are loops outside (OpenMP over the outermost), the dims after it loops inside,
    each with its own running value.  ``dst``/``idx`` hold ``geom.shape`` in eager's memory
    order (their buffers' ``strides``; C order when None)."""

    name: str
    op: str
    src: Buffer
    geom: Geometry
    dim: int
    dst: Buffer
    idx: Any = None
    reverse: bool = False
    ops: list = field(default_factory=list)

    def buffers(self) -> tuple[list, list]:
        return [self.src], [self.dst] + ([self.idx] if self.idx is not None else [])

    def __str__(self) -> str:
        outs = self.dst.name + (f", {self.idx.name}" if self.idx is not None else "")
        return (f"kernel {self.name}  // {' '.join(self.ops)} (scan)\n"
                f"{outs} = {self.op}({self.src.name}[{self.geom.offset}; shape "
                f"{list(self.geom.shape)}, strides {list(self.geom.strides)}], dim={self.dim}"
                f"{', reverse' if self.reverse else ''})  // sequential along dim")


@dataclass(eq=False)
class UserKernel:
    """One launch of an ``ember.kernel`` kernel (a ``kernel_launch`` node, e.g. from a
    ``triton_op``): ``source`` is the kernel's own C (program and grid functions, guarded so a
    unit holds it once), called as ``grid_fn(g0, g1, g2, <args>)``.  ``args`` gives each C
    argument: ``("buf", Buffer, offset)`` (a tensor; stored ones are the fresh ``outs``),
    or ``("lit", text)`` (a scalar argument, a C literal).  ``copies``: ``(out, src, offset)``
    pairs: each stored tensor starts as a copy of its input value, unless that value was
    uninitialized (``empty``).  ``names``: the kernel parameter of each arg; ``launch``: the
    kernel, its bound arguments and its int arguments' values, so that the fusion pass
    (``c/kernel_fusion.py``) can regenerate ``source`` with pointwise neighbours inside its
    loads and stores."""

    name: str
    source: str
    grid_fn: str
    grid: tuple
    args: list
    outs: list
    copies: list
    ops: list = field(default_factory=list)
    names: list = field(default_factory=list)
    launch: Any = None

    def buffers(self) -> tuple[list, list]:
        loads = _distinct([a[1] for a in self.args if a[0] == "buf" and a[1] not in self.outs]
                          + [c[1] for c in self.copies])
        return loads, list(self.outs)

    def __str__(self) -> str:
        args = ", ".join(a[1].name if a[0] == "buf" else a[1] for a in self.args)
        cp = "".join(f"\n  {o.name} = copy({s.name})" for o, s, _ in self.copies)
        return (f"kernel {self.name}  // {' '.join(self.ops)} (ember.kernel launch, grid "
                f"{list(self.grid)}){cp}\n  {self.grid_fn}({args})")


# the most batch dims an AttentionKernel iterates (the size of its job's C arrays)
ATTENTION_MAX_BATCH_DIMS = 8


@dataclass(eq=False)
class AttentionKernel:
    """Attention over ``batch`` heads of ``L`` query rows, ``S`` keys, head dims ``E``/``Ev``.
    ``outs``: ``[out]`` (forward) or ``[gq, gk, gv, gm]`` (backward; ``gm`` None when unused),
    all C-contiguous; operands are ``MatOperand``s (``g``: the output's gradient)."""

    name: str
    backward: bool
    q: MatOperand
    k: MatOperand
    v: MatOperand
    mask: MatOperand | None
    g: MatOperand | None
    outs: list
    batch: tuple
    L: int
    S: int
    E: int
    Ev: int
    scale: float
    ops: list = field(default_factory=list)
    impl: str = "blas"
    # float16/bfloat16 attention computed in float32 the way PyTorch's CPU flash kernel rounds
    # (``ops/attention.py``'s ``_sdpa_lowp``): 1 bfloat16 / 2 float16 rounds the unnormalized
    # probabilities before ``p v`` and divides by the row sum after; 0: plain float32
    round_p: int = 0

    @property
    def out(self) -> Buffer:
        return self.outs[0]

    def operands(self) -> list:
        return [x for x in (self.q, self.k, self.v, self.mask, self.g) if x is not None]

    def buffers(self) -> tuple[list, list]:
        loads: list = []
        for x in self.operands():
            if x.buf not in loads:
                loads.append(x.buf)
        return loads, [b for b in self.outs if b is not None]

    def has_checks(self) -> bool:
        return True  # returns 1 when its scratch cannot be allocated

    def __str__(self) -> str:
        what = "backward" if self.backward else "forward"
        outs = ", ".join("-" if b is None else b.name for b in self.outs)
        ops = ", ".join(f"{n}={x}" for n, x in (("q", self.q), ("k", self.k), ("v", self.v),
                                                 ("mask", self.mask), ("g", self.g))
                        if x is not None)
        return (f"kernel {self.name}  // {' '.join(self.ops)} (attention {what}, batch "
                f"{list(self.batch)}, L={self.L} S={self.S} E={self.E} Ev={self.Ev}, "
                f"scale={self.scale!r})\n  {outs} = attention({ops})")


@dataclass(eq=False)
class IndexKernel:
    """``scatter=False``: ``out[r, c] = src[idx[r] * src_rs + c * src_cs]`` (a gather of rows
    of the 2-D ``src``); ``scatter=True``: ``out`` (``num x cols``, C-contiguous) zeroed, then
    ``out[idx[r], c] += src[r, c]`` for ``r`` in order (``src`` rows through ``src_geom``).
    ``idx_geom``: the index tensor's geometry (its elements are the rows ``r``, C order).
    ``padding_idx``: rows whose index is it are multiplied by 0, ``scale_freq``: every row by
    1/count of its index (as eager's masked gather and its scatter-add).  float16/bfloat16
    scatter-adds accumulate in float and round once (as eager)."""

    name: str
    scatter: bool
    src: Buffer
    src_geom: Geometry
    idx: Buffer
    idx_geom: Geometry
    out: Buffer
    num: int
    cols: int
    ops: list = field(default_factory=list)
    padding_idx: int | None = None
    scale_freq: bool = False

    @property
    def rows(self) -> SizeExpr:
        return numel(tuple(self.idx_geom.shape))

    def buffers(self) -> tuple[list, list]:
        return [self.src, self.idx], [self.out]

    def has_checks(self) -> bool:
        return True  # returns 1 for an index out of range

    def __str__(self) -> str:
        what = "scatter_add" if self.scatter else "gather"
        return (f"kernel {self.name}  // {' '.join(self.ops)} ({what} of {self.rows} rows x "
                f"{self.cols}, {self.num} weights)\n  {self.out.name} = {what}("
                f"{self.src.name}{list(self.src_geom.strides)}+{self.src_geom.offset}, "
                f"{self.idx.name}{list(self.idx_geom.strides)}+{self.idx_geom.offset})")


def _distinct(bufs: list) -> list:
    """The buffers among ``bufs`` (None skipped), each once (one C parameter per buffer)."""
    out: list = []
    for b in bufs:
        if b is not None and all(b is not o for o in out):
            out.append(b)
    return out


@dataclass(eq=False)
class DimIndexKernel:
    """``gather``/``scatter``/``scatter_add`` along ``dim`` (``torch.gather`` semantics).

    ``gather``: ``out[p] = x[p with coordinate dim replaced by idx[p]]`` over the index's
    shape.  ``scatter``/``scatter_add``: ``out`` (``x``'s shape, C-contiguous) is a copy of
    ``x``, then for every index position ``p`` in C order ``out[p with dim := idx[p]] = src[p]``
    (``+=`` for ``scatter_add``): serial, so duplicates resolve as eager's (last write wins,
    sums in index order).  ``src`` is None when ``value`` (C text) is the scalar written;
    ``x`` is None when ``out`` starts as zeros of ``shape`` (the sort gradients' scatter-add).
    ``combine`` (``scatter_reduce``): the C of ``out = combine(out, src)`` at each index, in
    order, after ``identity`` is written at every indexed element (``include_self=False``).
    Every index is checked against ``[0, x.shape[dim])`` before anything is written: an index
    out of range makes the kernel return 1 (the graph reruns eagerly and raises)."""

    name: str
    mode: str                  # "gather", "scatter" or "scatter_add"
    dim: int
    dtype: Any
    x: Buffer | None
    x_geom: Geometry           # x's geometry (its shape only, when x is None)
    idx: Buffer
    idx_geom: Geometry
    src: Buffer | None
    src_geom: Geometry | None
    value: str | None
    out: Buffer
    ops: list = field(default_factory=list)
    combine: str = ""          # scatter_reduce: C over {a} (out) and {b} (src); "" otherwise
    identity: str | None = None  # scatter_reduce without include_self: written first
    mean_self: int | None = None  # scatter_reduce mean: each element's count before its hits

    def buffers(self) -> tuple[list, list]:
        return _distinct([self.x, self.idx, self.src]), [self.out]

    def has_checks(self) -> bool:
        return True  # returns 1 for an index out of range

    def __str__(self) -> str:
        src = self.src.name if self.src is not None else self.value
        return (f"kernel {self.name}  // {' '.join(self.ops)} ({self.mode} along dim "
                f"{self.dim}, index {list(self.idx_geom.shape)})\n  {self.out.name} = "
                f"{self.mode}({'zeros' if self.x is None else self.x.name}, {self.idx.name}, "
                f"{src})")


@dataclass(eq=False)
class AdvIndexKernel:
    """Advanced indexing ``x[..., idx[0], ..., idx[k-1], ...]`` at ``dims`` (the ``index``
    op) or its write (``index_put``, ``put`` = "put" or "add").

    ``result``: the indexing result's shape; ``layout``: for every result dim, ``("b", k)`` (dim
    ``k`` of the index's broadcast shape ``idx.shape[1:]``) or ``("x", d)`` (dim ``d`` of ``x``,
    not indexed).  A negative index counts from the end; one out of range makes the kernel
    return 1 before anything is written (the graph reruns eagerly and raises).  ``put``: ``out``
    (``x``'s shape, C-contiguous) is a copy of ``x`` and the values are written (added) in the
    result's C order, serially: duplicates resolve as eager's (last write wins, sums in
    order)."""

    name: str
    put: str | None            # None (a gather), "put" or "add"
    dims: tuple
    layout: tuple
    result: tuple
    dtype: Any
    x: Buffer
    x_geom: Geometry
    idx: Buffer
    idx_geom: Geometry
    values: Buffer | None
    values_geom: Geometry | None
    out: Buffer
    ops: list = field(default_factory=list)

    def buffers(self) -> tuple[list, list]:
        return _distinct([self.x, self.idx, self.values]), [self.out]

    def has_checks(self) -> bool:
        return True  # returns 1 for an index out of range

    def __str__(self) -> str:
        what = "index" if self.put is None else f"index_put({self.put})"
        vals = f", {self.values.name}" if self.values is not None else ""
        return (f"kernel {self.name}  // {' '.join(self.ops)} ({what} at dims "
                f"{list(self.dims)}, result {list(self.result)})\n  {self.out.name} = "
                f"{what}({self.x.name}, {self.idx.name}{vals})")


@dataclass(eq=False)
class PoolKernel:
    """N-d max pooling over ``x`` (``(N, C, *spatial)``) or its backward.

    ``scatter=False``: ``outs = [values, indices]`` of shape ``(N, C, *out)``; each window is
    scanned in C order of its kernel offsets, padding reading ``fill``: the first maximum wins,
    and every NaN replaces the running maximum (the last NaN wins), as eager; the index is the
    flat spatial position of the winner.  ``scatter=True``: ``x`` is the gradient (shape of
    the indices ``idx``), ``outs = [grad_input]`` (``(N, C, *spatial)``): each (N, C) row sums
    its gradient at its indices in double, in order, and rounds once (eager's bincount); an
    index outside the row is skipped."""

    name: str
    scatter: bool
    dtype: Any
    x: Buffer
    x_geom: Geometry
    idx: Buffer | None
    idx_geom: Geometry | None
    outs: list
    spatial: tuple
    out: tuple
    kernel: tuple = ()
    stride: tuple = ()
    padding: tuple = ()
    dilation: tuple = ()
    fill: str = "-INFINITY"
    ops: list = field(default_factory=list)

    def buffers(self) -> tuple[list, list]:
        return _distinct([self.x, self.idx]), list(self.outs)

    def has_checks(self) -> bool:
        return self.scatter  # returns 1 when its scratch cannot be allocated

    def __str__(self) -> str:
        what = "max_pool backward" if self.scatter else "max_pool"
        return (f"kernel {self.name}  // {' '.join(self.ops)} ({what}, spatial "
                f"{list(self.spatial)} -> {list(self.out)}, kernel {list(self.kernel)})\n  "
                f"{', '.join(b.name for b in self.outs)} = {what}({self.x.name})")


@dataclass(eq=False)
class ResampleKernel:
    """``resample`` (or its adjoint ``resample_backward``) of ``x``: every leading row (the
    ``lead`` dims, C order) is a plane of spatial shape ``size_in`` resampled to ``size_out``
    (``out``, C-contiguous) by separable passes.  ``passes`` holds ``(dim, idx, w)`` in the
    order they run (eager's: the last dim first forward, the first dim first backward):
    ``idx`` an int ``(K, n_out)`` table of input positions along ``dim``, ``w`` the
    ``(K, n_out)`` weights in the compute type (None: nearest, a plain gather); the tables are
    eager's own (``ember.ops.nn_resize.taps`` / ``transposed_taps``), so values are bit-equal."""

    name: str
    dtype: Any
    x: Buffer
    x_geom: Geometry
    out: Buffer
    lead: tuple
    size_in: tuple
    size_out: tuple
    passes: list
    backward: bool = False
    ops: list = field(default_factory=list)

    def buffers(self) -> tuple[list, list]:
        return [self.x], [self.out]

    def has_checks(self) -> bool:
        return True  # returns 1 when its scratch cannot be allocated

    def __str__(self) -> str:
        what = "resample_backward" if self.backward else "resample"
        taps = ", ".join(f"dim {d}: {idx.shape[0]} taps{'' if w is not None else ' (gather)'}"
                         for d, idx, w in self.passes)
        return (f"kernel {self.name}  // {' '.join(self.ops)} ({what} "
                f"{list(self.size_in)} -> {list(self.size_out)}; {taps})\n  "
                f"{self.out.name} = {what}({self.x.name})")


@dataclass(eq=False)
class SortKernel:
    """A stable sort of every slice of ``x`` along ``dim`` (``sort``) keeping its first
    ``count`` elements (``topk``): ``outs = [values, indices]`` (C-contiguous, ``x``'s shape
    with ``count`` along ``dim``).  NaN sorts as the largest value; equal keys keep their
    order (ascending and descending), as eager's stable argsort.

    ``pick`` (``kthvalue``, ``median``): only sorted position ``pick`` of each slice is stored
    (one element per slice, the slices in C order); ``nan``: "first" picks a slice's first NaN
    when it holds one (``kthvalue(nan_first=True)``), "value" stores NaN then (``median``);
    ``outs[1]`` (the indices) may be None."""

    name: str
    dtype: Any
    x: Buffer
    x_geom: Geometry
    dim: int
    descending: bool
    count: int
    outs: list
    ops: list = field(default_factory=list)
    pick: int | None = None
    nan: str = ""

    def buffers(self) -> tuple[list, list]:
        return [self.x], [b for b in self.outs if b is not None]

    def has_checks(self) -> bool:
        return True  # returns 1 when its scratch cannot be allocated

    def __str__(self) -> str:
        order = "descending" if self.descending else "ascending"
        return (f"kernel {self.name}  // {' '.join(self.ops)} (stable sort along dim "
                f"{self.dim}, {order}, first {self.count})\n  "
                f"{', '.join(b.name for b in self.outs if b is not None)} = sort({self.x.name})")


@dataclass(eq=False)
class SearchKernel:
    """``searchsorted``: for every value (C order), PyTorch's binary search over its row of
    ``seq`` (the row of the value's leading coordinates; one row when ``seq`` is 1-D), read
    through ``sorter`` when given; a sorter index out of range makes the kernel return 1 (the
    graph reruns eagerly and raises)."""

    name: str
    dtype: Any
    seq: Buffer
    seq_geom: Geometry
    values: Buffer
    values_geom: Geometry
    sorter: Buffer | None
    sorter_geom: Geometry | None
    right: bool
    out: Buffer
    ops: list = field(default_factory=list)

    def buffers(self) -> tuple[list, list]:
        return _distinct([self.seq, self.values, self.sorter]), [self.out]

    def has_checks(self) -> bool:
        return True

    def __str__(self) -> str:
        return (f"kernel {self.name}  // {' '.join(self.ops)} (binary search, "
                f"{'right' if self.right else 'left'})\n  {self.out.name} = searchsorted("
                f"{self.seq.name}, {self.values.name})")


@dataclass(frozen=True)
class FlexOperand:
    """A strided tensor a FlexAttentionKernel reads: element ``i`` is
    ``buf[offset + sum(strides * i)]`` (a broadcast dim has stride 0)."""

    buf: Buffer
    offset: int
    strides: tuple
    shape: tuple

    def __str__(self) -> str:
        return f"{self.buf.name}[{self.offset}; strides={list(self.strides)}]"


@dataclass(eq=False)
class FlexAttentionKernel:
    """FlexAttention forward over ``B x HQ`` heads (``HKV`` key heads: GQA), ``L`` queries,
    ``S`` keys, tiles of ``QB x KB`` following a BlockMask: ``blocks`` are the int32 operands
    ``kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices`` (the full pair None
    when absent).  ``score``/``mask`` are the traced mods (``ember.ops.flex.FlexExpr``, None
    for identity/keep-all) over ``captured`` operands; ``outs``: ``[out, lse, max]``, all
    C-contiguous.  ``splits``: key partitions per row block (flash-decoding), 1 for none."""

    name: str
    q: FlexOperand
    k: FlexOperand
    v: FlexOperand
    blocks: tuple
    captured: tuple
    outs: list
    B: int
    HQ: int
    HKV: int
    L: int
    S: int
    E: int
    EV: int
    QB: int
    KB: int
    scale: float
    score: Any
    mask: Any
    splits: int = 1
    ops: list = field(default_factory=list)
    # the backward: ``grads`` = (out, lse, g_out, g_lse or None) operands, ``outs`` =
    # ``[dq, dk, dv, *dcaptured]`` for the captured tensors ``grad_caps``
    backward: bool = False
    grads: tuple = ()
    grad_caps: tuple = ()

    @property
    def out(self) -> Buffer:
        return self.outs[0]

    def operands(self) -> list:
        blocks = [b for b in self.blocks if b is not None]
        grads = [g for g in self.grads if g is not None]
        return [self.q, self.k, self.v, *grads, *blocks, *self.captured]

    def buffers(self) -> tuple[list, list]:
        loads: list = []
        for x in self.operands():
            if x.buf not in loads:
                loads.append(x.buf)
        return loads, list(self.outs)

    def has_checks(self) -> bool:
        return True  # returns 1 when its scratch cannot be allocated

    def __str__(self) -> str:
        outs = ", ".join(b.name for b in self.outs)
        what = "backward" if self.backward else "forward"
        return (f"kernel {self.name}  // {' '.join(self.ops)} (flex attention {what}, "
                f"B={self.B} HQ={self.HQ} HKV={self.HKV} L={self.L} S={self.S} E={self.E} "
                f"tiles {self.QB}x{self.KB}, splits={self.splits})\n"
                f"  {outs} = flex_attention(q={self.q}, k={self.k}, v={self.v}, "
                f"score_mod: {self.score}, mask_mod: {self.mask})")


__all__ = ["ATTENTION_MAX_BATCH_DIMS", "AdvIndexKernel", "AttentionKernel", "DimIndexKernel",
           "FlexAttentionKernel", "FlexOperand", "GemmKernel", "Im2colKernel", "IndexKernel",
           "MatOperand", "PoolKernel", "ResampleKernel",
           "ScanKernel", "SearchKernel", "SortKernel", "UserKernel"]

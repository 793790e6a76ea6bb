"""Graph -> loop IR (ARCHITECTURE.md §5).

Nodes are taken in graph order:

* a pointwise op with a ``c_expr`` (its OpDef's; ``OpDef.c_template``) over supported dtypes joins
  the open fusion group when it iterates the same shape; its value is a typed local (a
  register) and is stored to a buffer only when something outside the group needs it;
* a view op (kind ``"view"``) becomes a ``Geometry`` (shape, element strides, offset) over its
  source's buffer, so consumers load through index arithmetic and nothing is copied;
* softmax/log_softmax over the last dim become a ``RowKernel`` (producers fused);
* reductions (argmax/argmin, max/min with indices and vector_norm included) and the row ops
  (layer_norm, rms_norm, cross_entropy and their backwards) become a ``ReduceKernel``
  (``lower_reduce.py``, ``lower_rows.py``); scans (cumsum, cumprod, cummax, cummin,
  logcumsumexp) a ``ScanKernel`` (``lower_scan.py``); matrix products and convolutions a
  ``GemmKernel``/``Im2colKernel`` with fused epilogues (``lower_gemm.py``);
  ``scaled_dot_product_attention`` and its backward an ``AttentionKernel``
  (``lower_attention.py``); ``reshape_copy``/``cat`` and the movement ops (clone, flip, roll,
  repeat, tril/triu, constant_pad, view backwards) copy kernels (``lower_copy.py``);
  ``embedding`` a gather and ``embedding_backward`` a scatter-add ``IndexKernel``,
  ``basic_index_backward`` zeros and a copy kernel (``lower_index.py``);
* ``dropout``, ``uniform``, ``normal`` and ``bernoulli`` join the open group like pointwise ops,
  drawing element ``i`` from the Philox stream as eager does (``lower_random.py``);
* anything else is an ``Extern`` step: the node's eager NumPy kernel runs from Python between
  two C entry functions.  Every extern is a fallback: it is counted in ``LowerStats`` and logged
  (each one with ``EMBER_LOGS=fallbacks`` or ``EMBER_DEBUG>=3``; a count per op with
  ``EMBER_DEBUG>=1``), never silent.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ember.compiler.c.codegen.prelude import lowp_variants, pasted_helpers
from ember.compiler.c.ir.loop_ir import (
    COMPUTE_CTYPES,
    CTYPES,
    STORAGE_CTYPES,
    Buffer,
    Const,
    Extern,
    Geometry,
    Index,
    Kernel,
    Let,
    Load,
    Local,
    Op,
    Program,
    RowKernel,
    Segment,
    Store,
    contiguous_strides,
    is_lowp,
    order_strides,
    round_expr,
    s_mul,
)
from ember.compiler.c.lower import attention as lower_attention
from ember.compiler.c.lower import copy as lower_copy
from ember.compiler.c.lower import index as lower_index
from ember.compiler.c.lower import random as lower_random
from ember.compiler.c.lower import reduce as lower_reduce
from ember.compiler.c.lower import scan as lower_scan
from ember.compiler.c.lower.gemm import GEMM_OPS, fuse_epilogues, lower_gemm
from ember.compiler.frontend.graph import Graph, Sym, _resolve
from ember.config import config

# the ops lowered by a dedicated module, each with the function that lowers one node (returning
# None when lowered, else the reason it stays an extern); other ops are pointwise or externs
_LOWER_BY_OP: dict[str, Callable[[Any, int, Any], str | None]] = {
    name: lower
    for names, lower in (
        (GEMM_OPS, lower_gemm),
        (lower_copy.COPY_OPS, lower_copy.lower),
        (lower_index.INDEX_OPS, lower_index.lower),
        (lower_attention.ATTENTION_OPS, lower_attention.lower),
        (lower_reduce.HANDLED, lower_reduce.lower),
        (lower_scan.HANDLED, lower_scan.lower),
        (lower_random.OPS, lower_random.lower),
    )
    for name in names
}

# integer division by zero raises in eager (data-dependent): these stay eager for integers
_INT_ZERO_RAISES = frozenset({"div_trunc", "div_floor", "remainder", "fmod"})
# float classification of integer or bool inputs is constant (C's isnan rejects integers)
_INT_CLASSIFY = {"isnan": "0", "isinf": "0", "isfinite": "1", "isposinf": "0", "isneginf": "0"}


@dataclass
class LowerStats:
    """What lowering did: counts for tests and ``EMBER_DEBUG``; ``copies`` counts run-time
    copies of non-contiguous inputs (the driver adds to it)."""

    kernels: int = 0
    segments: int = 0
    fused_ops: int = 0
    view_ops: int = 0
    externs: int = 0
    fallbacks: list = field(default_factory=list)   # "op: reason"
    copies: int = 0
    epilogues: int = 0   # pointwise kernels fused into a GEMM's epilogue (lower_gemm)

    @property
    def fallback_count(self) -> int:
        return len(self.fallbacks)


def _log(kind: str, message: str, level: int = 1) -> None:
    if kind in config.logs or config.debug >= level:
        print(f"[ember.compiler {kind}] {message}", file=sys.stderr)


class _Pw:
    """A value computed by the open group: a local; ``buf`` once it is stored."""

    __slots__ = ("group", "local", "shape", "dtype", "buf", "strides")

    def __init__(self, group: _Group, local: str, shape: tuple, dtype: Any,
                 strides: tuple) -> None:
        self.group, self.local, self.shape, self.dtype, self.buf = group, local, shape, dtype, None
        self.strides = strides  # the layout eager gives this value (where it is stored)


class _Mat:
    """A value in memory: ``buf`` seen through ``geom``."""

    __slots__ = ("buf", "geom", "dtype")

    def __init__(self, buf: Buffer, geom: Geometry, dtype: Any) -> None:
        self.buf, self.geom, self.dtype = buf, geom, dtype


class _Group:
    def __init__(self, shape: tuple) -> None:
        self.shape = shape
        self.body: list = []          # Let / Store / _PendingLoad
        self.members: dict = {}       # ref -> _Pw
        self.loads: dict = {}         # (buffer id, geometry) -> local
        self.writes: set = set()      # ids of buffers this group stores
        self.ops: list = []
        self.n_locals = 0

    def local(self) -> str:
        self.n_locals += 1
        return f"t{self.n_locals - 1}"


class _PendingLoad:
    __slots__ = ("name", "buf", "geom")

    def __init__(self, name: str, buf: Buffer, geom: Geometry) -> None:
        self.name, self.buf, self.geom = name, buf, geom


def helpers_in(prelude: str) -> frozenset:
    """The ``ember_*`` names a prelude defines (functions or macros)."""
    return frozenset(re.findall(r"\b(ember_\w+)\s*\(", prelude)) | pasted_helpers(prelude)


class Lowering:
    """Lower one Graph; ``program``, ``stats`` and ``sources`` (how the driver gets each
    value's NumPy array: ``("in", k)``, ``("buf", Buffer)`` or ``("view", node index, j)``)."""

    def __init__(self, graph: Graph, helpers: frozenset) -> None:
        self.graph = graph
        self.helpers = helpers
        self.stats = LowerStats()
        self.int_names = [f"s{k}" for k in range(graph.num_scalars)]
        self.dynamic = any(type(n) is Sym for s, _ in graph.inputs for n in s)
        self.steps: list = []
        self.segment: Segment | None = None
        self.group: _Group | None = None
        self.vals: dict = {}
        self.sources: dict = {}
        self.n_bufs = 0
        self.uses: dict = {}
        for i, n in enumerate(graph.nodes):
            for a in n.args:
                if _is_ref(a):
                    self.uses.setdefault(a, []).append(i)
        self.outputs = set(graph.outputs)
        self.inputs = []
        for k, (shape, dt) in enumerate(graph.inputs):
            shape = tuple(_size(n) for n in shape)
            b = Buffer(f"in{k}", dt, shape, "input")
            self.inputs.append(b)
            self.vals[("i", k)] = _Mat(b, Geometry.contiguous(shape), dt)
            self.sources[("i", k)] = ("in", k)
        for i, n in enumerate(graph.nodes):
            self._node(i, n)
        self._close_segment()
        self.program = Program(self.steps, self.inputs, self.int_names, graph.num_scalars)
        self.program.sources = self.sources  # type: ignore[attr-defined]
        self.program.stats = self.stats  # type: ignore[attr-defined]

    # -- dispatch --------------------------------------------------------------------------
    def _node(self, i: int, n: Any) -> None:
        kind = n.op.kind
        if n.op.name in ("softmax", "log_softmax"):
            if self._row(i, n):
                return
            reason = lower_reduce.softmax(self, i, n)  # other dims: a ReduceKernel
            if reason is None:
                return
        elif kind == "view":
            if self._view(i, n):
                return
            reason = "view geometry not computable (dynamic size or copy)"
        elif n.op.name in _LOWER_BY_OP:
            reason = _LOWER_BY_OP[n.op.name](self, i, n)
            if reason is None:
                return
        else:
            reason = self._pointwise_reason(n)
            if reason is None:
                self._pointwise(i, n)
                return
        self._extern(i, n, reason)

    def _pointwise_reason(self, n: Any) -> str | None:
        op = n.op
        if op.kind != "pointwise":
            return f"{op.kind} op (no C lowering yet)"
        tmpl = self._template(n)
        if tmpl is None:
            if op.name in _INT_ZERO_RAISES or op.name == "pow":
                return "integer division/pow checks its operands in eager"
            return "pointwise op without a c_expr"
        if len(n.specs) != 1:
            return "multi-output pointwise op"
        tensors = [a for a in n.args if _is_ref(a)]
        if not tensors:
            return "no tensor input"
        for r in tensors:
            d = self._dtype(r)
            if d.np.name not in STORAGE_CTYPES:
                return f"dtype {d.name} (no C storage type)"
        if n.specs[0][1].np.name not in STORAGE_CTYPES:
            return f"output dtype {n.specs[0][1].name}"
        missing = set(re.findall(r"\b(ember_\w+)\s*\(", tmpl)) - self.helpers
        if missing:
            return f"C helper {', '.join(sorted(missing))} not in the prelude"
        fields = set(re.findall(r"\{([A-Za-z_]\w*)\}", tmpl))
        fields.discard("T")  # the compute C type, filled in by the lowering
        extra = set(n.params) - fields - {op.c_selector}
        if extra:
            return f"parameter {', '.join(sorted(extra))} not in its c_expr"
        for k in fields:
            v = n.params.get(k)
            if k != "dtype" and not (type(v) in (int, float, bool) or type(v) is Sym):
                return f"parameter {k}={v!r}"
        return None

    def _template(self, n: Any) -> str | None:
        name = n.op.name
        tensors = [a for a in n.args if _is_ref(a)]
        floating = bool(tensors) and self._dtype(tensors[0]).is_floating_point
        if name in _INT_CLASSIFY and not floating:
            return _INT_CLASSIFY[name]
        if name == "pow" and not floating:
            return None  # integer pow (negative exponents, overflow) stays eager
        if name in _INT_ZERO_RAISES and not floating:
            return None
        if n.op.name == "bitwise_not" and n.specs[0][1].np.name == "bool":
            return "(!{0})"  # ~ on a C bool is never false
        tmpl = n.op.c_template(n.params)
        if tmpl is not None and tensors and is_lowp(self._dtype(tensors[0])):
            tmpl = lowp_variants(tmpl, self._dtype(tensors[0]).np.name)
        return tmpl

    # -- pointwise ------------------------------------------------------------------------------
    def _pointwise(self, i: int, n: Any) -> None:
        tensors = [a for a in n.args if _is_ref(a)]
        shape = self._shape(tensors[0])
        out_dt = n.specs[0][1]
        # scalars take the type of the value operands (where's cond is bool, its x/y are not)
        in_dt = next((self._dtype(r) for r in tensors if self._dtype(r) == out_dt),
                     self._dtype(tensors[0]))
        g = self.group
        if g is not None and (g.shape != shape or any(
                isinstance(self.vals[r], _Mat) and id(self.vals[r].buf) in g.writes
                for r in tensors)):
            self._close_group()
            g = None
        if g is None:
            g = self.group = _Group(shape)
        ct = COMPUTE_CTYPES[in_dt.np.name]
        args = []
        for a in n.args:
            if _is_ref(a):
                args.append(self._lowp_operand(g, a, out_dt))
            else:
                args.append(Const(_scalar(a, ct)))
        params = [("T", ct)]
        for k, v in n.params.items():
            if k == "dtype":  # a cast to float16/bfloat16 rounds once, from double (below)
                params.append((k, "double" if is_lowp(v) else CTYPES[v.np.name]))
            elif k != n.op.c_selector:
                # a float kernel's params are doubles (as cprelude.render_c_expr renders them):
                # the template converts them where eager does (ember_like / ember_as) and keeps
                # double where eager computes with the Python float
                params.append((k, _scalar(v, "double" if ct in ("float", "double") else ct)))
        name = g.local()
        expr: Any = Op(n.op.name, self._template(n), tuple(args), tuple(params))
        if is_lowp(out_dt) and in_dt != out_dt:  # a cast to float16/bfloat16 rounds
            expr = Op("round", round_expr(out_dt, "{0}"), (expr,))
        g.body.append(Let(name, COMPUTE_CTYPES[out_dt.np.name], expr))
        ref = ("n", i, 0)
        v = _Pw(g, name, shape, out_dt, self._layout(n, shape, tensors))
        g.members[ref] = v
        g.ops.append(n.op.name)
        self.vals[ref] = v
        self.stats.fused_ops += 1

    def _lowp_operand(self, g: _Group, r: tuple, out_dt: Any) -> Any:
        """The operand ``r``; a float16/bfloat16 value computed in the group is held in float
        without rounding (as torch.compile does; eager rounds after every op), and is rounded
        to its dtype where it leaves that dtype (a cast, a comparison), as eager sees it."""
        x = self._operand(g, r)
        d = self._dtype(r)
        if is_lowp(d) and d != out_dt and isinstance(self.vals[r], _Pw):
            return Op("round", round_expr(d, "{0}"), (x,))
        return x

    def _operand(self, g: _Group, r: tuple) -> Any:
        v = self.vals[r]
        if isinstance(v, _Pw):
            if v.group is not g:  # fused into a reduction's prologue: recomputed here
                return Local(lower_reduce.recompute(g, v))
            return Local(v.local)
        key = (id(v.buf), v.geom)
        name = g.loads.get(key)
        if name is None:
            name = g.loads[key] = g.local()
            g.body.append(_PendingLoad(name, v.buf, v.geom))
        return Local(name)

    def _layout(self, n: Any, shape: tuple, tensors: list) -> tuple:
        """Element strides of the node's output in eager's memory order (NumPy keeps its
        operands' order, as PyTorch does): contiguous unless an operand is permuted."""
        contig = contiguous_strides(shape)
        ops = []
        for r in tensors:
            v = self.vals[r]
            ops.append(v.strides if isinstance(v, _Pw) else v.geom.strides)
        if all(_ordered(st, shape) for st in ops) or any(type(x) is not int for st in ops
                                                           for x in st + shape):
            return contig
        try:
            order = _probe_order(n, shape, ops, [self._dtype(r) for r in tensors])
        except Exception:  # noqa: BLE001 - a kernel that rejects the stand-ins: C order
            return contig
        if order is None:
            return contig
        return order_strides(shape, order)

    def _store_buffer(self, ref: tuple, v: _Pw) -> Buffer:
        if v.buf is None:
            v.buf = self._buffer(v.dtype, v.shape, "temp")
            if v.strides != contiguous_strides(v.shape):
                v.buf.strides = v.strides
            v.group.writes.add(id(v.buf))
            self.sources[ref] = ("buf", v.buf)
        return v.buf

    def _close_group(self) -> None:
        g = self.group
        if g is None:
            return
        self.group = None
        for ref, v in g.members.items():
            outside = ref in self.outputs or any(
                ("n", c, 0) not in g.members for c in self.uses.get(ref, ()))
            if outside or v.buf is not None:
                self._store_buffer(ref, v)
                g.body.append(("store", v))
            self.vals[ref] = _Mat(v.buf, Geometry(v.shape, v.strides, 0), v.dtype) \
                if v.buf is not None else v
        stores = [x for x in g.body if type(x) is tuple]
        if not stores:
            return  # nothing leaves the group: dead code
        if not lower_random.has_random(g) and lower_reduce.as_epilogue(self, g):
            return
        loads = [x for x in g.body if isinstance(x, _PendingLoad)]
        flat = all(p.geom.is_contiguous() for p in loads) and all(
            x[1].strides == contiguous_strides(g.shape) for x in stores)
        lower_random.bind_indices(g, flat)
        ranges = g.shape
        loop_vars = ["i"] if flat else [f"i{d}" for d in range(len(ranges))]
        body = []
        for x in g.body:
            if isinstance(x, _PendingLoad):
                body.append(Let(x.name, x.buf.compute_ctype, Load(x.buf, _index(x.geom, loop_vars,
                                                                         flat))))
            elif type(x) is tuple:
                v = x[1]
                body.append(Store(v.buf, _index(Geometry(v.shape, v.strides, 0), loop_vars, flat),
                                  Local(v.local)))
            else:
                body.append(x)
        self._open_segment()
        order: tuple = ()
        lay = stores[0][1].strides
        if not flat and all(type(x) is int for x in lay) and list(lay) != sorted(lay)[::-1]:
            order = tuple(sorted(range(len(lay)), key=lambda d: -lay[d]))
        k = Kernel(self._kernel_name(), ranges, body, flat,
                   list(g.ops), order)
        self.segment.kernels.append(k)
        self.stats.kernels += 1
        _log("fusion", f"{k.name}: {len(g.ops)} ops fused over {list(ranges)}"
             f"{' (flat)' if flat else ''}: {' '.join(g.ops)}", 3)

    def _open_segment(self) -> Segment:
        """The segment kernels are appended to, opened (``ember_entry``, ``ember_entry_1``, ...)
        when none is."""
        if self.segment is None:
            k = self.program_segments()
            self.segment = Segment("ember_entry" if not k else f"ember_entry_{k}")
        return self.segment

    def _kernel_name(self) -> str:
        """The next kernel's name, ``kernel<N>`` with N counting the kernels of all segments."""
        return f"kernel{sum(len(s.kernels) for s in self._segments())}"

    def _bind(self, i: int, j: int, buf: Buffer, geom: Geometry, dt: Any) -> None:
        """Output ``j`` of node ``i`` is ``buf`` (seen through ``geom``), stored by a kernel."""
        ref = ("n", i, j)
        self.vals[ref] = _Mat(buf, geom, dt)
        self.sources[ref] = ("buf", buf)

    def _segments(self) -> list:
        segs = [s for s in self.steps if isinstance(s, Segment)]
        return segs + ([self.segment] if self.segment is not None else [])

    def program_segments(self) -> int:
        return len([s for s in self.steps if isinstance(s, Segment)])

    def _close_segment(self) -> None:
        self._close_group()
        if self.segment is not None and self.segment.kernels:
            self.steps.append(self.segment)
            self.stats.segments += 1
        self.segment = None

    # -- row-wise reductions ----------------------------------------------------------------------
    def _row(self, i: int, n: Any) -> bool:
        """softmax/log_softmax over the last dim of a floating value as a RowKernel."""
        src = n.args[0]
        v = self.vals.get(src)
        dim = n.params.get("dim")
        if v is None or type(dim) is not int or not v.dtype.is_floating_point:
            return False
        shape = v.shape if isinstance(v, _Pw) else v.geom.shape
        if not shape or dim not in (len(shape) - 1, -1):
            return False
        if any(type(m) is int and m == 0 for m in shape):
            return False  # empty: eager returns a copy
        if isinstance(v, _Pw) and self._fuse_into_row(i, n, src, v, shape):
            return True
        if isinstance(v, _Pw):
            if v.strides != contiguous_strides(shape):
                return False
            buf, offset = self._store_buffer(src, v), 0
        elif v.geom.strides == contiguous_strides(shape):
            buf, offset = v.buf, v.geom.offset
        else:
            return False
        self._close_group()  # the source is stored by the kernels before this one
        rows = 1
        for m in shape[:-1]:
            rows = s_mul(rows, m)
        out = self._buffer(v.dtype, shape, "temp")
        self._open_segment()
        k = RowKernel(self._kernel_name(), n.op.name,
                      rows, shape[-1], buf, offset, out, [n.op.name])
        self.segment.kernels.append(k)
        self.stats.kernels += 1
        self._bind(i, 0, out, Geometry.contiguous(shape), v.dtype)
        _log("fusion", f"{k.name}: {n.op.name} over rows of {list(shape)}", 3)
        return True

    def _fuse_into_row(self, i: int, n: Any, src: tuple, v: _Pw, shape: tuple) -> bool:
        """Make the open group the row kernel's producer when it exists only to compute the
        row kernel's input (nothing else leaves it) and reads its inputs contiguously."""
        g = self.group
        if g is None or v.group is not g or g.shape != shape or v.buf is not None:
            return False
        if lower_random.has_random(g):
            return False  # its flat index needs the plain kernel's loop variables
        if v.strides != contiguous_strides(shape):
            return False  # eager keeps a permuted layout through softmax; the row kernel's is C
        if self.uses.get(src) != [i] or src in self.outputs:
            return False
        for ref, m in g.members.items():
            if ref == src:
                continue
            if m.buf is not None or ref in self.outputs or any(
                    ("n", c, 0) not in g.members for c in self.uses.get(ref, ())):
                return False
        self.group = None
        row_vars = [f"i{d}" for d in range(len(shape) - 1)] + ["c"]
        prologue = [Let(x.name, x.buf.compute_ctype, Load(x.buf, _index(x.geom, row_vars,
                                                                          False)))
                    if isinstance(x, _PendingLoad) else x for x in g.body]
        rows = 1
        for m in shape[:-1]:
            rows = s_mul(rows, m)
        out = self._buffer(v.dtype, shape, "temp")
        self._open_segment()
        k = RowKernel(self._kernel_name(), n.op.name,
                      rows, shape[-1], None, 0, out, list(g.ops) + [n.op.name], prologue,
                      v.local, tuple(shape[:-1]))
        self.segment.kernels.append(k)
        self.stats.kernels += 1
        self._bind(i, 0, out, Geometry.contiguous(shape), v.dtype)
        _log("fusion", f"{k.name}: {' '.join(k.ops)} fused into one row kernel over "
             f"{list(shape)}", 3)
        return True

    # -- views ----------------------------------------------------------------------------------
    def _view(self, i: int, n: Any) -> bool:
        src_ref = n.args[0]
        lower_reduce.materialize(self, [src_ref])
        v = self.vals.get(src_ref)
        if v is None:
            return False
        if isinstance(v, _Pw):
            if v.group is not self.group:  # an unstored value of a closed group cannot happen
                return False
            geom = Geometry(v.shape, v.strides, 0)
            buf = None
        else:
            geom, buf = v.geom, v.buf
        try:
            outs = _view_geometry(n, geom, v.dtype)
        except Exception:  # noqa: BLE001 - an unexpected view form is an extern, not an error
            outs = None
        if outs is None:
            return False
        if isinstance(v, _Pw):
            buf = self._store_buffer(src_ref, v)
        for j, g2 in enumerate(outs):
            ref = ("n", i, j)
            self.vals[ref] = _Mat(buf, g2, v.dtype)
            self.sources[ref] = ("view", i, j)
        self.stats.view_ops += 1
        return True

    # -- externs --------------------------------------------------------------------------------
    def _extern(self, i: int, n: Any, reason: str) -> None:
        lower_reduce.materialize(self, [a for a in n.args if _is_ref(a)])
        self._close_segment()
        outs = []
        # a runtime scalar in a non-pointwise op's parameters may decide its output's sizes
        # (narrow's length, diagonal's offset): the recorded specs are one call's, so the
        # extern's real sizes go to C at run time, as in a dynamic graph
        runtime = self.dynamic or (n.op.kind != "pointwise" and _has_sym(n.params))
        for j, (shape, dt) in enumerate(n.specs):
            if runtime:
                names = [f"e{i}_{j}_{d}" for d in range(len(shape))]
                self.int_names.extend(names)
                shape = tuple(names)
            b = self._buffer(dt, tuple(shape), "extern")
            outs.append(b)
            self._bind(i, j, b, Geometry.contiguous(tuple(shape)), dt)
        self.steps.append(Extern(i, n, outs, reason))
        self.stats.externs += 1
        self.stats.fallbacks.append(f"{n.op.name}: {reason}")
        _log("fallbacks", f"node {i} ({n.op.name}) runs its eager kernel: {reason}", 3)

    # -- helpers --------------------------------------------------------------------------------
    def _buffer(self, dt: Any, shape: tuple, role: str) -> Buffer:
        self.n_bufs += 1
        return Buffer(f"buf{self.n_bufs - 1}", dt, shape, role)

    def _shape(self, r: tuple) -> tuple:
        v = self.vals[r]
        return v.shape if isinstance(v, _Pw) else v.geom.shape

    def _dtype(self, r: tuple) -> Any:
        return self.vals[r].dtype


def _is_ref(a: Any) -> bool:
    return type(a) is tuple and len(a) >= 2 and a[0] in ("i", "n")


def _size(n: Any) -> Any:
    return f"s{n.index}" if type(n) is Sym else int(n)


def _scalar(v: Any, ct: str) -> str:
    """C text of a number (or lifted scalar) converted to C type ``ct``."""
    if type(v) is Sym:
        src = f"floats[{v.index}]" if ct in ("float", "double") else f"ints[{v.index}]"
        return f"(({ct}){src})"
    if isinstance(v, (bool, np.bool_)):
        return f"(({ct}){int(v)})"
    if isinstance(v, (int, np.integer)):
        return f"(({ct}){int(v)}LL)"
    v = float(v)
    if ct not in ("float", "double", "bool") and math.isfinite(v):
        # a float to a narrower integer through int64, as NumPy's cast (C leaves an out-of-range
        # direct conversion undefined: (uint8_t)-1.0)
        return f"(({ct})(int64_t){v!r})"
    if math.isnan(v):
        return f"(({ct})NAN)"
    if math.isinf(v):
        return f"(({ct}){'-' if v < 0 else ''}INFINITY)"
    return f"(({ct}){v!r})"


def _index(geom: Geometry, loop_vars: list, flat: bool) -> Index:
    if flat:
        return Index(0, (("i", 1),))
    terms = tuple((v, s) for v, s, n in zip(loop_vars, geom.strides, geom.shape)
                  if s != 0 and n != 1)
    return Index(geom.offset, terms)


def _ordered(strides: tuple, shape: tuple) -> bool:
    """True when the non-broadcast dims of a geometry run in C order (slowest first)."""
    last = None
    for s, m in zip(strides, shape):
        if s == 0 or m == 1:
            continue
        if type(s) is not int:
            return True
        if last is not None and s > last:
            return False
        last = s
    return True


def _probe_order(n: Any, shape: tuple, strides: list, dtypes: list) -> list | None:
    """Dims from slowest to fastest of the output the node's eager kernel makes from small
    stand-ins laid out like its operands (2 per dim; broadcast dims stay stride 0)."""
    if _has_sym(n.params) or any(type(a) is Sym for a in n.args):
        return None
    small = tuple(1 if m == 1 else 2 for m in shape)
    it = iter(zip(strides, dtypes))
    args = []
    for a in n.args:
        if not _is_ref(a):
            args.append(a)
            continue
        st, dt = next(it)
        if dt.np.name not in STORAGE_CTYPES:
            return None
        npdt = np.dtype(dt.np)
        order = sorted(range(len(shape)), key=lambda d: -abs(st[d]))
        sst = [0] * len(shape)
        acc = 1
        for d in reversed(order):
            if st[d] != 0:
                sst[d] = acc
                acc *= small[d]
        base = np.ones(acc, npdt)
        args.append(np.lib.stride_tricks.as_strided(
            base, small, tuple(x * npdt.itemsize for x in sst)))
    with np.errstate(all="ignore"):
        out = n.op.eager(*args, **n.params)
    if not isinstance(out, np.ndarray) or out.shape != small:
        return None
    return sorted(range(len(shape)), key=lambda d: -out.strides[d])


def _view_geometry(n: Any, geom: Geometry, dt: Any) -> list | None:
    """Geometries of a view node's outputs over its source's geometry, or None."""
    name, p = n.op.name, n.params
    shape, st = geom.shape, geom.strides
    if name == "permute":
        d = p["dims"]
        if _has_sym(d):  # a dynamic graph lifts every int, even dims
            return None
        return [Geometry(tuple(shape[k] for k in d), tuple(st[k] for k in d), geom.offset)]
    if name == "expand":
        out = tuple(_size(x) for x in p["shape"])
        lead = len(out) - len(shape)
        strides = []
        for k, m in enumerate(out):
            j = k - lead
            if j < 0 or shape[j] == 1:
                strides.append(0 if m != 1 else 0)
            elif shape[j] == m or m == -1:
                strides.append(st[j])
            else:
                return None
        out = tuple(shape[k - lead] if m == -1 else m for k, m in enumerate(out))
        return [Geometry(out, tuple(strides), geom.offset)]
    if name == "view" and st == contiguous_strides(shape):
        out = tuple(_size(x) for x in p["shape"])
        if -1 in out:
            return None
        return [Geometry(out, contiguous_strides(out), geom.offset)]
    return _shadow_geometry(n, geom, dt)


def _shadow_geometry(n: Any, geom: Geometry, dt: Any) -> list | None:
    """Run the eager view on a stand-in array of the source's (concrete) geometry and read the
    result's strides and offset back; None if anything is symbolic or the kernel copies."""
    items = list(geom.shape) + list(geom.strides) + [geom.offset]
    if any(type(x) is not int for x in items) or any(s < 0 for s in geom.strides):
        return None
    if _has_sym(n.params) or any(type(a) is Sym for a in n.args):
        return None
    extent = geom.offset + 1 + sum((m - 1) * s for m, s in zip(geom.shape, geom.strides)
                                   if m > 0)
    npdt = np.dtype(dt.np) if dt.np.name in CTYPES else np.dtype(np.float32)
    root = np.empty(max(extent, 1), npdt)
    item = npdt.itemsize
    shadow = np.ndarray(geom.shape, npdt, buffer=root, offset=geom.offset * item,
                        strides=tuple(s * item for s in geom.strides))
    try:
        out = n.op.eager(shadow, *n.args[1:], **n.params)
    except Exception:  # noqa: BLE001 - a view we cannot replay is an extern, not an error
        return None
    outs = out if isinstance(out, (tuple, list)) else (out,)
    base = root.__array_interface__["data"][0]
    res = []
    for o in outs:
        if not isinstance(o, np.ndarray) or not _derives_from(o, root):
            return None
        off = (o.__array_interface__["data"][0] - base)
        if off % item or any(s % item for s in o.strides):
            return None
        res.append(Geometry(tuple(o.shape), tuple(s // item for s in o.strides), off // item))
    return res


def _derives_from(a: np.ndarray, root: np.ndarray) -> bool:
    b: Any = a
    while b is not None:
        if b is root:
            return True
        b = getattr(b, "base", None)
    return False


def _has_sym(x: Any) -> bool:
    t = type(x)
    if t is Sym:
        return True
    if t in (tuple, list):
        return any(_has_sym(y) for y in x)
    if t is dict:
        return any(_has_sym(y) for y in x.values())
    return False


def lower(graph: Graph, helpers: frozenset) -> Program:
    """The loop-IR ``Program`` of ``graph`` (with ``.stats`` and ``.sources``)."""
    program = Lowering(graph, helpers).program
    fuse_epilogues(program, graph)
    return program


resolve_params = _resolve

__all__ = ["LowerStats", "Lowering", "helpers_in", "lower"]

"""Tracing a module with symbolic sizes (ARCHITECTURE.md §4, §6).

Export runs the module's Python as written on tensors whose payload is a ``FakeArray``: a shape
(ints and ``SymInt``s) and a dtype, no data.  ``ember.tensor.bind`` hands every op to the active
recorder; ``Tracer.bind`` runs the op's ``meta`` on the symbolic shapes (which guards through the
``ShapeEnv``) and appends a node to the export ``Graph``.  Parameters, buffers and tensor
constants keep their real values and become placeholders the first time an op reads them; an
in-place write is functionalized (the written tensor reads the new value) and, for buffers and
user inputs, becomes a mutation output.  Anything that needs a tensor's values raises
``GuardOnDataDependentSymNode`` naming the user's line.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ember import _lazy
from ember.errors import GuardOnDataDependentSymNode
from ember.export.graph import Graph, Node
from ember.sym import FakeTensor, _user_frame
from ember.tensor import Tensor, _wrap


class _Flags:
    writeable = True
    c_contiguous = True
    f_contiguous = False
    owndata = True


def _contiguous_strides(shape: tuple, itemsize: int) -> tuple:
    out = []
    acc: Any = itemsize
    for n in reversed(shape):
        out.append(acc)
        acc = acc * n
    return tuple(reversed(out))


class FakeArray:
    """The payload of a traced tensor: ``shape``, ``dtype`` (NumPy's) and the graph ``node`` that
    produces it.  Answers the metadata a NumPy array answers; reading values is an error."""

    __slots__ = ("shape", "dtype", "node", "__weakref__")
    flags = _Flags()
    base = None

    def __init__(self, shape: tuple, np_dtype: Any, node: Node) -> None:
        self.shape = tuple(shape)
        self.dtype = np.dtype(np_dtype)
        self.node = node

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> Any:
        n: Any = 1
        for s in self.shape:
            n = n * s
        return n

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> Any:
        return self.size * self.dtype.itemsize

    @property
    def strides(self) -> tuple:
        return _contiguous_strides(self.shape, self.dtype.itemsize)

    def _values(self, what: str) -> Any:
        """Raise: export has no values; under ``draft_export`` give the real array instead."""
        draft = getattr(_lazy.STATE.trace, "draft", None)
        if draft is not None:
            return draft.value(self.node, what)
        self._fail(what)

    def _fail(self, what: str) -> Any:
        fn, line, func = _user_frame()
        raise GuardOnDataDependentSymNode(
            f"[export] {what} needs a tensor's values, which export does not have (tensors are "
            f"symbolic while tracing: only their shapes and dtypes are known).  Rewrite the code "
            f"without reading values (e.g. torch.where instead of `if tensor:`).\n"
            f"Caused by: ({fn}:{line} in {func})", None)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        arr = self._values("reading a tensor as a NumPy array")
        return arr if dtype is None else arr.astype(dtype)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._values(f"NumPy attribute .{name}"), name)

    def __getitem__(self, item: Any) -> Any:
        return self._values("indexing into the values")[item]

    def __setitem__(self, item: Any, value: Any) -> None:
        self._fail("writing values directly")

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self) -> Any:
        return iter(self._values("iterating over a tensor's values"))

    def __bool__(self) -> bool:
        return bool(self._values("bool() of a tensor"))

    def __float__(self) -> float:
        return float(self._values("float() of a tensor"))

    def __int__(self) -> int:
        return int(self._values("int() of a tensor"))

    def ember_item(self, t: Tensor) -> Any:
        """``t.item()`` while exporting: an integer becomes an unbacked SymInt ``u<k>`` (an
        ``item`` node), usable in later shapes after ``ember._check``s, a float an unbacked
        ``SymFloat`` ``zuf<k>``, as in PyTorch; a bool needs the values (draft_export gives
        them)."""
        tr = _lazy.STATE.trace
        if (t._dtype.name == "bool" or t._dtype.is_complex or tr is None
                or tr.env is None or getattr(tr, "draft", None) is not None):
            return NotImplemented
        return tr.item(t)

    def __repr__(self) -> str:
        return f"FakeArray(shape={self.shape}, dtype={self.dtype}, node={self.node.name})"


def fake_val(shape: tuple, dtype: Any) -> FakeTensor:
    return FakeTensor(tuple(shape), dtype)


class Tracer:
    """The recorder installed in ``ember._lazy.STATE.trace`` while export runs the module."""

    owner = None
    draft = None  # draft_export's RealValues
    # id(ndarray) -> FQN of a plain tensor attribute of the exported module (not a parameter
    # or buffer): lifted as a constant named after it, as PyTorch's _gather_constant_attrs
    attr_fqns: dict = {}

    def __init__(self, graph: Graph, lifted: dict, env: Any = None) -> None:
        self.graph = graph
        self.env = env                            # the ShapeEnv (for data-dependent sizes)
        # id(ndarray) -> (placeholder name, kind, target fqn, array) of a liftable tensor
        self.lifted = lifted
        self.placeholders: dict[int, Node] = {}   # id(ndarray) -> its placeholder (lifted)
        self.constants: list = []                 # (name, Tensor) lifted during the trace
        self.constant_targets: dict = {}          # name -> target of a constant named by FQN
        self.keep: list = []                      # arrays whose ids are keys above
        self.written: dict[int, tuple] = {}       # id(Tensor) -> (tensor, original node)
        self.restore: list = []                   # (tensor, payload, version) to put back
        self.stack: list = []                     # node -> user line
        self.frames: list = []                    # cond branches being traced (innermost last)
        self._on_create: Any = None               # sets a new node's nn_module_stack

    @property
    def on_create(self) -> Any:
        return self._on_create

    @on_create.setter
    def on_create(self, fn: Any) -> None:
        self._on_create = fn
        self.graph.on_create = fn

    # ------------------------------------------------------------------ values
    def node_of(self, t: Tensor) -> Node:
        n = self._node_of(t)
        return n if n.graph is self.graph else self._local(n)

    def _local(self, n: Node) -> Node:
        """``n`` (a node of an enclosing graph, read inside a ``cond`` branch) as an input of
        the branch's graph: a placeholder, and an extra operand of the ``cond``."""
        frame = self.frames[-1]
        ph = frame.map.get(n)
        if ph is None:
            ph = frame.map[n] = self.graph.placeholder(f"arg_{n.name}")
            ph.meta["val"] = n.meta.get("val")
            frame.extras.append(n)
        return ph

    def _node_of(self, t: Tensor) -> Node:
        p = t._data
        if p.__class__ is FakeArray:
            return p.node
        key = id(p)
        n = self.placeholders.get(key)
        if n is not None:
            return n
        info = self.lifted.get(key)
        if info is None:  # a tensor constant the forward made (or reads from elsewhere)
            fqn = self.attr_fqns.get(key)
            if fqn is None:
                k = sum(c is None or c.startswith("c_lifted_tensor_") for c, _ in self.constants)
                name = f"c_lifted_tensor_{k}"
            else:
                name = "c_" + fqn.replace(".", "_")
                self.constant_targets[name] = fqn
            self.constants.append((name, t))
            info = (name, "CONSTANT_TENSOR", fqn or name.removeprefix("c_"), p)
            self.lifted[key] = info
        n = self.graph.placeholder(info[0])
        n.meta["val"] = fake_val(p.shape, t._dtype)
        self.placeholders[key] = n
        self.keep.append(p)
        return n

    def _arg(self, x: Any) -> Any:
        if isinstance(x, Tensor):
            return self.node_of(x)
        if getattr(type(x), "ember_sym_scalar", False):  # a SymFloat: the node computing it
            n = x.node
            return n if n.graph is self.graph else self._local(n)
        if isinstance(x, (list, tuple)) and any(isinstance(y, Tensor) for y in x):
            return type(x)(self._arg(y) for y in x)
        return x

    def wrap(self, node: Node, shape: tuple, dtype: Any) -> Tensor:
        node.meta["val"] = fake_val(shape, dtype)
        return _wrap(FakeArray(shape, dtype.np, node), dtype)

    # ------------------------------------------------------------------ recording
    def bind(self, op: Any, inputs: tuple, params: dict) -> Any:
        spec = op.meta(*inputs, **params)
        specs = (spec,) if op.num_outputs == 1 else tuple(spec)
        if any(d is None for s, _ in specs for d in s):
            specs = tuple((self._unbacked(s, op), d) for s, d in specs)
        args = tuple(self._arg(x) for x in inputs)
        node = self.graph.create_node("call_function", op, args, dict(params))
        fn, line, func = _user_frame()
        node.meta["stack_trace"] = f'File "{fn}", line {line}, in {func}'
        src = inputs[0] if op.kind == "view" and inputs and isinstance(inputs[0], Tensor) \
            else None
        base = None if src is None else src if src._base is None else src._base
        if op.num_outputs == 1:
            (shape, dtype), = specs
            out = self.wrap(node, shape, dtype)
            out._base = base  # a view: an in-place write into it writes its base
            return out
        node.meta["val"] = tuple(fake_val(s, d) for s, d in specs)
        outs = []
        for j, (shape, dtype) in enumerate(specs):
            g = self.graph.create_node("call_function", operator.getitem, (node, j))
            outs.append(self.wrap(g, shape, dtype))
            outs[-1]._base = base
        return tuple(outs)

    def item(self, t: Tensor) -> Any:
        from ember.export._functions import ITEM
        node = self.graph.create_node("call_function", ITEM, (self.node_of(t),), {})
        fn, line, func = _user_frame()
        node.meta["stack_trace"] = f'File "{fn}", line {line}, in {func}'
        if t._dtype.is_floating_point:
            from ember.export._symfloat import float_item
            return float_item(self, node)
        u = self.env.create_unbacked_symint()
        node.meta["val"] = u
        return u

    def runtime_assert(self, rel: Any, message: str | None) -> None:
        """``ember._check`` of an unbacked relation: an ``_assert_scalar`` node."""
        from ember.export._functions import ASSERT_SCALAR
        from ember.sym import SymBool, pyexpr
        node = self.graph.create_node("call_function", ASSERT_SCALAR, (SymBool(rel, self.env),
                                                                        message), {})
        node.args = (node.args[0], message or f"Runtime assertion failed for expression "
                     f"{pyexpr(rel)} on node '{node.name}'")
        node.meta["val"] = None
        fn, line, func = _user_frame()
        node.meta["stack_trace"] = f'File "{fn}", line {line}, in {func}'

    def cond(self, pred: Any, true_fn: Any, false_fn: Any, operands: tuple) -> Any:
        """``ember.cond`` while exporting: both branches traced into subgraphs of one node."""
        from ember.export._cond import trace_cond
        return trace_cond(self, pred, true_fn, false_fn, operands)

    def _unbacked(self, shape: tuple, op: Any) -> tuple:
        """A data-dependent size (``nonzero``'s row count) becomes an unbacked symbol ``u<k>``
        (range ``[0, inf)``); code that branches on it raises ``GuardOnDataDependentSymNode``."""
        if self.env is None:
            fn, line, func = _user_frame()
            raise GuardOnDataDependentSymNode(
                f"[export] {op.name} has an output shape that depends on the data.\n"
                f"Caused by: ({fn}:{line} in {func})", None)
        return tuple(self.env.create_unbacked_symint(min=0) if d is None else d for d in shape)

    def write(self, t: Tensor, new: Tensor) -> bool:
        """Functionalize ``t[...] = new``: ``t`` reads ``new``'s value from now on."""
        if t._base is not None:  # functionalized onto the base (ember/export/_view_write.py)
            from ember.export._view_write import write_view
            write_view(self, t, new)
            return True
        if id(t) not in self.written:
            self.written[id(t)] = (t, self.node_of(t))
            if t._data.__class__ is not FakeArray:
                self.restore.append((t, t._data, t._version_counter[0]))
        node = self.node_of(new)
        t._data = FakeArray(tuple(t.shape), t._dtype.np, node)
        return True

    def graph_break(self, reason: str) -> None:
        fn, line, func = _user_frame()
        raise GuardOnDataDependentSymNode(
            f"[export] {reason}: export needs the whole program as one graph.\n"
            f"Caused by: ({fn}:{line} in {func})", None)

    def register_tensor(self, t: Any) -> None:  # the lazy trace's interface; nothing to do
        pass

    # ------------------------------------------------------------------ install
    def __enter__(self) -> Tracer:
        if _lazy.STATE.trace is not None:
            raise RuntimeError("[export] cannot export inside ember.compile or another export")
        _lazy.STATE.trace = self
        if self.env is not None:
            self.env.assert_hook = self.runtime_assert
            self.env.lazy_user_bools = True
        return self

    def __exit__(self, *exc: Any) -> None:
        _lazy.STATE.trace = None
        if self.env is not None:
            self.env.assert_hook = None
            self.env.lazy_user_bools = False
        for t, payload, version in self.restore:
            t._data = payload
            t._version_counter[0] = version


__all__ = ["FakeArray", "Tracer"]

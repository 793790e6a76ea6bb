"""Autograd graph nodes.

A ``Node`` is a backward function (``grad_fn``).  Its ``next_functions`` are edges
``(node, input_nr)`` to the nodes that produced its inputs; a leaf that requires grad is reached
through its ``AccumulateGrad`` node.  ``OpNode`` is the node of one registry op: it keeps what
the op's ``vjp`` reads, with the versions those tensors had when saved, so a backward through a
tensor that was modified in place afterwards raises PyTorch's error.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ember import _lazy
from ember import dtypes as _dt
from ember.autograd import grad_mode as _gm
from ember.errors import EmberRuntimeError
from ember.ops import _layout

if TYPE_CHECKING:
    from ember.ops.registry import OpDef
    from ember.tensor import Tensor

Edge = tuple["Node", int]
_seq = itertools.count()


class Node:
    """Base of every backward node (``tensor.grad_fn``)."""

    # hooks and metadata are rare: class-level defaults, set per instance only when used
    __slots__ = ("next_functions", "_seq", "_num_outputs", "__weakref__", "__dict__")
    _pre_hooks: list[Callable] | None = None
    _hooks: list[Callable] | None = None
    _tensor_pre_hooks: dict[int, list[Callable]] | None = None
    _compiled_by: Any = None  # the compiled call that recorded this node (compiled autograd)

    def __init__(self, next_functions: tuple[Edge | None, ...], num_outputs: int = 1) -> None:
        self.next_functions = next_functions
        self._seq = next(_seq)
        self._num_outputs = num_outputs

    @property
    def metadata(self) -> dict:
        md = self.__dict__.get("_metadata")
        if md is None:
            md = self.__dict__["_metadata"] = {}
        return md

    def name(self) -> str:
        return type(self).__name__

    def apply(self, grads: tuple[Tensor | None, ...], create_graph: bool) -> tuple:
        raise NotImplementedError

    def release(self) -> None:
        """Free saved tensors (after a backward without ``retain_graph``)."""

    # -- hooks, as in PyTorch: pre-hooks see grad_outputs, hooks see (grad_inputs, grad_outputs)
    def register_prehook(self, fn: Callable) -> _RemovableHandle:
        if self._pre_hooks is None:
            self._pre_hooks = []
        self._pre_hooks.append(fn)
        return _RemovableHandle(self._pre_hooks, fn)

    def register_hook(self, fn: Callable) -> _RemovableHandle:
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(fn)
        return _RemovableHandle(self._hooks, fn)

    def _add_tensor_pre_hook(self, output_nr: int, fn: Callable) -> _RemovableHandle:
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
        lst = self._tensor_pre_hooks.setdefault(output_nr, [])
        lst.append(fn)
        return _RemovableHandle(lst, fn)

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


class _RemovableHandle:
    __slots__ = ("_lst", "_fn")

    def __init__(self, lst: list, fn: Callable) -> None:
        self._lst, self._fn = lst, fn

    def remove(self) -> None:
        try:
            self._lst.remove(self._fn)
        except ValueError:
            pass

    def __enter__(self) -> _RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


class AccumulateGrad(Node):
    """Sink node of a leaf: adds the incoming gradient into ``variable.grad``."""

    __slots__ = ("variable", "_post_acc_hooks", "edge")

    def __init__(self, variable: Tensor) -> None:
        super().__init__(())
        self.variable = variable
        self._post_acc_hooks: list[Callable] | None = None
        self.edge = (self, 0)  # the edge to this node (built once: nodes of ops on the leaf)

    def apply(self, grads: tuple, create_graph: bool, stored: set | None = None) -> tuple:
        """``stored``: ids of the payloads this backward already stored as some leaf's
        ``.grad``; a gradient handed to two leaves (``a + b``) is copied for the second, as
        PyTorch's AccumulateGrad copies a gradient it cannot steal."""
        (g,) = grads
        var = self.variable
        if g is None:
            return ()
        rec = _lazy.STATE.recorder
        if rec is not None:
            rec.grad_set(var, self)
        if var.grad is None:
            # a fresh gradient is stored as is; one that aliases other memory (a view, or a
            # tensor the user passed in) is copied so later writes to it cannot change .grad,
            # and one that breaks PyTorch's layout contract is copied into the layout it asks
            if create_graph:
                var.grad = g if obeys_layout(g, var) else lay_out(g, var, create_graph)
            else:
                g = g.detach()
                if not obeys_layout(g, var):
                    g = lay_out(g, var, False)
                elif g._base is not None or _shared_payload(g, stored):
                    g = g.clone()
                if stored is not None:
                    stored.add(id(g._data))
                var.grad = g
        elif create_graph:
            var.grad = var.grad + g
        else:
            if not _gm.STATE.grad_enabled:  # the engine runs a first-order backward so
                acc = var.grad + g
            else:
                with _gm.no_grad():
                    acc = var.grad + g
            # PyTorch adds in place (``grad += g``): the sum keeps .grad's layout
            var.grad = acc if obeys_layout(acc, var) else lay_out(acc, var, False)
        if self._post_acc_hooks:
            for hook in list(self._post_acc_hooks):
                hook(var)
        return ()


def _shared_payload(g: Tensor, stored: set | None) -> bool:
    """Whether ``g``'s memory is already another leaf's ``.grad`` or is a broadcast (stride-0)
    array, which in-place updates of ``.grad`` (``mul_`` in gradient clipping) must not see."""
    data = g._data
    if stored is not None and id(data) in stored:
        return True
    strides = getattr(data, "strides", None)
    return bool(strides) and data.size > 1 and 0 in strides


def _dense(shape: tuple, strides: tuple, itemsize: int) -> bool:
    """PyTorch's ``is_non_overlapping_and_dense`` (byte strides): the dims of size >= 2, by
    increasing stride, pack the elements without gaps or overlaps."""
    need = itemsize
    for d in sorted([d for d in range(len(shape)) if shape[d] >= 2], key=strides.__getitem__):
        if strides[d] != need:
            return False
        need *= shape[d]
    return True


def obeys_layout(g: Tensor, var: Tensor) -> bool:
    """PyTorch's gradient layout contract (``torch/csrc/autograd/functions/accumulate_grad.h``,
    ``obeys_layout_contract``) for ``g`` as ``var.grad``: ``var``'s strides (size-1 dims
    aside) where ``var`` is non-overlapping and dense, else contiguous.  A lazy (compiled)
    payload answers from its recorded geometry."""
    a, v = g._data, var._data
    lazy = _lazy.LazyArray
    if a.shape != v.shape or not (a.__class__ is np.ndarray or a.__class__ is lazy) or \
            not (v.__class__ is np.ndarray or v.__class__ is lazy):
        return True
    if a.__class__ is np.ndarray and v.__class__ is np.ndarray and v.flags.c_contiguous:
        return a.flags.c_contiguous  # the frequent case: contiguous (size-1 dims aside)
    gs, vs = a.strides, v.strides
    if a.itemsize == v.itemsize and _dense(v.shape, vs, v.itemsize):
        return all([n == 1 or x == y for n, x, y in zip(a.shape, gs, vs)])
    n = a.itemsize
    return _layout.is_contiguous(a.shape, tuple([s // n for s in gs]))


def lay_out(g: Tensor, var: Tensor, create_graph: bool) -> Tensor:
    """A copy of ``g`` that obeys the layout contract for ``var`` (PyTorch's
    ``clone_obey_contract``): ``var``'s strides where ``var`` is non-overlapping and dense, else
    contiguous.  With ``create_graph``, or a lazy (compiled) ``g``, the copy is an ember op
    (part of the graph): a contiguous one, and ``g`` itself where ``var`` has another dense
    layout."""
    v, a = var._data, g._data
    permuted = _dense(v.shape, v.strides, v.itemsize) and \
        not _layout.is_contiguous(v.shape, var.stride())   # dense in another dim order
    if create_graph or a.__class__ is not np.ndarray:
        return g if permuted else g.clone(memory_format=_dt.contiguous_format)
    if permuted and a.size and a.itemsize == v.itemsize:
        out = np.ndarray(a.shape, a.dtype, np.empty(a.size, a.dtype), 0, v.strides)
        out[...] = a
    else:
        out = np.array(a, order="C")   # a fresh contiguous copy
    t = g.detach()   # a new leaf (ember.tensor._wrap) around the copy
    t._data = out
    t._version_counter = [0]
    return t


class SavedTensor:
    """A tensor saved for backward together with its version at save time."""

    __slots__ = ("tensor", "version", "node_name", "output_nr", "is_output")

    def __init__(self, tensor: Tensor, node_name: str, is_output: bool = False) -> None:
        self.tensor = tensor
        self.version = tensor._version_counter[0]
        self.node_name = node_name
        self.is_output = is_output

    def unpack(self) -> Tensor:
        t = self.tensor
        if t is None:
            raise EmberRuntimeError(
                "Trying to backward through the graph a second time (or directly access saved "
                "tensors after they have already been freed). Saved intermediate values of the "
                "graph are freed when you call .backward() or autograd.grad(). Specify "
                "retain_graph=True if you need to backward through the graph a second time or "
                "if you need to access saved tensors after calling backward."
            )
        if t._version_counter[0] != self.version:
            shape = "[" + ", ".join(str(s) for s in t.shape) + "]"
            raise EmberRuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [ember.{t.dtype.name} {shape}], which is "
                f"{'output 0' if self.is_output else 'an input'} of {self.node_name}, is at "
                f"version {t._version_counter[0]}; expected version {self.version} instead. "
                "Hint: the backtrace further above shows the operation that failed to compute "
                "its gradient. The variable in question was changed in there or anywhere later."
            )
        return t


class BackwardContext:
    """What a ``vjp`` sees: saved tensors, input shapes/dtypes, params, output count.  An
    ``OpNode`` carries these fields itself (it is its own context); this class serves code that
    calls a ``vjp`` without a node (``ember.export``)."""

    __slots__ = ("_saved_inputs", "_saved_outputs", "input_shapes", "input_dtypes", "params",
                 "needs_input_grad", "_owner")

    def __init__(self, saved_inputs: tuple, saved_outputs: tuple, input_shapes: tuple,
                 input_dtypes: tuple, params: dict, needs_input_grad: tuple) -> None:
        self._saved_inputs = saved_inputs
        self._saved_outputs = saved_outputs
        self.input_shapes = input_shapes
        self.input_dtypes = input_dtypes
        self.params = params
        self.needs_input_grad = needs_input_grad
        self._owner: Node | None = None

    @property
    def create_graph(self) -> bool:
        """Whether a graph of this backward is being recorded (``backward(create_graph=True)``,
        ``autograd.grad(..., create_graph=True)``): a ``vjp`` may take a fused first-order
        kernel only when this is false."""
        return self._owner is not None

    @property
    def inputs(self) -> tuple:
        # a list comprehension: ~2x cheaper than tuple() over a generator for 1-3 items
        return tuple([None if s is None else s.unpack() if isinstance(s, SavedTensor) else s
                      for s in self._saved_inputs])

    @property
    def outputs(self) -> tuple:
        outs = tuple([None if s is None else s.unpack() for s in self._saved_outputs])
        owner = self._owner
        if owner is None:
            return outs
        # building a graph of the gradient (create_graph): the saved outputs are the outputs of
        # this very node, so reattach them to it for higher-order derivatives
        rebuilt = []
        for i, t in enumerate(outs):
            if t is None or not t.dtype.is_floating_point:  # unsaved; indices, masks
                rebuilt.append(t)
                continue
            r = t.detach()
            r._version_counter = t._version_counter
            r._requires_grad = True
            r.grad_fn = owner
            r._output_nr = i
            rebuilt.append(r)
        return tuple(rebuilt)


class OpNode(Node):
    """Backward node of one registry op; it is also the op's ``BackwardContext`` (``ctx`` is the
    node itself): one object per recorded op, built by ``ember._bind_fast`` slot by slot."""

    __slots__ = ("op", "out_specs", "_saved_inputs", "_saved_outputs", "input_shapes",
                 "input_dtypes", "params", "needs_input_grad", "_owner")
    # rare: set per instance (in ``__dict__``) only when used
    _freed = False
    # the name PyTorch gives this use of the op when it differs from ``op.grad_name``
    # (batch norm runs the layer-norm op: NativeBatchNormBackward0); see ``rename``
    alias: str | None = None

    def __init__(self, op: OpDef, next_functions: tuple, ctx: BackwardContext,
                 out_specs: tuple) -> None:
        # len(out_specs), not op.num_outputs: ops with a variable output count (split, unbind)
        # declare num_outputs=0.  Node.__init__, inlined
        self.next_functions = next_functions
        self._seq = next(_seq)
        self._num_outputs = len(out_specs)
        self.op = op
        self.out_specs = out_specs  # ((shape, dtype), ...) to build zero grads of unused outputs
        self._saved_inputs = ctx._saved_inputs
        self._saved_outputs = ctx._saved_outputs
        self.input_shapes = ctx.input_shapes
        self.input_dtypes = ctx.input_dtypes
        self.params = ctx.params
        self.needs_input_grad = ctx.needs_input_grad
        self._owner = None

    @property
    def ctx(self) -> OpNode:
        """What the op's ``vjp`` sees (``BackwardContext``'s fields): this node."""
        return self

    create_graph = BackwardContext.create_graph
    inputs = BackwardContext.inputs
    outputs = BackwardContext.outputs

    def name(self) -> str:
        return self.alias or self.op.grad_name

    def apply(self, grads: tuple, create_graph: bool) -> tuple:
        if self._freed:
            SavedTensor.unpack(_FREED)
        if not create_graph:  # _owner is None outside this method
            return self.op.vjp(self, *grads)
        self._owner = self
        try:
            return self.op.vjp(self, *grads)
        finally:
            self._owner = None

    def release(self) -> None:
        op = self.op
        if op.save or op.save_for or op.save_output:
            self._freed = True
            self._saved_inputs = ()
            self._saved_outputs = ()


_NO_PARAMS: dict = {}  # the params of a param-less op's node (never written)


class SameShapeNode(OpNode):
    """The ``OpNode`` of a one-output binary op without params whose ``vjp`` reads no saved
    tensors (add, sub), on operands of the output's shape and dtype (or a Python number): the
    output spec and which operands are tensors / need a gradient are stored, and the context
    fields (``input_shapes``, ``input_dtypes``, ``needs_input_grad``, ``out_specs``) are derived
    from them when the backward reads them.  Built by ``ember._bind_fast.fast_operator``."""

    __slots__ = ("_spec", "_mask")  # (shape, dtype); bits: 1/2 operand is a tensor, 4/8 needs
    _num_outputs = 1
    _owner = None  # set per instance (in ``__dict__``) only while a create_graph vjp runs
    params = _NO_PARAMS
    _saved_inputs = ()
    _saved_outputs = ()

    @property
    def out_specs(self) -> tuple:  # type: ignore[override]
        return (self._spec,)

    @property
    def input_shapes(self) -> tuple:  # type: ignore[override]
        s, m = self._spec[0], self._mask
        return (s if m & 1 else None, s if m & 2 else None)

    @property
    def input_dtypes(self) -> tuple:  # type: ignore[override]
        d, m = self._spec[1], self._mask
        return (d if m & 1 else None, d if m & 2 else None)

    @property
    def needs_input_grad(self) -> tuple:  # type: ignore[override]
        m = self._mask
        return (bool(m & 4), bool(m & 8))


class FullReduceNode(OpNode):
    """The ``OpNode`` of ``x.sum()`` / ``x.mean()`` over all dims of a float tensor that needs a
    gradient (built by ``ember._bind_fast.full_reduce``): nothing saved, one output, 0-d, of
    the input's dtype; the fields that never vary are class attributes, and ``out_specs`` and
    ``params`` (all dims, ``keepdim=False``) are derived when read (fewer stores per node)."""

    __slots__ = ()
    _num_outputs = 1
    _saved_inputs = ()
    _saved_outputs = ()
    needs_input_grad = (True,)
    _owner = None  # set per instance (in ``__dict__``) only while a create_graph vjp runs

    @property
    def out_specs(self) -> tuple:  # type: ignore[override]
        return (((), self.input_dtypes[0]),)

    @property
    def params(self) -> dict:  # type: ignore[override]
        return {"dims": tuple(range(len(self.input_shapes[0]))), "keepdim": False}


_new = object.__new__


def op_node(op: OpDef, edges: tuple, saved_in: tuple, saved_out: tuple, shapes: tuple,
            dtypes: tuple, params: dict, needs: tuple, out_specs: tuple) -> OpNode:
    """An ``OpNode`` from its fields (what ``OpNode(op, edges, BackwardContext(...), specs)``
    builds, without the context object)."""
    n = _new(OpNode)
    n.next_functions = edges
    n._seq = next(_seq)
    n._num_outputs = len(out_specs)
    n.op = op
    n.out_specs = out_specs
    n._saved_inputs = saved_in
    n._saved_outputs = saved_out
    n.input_shapes = shapes
    n.input_dtypes = dtypes
    n.params = params
    n.needs_input_grad = needs
    n._owner = None
    return n


def rename(t: Any, name: str) -> None:
    """Name the backward node of ``t`` (an op output) as PyTorch names it for this use of the
    op, e.g. ``rename(y, "NativeBatchNormBackward0")``; nothing when ``t`` has no op node."""
    node = getattr(t, "grad_fn", None)
    if isinstance(node, OpNode):
        node.alias = name


class _Freed:
    tensor = None


_FREED: Any = _Freed()

"""The backward engine: ``backward`` and ``autograd.grad``.

It walks the graph of ``Node``s from the roots, runs each node once all the gradients flowing
into it have arrived (dependency counting; among ready nodes the most recently created runs
first, as in PyTorch), and either accumulates into leaves' ``.grad`` (``backward``) or captures
the gradients of chosen inputs (``grad``).
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from ember import _lazy
from ember.autograd import grad_mode as _gm
from ember.autograd.graph import AccumulateGrad, Node, OpNode
from ember.errors import EmberRuntimeError, ShapeError

# set by ember.tensor once it is defined (it imports this package's graph module)
Tensor: Any = None
_wrap: Any = None


def _as_list(x: Any) -> list:
    if x is None:
        return []
    if isinstance(x, Tensor):
        return [x]
    return list(x)


_ONES: dict = {}  # (shape, NumPy dtype) -> a one-element array of ones (never handed out)


def _ones(shape: tuple, npd: Any) -> np.ndarray:
    """A new one-element array of ones: a copy of a cached one (~8x cheaper than np.ones)."""
    o = _ONES.get((shape, npd))
    if o is None:
        o = _ONES[(shape, npd)] = np.ones(shape, dtype=npd)
    return o.copy()


def _root_grads(tensors: list, grad_tensors: list | None, op: str) -> list:
    if grad_tensors is None and len(tensors) == 1:
        # the most frequent case, ``loss.backward()``: an implicit gradient of one scalar
        t = tensors[0]
        a = t._data
        if t._requires_grad and t._dtype.category == 2 and a.size == 1 and \
                (a.__class__ is np.ndarray or a.__class__ is _lazy.LazyArray):
            # a lazy loss (a compiled step) takes the same concrete ones
            return [_wrap(_ones(a.shape, a.dtype), t._dtype)]
    grads = list(grad_tensors) if grad_tensors is not None else [None] * len(tensors)
    if len(grads) != len(tensors):
        raise EmberRuntimeError(
            f"[{op}] got {len(grads)} gradients for {len(tensors)} tensors; expected one each"
        )
    out = []
    for i, (t, g) in enumerate(zip(tensors, grads)):
        if not t.requires_grad:
            raise EmberRuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )
        if g is None:
            if t.numel() != 1:
                raise EmberRuntimeError("grad can be implicitly created only for scalar outputs")
            if not t.dtype.is_floating_point:
                raise EmberRuntimeError(
                    f"grad can be implicitly created only for real scalar outputs but got "
                    f"{t.dtype!r}"
                )
            a = t._data
            g = _wrap(_ones(a.shape, a.dtype) if a.__class__ is np.ndarray else
                      np.ones(a.shape, dtype=a.dtype), t.dtype)
        elif not isinstance(g, Tensor):
            g = t.new_tensor(g)  # type: ignore[attr-defined]
        elif tuple(g.shape) != tuple(t.shape):
            raise ShapeError(
                f"[{op}] Mismatch in shape: grad_output[{i}] has a shape of {tuple(g.shape)} and "
                f"output[{i}] has a shape of {tuple(t.shape)}."
            )
        else:
            g = g if g.requires_grad else g.detach()
        out.append(g)
    return out


# ------------------------------------------------------------------------- compiled autograd
def _compiled_owner(nodes: list) -> Any:
    """The trace owner under which a backward over ``nodes`` is recorded, or None (eager).

    A backward that reaches nodes recorded in compiled code (they carry ``_compiled_by``, set
    when the forward was traced) runs under a trace of its own: every vjp is recorded lazily
    and the whole backward is realized as one graph when the engine finishes
    (ARCHITECTURE.md §4).  Inside a compiled call the active trace records it already.
    """
    st = _lazy.STATE
    if st.trace is not None or st.backward_owner is None:
        return None
    for n in nodes:
        fwd = n._compiled_by
        if fwd is not None:
            return st.backward_owner(fwd)
    return None


class _CompiledAutograd:
    """Records the engine's work under a trace and realizes it at the end."""

    __slots__ = ("owner", "trace")

    def __init__(self, owner: Any) -> None:
        self.owner = owner
        self.trace: Any = None

    def __enter__(self) -> None:
        if self.owner is None:
            return
        self.trace = _lazy.Trace(self.owner)
        if hasattr(self.owner, "trace"):
            self.owner.trace = self.trace
        _lazy.STATE.trace = self.trace

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        tr = self.trace
        if tr is None:
            return
        try:
            if exc_type is None:
                tr.realize("end of the backward pass")
            else:
                _lazy.STATE.trace = None
                try:
                    tr.realize("exception")
                except Exception:  # noqa: BLE001 (the original error matters more)
                    pass
        finally:
            _lazy.STATE.trace = None


def backward(tensors: Any, grad_tensors: Any = None, retain_graph: bool | None = None,
             create_graph: bool = False, inputs: Any = None) -> None:
    """Compute gradients of ``tensors`` and accumulate them into leaves' ``.grad``."""
    tensors = _as_list(tensors)
    grads = _root_grads(tensors, None if grad_tensors is None else _as_list(grad_tensors),
                        "backward")
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is None:
        _run(tensors, grads, retain_graph, create_graph, capture=None, accumulate=True)
        return
    inputs_l = _as_list(inputs)
    if not inputs_l:
        raise EmberRuntimeError("[backward] 'inputs' argument to backward() cannot be empty.")
    for t in inputs_l:
        if not t.requires_grad:
            raise EmberRuntimeError("[backward] One of the differentiated Tensors does not "
                                    "require grad")
    targets = {}
    for t in inputs_l:
        targets[t._grad_edge()] = t
    captured = _run(tensors, grads, retain_graph, create_graph, capture=list(targets),
                    accumulate=False)
    stored: set[int] = set()
    for edge, t in targets.items():
        g = captured.get(edge)
        if g is None:
            continue
        if t.grad_fn is None:
            t._accumulator().apply((g,), create_graph, stored)
        else:
            from ember.autograd.grad_mode import no_grad
            with no_grad() if not create_graph else _NullCtx():
                t.grad = g if t.grad is None else t.grad + g


class _NullCtx:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: bool | None = None,
         is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple:
    """Return d(outputs)/d(inputs) without touching ``.grad``."""
    outputs_l = _as_list(outputs)
    inputs_l = _as_list(inputs)
    if is_grads_batched:
        raise EmberRuntimeError("[grad] is_grads_batched=True is not supported")
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and allow_unused is False:
        raise EmberRuntimeError("[grad] Expected allow_unused to be True or not passed when "
                                "materialize_grads=True")
    for _i, t in enumerate(inputs_l):
        if not t.requires_grad:
            raise EmberRuntimeError("One of the differentiated Tensors does not require grad")
    grads = _root_grads(outputs_l, None if grad_outputs is None else _as_list(grad_outputs),
                        "grad")
    if retain_graph is None:
        retain_graph = create_graph
    edges = [t._grad_edge() for t in inputs_l]
    captured = _run(outputs_l, grads, retain_graph, create_graph, capture=edges,
                    accumulate=False)
    result = []
    for _i, (t, e) in enumerate(zip(inputs_l, edges)):
        g = captured.get(e)
        if g is None:
            if not allow_unused:
                raise EmberRuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the "
                    "graph. Set allow_unused=True if this is the desired behavior."
                )
            if materialize_grads:
                g = t.new_zeros(t.shape)
        result.append(g)
    return tuple(result)


def _collect(roots: list[Node]) -> tuple[dict[Node, list[Node]], dict[Node, int]]:
    """All nodes reachable from ``roots`` with their children (iterative DFS), and the number
    of edges into each node (a node reached through two edges counts twice)."""
    children: dict[Node, list[Node]] = {}
    deps: dict[Node, int] = {}
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n in children:
            continue
        nf = n.next_functions
        if not nf:  # a leaf's AccumulateGrad (half the nodes of a small graph)
            children[n] = ()
            continue
        kids = [e[0] for e in nf if e is not None]
        children[n] = kids
        for k in kids:
            deps[k] = deps.get(k, 0) + 1
            if k not in children:
                stack.append(k)
    return children, deps


def _run(tensors: list, grads: list, retain_graph: bool, create_graph: bool,
         capture: list | None, accumulate: bool) -> dict:
    root_edges = [t._grad_edge() for t in tensors]
    children, deps = _collect([e[0] for e in root_edges])
    owner = _compiled_owner(children)
    if owner is not None:
        with _CompiledAutograd(owner):
            return _execute(root_edges, children, deps, grads, retain_graph, create_graph,
                            capture, accumulate)
    return _execute(root_edges, children, deps, grads, retain_graph, create_graph, capture,
                    accumulate)


def _needed(children: dict, capture_set: set) -> tuple[set, dict]:
    """The nodes with a path to a captured edge (only they need to run), and the dependency
    counts over the edges between them."""
    targets = {e[0] for e in capture_set}
    needed: set = set()
    parents: dict[Node, list[Node]] = {n: [] for n in children}
    for n, kids in children.items():
        for k in kids:
            parents[k].append(n)
    stack = [t for t in targets if t in parents]
    while stack:
        n = stack.pop()
        if n in needed:
            continue
        needed.add(n)
        stack.extend(parents[n])
    deps: dict[Node, int] = {}
    for n, kids in children.items():
        if n in needed:
            for k in kids:
                deps[k] = deps.get(k, 0) + 1
    return needed, deps


def _execute(root_edges: list, children: dict, deps: dict, grads: list, retain_graph: bool,
             create_graph: bool, capture: list | None, accumulate: bool) -> dict:
    needed: set[Node] | None = None
    capture_set = set(capture) if capture is not None else None
    if not accumulate:
        needed, deps = _needed(children, capture_set)

    buffers: dict[Node, list] = {}
    if len(root_edges) == 1 and root_edges[0][1] == 0 and root_edges[0][0]._num_outputs == 1:
        buffers[root_edges[0][0]] = [grads[0]]  # one root (``loss.backward()``)
    else:
        for (node, nr), g in zip(root_edges, grads):
            _add_to_buffer(buffers, node, nr, g, create_graph)

    captured: dict = {}
    stored: set[int] = set()  # payload ids stored as leaves' .grad (AccumulateGrad.apply)
    ready: list = []
    for node in buffers:
        if deps.get(node, 0) == 0:
            heapq.heappush(ready, (-node._seq, id(node), node))

    prev = _gm.STATE.grad_enabled
    _gm.STATE.grad_enabled = create_graph
    _gm.GENERATION[0] += 1
    rec = _lazy.STATE.recorder
    heappush, heappop = heapq.heappush, heapq.heappop
    try:
        while ready:
            node = heappop(ready)[2]
            if needed is not None and node not in needed:
                continue
            grads_in = buffers.pop(node)
            if rec is not None:
                rec.ran(node, retain_graph)
            if node._tensor_pre_hooks or node._pre_hooks:
                grads_in = _run_pre_hooks(node, grads_in)
            if capture_set:
                for nr in range(len(grads_in)):
                    if (node, nr) in capture_set and grads_in[nr] is not None:
                        captured[(node, nr)] = grads_in[nr]
            if node.__class__ is AccumulateGrad:
                if accumulate:
                    node.apply(tuple(grads_in), create_graph, stored)
                continue
            if needed is not None and all(k not in needed for k in children[node]):
                continue
            grads_out = _apply(node, grads_in, create_graph)
            if node._hooks:
                for hook in node._hooks:
                    r = hook(grads_out, tuple(grads_in))
                    if r is not None:
                        grads_out = tuple(r)
            if not retain_graph:
                node.release()
            for edge, g in zip(node.next_functions, grads_out):
                if edge is None:
                    continue
                child = edge[0]
                if needed is not None and child not in needed:
                    continue
                if g is not None:
                    buf = buffers.get(child)
                    if buf is None and child._num_outputs == 1 and edge[1] == 0:
                        buffers[child] = [g]
                    else:
                        _add_to_buffer(buffers, child, edge[1], g, create_graph)
                d = deps[child] - 1
                deps[child] = d
                if d == 0 and child in buffers:
                    heappush(ready, (-child._seq, id(child), child))
    finally:
        _gm.STATE.grad_enabled = prev
        _gm.GENERATION[0] += 1
    return captured


def _add_to_buffer(buffers: dict, node: Node, nr: int, g: Any, create_graph: bool) -> None:
    buf = buffers.get(node)
    if buf is None:
        buf = buffers[node] = [None] * max(node._num_outputs, nr + 1)
    if buf[nr] is None:
        buf[nr] = g
    else:
        buf[nr] = buf[nr] + g


def _run_pre_hooks(node: Node, grads: list) -> list:
    from ember.tensor import _RetainHook
    if node._tensor_pre_hooks:
        retains = []
        for nr, hooks in node._tensor_pre_hooks.items():
            for hook in list(hooks):
                if isinstance(hook, _RetainHook):
                    retains.append((nr, hook))
                    continue
                if grads[nr] is None:
                    continue
                r = hook(grads[nr])
                if r is not None:
                    grads[nr] = r
        for nr, hook in retains:
            if grads[nr] is not None:
                hook(grads[nr])
    if node._pre_hooks:
        for hook in list(node._pre_hooks):
            r = hook(tuple(grads))
            if r is not None:
                grads = list(r)
    return grads


def _apply(node: Node, grads_in: list, create_graph: bool) -> tuple:
    if isinstance(node, OpNode):
        for g in grads_in:
            if g is None:
                grads_in = _materialize(node, grads_in)
                break
        if create_graph or node._freed:
            out = node.apply(tuple(grads_in), create_graph)
        else:  # OpNode.apply's first-order case, inlined
            out = node.op.vjp(node, *grads_in)
        return _validate(node, out)
    return tuple(node.apply(tuple(grads_in), create_graph))


def _materialize(node: OpNode, grads_in: list) -> list:
    specs = node.out_specs
    res = []
    for g, (shape, dt) in zip(grads_in, specs):
        if g is None:
            g = Tensor._zeros(shape, dt)
        res.append(g)
    return res


def _validate(node: OpNode, grads: tuple) -> tuple:
    nexts = node.next_functions
    if len(grads) != len(nexts):
        raise EmberRuntimeError(
            f"function {node.name()} returned an incorrect number of gradients (expected "
            f"{len(nexts)}, got {len(grads)})"
        )
    shapes = node.input_shapes  # the node is its own context; read once (may be derived)
    dtypes = node.input_dtypes
    out = None
    i = -1
    for g in grads:
        i += 1
        if g is None:
            continue
        if nexts[i] is None:
            if out is None:
                out = list(grads)
            out[i] = None
            continue
        shape = shapes[i]
        gs = g._data.shape
        if gs != shape and tuple(gs) != tuple(shape):
            raise ShapeError(
                f"Function {node.name()} returned an invalid gradient at index {i} - got "
                f"{list(g.shape)} but expected shape compatible with {list(shape)}"
            )
        dt = dtypes[i]
        if g._dtype is not dt:
            if out is None:
                out = list(grads)
            out[i] = g.to(dt)
    if out is None:
        return grads if grads.__class__ is tuple else tuple(grads)
    return tuple(out)

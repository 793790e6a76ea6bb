"""An in-place write into a view while exporting (``x[:, 0] += 1``, ``buf.view(-1).add_(1)``),
functionalized onto the view's base, as PyTorch's functionalization records it.

The view's node is followed back through the view ops that made it (``basic_index``, ``view``,
``permute``, ``split_with_sizes`` ...) to the base's current value.  Walking back up, each level's
new value is the level below scattered into it: the view op's ``vjp`` places the new values
where the view reads (``V^T(new)``), and where a ones-tensor lands marks that region, so the
level becomes ``where(region, V^T(new), old)`` (exact: nothing is added); a view that reads every
element once (a reshape, a permutation) is just ``V^T(new)``.  The base then takes the new value
as a whole-tensor write does (a ``BUFFER_MUTATION``/``USER_INPUT_MUTATION`` output for a buffer
or a user input), and the view reads the new value too.
"""

from __future__ import annotations

import operator
from typing import Any

from ember.autograd.graph import BackwardContext
from ember.errors import GuardOnDataDependentSymNode
from ember.export.graph import Node
from ember.sym import _user_frame
from ember.tensor import Tensor, _wrap


def _fail(why: str) -> None:
    fn, line, func = _user_frame()
    raise GuardOnDataDependentSymNode(
        f"[export] an in-place write into a view is not supported here ({why}); write into the "
        f"whole tensor or use out-of-place ops.\nCaused by: ({fn}:{line} in {func})", None)


def _value(tr: Any, node: Node, j: int | None = None) -> Tensor:
    from ember.export._trace import FakeArray
    v = node.meta["val"]
    if j is not None:
        v = v[j]
    return _wrap(FakeArray(v.shape, v.dtype.np, node), v.dtype)


def _chain(node: Node, base_node: Node) -> list:
    """``[(view node, output index or None, getitem node or None)]`` from the base down."""
    out = []
    n = node
    while n is not base_node:
        if n.op != "call_function":
            _fail("the view was made from an earlier value of its base")
        if n.target is operator.getitem:
            parent = n.args[0]
            if getattr(parent.target, "kind", None) != "view":
                _fail(f"a view of {getattr(parent.target, 'name', parent.target)}'s output")
            out.append((parent, n.args[1], n))
            n = parent.args[0]
        elif getattr(n.target, "kind", None) == "view":
            out.append((n, None, n))
            n = n.args[0]
        else:
            _fail(f"the view comes through {getattr(n.target, 'name', n.target)}, not a view op")
        if not isinstance(n, Node):
            _fail("a view of a constant")
    return out[::-1]


def _scatter(tr: Any, op_node: Node, j: int | None, parent: Tensor, new: Tensor) -> Tensor:
    """``parent`` with the part that output ``j`` of ``op_node`` views replaced by ``new``."""
    import ember
    from ember.sym import sym_eq_static
    op = op_node.target
    shapes = tuple(a.meta["val"].shape if isinstance(a, Node) else None for a in op_node.args)
    dtypes = tuple(a.meta["val"].dtype if isinstance(a, Node) else None for a in op_node.args)
    ctx = BackwardContext((None,) * len(op_node.args), (), shapes, dtypes, dict(op_node.kwargs),
                          tuple(isinstance(a, Node) for a in op_node.args))
    vals = op_node.meta["val"]

    def place(g: Tensor) -> Tensor:
        if j is None:
            grads = (g,)
        else:  # a multi-output view (split): zeros for the other pieces
            grads = tuple(g if k == j else ember.zeros(tuple(v.shape), dtype=v.dtype)
                          for k, v in enumerate(vals))
        out = op.vjp(ctx, *grads)
        return out[0] if isinstance(out, (tuple, list)) else out

    placed = place(new)
    n_view, n_base = new.numel(), parent.numel()
    if j is None and "bijective" in op.tags and \
            sym_eq_static(n_view, n_base) is True:
        return placed  # every element read once: the inverse view is the whole new value
    region = place(ember.ones_like(new, dtype=ember.float32))
    return ember.where(region != 0, placed.to(parent.dtype), parent)


def write_view(tr: Any, t: Tensor, new: Tensor) -> None:
    """Functionalize ``t[...] = new`` for a view ``t`` (see the module docstring)."""
    from ember.autograd.grad_mode import no_grad
    from ember.export._trace import FakeArray
    base = t._base
    chain = _chain(tr.node_of(t), tr.node_of(base))
    if not chain:
        _fail("the view has no view ops")
    with no_grad():
        levels = [base]  # the value each level of the chain reads
        for op_node, j, _ in chain[:-1]:
            levels.append(_value(tr, op_node, j) if j is not None else _value(tr, op_node))
        cur = new
        for (op_node, j, _), parent in zip(reversed(chain), reversed(levels)):
            if op_node.target.vjp is None:
                _fail(f"{op_node.target.name} has no inverse")
            cur = _scatter(tr, op_node, j, parent, cur)
        tr.write(base, cur)
    t._data = FakeArray(tuple(t.shape), t._dtype.np, tr.node_of(new))


__all__ = ["write_view"]

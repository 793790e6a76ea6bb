"""``config.check_meta``: the check of an eager op's results against its OpDef (tests turn it
on; ``docs/eager.md``).

One function, ``check_results``, serves the binder's general path (``tensor._eager_bind``) and
every eager fast path (``ember._bind_fast``, ``_frontend.core.binary``'s broadcasting ufunc): under
``check_meta`` the fast paths run as they do for users and then hand their results here, so the
whole suite exercises them while every result is still verified.  ``config.check_fast_paths``
off makes them step aside instead (their own tests compare them with the general path that way).

``ember.tensor`` imports this module at its end; it uses its names.
"""

from __future__ import annotations

from typing import Any

from ember.ops.registry import OpDef
from ember.tensor import _STATE, Tensor


class MetaArg:
    """A stand-in with a tensor's shape and dtype for ``meta`` (the operands of a pointwise op
    that NumPy broadcast, as the general path would have expanded them)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple, dtype: Any) -> None:
        self.shape = shape
        self.dtype = dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)


def check_results(op: OpDef, inputs: tuple, params: dict, results: tuple,
                  spec: Any = None) -> None:
    """Assert that ``results`` (the output tensors ``op`` made eagerly of ``inputs``) are what
    ``op``'s rules say: each array's shape and dtype and the tensor's dtype against ``spec``
    (``op.meta``'s, run now on ``inputs`` when None), a view's version counter and base, and the
    autograd node against what ``ember._bind_fast._record`` records for these inputs."""
    if spec is None:
        spec = op.meta(*inputs, **params)
    specs = (spec,) if op.num_outputs == 1 else tuple(spec)
    assert len(specs) == len(results), (op.name, len(specs), len(results))
    for r, (shape, dtype) in zip(results, specs):
        arr = r._data
        got = arr.shape
        # data-dependent ops (unique, nonzero) leave unknown sizes as None in their meta
        assert got == shape or (len(got) == len(shape) and all(
            [s is None or a == s for a, s in zip(got, shape)])), (op.name, got, shape)
        assert arr.dtype == dtype.np and r._dtype is dtype, (op.name, arr.dtype, r._dtype, dtype)
    if op.kind == "view":
        src = inputs[0]
        base = src if src._base is None else src._base
        for r in results:
            assert r._version_counter is src._version_counter and r._base is base, op.name
    if _STATE.grad_enabled and op.vjp is not None:
        for x in inputs:
            if isinstance(x, Tensor) and x._requires_grad:
                _check_node(op, inputs, params, results)
                return
    for i, r in enumerate(results):   # no node is due
        assert r.grad_fn is None and not r._requires_grad, (op.name, i, r.grad_fn)


def _check_node(op: OpDef, inputs: tuple, params: dict, results: tuple) -> None:
    """The autograd node of ``results`` (one is due): on every floating output (the same
    node, with its output index), none on the others, with ``_record``'s fields."""
    needs = tuple([isinstance(x, Tensor) and x._requires_grad for x in inputs])
    node = None
    for i, r in enumerate(results):
        if r._dtype.category != 2:
            assert r.grad_fn is None and not r._requires_grad, (op.name, i, r.grad_fn)
            continue
        assert r.grad_fn is not None and r._requires_grad, (op.name, i)
        assert node is None or r.grad_fn is node, (op.name, i)
        node = r.grad_fn
        assert r._output_nr == (i if len(results) > 1 else 0), (op.name, i, r._output_nr)
    if node is None:
        return
    assert node.op is op, (op.name, node.op.name)
    assert node.needs_input_grad == needs, (op.name, node.needs_input_grad, needs)
    assert node.params is params or node.params == params, (op.name, node.params, params)
    assert node.out_specs == tuple([(r._data.shape, r._dtype) for r in results]), \
        (op.name, node.out_specs)
    tensors = [isinstance(x, Tensor) for x in inputs]
    assert node.input_shapes == tuple([x._data.shape if t else None
                                       for x, t in zip(inputs, tensors)]), \
        (op.name, node.input_shapes)
    assert node.input_dtypes == tuple([x._dtype if t else None
                                       for x, t in zip(inputs, tensors)]), \
        (op.name, node.input_dtypes)
    edges = node.next_functions
    assert len(edges) == len(inputs) and all(
        [(e is not None) == n for e, n in zip(edges, needs)]), (op.name, edges, needs)

"""Trace ``score_mod``/``mask_mod`` into ``FlexExpr``s (``ember/ops/flex.py``) for the compiled
path of flex_attention.

The mod runs once on 1-element placeholder tensors under a private lazy ``Trace``: each op it
calls is recorded, not run.  Tensors the mod captures (in its closure or globals, also through
nested functions such as ``and_masks``) are the kernel's extra inputs: while tracing they read
as placeholders of their shape, and indexing one with index tensors (``bias[q_idx - kv_idx]``)
records a ``flex_load``.  A mod that needs values (``if q_idx > 3``), reads a tensor the tracer
did not find, or produces something other than one element gives ``None``: flex_attention
then runs its ordinary blockwise path.
"""

from __future__ import annotations

import types
from typing import Any, Callable

import numpy as np

from ember import _lazy
from ember import dtypes as dt
from ember.autograd import grad_mode
from ember.errors import GraphBreakError
from ember.ops.flex import FLEX_LOAD, FlexExpr
from ember.ops.registry import bind
from ember.tensor import Tensor


class _NoTrace(Exception):  # noqa: N818 (control flow, never escapes)
    pass


class _Proxy(Tensor):
    """A captured tensor while its mod is traced: indexing it records a ``flex_load``."""

    __slots__ = ()

    def __getitem__(self, index: Any) -> Tensor:
        items = index if isinstance(index, tuple) else (index,)
        if not items or not all(isinstance(i, Tensor) and not i.dtype.is_floating_point
                                for i in items):
            raise _NoTrace("a captured tensor indexed by something other than index tensors")
        return bind(FLEX_LOAD, self, *items)


class _Tracer(_lazy.Trace):
    def graph_break(self, reason: str) -> None:
        raise _NoTrace(reason)


def captured_tensors(fn: Callable, seen: set | None = None) -> list:
    """Tensors ``fn`` can reach through its closure, defaults and the globals it names."""
    seen = set() if seen is None else seen
    if id(fn) in seen:
        return []
    seen.add(id(fn))
    if isinstance(fn, types.MethodType):
        return captured_tensors(fn.__func__, seen)
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    cands = [c.cell_contents for c in (fn.__closure__ or ()) if _filled(c)]
    cands += list(fn.__defaults__ or ())
    g = fn.__globals__
    cands += [g[n] for n in code.co_names if n in g]
    out: list = []
    flat: list = []
    for c in cands:
        flat += list(c) if isinstance(c, (tuple, list)) and len(c) < 64 else [c]
    for c in flat:
        if isinstance(c, Tensor):
            if all(c is not x for x in out):
                out.append(c)
        elif isinstance(c, (types.FunctionType, types.MethodType)):
            out += [t for t in captured_tensors(c, seen) if all(t is not x for x in out)]
        elif hasattr(c, "__dict__") and not isinstance(c, (type, types.ModuleType)):
            # an object the mod reads attributes of (PagedAttention's page tables)
            out += [t for t in vars(c).values()
                    if isinstance(t, Tensor) and all(t is not x for x in out)]
            out += [t for m in (getattr(type(c), n, None) for n in code.co_names)
                    if isinstance(m, types.FunctionType)
                    for t in captured_tensors(m, seen) if all(t is not x for x in out)]
    return out


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def trace_mod(fn: Callable, score_dtype: Any | None, captured: list) -> FlexExpr | None:
    """``fn`` (5 args when ``score_dtype`` is given, else 4) as a FlexExpr over ``captured``
    (extended with the tensors it reads); None when it cannot be traced."""
    own = captured_tensors(fn)
    for t in own:
        if all(t is not x for x in captured):
            captured.append(t)
    saved = [(t, t.__class__, t._data) for t in captured]
    tr = _Tracer(None)
    old = _lazy.STATE.trace
    shape = (1, 1, 1, 1)
    phs = [np.zeros(shape, np.int32) for _ in range(4)]
    if score_dtype is not None:
        phs.insert(0, np.zeros(shape, score_dtype.np))
    try:
        for t in captured:
            if isinstance(t._data, _lazy.LazyArray) and t._data.value is not None:
                t._data = t._data.value
            arr = t._data
            t._data = np.zeros(arr.shape, arr.dtype)
            t.__class__ = _Proxy
        args = [Tensor.__new__(Tensor) for _ in phs]
        for a, p in zip(args, phs):
            a._data, a._dtype, a._version_counter = p, dt._FROM_NP[p.dtype], [0]
            a._base = None
            a._requires_grad = False
        _lazy.STATE.trace = tr
        with grad_mode.no_grad():
            for a in args:
                tr.ref_of(a)
            for t in captured:
                tr.ref_of(t)
            res = fn(*args)
            if not isinstance(res, Tensor):
                return None
            out = tr.ref_of(res)
    except (_NoTrace, GraphBreakError, TypeError, AttributeError):
        return None
    finally:
        _lazy.STATE.trace = old
        for t, cls, data in saved:
            t.__class__, t._data = cls, data
    return _to_expr(tr, out, len(phs), len(captured), score_dtype is None, res)


def _to_expr(tr: _lazy.Trace, out: tuple, n_ph: int, n_cap: int, is_mask: bool,
             res: Tensor) -> FlexExpr | None:
    if res.numel() != 1 or any(a.size != 1 for a in tr.inputs[n_ph + n_cap:]):
        return None
    shift = 1 if is_mask else 0

    def conv(a: Any) -> Any:
        if type(a) is tuple and a and a[0] == "i":
            k = a[1]
            if k >= n_ph + n_cap:  # a constant the mod made (``b.new_ones(())``)
                return tr.inputs[k].reshape(()).item()
            return ("x", k + shift) if k < n_ph else ("c", k - n_ph)
        if type(a) is tuple and a and a[0] == "n":
            return refs[a[1]]
        if type(a) in (int, float, bool):
            return a
        raise _NoTrace(f"argument {a!r}")

    refs: list = []  # trace node -> its value in the expression
    try:
        nodes: list = []
        for n in tr.nodes:
            if len(n.specs) != 1:
                return None
            if n.op.kind == "view":  # one element: a view is the same value
                refs.append(conv(n.args[0]))
                continue
            params = tuple(sorted(n.params.items()))
            hash(params)
            refs.append(("v", len(nodes)))
            nodes.append((n.op.name, tuple(conv(a) for a in n.args), params,
                          n.specs[0][1].name))
        return FlexExpr(tuple(nodes), conv(out))
    except (_NoTrace, TypeError):
        return None


__all__ = ["captured_tensors", "trace_mod"]

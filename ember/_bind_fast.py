"""The binder's fast paths (issue 21; ``docs/performance.md``), split from ``tensor.py``:

* ``_eager_pointwise`` / ``_eager_unary``: an eager one-output pointwise op without params
  (``a + b``, ``x.exp()``): small arrays that are not float16/bfloat16 go to the op's ufunc, the
  output tensor and (with grad) the autograd node are built inline;
* ``bind``: the binder; under a trace, an op that is the next node of the trace an earlier
  call recorded (``_lazy.Known``) reuses that node and its spec (no ``meta``, no new node);
* ``fast_operator``: ``Tensor.__add__`` / ``__sub__`` / ``__mul__`` / ``__truediv__``, whose
  eager same-shape case runs in one Python call;
* ``_record``: the autograd node of any op (``ember.tensor`` re-exports it).

``ember.tensor`` imports this module at its end; these functions use its names.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ember import _lazy
from ember import dtypes as _dt
from ember._meta_check import check_results
from ember.autograd.grad_mode import GENERATION as _GM_GENERATION
from ember.autograd.graph import FullReduceNode, OpNode, SameShapeNode, SavedTensor, op_node
from ember.autograd.graph import _seq as _node_seq
from ember.config import config
from ember.ops import _parallel
from ember.ops import registry as _registry
from ember.ops import shape as _S
from ember.ops.registry import OpDef
from ember.tensor import _LZ, _STATE, Tensor, _eager_bind, _lazy_bind, _new, refresh_view

_LazyArray = _lazy.LazyArray
_IREFS = _lazy._IREFS
_Trace = _lazy.Trace
_same = _lazy.same
_weakref = weakref.ref
_next = next
_NO: dict = {}  # the params of a param-less op's node (never written)
_LOWP_NUMS = frozenset((np.dtype(np.float16).num, _dt.bfloat16.np.num))
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


_SAVES: dict = {}  # (id(op), needs) -> (op, indices of the inputs the node saves)


def _saved_indices(op: OpDef, needs: tuple) -> tuple:
    """The inputs ``op``'s node saves when ``needs`` says which inputs need a gradient
    (``op.save``, or the union of ``op.save_for`` over those inputs), memoized."""
    key = (id(op), needs)
    hit = _SAVES.get(key)
    if hit is not None and hit[0] is op:
        return hit[1]
    save = op.save
    if op.save_for is not None:
        save = tuple(sorted({j for i, n in enumerate(needs) if n for j in op.save_for.get(i, ())}))
    _SAVES[key] = (op, tuple(save))
    return tuple(save)


def _edge(x: Tensor) -> tuple:
    """The autograd edge of ``x``: (its grad_fn, output index), or its leaf accumulator."""
    if x._base is not None:
        refresh_view(x)
    fn = x.grad_fn
    if fn is not None:
        return (fn, x._output_nr)
    acc = x._accum
    return (acc if acc is not None else x._accumulator()).edge


def _record(op: OpDef, inputs: tuple, params: dict, results: tuple, needs: tuple) -> None:
    edges = []
    shapes = []
    dtypes = []
    for x, n in zip(inputs, needs):
        if isinstance(x, Tensor):
            edges.append(_edge(x) if n else None)
            shapes.append(x._data.shape)
            dtypes.append(x._dtype)
        else:
            edges.append(None)
            shapes.append(None)
            dtypes.append(None)
    name = op.grad_name
    saved_in: tuple = ()
    save = _saved_indices(op, needs)
    if save:
        lst: list = [None] * len(inputs)
        for i in save:
            if i >= len(inputs):  # ops with a variable input count (einsum) list them all
                break
            x = inputs[i]
            lst[i] = SavedTensor(x, name) if isinstance(x, Tensor) else x
        saved_in = tuple(lst)
    saved_out: tuple = ()
    if op.save_output:
        keep = op.save_output
        saved_out = tuple(SavedTensor(r.detach(), name, is_output=True)
                          if keep is True or i in keep else None for i, r in enumerate(results))
    if len(results) == 1:
        r = results[0]
        d = r._dtype
        node = op_node(op, tuple(edges), saved_in, saved_out, tuple(shapes), tuple(dtypes),
                       params, needs, ((r._data.shape, d),))
        if d.category == 2:
            r._requires_grad = True
            r.grad_fn = node
        return
    node = op_node(op, tuple(edges), saved_in, saved_out, tuple(shapes), tuple(dtypes), params,
                   needs, tuple((r._data.shape, r._dtype) for r in results))
    for i, r in enumerate(results):
        if r._dtype.category == 2:
            r._requires_grad = True
            r.grad_fn = node
            r._output_nr = i


def _eager_pointwise(op: OpDef, a: Any, b: Any) -> Tensor:
    """``_eager_bind`` of a one-output binary pointwise op without params (add, mul, ...):
    small arrays that are not float16/bfloat16 go straight to the op's ufunc, and the output
    tensor is made inline."""
    x = a._data if isinstance(a, Tensor) else a
    y = b._data if isinstance(b, Tensor) else b
    if (a._dtype if isinstance(a, Tensor) else a.__class__,
            b._dtype if isinstance(b, Tensor) else b.__class__) not in op._dtypes_ok:
        op.check_dtypes((a, b), _NO)  # the first call with these dtypes: meta's dtype errors
    uf = op._ufunc
    if uf is not None and x.__class__ is np.ndarray and x.dtype.num not in _LOWP_NUMS and \
            x.size < _parallel.MIN_ELEMENTS:
        out = uf(x, y)
    else:
        out = op.eager(x, y)
    if out.__class__ is not np.ndarray:
        out = np.asarray(out)
    t = _new(Tensor)
    t._data = out
    t._dtype = _dt._FROM_NP[out.dtype]
    t._version_counter = [0]
    st = _STATE
    if st.inference:
        t._inference = True
    if st.grad_enabled and op.vjp is not None:
        ta = isinstance(a, Tensor)
        tb = isinstance(b, Tensor)
        na = ta and a._requires_grad
        nb = tb and b._requires_grad
        if na or nb:
            if op.save_output:
                _record(op, (a, b), {}, (t,), (na, nb))
            elif op.save or op.save_for is not None:
                _record2(op, a, b, t, na, nb)
            else:  # nothing saved (add, sub): op_node inlined, one object per op
                d = t._dtype
                n = _new(OpNode)
                n.next_functions = ((_edge(a) if na else None), (_edge(b) if nb else None))
                n._seq = _next(_node_seq)
                n._num_outputs = 1
                n.op = op
                n.out_specs = ((out.shape, d),)
                n._saved_inputs = n._saved_outputs = ()
                n.input_shapes = (x.shape if ta else None, y.shape if tb else None)
                n.input_dtypes = (a._dtype if ta else None, b._dtype if tb else None)
                n.params = _NO
                n.needs_input_grad = (na, nb)
                n._owner = None
                if d.category == 2:
                    t._requires_grad = True
                    t.grad_fn = n
    return t


def fast_operator(op: OpDef, slow: Any, floats_only: bool = False, no_bool: bool = False
                  ) -> Any:
    """``Tensor.__add__`` and co.: ``self <op> other`` with a fast path for the most frequent
    case, two tensors of one dtype and shape, or a floating tensor and a Python int/float
    (nothing to broadcast or promote).  Eagerly the op runs here: the ufunc, the output tensor
    and, with grad, the node (add/sub: a ``SameShapeNode``, the cheapest there is; mul/div:
    ``_record2``), in one Python call (under ``check_meta``, checked by ``check_results``).
    Under a compiled call's trace it binds the primitive directly, exactly what ``binary``
    binds for these arguments.  Everything else is ``slow`` (the general frontend)."""
    plain = not (op.save or op.save_for is not None or op.save_output)

    def operator(self: Tensor, other: Any) -> Tensor:
        tr = _LZ.trace
        d = self._dtype
        x = self._data
        if isinstance(other, Tensor):
            y = other._data
            if other._dtype is not d or (floats_only and d.category != 2) or \
                    (no_bool and d is _dt.bool):
                return slow(self, other)
            if tr is None:  # ranks 0 and 1: equal sizes are equal shapes (no tuples to build)
                if x.ndim != y.ndim or x.size != y.size or (x.ndim > 1 and x.shape != y.shape):
                    return slow(self, other)
            elif tr.__class__ is not _Trace or x.shape != y.shape:
                return slow(self, other)  # export's tracer: symbolic sizes, for ``binary``
            else:  # under a compiled call's trace: bind what ``binary`` would bind
                return _registry._binder(op, (self, other), {})
            tb = True
        elif (other.__class__ is float or other.__class__ is int) and d.category == 2:
            y = float(other)
            if tr is not None:
                if tr.__class__ is not _Trace:
                    return slow(self, other)
                return _registry._binder(op, (self, y), {})
            tb = False
        else:
            return slow(self, other)
        check = config.check_meta
        if check and not config.check_fast_paths:
            return slow(self, other)  # the general path, asked for
        uf = op._ufunc
        if uf is not None and x.__class__ is np.ndarray and x.dtype.num not in _LOWP_NUMS and \
                x.size < _parallel.MIN_ELEMENTS:
            out = uf(x, y)
        else:
            out = op.eager(x, y)
        if out.__class__ is not np.ndarray:
            out = np.asarray(out)
        t = _new(Tensor)
        t._data = out
        t._dtype = d = _dt._FROM_NP[out.dtype]
        t._version_counter = [0]
        st = _STATE
        if st.inference:
            t._inference = True
        if st.grad_enabled:
            na = self._requires_grad
            nb = tb and other._requires_grad
            if na or nb:
                if not plain or d is not self._dtype:
                    _record2(op, self, other if tb else y, t, na, nb)
                else:
                    n = _new(SameShapeNode)  # nothing saved, no params (add, sub)
                    if na:
                        acc = self._accum
                        if acc is not None and self.grad_fn is None and self._base is None:
                            ea = acc.edge  # a leaf seen before: _edge, inlined
                        else:
                            ea = _edge(self)
                        n.next_functions = (ea, _edge(other) if nb else None)
                    else:
                        n.next_functions = (None, _edge(other))
                    n._seq = _next(_node_seq)
                    n.op = op
                    n._spec = (out.shape, d)
                    n._mask = (5 if na else 1) | ((10 if nb else 2) if tb else 0)
                    if d.category == 2:
                        t._requires_grad = True
                        t.grad_fn = n
        if check:
            check_results(op, (self, other if tb else y), _NO, (t,))
        return t
    operator.__name__ = f"__{op.name}__"
    return operator


def _eager_unary(op: OpDef, a: Tensor) -> Tensor:
    """``_eager_bind`` of a one-output unary pointwise op without params (exp, tanh, ...)."""
    x = a._data
    if (a._dtype,) not in op._dtypes_ok:
        op.check_dtypes((a,), _NO)  # the first call with this dtype: meta's dtype errors
    uf = op._ufunc
    if uf is not None and x.__class__ is np.ndarray and x.dtype.num not in _LOWP_NUMS and \
            x.size < _parallel.MIN_ELEMENTS:
        out = uf(x)
    else:
        out = op.eager(x)
    if out.__class__ is not np.ndarray:
        out = np.asarray(out)
    t = _new(Tensor)
    t._data = out
    t._dtype = _dt._FROM_NP[out.dtype]
    t._version_counter = [0]
    st = _STATE
    if st.inference:
        t._inference = True
    if st.grad_enabled and op.vjp is not None and a._requires_grad:
        if op.save_for is not None:
            _record(op, (a,), {}, (t,), (True,))
        else:  # _record of a one-input, one-output op, inlined
            name = op.grad_name
            save, keep = op.save, op.save_output
            saved_in = ((SavedTensor(a, name) if 0 in save else None),) if save else ()
            saved_out = ((SavedTensor(t.detach(), name, is_output=True)
                          if keep is True or 0 in keep else None),) if keep else ()
            d = t._dtype
            node = op_node(op, (_edge(a),), saved_in, saved_out, (x.shape,), (a._dtype,), _NO,
                           (True,), ((out.shape, d),))
            if d.category == 2:
                t._requires_grad = True
                t.grad_fn = node
    return t


def _record2(op: OpDef, a: Any, b: Any, t: Tensor, na: bool, nb: bool) -> None:
    """``_record`` of a binary op with one output whose vjp reads inputs only (``op.save`` or
    ``op.save_for``; no outputs): the same node, built without the general loops."""
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    save = _saved_indices(op, (na, nb))
    saved_in: tuple = ()
    if save:
        name = op.grad_name
        saved_in = ((SavedTensor(a, name) if ta else a) if 0 in save else None,
                    (SavedTensor(b, name) if tb else b) if 1 in save else None)
    d = t._dtype
    node = op_node(op, (_edge(a) if na else None, _edge(b) if nb else None), saved_in, (),
                   (a._data.shape if ta else None, b._data.shape if tb else None),
                   (a._dtype if ta else None, b._dtype if tb else None), {}, (na, nb),
                   ((t._data.shape, d),))
    if d.category == 2:
        t._requires_grad = True
        t.grad_fn = node


def bind(op: OpDef, inputs: tuple, params: dict) -> Any:
    """The binder (``ember.ops.registry.bind`` calls it; ``ember.tensor`` installs it): run
    ``op`` eagerly and, when needed, record its autograd node; under a compiled call's trace,
    record it (``tensor._lazy_bind``).

    Pointwise primitives skip ``meta`` eagerly: their frontend has already broadcast and
    promoted, and the output dtype is read off the kernel's result (tests run with
    ``check_meta``, which checks every result, fast paths' included, against its meta rule:
    ``ember._meta_check.check_results``).

    Under a trace that follows a known one (``_lazy.Known``: the trace an earlier call of the
    same code recorded), a one-output, non-view op that is the known trace's next node (the
    same op on the same values with the same params) reuses the cached node and its spec: no
    ``meta``, no new node; only the output tensor and its lazy payload are made (inlined here:
    one Python call less per recorded op).
    """
    tr = _LZ.trace
    if tr is None:
        return _eager_bind(op, inputs, params)
    if tr.__class__ is not _Trace and not isinstance(tr, _Trace):
        return tr.bind(op, inputs, params)  # another recorder (ember.export's tracer)
    kn = tr.known
    if kn is None:
        return _lazy_bind(tr, op, inputs, params)
    nodes = tr.nodes
    i = len(nodes)
    if i >= kn.n:
        return _lazy_bind(tr, op, inputs, params)
    step = kn.simple[i]
    if step is None or step[1] is not op:
        v = kn.views[i]
        if v is not None and v[1] is op:
            return _follow_view(tr, kn, i, v, inputs, params)
        m = kn.multi[i]
        if m is not None and m[1] is op:
            return _follow_multi(tr, kn, i, m, inputs, params)
        return _lazy_bind(tr, op, inputs, params)
    nd, _, args, nparams, ref, shape, dtype, npd, pattern, a0, a1 = step
    looked = False
    plain = not tr.storages   # no in-place write yet: a lazy input's payload is its value
    try:   # the frequent argument patterns, one check each (a Tensor's lazy payload is p)
        if not (pattern and plain):
            ok = False
        elif pattern == 1:
            (x,) = inputs
            p = x._data
            ok = p.__class__ is _LazyArray and p.ref is a0 and p.value is None
        elif pattern == 3:
            x, y = inputs
            p = x._data
            ok = p.__class__ is _LazyArray and p.ref is a0 and p.value is None and \
                y.__class__ is float and y == a1
        else:
            x, y = inputs
            p, q = x._data, y._data
            ok = p.__class__ is _LazyArray and q.__class__ is _LazyArray and p.ref is a0 and \
                q.ref is a1 and p.value is None and q.value is None
    except (AttributeError, ValueError):   # not a tensor there, another arity (rare)
        ok = False
    if not ok:
        if len(args) != len(inputs):
            return _lazy_bind(tr, op, inputs, params)
        for a, x in zip(args, inputs):
            c = x.__class__
            if c is Tensor or (c is not float and isinstance(x, Tensor)):
                p = x._data
                if p.__class__ is _LazyArray:
                    if p.ref is a and p.value is None and plain:
                        continue
                elif plain and p.__class__ is np.ndarray:   # an input seen before
                    k = tr.input_ids.get(id(p))
                    if k is not None and k < 64 and _IREFS[k] is a and c is Tensor and \
                            not x.__dict__:
                        continue   # what ref_of would give, with nothing else to note
                looked = True
                if tr.ref_of(x) != a:
                    return _lazy_bind(tr, op, inputs, params)
            elif c is float:  # a Python scalar (the frequent ``x * 0.5``): _same, inlined
                if a.__class__ is not float or x != a:
                    return _lazy_bind(tr, op, inputs, params)
            elif x is not a and not _same(x, a):
                return _lazy_bind(tr, op, inputs, params)
    if params is not nparams and (params or nparams) and not _same(params, nparams):
        return _lazy_bind(tr, op, inputs, params)
    if looked and tr.known is not kn:  # ref_of met an input unlike the known trace's
        return _lazy_bind(tr, op, inputs, params)
    nodes.append(nd)
    t = _new(Tensor)
    t._dtype = dtype
    t._version_counter = vc = [0]
    la = _new(_LazyArray)   # LazyArray(tr, ref, shape, npd, None, None, vc, 0), inlined
    la.trace = tr
    la.ref = ref
    la.shape = shape
    la.dtype = npd
    la.vc = vc
    la.sver = 0
    la.shadow = None
    la.owner = None
    la.value = None
    t._data = la
    gen = _GM_GENERATION[0]
    if tr.gm_generation != gen:   # the grad mode changed (in some thread) since it was read
        st = _STATE
        tr.gm_generation = gen
        tr.gm = (st.grad_enabled, st.inference)
    grad, inference = tr.gm
    if inference:
        t._inference = True
    if grad and op.vjp is not None:
        for x in inputs:
            if isinstance(x, Tensor) and x._requires_grad:
                needs = tuple(isinstance(y, Tensor) and y._requires_grad for y in inputs)
                _record(op, inputs, params, (t,), needs)
                if t.grad_fn is not None:  # compiled autograd: backward over it is recorded
                    t.grad_fn._compiled_by = tr.owner
                # with a node, weak references (the nodes keep most tensors alive, and the
                # sweep of held tensors costs more than it saves then)
                tr.lazies.append(_weakref(la))
                tr.tensors.append(_weakref(t))
                return t
    tr.lazies.append(t)  # tr.hold(t), inlined
    tr.holding = True
    return t


def full_reduce(op: OpDef, x: Tensor, all_dims: tuple, mean: bool) -> Tensor | None:
    """``x.sum()`` / ``x.mean()`` (``op``: the SUM or MEAN primitive) of a small float tensor,
    eagerly: the frontend's fast path.  It runs what ``_eager_bind`` runs for these (the
    kernel's ``np.add.reduce``, the output tensor, the node with params ``dims`` (all of
    ``x``'s, from ``all_dims``) and ``keepdim=False``) without ``meta`` and the generic loops;
    None when the general path must run (a trace, low precision, empty or large inputs;
    ``check_meta`` with ``check_fast_paths`` off).  Under ``check_meta`` the
    result is checked by ``check_results``."""
    a = x._data
    if _LZ.trace is not None or a.__class__ is not np.ndarray:
        return None
    check = config.check_meta
    if check and not config.check_fast_paths:
        return None
    npd = a.dtype
    n = a.size
    # float32/float64 in native byte order (the singleton dtypes): no low precision, no casts
    if (npd is not _F32 and npd is not _F64) or not 0 < n < _parallel.MIN_ELEMENTS or \
            a.ndim >= len(all_dims):
        return None
    dims = all_dims[a.ndim]   # the node's params derive the same dims (FullReduceNode.params)
    if mean:
        out = np.asarray(np.add.reduce(a, dims, npd) / npd.type(n))   # _mean_eager's value
    else:   # _sum_eager's call for inputs under MIN_ELEMENTS, into a 0-d array
        out = np.add.reduce(a, dims, npd, np.empty((), npd))
    t = _new(Tensor)
    t._data = out
    t._dtype = d = x._dtype
    t._version_counter = [0]
    st = _STATE
    if st.inference:
        t._inference = True
    if st.grad_enabled and x._requires_grad:
        node = _new(FullReduceNode)   # the op saves nothing: no SavedTensor
        acc = x._accum
        if acc is not None and x.grad_fn is None and x._base is None:
            node.next_functions = (acc.edge,)   # a leaf seen before: _edge, inlined
        else:
            node.next_functions = (_edge(x),)
        node._seq = _next(_node_seq)
        node.op = op
        node.input_shapes = (a.shape,)
        node.input_dtypes = (d,)
        t._requires_grad = True
        t.grad_fn = node
    if check:
        check_results(op, (x,), {"dims": dims, "keepdim": False}, (t,))
    return t


def expand_view(x: Tensor, shape: tuple) -> Tensor | None:
    """``x.expand(shape)`` (``shape`` a tuple of non-negative ints) eagerly when no node is
    recorded (a full reduction's gradient, ``grad.expand(sizes)``, in every backward): the view
    ``_eager_bind`` makes from ``_expand_eager``'s direct case (C-contiguous, no size-1 target
    dim), after ``_expand_meta``'s checks; None when the general path must run.  Under
    ``check_meta`` the view is checked against ``_expand_eager``'s and by ``check_results``."""
    a = x._data
    if _LZ.trace is not None or a.__class__ is not np.ndarray or 1 in shape or not a.size or \
            (_STATE.grad_enabled and x._requires_grad) or not a.flags.c_contiguous:
        return None
    check = config.check_meta
    if check and not config.check_fast_paths:
        return None
    xs = a.shape
    lead = len(shape) - len(xs)
    if lead < 0 or (lead == 0 and shape == xs):
        return None
    st = a.strides
    strides = [0] * lead
    for j in range(len(xs)):
        n = xs[j]
        if n == shape[lead + j]:
            strides.append(st[j])
        elif n == 1:
            strides.append(0)
        else:
            return None   # the general path raises meta's error
    v = np.ndarray(shape, a.dtype, a, 0, tuple(strides))
    v.flags.writeable = False
    t = _new(Tensor)
    t._data = v
    t._dtype = x._dtype
    vc = t._version_counter = x._version_counter
    t._base = x if x._base is None else x._base
    t._view_version = vc[0]
    if _STATE.inference:
        t._inference = True
    if check:
        _check_expand(x, shape, t)
    return t


def _check_expand(x: Tensor, shape: tuple, t: Tensor) -> None:
    """``check_meta``: ``expand_view``'s view ``t`` against the general path's
    (``_expand_eager``'s geometry, ``check_results``)."""
    v, ref = t._data, _S.EXPAND.eager(x._data, shape=shape)
    assert (v.shape, v.strides, v.dtype, v.flags.writeable) == \
        (ref.shape, ref.strides, ref.dtype, ref.flags.writeable), ("expand", v.strides, ref.strides)
    assert v.__array_interface__["data"][0] == ref.__array_interface__["data"][0], "expand"
    check_results(_S.EXPAND, (x,), {"shape": shape}, (t,))


def _follow_view(tr: _Trace, kn: Any, i: int, v: tuple, inputs: tuple, params: dict) -> Any:
    """``bind`` of a view op (``x.view(...)``, ``x.permute(...)``) that is the known trace's
    next node, on the lazy output of an earlier node (``Known.views``): the cached node, and
    the output's stand-in geometry of the last call while the input's is the same object
    (``Known.vmemo``); what ``tensor._lazy_bind`` makes for a view, without ``match``, the
    view kernel and the frame lookups.  Anything else takes ``_lazy_bind``."""
    nd, _, nparams, ref, shape, dtype, npd, a0 = v
    src = inputs[0] if len(inputs) == 1 else None
    p = src._data if isinstance(src, Tensor) else None
    if tr.storages or (params is not nparams and (params or nparams) and
                       not _same(params, nparams)):
        return _lazy_bind(tr, v[1], inputs, params)
    if p.__class__ is np.ndarray:   # an input array (a parameter): its real NumPy view
        return _follow_input_view(tr, kn, v, src, p, inputs, params)
    if p.__class__ is not _LazyArray or p.ref is not a0 or p.value is not None:
        return _lazy_bind(tr, v[1], inputs, params)
    owner = p if p.owner is None else p.owner
    if owner.__class__ is not _LazyArray:   # a view of a concrete array: its real NumPy view
        return _lazy_bind(tr, v[1], inputs, params)
    g_in = p.geometry()
    memo = kn.vmemo.get(i)
    if memo is not None and memo[0] is g_in:
        sh = memo[1]
    else:
        sh = v[1].eager(g_in, **params)
        if sh.dtype != npd or tuple(sh.shape) != shape:
            sh = None   # a reinterpreting view: its value is its own (as _lazy_bind)
        if sh is not g_in:
            kn.vmemo[i] = (g_in, sh)
    tr.nodes.append(nd)
    return _view_result(tr, v, src, inputs, params, sh, owner, p.sver)


def _follow_input_view(tr: _Trace, kn: Any, v: tuple, src: Tensor, p: np.ndarray,
                       inputs: tuple, params: dict) -> Any:
    """``_follow_view`` of a view of an input array (``w.permute(...)`` of a parameter in a
    backward): the shadow is the real NumPy view (what realizing hands out)."""
    if tr.ref_of(src) != v[7] or tr.known is not kn:
        return _lazy_bind(tr, v[1], inputs, params)
    root = p
    while isinstance(root.base, np.ndarray):
        root = root.base
    sh = v[1].eager(p, **params)
    if sh.dtype != v[6] or tuple(sh.shape) != v[4]:
        sh = None   # a reinterpreting view (as _lazy_bind)
    tr.nodes.append(v[0])
    return _view_result(tr, v, src, inputs, params, sh, root, src._version_counter[0])


def _view_result(tr: _Trace, v: tuple, src: Tensor, inputs: tuple, params: dict, sh: Any,
                 owner: Any, sver: int) -> Tensor:
    """The output tensor of a followed view (``_follow_view``), as ``_lazy_bind`` makes it."""
    _, op, _, ref, shape, dtype, npd, _ = v
    vc = src._version_counter
    t = _new(Tensor)
    t._dtype = dtype
    t._version_counter = vc
    t._base = src if src._base is None else src._base
    t._view_version = vc[0]
    if sh is None:
        t._data = tr.lazy(ref, shape, npd, None, None, vc, sver)
    else:
        t._data = tr.lazy(ref, shape, npd, sh, owner, vc, sver)
    tr.register_tensor(t)
    st = _STATE
    if st.inference:
        t._inference = True
    if st.grad_enabled and src._requires_grad and op.vjp is not None:
        _record(op, inputs, params, (t,), (True,))
        if t.grad_fn is not None:  # compiled autograd: backward over it is recorded too
            t.grad_fn._compiled_by = tr.owner
    return t


def _follow_multi(tr: _Trace, kn: Any, i: int, m: tuple, inputs: tuple, params: dict) -> Any:
    """``bind`` of an op of several outputs that gets no autograd node (a multi-tensor
    optimizer step under ``no_grad``) and is the known trace's next node (``Known.multi``):
    what ``tensor._lazy_bind``'s ``match`` and held outputs do for it, without its lists and
    calls per argument and output.  Numbers the entry takes at run time may differ
    (``Known.loose``); anything else takes ``_lazy_bind``."""
    nd, op, args, nparams, outs = m
    gen = _GM_GENERATION[0]
    if tr.gm_generation != gen:
        st = _STATE
        tr.gm_generation = gen
        tr.gm = (st.grad_enabled, st.inference)
    grad, inference = tr.gm
    if len(args) != len(inputs) or (grad and op.vjp is not None and any(
            isinstance(x, Tensor) and x._requires_grad for x in inputs)):
        return _lazy_bind(tr, op, inputs, params)
    ref_of = tr.ref_of
    plain = not tr.storages
    for a, x in zip(args, inputs):   # every tensor's ref, in order, as ``match`` reads them
        if isinstance(x, Tensor):
            p = x._data
            if plain and p.__class__ is _LazyArray and p.value is None:
                r = p.ref   # ref_of(x) of an unwritten lazy value, inlined
            else:
                r = ref_of(x)
            if r is not a and r != a:
                return _lazy_bind(tr, op, inputs, params)
        elif x is not a and not _same(x, a):
            return _lazy_bind(tr, op, inputs, params)
    if tr.known is not kn:   # ref_of met an input unlike the known trace's
        return _lazy_bind(tr, op, inputs, params)
    if params is nparams or _same(params, nparams):
        tr.nodes.append(nd)
    else:
        got = kn.loose(i, op, args, params) if kn.loose is not None else None
        if got is None:
            return _lazy_bind(tr, op, inputs, params)
        tr.nodes.append(_lazy.TNode(op, args, params, nd.specs))
        tr.loosened = got if tr.loosened is None else tr.loosened + got
    results = []
    for ref, shape, dtype, npd in outs:
        t = _new(Tensor)
        t._dtype = dtype
        t._version_counter = vc = [0]
        t._data = _LazyArray(tr, ref, shape, npd, None, None, vc, 0)
        if inference:
            t._inference = True
        results.append(t)
    tr.lazies += results   # tr.hold(t) for each, inlined
    tr.holding = True
    return tuple(results)

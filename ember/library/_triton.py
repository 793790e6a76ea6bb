"""``triton_op`` / ``wrap_triton`` (PyTorch 2.6's contract) for ember's kernel language.

``triton_op(name, fn, mutates_args=...)`` is a custom op whose body ``fn`` is written with
ember ops and launches of ``ember.kernel`` kernels wrapped by ``wrap_triton``:

* eagerly the op runs ``fn`` (the kernels run compiled, or in the interpreter);
* ``fn`` itself is the fake impl (a launch on data-less tensors only records shapes);
* under ``ember.compile`` the op is *decomposed*: ``fn`` runs on the lazy tensors, so each
  launch becomes a ``kernel_launch`` node that the C backend places inside the graph's C
  translation unit (no extern); a registered autograd formula still applies to the op;
* ``ember.export`` keeps the op as one node unless
  ``ep.run_decompositions(decompose_custom_triton_ops=True)``.

>>> @triton_op("mylib::add", mutates_args=())
... def add(x: Tensor, y: Tensor) -> Tensor:
...     out = ember.empty_like(x)
...     wrap_triton(add_kernel)[(cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCK=64)
...     return out
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Iterable
from weakref import ref as _weakref

from ember import _lazy
from ember.autograd import grad_mode as _gm
from ember.errors import EmberRuntimeError
from ember.library import _custom_op
from ember.library._custom_op import _SLOW, CustomOpDef, custom_op
from ember.tensor import Tensor, _new, _record

# OpDef name -> the triton op (export's ``decompose_custom_triton_ops`` looks them up)
TRITON_OPS: dict[str, CustomOpDef] = {}


def triton_op(name: str, fn: Callable | None = None, /, *, mutates_args: Iterable[str] | str,
              schema: str | None = None) -> Any:
    """Make ``fn`` (ember ops + ``wrap_triton`` kernel launches) a custom op whose body the
    compiler sees (decorator when ``fn`` is omitted)."""

    def inner(f: Callable) -> CustomOpDef:
        op = custom_op(name, f, mutates_args=mutates_args, schema=schema)
        op.register_fake(f)
        op._triton = True  # type: ignore[attr-defined]
        # the argument count of a call that may replay the body (replay); -1: none may
        op._replay_n = op._fast[0] if op._fast is not None else -1
        TRITON_OPS[op.opdef.name] = op
        return op

    return inner if fn is None else inner(fn)


kernel_op = triton_op


class TraceableKernel:
    """What ``wrap_triton(kernel)`` returns: ``[grid](*args)`` launches the kernel; recorders
    (compile, export, fake impls) see the launch as a ``kernel_launch`` node."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel

    def __getitem__(self, grid: Any) -> Callable:
        return self.kernel[grid]

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> None:
        self.kernel.run(*args, grid=grid, **kwargs)

    def __repr__(self) -> str:
        return f"wrap_triton({self.kernel!r})"


def wrap_triton(triton_kernel: Any, /) -> TraceableKernel:
    """Allow ``triton_kernel`` (an ``ember.kernel.jit`` function) to be traced inside a
    ``triton_op``: ``wrap_triton(kernel)[grid](*args)``."""
    if isinstance(triton_kernel, TraceableKernel):
        return triton_kernel
    if not (hasattr(triton_kernel, "run") and hasattr(triton_kernel, "stored_params")):
        raise RuntimeError("wrap_triton only works on functions annotated with "
                           "ember.kernel.jit (got "
                           f"{type(triton_kernel).__name__})")
    return TraceableKernel(triton_kernel)


wrap_kernel = wrap_triton


def call_decomposed(op: CustomOpDef, tensors: list, params: dict) -> Any:
    """Run the triton op's body on lazy tensors (``ember.compile``): its kernel launches become
    graph nodes; an autograd formula registered on the op is recorded around them.  When the
    trace follows a known one (a cache hit), what the body recorded is remembered, so later
    calls at the same place replay it (``replay``) instead of running the body's Python."""
    tr = _lazy.STATE.trace
    kn = tr.known
    before = (len(tr.nodes), len(tr.inputs), bool(tr.storages))
    pos, kw = op._unflatten([t.detach() for t in tensors], params)
    with _gm.no_grad():
        out = op._kernel()(*pos, **kw)
    rets = [r for r in op._returns(out) if isinstance(r, Tensor)]
    for i in op._mutated_indices(params):
        tensors[i]._version_counter[0] += 1
    if kn is not None and tr.known is kn and op._fast is not None and \
            op.__dict__.get("_replays", _NONE).get((id(kn), before[0])) is None:
        _remember(op, tr, kn, before, tensors, params, out)   # (once per place)
    _record_autograd(op, tensors, params, rets)
    return out


def _record_autograd(op: CustomOpDef, tensors: list, params: dict, rets: list) -> None:
    if _gm.STATE.grad_enabled and rets:
        needs = tuple(t._requires_grad for t in tensors)
        if any(needs):
            if op._backward is None:
                raise EmberRuntimeError(f"[{op._qualname}] an input requires grad but no "
                                        "autograd formula was registered "
                                        "(register_autograd)")
            _record(op.opdef, tuple(tensors), params, tuple(rets), needs)


# -- replaying a kernel op's body on cache hits ---------------------------------------------
# A kernel op's body is a function of its inputs' metadata and its other arguments (PyTorch's
# triton_op contract: it may compute sizes and launch kernels, never read tensor values).  On a
# call that follows the known trace, the body's nodes are the known trace's next nodes; when a
# later call reaches the same place with the same input values (refs, hence shapes, dtypes and
# layouts) and the same other arguments, it appends those nodes and makes the output tensors
# directly: a few microseconds instead of the body's Python (binding, ``empty_like``, strides,
# the launch's argument handling).  As with ``torch.compile``, the body's Python does not run
# again on such calls (a ``print`` in it prints while tracing only).

class _Replay:
    __slots__ = ("kn", "nodes", "new_inputs", "old_inputs", "consts", "params", "outs", "kind")

    def __init__(self, **kw: Any) -> None:
        for k, v in kw.items():
            setattr(self, k, v)


def _ref_now(tr: Any, t: Tensor) -> Any:
    """The ref of ``t``'s value in ``tr`` without registering anything: None when it has none
    yet (an input the trace has not seen) or cannot be told cheaply."""
    p = t._data
    if p.__class__ is _lazy.LazyArray:
        return p.ref if p.value is None and p.trace is tr else False
    k = tr.input_ids.get(id(p))
    return None if k is None else ("i", k)


def _remember(op: CustomOpDef, tr: Any, kn: Any, before: tuple, tensors: list, params: dict,
              out: Any) -> None:
    """Keep what the body recorded at this place of ``kn`` (when it can be replayed)."""
    i0, n_in, had_storages = before
    i1 = len(tr.nodes)
    if had_storages or tr.storages or i1 > kn.n:
        return
    order = []   # the op's tensors the body registered as graph inputs, in that order
    for a in tr.inputs[n_in:]:
        k = next((k for k, t in enumerate(tensors) if t._data is a), None)
        if k is None:
            return  # the body made a graph input of its own (a constant)
        order.append(k)
    in_refs = tuple(_ref_now(tr, t) for t in tensors)
    if any(r is None or r is False for r in in_refs) or any(
            t._data.__class__ is not _lazy.LazyArray and not t._data.flags.c_contiguous
            for t in tensors):
        return
    outs = []
    for r in op._returns(out):
        p = getattr(r, "_data", None)
        if p.__class__ is not _lazy.LazyArray or p.owner is not None or p.value is not None \
                or not (p.ref[0] == "n" and i0 <= p.ref[1] < i1):
            return  # not a tensor, a view, realized, or not made by the body: not replayable
        outs.append((p.ref, p.shape, p.dtype, r._dtype))
    replays = op.__dict__.setdefault("_replays", {})
    if len(replays) > 16:
        replays.clear()
    fast_n, tensor_pos = op._fast
    consts = tuple(i for i in range(fast_n) if i not in tensor_pos)
    new_inputs = tuple((tensor_pos[k], in_refs[k]) for k in order)
    old_inputs = tuple((tensor_pos[k], r) for k, r in enumerate(in_refs) if k not in order)
    replays[(id(kn), i0)] = _Replay(
        kn=kn, nodes=tuple(kn.nodes[i0:i1]), new_inputs=new_inputs, old_inputs=old_inputs,
        consts=tuple((i, op._arg_names[i]) for i in consts), params=dict(params),
        outs=tuple(outs), kind=_return_kind(op))


def _return_kind(op: CustomOpDef) -> int:
    """How the op returns its outputs: 0 none, 1 one tensor, 2 a tuple, 3 a list."""
    sch = op._schema
    if not sch.returns:
        return 0
    if sch.returns_tuple:
        return 2
    return 3 if sch.returns[0] == "Tensor[]" else 1


def replay(op: CustomOpDef, tr: Any, args: tuple, tensor_pos: tuple) -> Any:
    """The op's outputs recorded without running its body (see above), or ``_SLOW``."""
    kn = tr.known
    if kn is None or tr.storages:
        return _SLOW
    nodes = tr.nodes
    i0 = len(nodes)
    rec = op.__dict__.get("_replays", _NONE).get((id(kn), i0))
    if rec is None or rec.kn is not kn:
        return _SLOW
    params = rec.params
    for i, name in rec.consts:
        v, w = args[i], params[name]
        if v is not w and not _same(v, w):
            return _SLOW
    ids = tr.input_ids
    for i, r in rec.new_inputs:  # register new graph inputs in the order the body did
        t = args[i]
        if t.__class__ is not Tensor or t._data.__class__ is _LazyArray or id(t._data) in ids \
                or tr.ref_of(t) != r:   # now the graph input that the body's was
            return _SLOW
    if tr.known is not kn:
        return _SLOW
    for i, r in rec.old_inputs:
        t = args[i]
        if t.__class__ is not Tensor:
            return _SLOW
        p = t._data
        if p.__class__ is _LazyArray:
            if p.value is not None or p.trace is not tr or (p.ref is not r and p.ref != r):
                return _SLOW
        elif r[0] != "i" or ids.get(id(p)) != r[1]:
            return _SLOW
    nodes.extend(rec.nodes)
    st = _gm.STATE
    kind = rec.kind
    if kind == 1 and not st.grad_enabled:  # one output, no autograd: the common case, inlined
        ref, shape, np_dtype, dtype = rec.outs[0]
        t = _new(Tensor)
        t._dtype = dtype
        t._version_counter = vc = [0]
        la = _new(_LazyArray)   # tr.lazy(ref, shape, np_dtype, None, None, vc, 0), inlined
        la.trace, la.ref, la.shape, la.dtype, la.vc, la.sver = tr, ref, shape, np_dtype, vc, 0
        la.shadow = la.owner = la.value = None
        tr.lazies.append(_weakref(la))
        t._data = la
        tr.tensors.append(_weakref(t))
        if st.inference:
            t._inference = True
        return t
    outs = [_lazy_out(tr, *o) for o in rec.outs]
    if st.grad_enabled:
        _record_autograd(op, [args[i] for i in tensor_pos], params, outs)
    return outs[0] if kind == 1 else tuple(outs) if kind == 2 else outs if kind == 3 else None


_NONE: dict = {}


def _lazy_out(tr: Any, ref: Any, shape: tuple, np_dtype: Any, dtype: Any) -> Tensor:
    t = _new(Tensor)
    t._dtype = dtype
    t._version_counter = vc = [0]
    t._data = tr.lazy(ref, shape, np_dtype, None, None, vc, 0)
    tr.tensors.append(_weakref(t))
    if _gm.STATE.inference:
        t._inference = True
    return t


_LazyArray, _same = _lazy.LazyArray, _lazy.same


def decomposes_now() -> bool:
    """True under ``ember.compile``'s recorder (not export's, not a fake impl's)."""
    return isinstance(_lazy.STATE.trace, _lazy.Trace)


__all__ = ["TRITON_OPS", "TraceableKernel", "kernel_op", "triton_op", "wrap_kernel",
           "wrap_triton"]

_custom_op._TRITON = sys.modules[__name__]  # CustomOpDef.__call__ reaches replay through it

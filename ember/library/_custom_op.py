"""``custom_op``: a Python function as a first-class op (ARCHITECTURE.md §2, §7).

A ``CustomOpDef`` owns one ``OpDef`` registered as ``"ns::name"``.  The OpDef is functional:
its inputs are the op's tensors (lists flattened), its params the other arguments, and its
outputs the returned tensors followed by the new values of mutated tensors.  Eagerly the user's
function runs directly on the real tensors; under ``ember.compile`` or ``ember.export`` the
OpDef is recorded as one node (its ``meta`` runs the fake impl, its ``eager`` kernel the user's
function) and mutated arguments are written back with ``copy_``.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Iterable

import numpy as np

from ember import _lazy
from ember.autograd import grad_mode as _gm
from ember.autograd.function import FunctionCtx
from ember.errors import EmberRuntimeError
from ember.library._fake import FakeMode, fake_tensor
from ember.library._schema import Schema, infer
from ember.ops import PACKETS
from ember.ops import registry as _registry
from ember.ops.registry import OpDef
from ember.tensor import Tensor, _record, _wrap

_ALIAS_MSG = ("{name} (with implementation in {mod}): The output of this custom operator (1) "
              "must not also be an input to this custom operator and (2) may not alias any "
              "inputs to this custom operator or other returns. The most common way to trigger "
              "this error is if we have y = custom_op(x) and y and x are the same Tensor. Please "
              "instead return a clone of the offending output tensor(s) (e.g. return x.clone()) "
              "or refactor the custom operator to not return y.")



# every tensor input is saved for setup_context (``_record`` stops at the real input count)
_SAVE_ALL = tuple(range(4096))


_TRITON: Any = None  # ember.library._triton once imported (a triton_op exists)
_Trace = _lazy.Trace


class CustomOpDef:
    """A custom op: call it like the function; ``register_fake``/``register_autograd``/
    ``register_kernel`` add rules.  Reachable as ``ember.ops.<ns>.<name>`` (and ``.default``).

    >>> @custom_op("mylib::twice", mutates_args=())
    ... def twice(x: Tensor) -> Tensor:
    ...     return x * 2
    """

    def __init__(self, namespace: str, name: str, schema: Schema, fn: Callable,
                 mutates_args: Any = ()) -> None:
        self._namespace, self._name, self._schema = namespace, name, schema
        self._init_fn = fn
        self._stable_call: Any = _UNRESOLVED  # see _resolve_stable_call
        self._fast_kernel: Callable | None = None
        self._kernels = {None: fn}
        self._fake: Callable | None = None
        self._implicit = False  # a CompositeImplicitAutograd kernel: called as plain code
        self._triton = False    # a triton_op: ember.compile decomposes it into its body
        self._replay_n = -1     # a triton_op's positional arity for _triton.replay
        self._backward: Callable | None = None
        self._setup_context: Callable | None = None
        self._mutated = tuple(a.name for a in schema.args if a.mutable)
        self._signature = _signature_of(schema)
        # one plain Tensor out and nothing mutated: the OpDef has one output (no getitem)
        self._single = schema.returns == ("Tensor",) and not schema.returns_tuple \
            and not self._mutated
        self._opdef = self._build_opdef()
        self._fast = _fast_plan(schema, self._mutated)
        self._arg_names = tuple(a.name for a in schema.args)
        self._kwarg_only = any(a.kwarg_only for a in schema.args)
        # a redefinition replaces (as PyTorch)
        _registry.REGISTRY[self._opdef.name] = self._opdef
        PACKETS[self._qualname] = self

    # ------------------------------------------------------------------ kernels
    @property
    def _kernels(self) -> dict:
        """device type (None: any) -> kernel; every change drops the cached stable call."""
        return self.__kernels

    @_kernels.setter
    def _kernels(self, table: dict) -> None:
        self.__kernels = _KernelTable(self, table)
        self._stable_call = _UNRESOLVED

    @property
    def _implicit(self) -> bool:
        return self.__implicit

    @_implicit.setter
    def _implicit(self, on: bool) -> None:
        self.__implicit = on
        self._stable_call = _UNRESOLVED

    def _resolve_stable_call(self) -> Any:
        """Resolve the eager fast path once per change of the kernels: ``_stable_call`` (the C
        fast call of an extension's boxed kernel, ``StableKernel.op_fast_call``, else None) and
        ``_fast_kernel`` (the kernel ``_call_fast`` runs; None when calls take the general
        path).  Returns ``_stable_call``."""
        kernel = self._kernel()
        fast = self._fast is not None and not self._implicit
        sk = getattr(kernel, "stable_kernel", None)
        self._fast_kernel = kernel if fast else None
        self._stable_call = sk.op_fast_call(self._alias_error) if fast and sk else None
        return self._stable_call

    # ------------------------------------------------------------------ identity
    @property
    def _qualname(self) -> str:
        return f"{self._namespace}::{self._name}"

    @property
    def default(self) -> CustomOpDef:
        return self

    @property
    def opdef(self) -> OpDef:
        """The registered ``OpDef``."""
        return self._opdef

    @property
    def schema(self) -> str:
        return str(self._schema)

    def __repr__(self) -> str:
        return f"<CustomOpDef({self._qualname})>"

    def _build_opdef(self) -> OpDef:
        # named as PyTorch prints the overload, so a printed graph's ``ember.ops.ns.name.default``
        # is a valid path to the op
        return OpDef(name=f"{self._namespace}.{self._name}.default", kind="extern",
                     meta=self._meta, eager=self._eager, vjp=self._vjp,
                     num_outputs=1 if self._single else 0,
                     save=_SAVE_ALL if self._backward else (),
                     save_output=self._backward is not None,
                     doc=f"custom op {self._qualname}{self._schema}",
                     grad_name=f"{self._namespace}_{self._name}_default_backward")

    def _refresh(self, **changes: Any) -> None:
        self._opdef = dataclasses.replace(self._opdef, **changes)
        _registry.REGISTRY[self._opdef.name] = self._opdef

    # ------------------------------------------------------------------ registration
    def register_fake(self, fn: Callable, /) -> Callable:
        """Register the shape/dtype rule (runs on data-less tensors; needed by compile and
        export).  ``get_ctx().new_dynamic_size()`` gives a data-dependent size."""
        self._fake = fn
        return fn

    def register_autograd(self, backward: Callable, /, *,
                          setup_context: Callable | None = None) -> None:
        """``backward(ctx, *grads)`` returns one gradient per input (None for non-tensors);
        ``setup_context(ctx, inputs, output)`` saves what it needs on ``ctx``."""
        if self._mutated:
            raise EmberRuntimeError(f"[{self._qualname}] register_autograd: attempted to "
                                    "register an autograd formula for a custom op that mutates "
                                    "some of its inputs. This is not supported.")
        self._backward, self._setup_context = backward, setup_context
        self._refresh(save=_SAVE_ALL, save_output=True)

    def register_kernel(self, device_types: Any, fn: Callable | None = None, /) -> Any:
        """Register ``fn`` as the kernel for ``device_types`` (ember runs on ``"cpu"``)."""
        types = [device_types] if isinstance(device_types, str) or device_types is None \
            else list(device_types)

        def reg(f: Callable) -> Callable:
            for t in types:
                self._kernels[None if t is None else str(t).split(":")[0]] = f
            return f
        return reg if fn is None else reg(fn)

    def _kernel(self) -> Callable:
        return self._kernels.get("cpu", self._kernels[None])

    def _set_composite(self, on: bool) -> None:
        """The kernel is written with ember ops (a ``Composite*`` Library impl): the C backend
        may expand it (``OpDef.decomp``) instead of calling it as an extern."""
        self._refresh(decomp=self._decomp if on and not self._mutated else None)

    def _decomp(self, *tensors: Any, **params: Any) -> Any:
        pos, kw = self._unflatten(list(tensors), params)
        rets = self._returns(self._kernel()(*pos, **kw))
        return rets[0] if self._single else tuple(rets)

    # ------------------------------------------------------------------ flattening
    def _bind_args(self, args: tuple, kwargs: dict) -> dict:
        names = self._arg_names
        if not kwargs and len(args) == len(names) and not self._kwarg_only:
            return dict(zip(names, args))  # what Signature.bind gives, without its cost
        try:
            ba = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self._qualname}() {e}") from None
        ba.apply_defaults()
        return dict(ba.arguments)

    def _flatten(self, values: dict) -> tuple[list, dict]:
        tensors: list = []
        params: dict = {}
        layout = []
        for a in self._schema.args:
            v = values[a.name]
            if a.is_tensor_list:
                if v is None:  # Tensor[]? given None
                    layout.append(-1)
                elif a.type.startswith("Tensor?[]"):  # which elements are tensors
                    tensors.extend(t for t in v if t is not None)
                    layout.append(tuple(-1 if t is None else 0 for t in v))
                else:
                    tensors.extend(v)
                    layout.append(len(v))
            elif a.is_tensor:
                if v is None:
                    layout.append(-1)
                else:
                    tensors.append(v)
                    layout.append(0)
            else:
                params[a.name] = tuple(v) if isinstance(v, list) else v
        if any(layout):  # only when some tensor argument is None or a list
            params["_layout"] = tuple(layout)
        return tensors, params

    def _unflatten(self, tensors: list, params: dict) -> tuple[tuple, dict]:
        it = iter(tensors)
        layout = iter(_layout(self._schema, params))
        pos: list = []
        kw: dict = {}
        for a in self._schema.args:
            if a.is_tensor:
                k = next(layout)
                if type(k) is tuple:  # Tensor?[]
                    v: Any = [None if e < 0 else next(it) for e in k]
                else:
                    v = None if k < 0 else next(it) if not a.is_tensor_list else \
                        [next(it) for _ in range(k)]
            else:
                v = params[a.name]
                v = list(v) if isinstance(v, tuple) and "[]" in a.type else v
            (kw.__setitem__(a.name, v) if a.kwarg_only else pos.append(v))
        return tuple(pos), kw

    def _mutated_indices(self, params: dict) -> list[int]:
        out, k = [], 0
        for a, n in zip([a for a in self._schema.args if a.is_tensor],
                        _layout(self._schema, params)):
            width = _width(a, n)
            if a.mutable:
                out.extend(range(k, k + width))
            k += width
        return out

    # ------------------------------------------------------------------ calling
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tr = _lazy.STATE.trace
        if tr is not None:
            if len(args) == self._replay_n and not kwargs and tr.__class__ is _Trace:
                # a kernel op on a cache hit of ember.compile: its recorded body, replayed
                # (_TRITON: the module, set when it is imported, as a triton_op needs it)
                got = _TRITON.replay(self, tr, args, self._fast[1])
                if got is not _SLOW:
                    return got
        elif not kwargs:
            sc = self._stable_call
            if sc is _UNRESOLVED:
                sc = self._resolve_stable_call()
            if sc is not None:
                got = sc(*args)  # NotImplemented: a tensor requires grad, or the arity differs
                if got is not NotImplemented:
                    return got
            elif self._fast_kernel is not None and len(args) == self._fast[0]:
                got = self._call_fast(args, self._fast[1])
                if got is not _SLOW:
                    return got
        values = self._bind_args(args, kwargs)
        if self._implicit:  # decomposes into its ember ops (autograd and tracing see them)
            pos, kw = self._unflatten(*self._flatten(values))
            return self._kernel()(*pos, **kw)
        tensors, params = self._flatten(values)
        if _lazy.STATE.trace is None:
            return self._call_eager(tensors, params)
        if self._triton:
            from ember.library import _triton
            if _triton.decomposes_now():  # ember.compile sees into a triton_op's body
                return _triton.call_decomposed(self, tensors, params)
        return self._call_traced(tensors, params)

    def _call_fast(self, args: tuple, tensor_pos: tuple) -> Any:
        """An eager call with every argument given positionally, no input requiring grad and
        nothing mutated: the kernel runs on the arguments as given (what binding, flattening
        and detaching would pass it), then the outputs' aliasing is checked.  ``_SLOW`` when
        the call needs the general path."""
        tensors = []
        for i in tensor_pos:
            t = args[i]
            if t.__class__ is not Tensor or t._requires_grad:
                return _SLOW
            tensors.append(t)
        kernel = self._fast_kernel
        sk = getattr(kernel, "stable_kernel", None)
        if sk is not None:  # an extension's boxed kernel: C, which checks its own results
            return sk.invoke(args, self._alias_error)
        st = _gm.STATE
        prev = st.grad_enabled
        st.grad_enabled = False
        _gm.GENERATION[0] += 1
        try:
            out = kernel(*args)
        finally:
            st.grad_enabled = prev
            _gm.GENERATION[0] += 1
        if out.__class__ is Tensor and self._single:
            self._check_aliasing(tensors, [out])
        else:
            self._check_aliasing(tensors, [r for r in self._returns(out)
                                           if isinstance(r, Tensor)])
        return out

    def _run_kernel(self, tensors: list, params: dict) -> Any:
        pos, kw = self._unflatten(tensors, params)
        saved = _lazy.STATE.trace
        _lazy.STATE.trace = None
        try:
            with _gm.no_grad():
                return self._kernel()(*pos, **kw)
        finally:
            _lazy.STATE.trace = saved

    def _returns(self, out: Any) -> list:
        if not self._schema.returns:
            return []
        if self._schema.returns_tuple:
            return list(out)
        return list(out) if self._schema.returns[0] == "Tensor[]" else [out]

    def _call_eager(self, tensors: list, params: dict) -> Any:
        out = self._run_kernel([t.detach() for t in tensors], params)
        rets = [r for r in self._returns(out) if isinstance(r, Tensor)]
        self._check_aliasing(tensors, rets)
        for i in self._mutated_indices(params):
            tensors[i]._version_counter[0] += 1
        if _gm.STATE.grad_enabled and rets:
            needs = tuple(t._requires_grad for t in tensors)
            if any(needs):
                _record(self._opdef, tuple(tensors), params, tuple(rets), needs)
        return out

    def _check_aliasing(self, tensors: list, rets: list) -> None:
        """Raise when a result is an input, or lies on an input's or an earlier result's
        storage (PyTorch compares storages: disjoint views of one buffer alias too)."""
        may, exact = np.may_share_memory, np.shares_memory
        seen = tensors
        for i, r in enumerate(rets):
            a = r._data
            root = a if a.base is None else _root(a)
            for t in seen:
                d = t._data
                if r is t or d is root:
                    self._alias_error()
                if d.base is not None:
                    d = _root(d)
                # may_share_memory compares bounds only: the exact (slower) test runs only
                # when the bounds overlap
                if d is root or (may(a, t._data) and exact(a, t._data)):
                    self._alias_error()
            if len(rets) > 1:
                seen = tensors + rets[:i + 1]

    def _alias_error(self) -> None:
        raise EmberRuntimeError(_ALIAS_MSG.format(
            name=self._name, mod=f"<module {self._init_fn.__module__!r}>"))

    def _call_traced(self, tensors: list, params: dict) -> Any:
        flat = _registry.bind(self._opdef, *tensors, **params)
        flat = (flat,) if isinstance(flat, Tensor) else tuple(flat)
        n = len(flat) - len(self._mutated_indices(params))
        for i, new in zip(self._mutated_indices(params), flat[n:]):
            with _gm.no_grad():
                tensors[i].copy_(new.detach())
        rets = list(flat[:n])
        if not self._schema.returns:
            return None
        if self._schema.returns_tuple:
            return tuple(rets)
        return rets if self._schema.returns[0] == "Tensor[]" else rets[0]

    # ------------------------------------------------------------------ OpDef rules
    def _meta(self, *tensors: Any, **params: Any) -> tuple:
        if self._fake is None:
            raise EmberRuntimeError(
                f"There was no fake impl registered for {self!r}. This is necessary for "
                "ember.compile/export/fx tracing to work. Please use "
                f"`{self._init_fn.__name__}.register_fake` to add an fake impl.")
        mode = FakeMode([tuple(t.shape) for t in tensors])
        with mode:
            fakes = [fake_tensor(tuple(t.shape), t.dtype) for t in tensors]
            pos, kw = self._unflatten(fakes, params)
            out = self._fake(*pos, **kw)
        specs = [(tuple(mode.size_of(d) for d in r.shape), r.dtype) for r in self._returns(out)]
        specs += [(tuple(tensors[i].shape), tensors[i].dtype)
                  for i in self._mutated_indices(params)]
        return specs[0] if self._single else tuple(specs)

    def _eager(self, *arrays: Any, **params: Any) -> tuple:
        from ember import dtypes as _dt
        mutated = set(self._mutated_indices(params))
        tensors = [_wrap(np.array(a, copy=True) if i in mutated else a, _dt._FROM_NP[a.dtype])
                   for i, a in enumerate(arrays)]
        out = self._run_kernel(tensors, params)
        rets = [r._data for r in self._returns(out)]
        if self._single:
            return rets[0]
        return tuple(rets + [tensors[i]._data for i in sorted(mutated)])

    def _vjp(self, ctx: Any, *grads: Any) -> tuple:
        if self._backward is None:
            raise EmberRuntimeError(f"Trying to backward through {self._namespace}."
                                    f"{self._name}.default but no autograd formula was "
                                    "registered. Please use register_autograd to add one.")
        tensors = list(ctx.inputs)
        n_ret = len(self._returns_spec(ctx.params, len(ctx.outputs)))
        outs = list(ctx.outputs[:n_ret])
        grads = tuple(g if g is not None else o.new_zeros(o.shape)
                      for g, o in zip(grads[:n_ret], outs))
        pos, kw = self._unflatten(tensors, ctx.params)
        uctx = _Ctx()
        uctx.needs_input_grad = self._arg_needs(ctx)
        output = self._pack(outs)
        if self._setup_context is not None:
            if kw:
                self._setup_context(uctx, pos, kw, output)
            else:
                self._setup_context(uctx, pos, output)
        if self._schema.returns == ("Tensor[]",) and not self._schema.returns_tuple:
            got = self._backward(uctx, list(grads))  # one list of grads, as PyTorch
        else:
            got = self._backward(uctx, *grads)
        got = got if isinstance(got, tuple) else (got,)
        return self._flat_grads(got, ctx.params)

    def _returns_spec(self, params: dict, n_out: int) -> range:
        return range(n_out - len(self._mutated_indices(params)))

    def _pack(self, outs: list) -> Any:
        if self._schema.returns_tuple:
            return tuple(outs)
        return outs if self._schema.returns[0] == "Tensor[]" else outs[0]

    def _arg_needs(self, ctx: Any) -> tuple:
        it = iter(ctx.needs_input_grad)
        out = []
        for a, n in zip(self._schema.args, _expand_layout(self._schema, ctx.params)):
            if a.is_tensor_list:
                out.append(any([next(it) for _ in range(_width(a, n))]))
            elif a.is_tensor and n >= 0:
                out.append(next(it))
            else:
                out.append(False)
        return tuple(out)

    def _flat_grads(self, got: tuple, params: dict) -> tuple:
        flat: list = []
        positional = [a for a in self._schema.args]
        for a, n, g in zip(positional, _expand_layout(self._schema, params), got):
            if a.is_tensor_list:
                width = _width(a, n)
                if type(n) is tuple and g is not None:  # Tensor?[]: the tensors' grads only
                    g = [x for x, e in zip(g, n) if e >= 0]
                flat.extend(g if g is not None else [None] * width)
            elif a.is_tensor and n >= 0:
                flat.append(g)
        return tuple(flat)


class _Ctx(FunctionCtx):
    """``setup_context`` runs when the backward runs, on the saved inputs and outputs (which
    autograd already keeps), so what it saves is kept as is."""

    def save_for_backward(self, *tensors: Any) -> None:
        self._saved = tensors


_SLOW = object()
_UNRESOLVED = object()


class _KernelTable(dict):
    """``CustomOpDef._kernels``: a dict that tells its op when it changes (the op caches the
    C fast call of its kernel)."""

    def __init__(self, op: CustomOpDef, table: dict) -> None:
        super().__init__(table)
        self._op = op

    def _changed(self) -> None:
        self._op._stable_call = _UNRESOLVED

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self._changed()

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        self._changed()

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self._changed()

    def pop(self, *args: Any) -> Any:
        try:
            return super().pop(*args)
        finally:
            self._changed()

    def popitem(self) -> Any:
        try:
            return super().popitem()
        finally:
            self._changed()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        try:
            return super().setdefault(key, default)
        finally:
            self._changed()

    def clear(self) -> None:
        super().clear()
        self._changed()

    def __ior__(self, other: Any) -> _KernelTable:
        self.update(other)
        return self
# schema types an argument of the fast path may have (no lists, no optional tensors)
_FAST_TYPES = frozenset({"Tensor", "SymInt", "int", "float", "bool", "str", "Scalar",
                         "ScalarType", "Device", "SymInt?", "int?", "float?", "bool?",
                         "str?", "ScalarType?", "Device?", "Scalar?"})


def _fast_plan(schema: Schema, mutated: tuple) -> tuple | None:
    """(argument count, positions of the tensors) for ``CustomOpDef._call_fast``; None when
    the op takes lists, optional tensors or keyword-only arguments, or mutates."""
    if mutated or any(a.kwarg_only or a.type not in _FAST_TYPES for a in schema.args):
        return None
    return len(schema.args), tuple(i for i, a in enumerate(schema.args) if a.type == "Tensor")


def _root(a: Any) -> Any:
    """The array that owns a view's memory."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _width(a: Any, n: Any) -> int:
    """How many flat tensors argument ``a`` with layout entry ``n`` holds."""
    if type(n) is tuple:
        return sum(1 for e in n if e >= 0)
    if a.is_tensor_list:
        return max(n, 0)
    return 0 if n < 0 else 1


def _layout(schema: Schema, params: dict) -> tuple:
    got = params.get("_layout")
    return got if got is not None else (0,) * sum(a.is_tensor for a in schema.args)


def _expand_layout(schema: Schema, params: dict) -> list:
    it = iter(_layout(schema, params))
    return [next(it) if a.is_tensor else -2 for a in schema.args]


def _signature_of(schema: Schema) -> inspect.Signature:
    ps = []
    for a in schema.args:
        kind = inspect.Parameter.KEYWORD_ONLY if a.kwarg_only else \
            inspect.Parameter.POSITIONAL_OR_KEYWORD
        ps.append(inspect.Parameter(a.name, kind, default=a.default))
    return inspect.Signature(ps)


def _split_name(qualname: str) -> tuple[str, str]:
    ns, sep, name = qualname.partition("::")
    if not sep or not ns or not name or "::" in name:
        raise ValueError(f"[custom_op] expected a name 'namespace::opname', got {qualname!r}")
    if not (ns.isidentifier() and name.isidentifier()):
        raise ValueError(f"[custom_op] namespace and op name must be identifiers, got "
                         f"{qualname!r}")
    return ns, name


def custom_op(name: str, fn: Callable | None = None, /, *, mutates_args: Iterable[str] | str,
              device_types: Any = None, schema: str | None = None, tags: Any = None) -> Any:
    """Wrap ``fn`` as an op ``ember.ops.<ns>.<name>`` (decorator when ``fn`` is omitted).

    >>> @custom_op("mylib::numpy_sin", mutates_args=())
    ... def numpy_sin(x: Tensor) -> Tensor:
    ...     return ember.from_numpy(np.sin(x.numpy()))
    >>> numpy_sin(ember.ones(2))      # doctest: +SKIP
    """
    from ember.library._schema import parse_schema

    def inner(f: Callable) -> CustomOpDef:
        ns, opname = _split_name(name)
        if schema is None:
            sch = infer(f, mutates_args)
        else:
            sch = parse_schema(schema, name)[1]
        op = CustomOpDef(ns, opname, sch, f, mutates_args)
        if device_types is not None:
            op._kernels = {None: _no_kernel(op)}
            op.register_kernel(device_types, f)
        return op

    return inner if fn is None else inner(fn)


def _no_kernel(op: CustomOpDef) -> Callable:
    def raise_(*a: Any, **k: Any) -> Any:
        raise EmberRuntimeError(f"[{op._qualname}] no kernel registered for device 'cpu'; "
                                "use register_kernel('cpu', fn)")
    return raise_


__all__ = ["CustomOpDef", "PACKETS", "custom_op"]

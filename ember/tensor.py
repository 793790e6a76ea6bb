"""The Tensor class and the binder that runs registry ops on it.

A Tensor holds metadata (dtype, requires_grad, grad_fn, version counter, view base) and a
payload: a NumPy array in eager mode (ARCHITECTURE.md §3).  Ops are defined in ``ember/ops`` and
exposed by the frontend modules in ``ember/_frontend``, which attach themselves as methods here
with ``tensor_method``.

Views share memory with their base through NumPy views and share its version counter (a one-item
list), so an in-place write through any of them is seen by autograd's saved-tensor checks.
"""

from __future__ import annotations

import builtins
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ember import _lazy
from ember import dtypes as _dt
from ember.autograd import grad_mode as _gm
from ember.autograd.graph import AccumulateGrad
from ember.config import config
from ember.device import CPU, check_device
from ember.dtypes import dtype as DType
from ember.errors import EmberRuntimeError, EmberTypeError, ShapeError
from ember.ops import _layout, _util
from ember.ops import registry as _registry
from ember.ops.registry import OpDef

_STATE = _gm.STATE
_LZ = _lazy.STATE
_LazyArray = _lazy.LazyArray
_Trace = _lazy.Trace


class Size(tuple):
    """A tensor's shape: a tuple of ints (``ember.Size([2, 3])``)."""

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"ember.Size([{', '.join(str(s) for s in self)}])"

    def __getitem__(self, item: Any) -> Any:
        r = tuple.__getitem__(self, item)
        return Size(r) if isinstance(item, slice) else r

    def __add__(self, other: Any) -> Size:
        return Size(tuple.__add__(self, tuple(other)))


class Tensor:
    """An n-dimensional array with autograd (``ember.tensor([1., 2.])``)."""

    # Hot attributes live in slots; the rest default to these class attributes and are set
    # per instance (in ``__dict__``) only when they change, which keeps creating a tensor cheap.
    __slots__ = ("_data", "_dtype", "_version_counter", "__weakref__", "__dict__")
    _requires_grad = False
    grad: Tensor | None = None
    grad_fn: Any = None
    _output_nr = 0
    _base: Tensor | None = None
    _accum: Any = None
    _retains_grad = False
    _hooks: Any = None
    _is_param = False
    _inference = False

    # -------------------------------------------------------------------- construction
    def __new__(cls, *args: Any, **kwargs: Any) -> Tensor:
        return object.__new__(cls)

    def __init__(self, *args: Any, dtype: DType | None = None, device: Any = None) -> None:
        """``ember.Tensor(data)`` or ``ember.Tensor(*sizes)``: a default-dtype tensor, as in
        PyTorch (prefer ``ember.tensor`` / ``ember.empty``)."""
        check_device(device, "Tensor")
        d = dtype or _dt.get_default_dtype()
        if len(args) == 1 and isinstance(args[0], np.ndarray):
            arr = np.asarray(args[0], dtype=d.np)
        elif len(args) == 1 and not isinstance(args[0], (int, np.integer)):
            arr = np.array(_to_nested(args[0]), dtype=d.np)
        else:
            if not all(isinstance(a, (int, np.integer)) for a in args):
                raise EmberTypeError(f"[Tensor] expected sizes or data, got {args!r}")
            arr = np.zeros(tuple(int(a) for a in args), dtype=d.np)
        _init(self, arr, d)

    @staticmethod
    def _zeros(shape: tuple, dtype: DType) -> Tensor:
        if any(type(s) is not int and not isinstance(s, np.integer) for s in shape):
            # symbolic sizes (export): a recorded broadcast of 0, not an array
            from ember.ops.shape import CLONE, EXPAND
            zero = _wrap(np.zeros((), dtype=dtype.np), dtype)
            return _registry.bind(CLONE, _registry.bind(EXPAND, zero, shape=tuple(shape)),
                                  contiguous=True)
        return _wrap(np.zeros(shape, dtype=dtype.np), dtype)

    @staticmethod
    def _from_array(arr: np.ndarray, dtype: DType | None = None) -> Tensor:
        return _wrap(arr, _dt.from_numpy_dtype(arr.dtype) if dtype is None else dtype)

    # -------------------------------------------------------------------- metadata
    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_util.wrap_dim(dim, self._data.ndim, "size")]

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def device(self) -> Any:
        return CPU

    @property
    def is_cpu(self) -> bool:
        return True

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def layout(self) -> str:
        return "strided"

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    ndimension = dim

    def numel(self) -> int:
        return self._data.size

    nelement = numel

    def element_size(self) -> int:
        return self._dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self._data.size * self._dtype.itemsize

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_complex(self) -> bool:
        return False

    def is_signed(self) -> bool:
        return self._dtype.is_signed

    def stride(self, dim: int | None = None) -> Any:
        item = self._dtype.itemsize
        st = tuple(s // item for s in self._data.strides)
        # views carry PyTorch's exact geometry (the view kernels build it); fresh arrays get
        # PyTorch's strides for their size-1/empty dims, which NumPy leaves unspecified
        if self._base is None and (self._data.size == 0 or 1 in self._data.shape):
            st = _layout.canonical_strides(self._data.shape, st)
        if dim is None:
            return st
        return st[_util.wrap_dim(dim, self._data.ndim, "stride")]

    def is_contiguous(self, memory_format: Any = _dt.contiguous_format) -> bool:
        shape, strides = self._data.shape, self.stride()
        name = getattr(memory_format, "name", "contiguous_format")
        if name in ("channels_last", "channels_last_3d"):
            rank = 4 if name == "channels_last" else 5
            if len(shape) != rank:
                return False
            order = (0, *range(2, rank), 1)  # N, spatial..., C
            shape, strides = tuple(shape[i] for i in order), tuple(strides[i] for i in order)
        return _layout.is_contiguous(shape, strides)

    def storage_offset(self) -> int:
        if self._data.__class__ is _LazyArray:
            return _lazy.storage_offset(self)
        return _layout.storage_offset(self._data)

    def data_ptr(self) -> int:
        if self._data.__class__ is _LazyArray:
            _lazy.need_values(self, "Tensor.data_ptr()")
        return int(self._data.__array_interface__["data"][0])

    def untyped_storage(self) -> _StorageView:
        return _StorageView(self)

    @property
    def _version(self) -> int:
        return self._version_counter[0]

    @property
    def _is_view(self) -> bool:
        return self._base is not None

    def is_inference(self) -> bool:
        return self._inference

    # -------------------------------------------------------------------- autograd state
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self.grad_fn is not None:
            raise EmberRuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        if value and not self._dtype.is_floating_point:
            raise EmberRuntimeError(
                f"only Tensors of floating point dtype can require gradients (got {self._dtype!r})"
            )
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def data(self) -> Tensor:
        t = _wrap(self._data, self._dtype)
        t._version_counter = self._version_counter
        return t

    @data.setter
    def data(self, other: Tensor) -> None:
        self._data = other._data
        self._dtype = other._dtype
        if self._data.__class__ is _LazyArray:  # realized with the trace like other payloads
            self._data.trace.register_tensor(self)

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def detach(self) -> Tensor:
        """A tensor sharing memory (and version counter) with this one, outside the graph."""
        t = _wrap(self._data, self._dtype)
        t._version_counter = self._version_counter
        return t

    def detach_(self) -> Tensor:
        self.grad_fn = None
        self._requires_grad = False
        return self

    def _accumulator(self) -> AccumulateGrad:
        acc = self._accum
        if acc is None:
            acc = self._accum = AccumulateGrad(self)
        return acc

    def _grad_edge(self) -> tuple:
        if self._base is not None:
            refresh_view(self)
        if self.grad_fn is not None:
            return (self.grad_fn, self._output_nr)
        return (self._accumulator(), 0)

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor after backward."""
        if self.grad_fn is None:
            if not self._requires_grad:
                raise EmberRuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return
        if self._retains_grad:
            return
        self._retains_grad = True
        import weakref
        ref = weakref.ref(self)

        def _store(grad: Tensor) -> None:
            t = ref()
            if t is None or grad is None:
                return
            g = grad.detach()
            t.grad = g.clone() if t.grad is None else t.grad + g

        self.grad_fn._add_tensor_pre_hook(self._output_nr, _RetainHook(_store))

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> Any:
        """Call ``hook(grad)`` when this tensor's gradient is computed; a returned tensor
        replaces the gradient."""
        if not self._requires_grad:
            raise EmberRuntimeError(
                "cannot register a hook on a tensor that doesn't require gradient"
            )
        if self.grad_fn is None:
            return self._accumulator().register_prehook(_LeafHook(hook))
        return self.grad_fn._add_tensor_pre_hook(self._output_nr, hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> Any:
        if self.grad_fn is not None:
            raise EmberRuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors"
            )
        acc = self._accumulator()
        if acc._post_acc_hooks is None:
            acc._post_acc_hooks = []
        from ember.autograd.graph import _RemovableHandle
        acc._post_acc_hooks.append(hook)
        return _RemovableHandle(acc._post_acc_hooks, hook)

    def backward(self, gradient: Tensor | None = None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs: Sequence[Tensor] | None = None) -> None:
        """Accumulate d(self)/d(leaf) into each leaf's ``.grad``."""
        _engine.backward([self], None if gradient is None else [gradient], retain_graph,
                         create_graph, inputs=inputs)

    # -------------------------------------------------------------------- Python protocol
    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise EmberTypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if self._data.ndim == 0:
            raise EmberTypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        if self._data.__class__ is _LazyArray:
            _lazy.need_values(self, "bool() of a tensor (data-dependent control flow)")
        if self._data.size != 1:
            what = "no values" if self._data.size == 0 else "more than one value"
            raise EmberRuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
        return bool(self._data.reshape(()))

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number."""
        if self._data.__class__ is _LazyArray:
            _lazy.need_values(self, "Tensor.item()")
        elif self._data.__class__ is not np.ndarray:  # export's FakeArray: an unbacked SymInt
            hook = getattr(type(self._data), "ember_item", None)
            v = hook(self._data, self) if hook is not None else NotImplemented
            if v is not NotImplemented:
                return v
        if self._data.size != 1:
            raise EmberRuntimeError(
                f"[item] a Tensor with {self._data.size} elements cannot be converted to Scalar"
            )
        v = self._data.reshape(())
        if self._dtype.is_floating_point:
            return builtins.float(v)
        if self._dtype is _dt.bool:
            return builtins.bool(v)
        return builtins.int(v)

    def __float__(self) -> float:
        return builtins.float(self.item())

    def __int__(self) -> int:
        return builtins.int(self.item())

    def __index__(self) -> int:
        if self._dtype.is_floating_point or self._data.size != 1:
            raise EmberTypeError(
                "only integer tensors of a single element can be converted to an index"
            )
        return builtins.int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def tolist(self) -> Any:
        """Nested Python lists of Python numbers."""
        if self._data.__class__ is _LazyArray:
            _lazy.need_values(self, "Tensor.tolist()")
        a = self._data
        if self._dtype in (_dt.float16, _dt.bfloat16):
            a = a.astype(np.float32)
        return a.tolist()

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The NumPy array sharing this tensor's memory."""
        if self._data.__class__ is _LazyArray:
            _lazy.need_values(self, "Tensor.numpy()")
        if self._requires_grad and not force:
            raise EmberRuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead."
            )
        return self._data

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self._data.__class__ is _LazyArray:
            _lazy.need_values(self, "NumPy conversion of a tensor (__array__)")
        a = self._data
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        if copy:
            return a.copy()
        return a

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        if self._data.__class__ is _LazyArray:
            _lazy.need_values(self, "Tensor.__dlpack__()")
        if self._dtype is _dt.bfloat16:
            raise EmberTypeError("[__dlpack__] bfloat16 tensors cannot be exported through DLPack "
                                 "by NumPy; convert with .float() first")
        kwargs: dict = {"stream": stream}
        if max_version is not None:
            kwargs["max_version"] = max_version
        if dl_device is not None:
            kwargs["dl_device"] = dl_device
        if copy is not None:
            kwargs["copy"] = copy
        return self._data.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)

    def __repr__(self) -> str:
        if self._data.__class__ is _LazyArray:
            _lazy.need_values(self, "printing a tensor")
        from ember._tensor_str import tensor_repr
        return tensor_repr(self)

    def __str__(self) -> str:
        return self.__repr__()

    def __format__(self, spec: str) -> str:
        if self._data.ndim == 0 and spec:
            return format(self.item(), spec)
        return self.__repr__()

    def __reduce_ex__(self, protocol: int) -> Any:
        if self._data.__class__ is _LazyArray:
            _lazy.need_values(self, "pickling a tensor")
        return (_rebuild, (np.ascontiguousarray(self._data), self._dtype.name,
                           self._requires_grad))

    def __deepcopy__(self, memo: dict) -> Tensor:
        if self._data.__class__ is _LazyArray:
            _lazy.need_values(self, "deepcopy of a tensor")
        if self.grad_fn is not None:
            raise EmberRuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment."
            )
        t = _wrap(self._data.copy(), self._dtype)
        t._requires_grad = self._requires_grad
        if self.grad is not None:
            t.grad = self.grad.__deepcopy__(memo)
        if type(self) is not Tensor:
            t.__class__ = type(self)
        t.__dict__.update({k: v for k, v in self.__dict__.items()})
        memo[id(self)] = t
        return t


class _RetainHook:
    """Marks the pre-hook that ``retain_grad`` installs; the engine runs it after user hooks."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def __call__(self, grad: Tensor) -> None:
        self.fn(grad)


class _LeafHook:
    """Adapts a tensor hook to the AccumulateGrad pre-hook signature."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def __call__(self, grads: tuple) -> tuple | None:
        (g,) = grads
        r = self.fn(g)
        return None if r is None else (r,)

    def __eq__(self, other: object) -> bool:
        return other is self or other is self.fn

    __hash__ = object.__hash__


class _StorageView:
    """The untyped storage a tensor views (compared by data pointer)."""

    def __init__(self, t: Tensor) -> None:
        if t._data.__class__ is _LazyArray:
            _lazy.need_values(t, "Tensor.untyped_storage()")
        root = _layout.storage_root(t._data)
        self._root = root
        self._ptr = int(root.__array_interface__["data"][0])
        self._nbytes = root.nbytes

    def data_ptr(self) -> int:
        return self._ptr

    def nbytes(self) -> int:
        return self._nbytes

    def size(self) -> int:
        return self._nbytes

    def __len__(self) -> int:
        return self._nbytes


def _rebuild(arr: np.ndarray, dtype_name: str, requires_grad: bool) -> Tensor:
    t = _wrap(arr, _dt.by_name(dtype_name))
    t._requires_grad = requires_grad
    return t


def _to_nested(obj: Any) -> Any:
    if isinstance(obj, Tensor):
        return obj._data
    if isinstance(obj, (list, tuple)):
        return [_to_nested(o) for o in obj]
    return obj


# ------------------------------------------------------------------------ fast construction
_new = object.__new__


def _init(t: Tensor, arr: np.ndarray, dtype: DType) -> None:
    t._data = arr
    t._dtype = dtype
    t._version_counter = [0]
    if _STATE.inference:
        t._inference = True


def _wrap(arr: np.ndarray, dtype: DType) -> Tensor:
    """A new leaf Tensor around ``arr`` (no copy)."""
    t = _new(Tensor)
    _init(t, arr, dtype)
    if arr.__class__ is _LazyArray:
        if arr.value is not None:
            t._data = arr.value
        else:
            arr.trace.register_tensor(t)
    return t


# ------------------------------------------------------------------------ the binder
# ``bind`` (the installed binder) is ``ember._bind_fast.bind``, re-exported below
def _eager_bind(op: OpDef, inputs: tuple, params: dict) -> Any:
    check = config.check_meta
    # the fast paths run unless check_meta asks for the general path (check_fast_paths off);
    # under check_meta their results are checked as the general path's are (check_results)
    fast = not check or config.check_fast_paths
    pointwise = op.kind == "pointwise"
    if pointwise and not params and fast and op.num_outputs == 1:
        if len(inputs) == 2:
            t = _eager_pointwise(op, inputs[0], inputs[1])
            if check:
                check_results(op, inputs, params, (t,))
            return t
        if len(inputs) == 1 and isinstance(inputs[0], Tensor):
            t = _eager_unary(op, inputs[0])
            if check:
                check_results(op, inputs, params, (t,))
            return t
    if pointwise and fast:
        spec = None  # the output dtype is read off the kernel's result
        op.check_dtypes(inputs, params)
    else:
        spec = op.meta(*inputs, **params)
    n = len(inputs)
    if n == 1:  # the common unary and binary cases without a list
        a = inputs[0]
        out = op.eager(a._data if isinstance(a, Tensor) else a, **params)
    elif n == 2:
        a, b = inputs
        out = op.eager(a._data if isinstance(a, Tensor) else a,
                       b._data if isinstance(b, Tensor) else b, **params)
    else:
        out = op.eager(*[x._data if isinstance(x, Tensor) else x for x in inputs], **params)
    single = op.num_outputs == 1
    if single:
        if spec is not None and op.kind != "view":
            # _make_output, inlined for the frequent one-output, non-view op
            dtype = spec[1]
            if out.__class__ is not np.ndarray and not isinstance(out, np.ndarray):
                out = np.asarray(out, dtype=dtype.np)
            t = _new(Tensor)
            t._data = out
            t._dtype = dtype
            t._version_counter = [0]
            if _STATE.inference:
                t._inference = True
            results: tuple = (t,)
        else:
            results = (_make_output(out, spec, op, inputs),)
    else:
        results = tuple(_make_output(o, s, op, inputs) for o, s in zip(out, spec))
    if _STATE.grad_enabled and op.vjp is not None:
        if n == 1:
            x = inputs[0]
            if isinstance(x, Tensor) and x._requires_grad:
                _record(op, inputs, params, results, (True,))
        else:
            for x in inputs:
                if isinstance(x, Tensor) and x._requires_grad:
                    needs = tuple([isinstance(y, Tensor) and y._requires_grad for y in inputs])
                    _record(op, inputs, params, results, needs)
                    break
    if check:
        check_results(op, inputs, params, results, spec)
    return results[0] if single else results


def _make_output(arr: Any, spec: tuple | None, op: OpDef, inputs: tuple) -> Tensor:
    if spec is None:
        if not isinstance(arr, np.ndarray):
            arr = np.asarray(arr)
        dtype = _dt._FROM_NP[arr.dtype]
    else:
        shape, dtype = spec
        if not isinstance(arr, np.ndarray):
            arr = np.asarray(arr, dtype=dtype.np)
    t = _new(Tensor)
    t._data = arr
    t._dtype = dtype
    if op.kind == "view":
        src = inputs[0]
        vc = t._version_counter = src._version_counter
        t._base = src if src._base is None else src._base
        t._view_version = vc[0]
    else:
        t._version_counter = [0]
    if _STATE.inference:
        t._inference = True
    return t


def _lazy_bind(tr: _lazy.Trace, op: OpDef, inputs: tuple, params: dict) -> Any:
    """Record ``op`` in the trace ``tr``: outputs get lazy payloads (ARCHITECTURE.md §4)."""
    if "data_dependent" in op.tags:
        tr.graph_break(f"{op.name} has an output shape that depends on the data")
        return _eager_bind(op, inputs, params)
    for x in inputs:
        if x.__class__ in (list, tuple) and any(isinstance(y, Tensor) for y in x):
            tr.graph_break(f"{op.name} takes a nested list of tensors")
            return _eager_bind(op, inputs, params)
    hit = None
    if tr.known is not None:  # an earlier call recorded this graph: follow it (no meta)
        ref_of = tr.ref_of
        hit = tr.match(op, tuple([ref_of(x) if isinstance(x, Tensor) else x for x in inputs]),
                       params)
    if hit is not None:
        refs, specs = hit
    else:
        spec = op.meta(*inputs, **params)
        specs = (spec,) if op.num_outputs == 1 else tuple(spec)
        for shape, _ in specs:
            if None in shape:
                tr.graph_break(f"{op.name} has an output shape that depends on the data")
                return _eager_bind(op, inputs, params)
        ref_of = tr.ref_of
        args = tuple([ref_of(x) if isinstance(x, Tensor) else x for x in inputs])
        refs = tr.add_node(op, args, params, specs)
    view = op.kind == "view"
    if view:
        src = inputs[0]
        vc = src._version_counter
        g_in, owner = tr.frame(src)
        sp = src._data
        sver = sp.sver if sp.__class__ is _LazyArray else vc[0]
        shadows = op.eager(g_in, **params)
        if op.num_outputs == 1:
            shadows = (shadows,)
        base = src if src._base is None else src._base
    results = []
    inference = _STATE.inference
    # outputs that get no autograd node are held by the trace (``Trace.hold``: one entry per
    # output instead of two weak references), as the binder's follow path holds them
    held = not view and not (_STATE.grad_enabled and op.vjp is not None and any(
        isinstance(x, Tensor) and x._requires_grad for x in inputs))
    for k, (ref, (shape, dtype)) in enumerate(zip(refs, specs)):
        t = _new(Tensor)
        t._dtype = dtype
        npd = dtype.np
        if held:
            t._version_counter = vcn = [0]
            t._data = _LazyArray(tr, ref, tuple(shape), npd, None, None, vcn, 0)
            tr.hold(t)
            if inference:
                t._inference = True
            results.append(t)
            continue
        if view:
            t._version_counter = vc
            t._base = base
            t._view_version = vc[0]
            sh = shadows[k]
            if sh.dtype == npd and tuple(sh.shape) == tuple(shape):
                la = tr.lazy(ref, tuple(shape), npd, sh, owner, vc, sver)
            else:  # a reinterpreting view: its value is its own (aliasing is not tracked)
                la = tr.lazy(ref, tuple(shape), npd, None, None, vc, sver)
        else:
            t._version_counter = vcn = [0]
            la = tr.lazy(ref, tuple(shape), npd, None, None, vcn, 0)
        t._data = la
        tr.register_tensor(t)
        if inference:
            t._inference = True
        results.append(t)
    results_t = tuple(results)
    if _STATE.grad_enabled and op.vjp is not None:
        for x in inputs:
            if isinstance(x, Tensor) and x._requires_grad:
                needs = tuple(isinstance(y, Tensor) and y._requires_grad for y in inputs)
                _record(op, inputs, params, results_t, needs)
                for r in results_t:  # compiled autograd: backward over it is recorded too
                    if r.grad_fn is not None:
                        r.grad_fn._compiled_by = tr.owner
                        break
                break
    return results_t[0] if op.num_outputs == 1 else results_t


def refresh_view(view: Tensor) -> None:
    """Give a view whose storage was written in place since it was made (through another view
    or its base) a grad_fn that reads its base's current history, as PyTorch regenerates it."""
    made = view.__dict__.get("_view_version")
    if made is None or made == view._version_counter[0]:
        return
    base = view._base
    view._view_version = view._version_counter[0]
    if not (base._requires_grad and view._dtype.is_floating_point):
        return
    from ember._frontend.inplace import AsStridedViewBackward, _geometry
    view.grad_fn = AsStridedViewBackward(base._grad_edge(), _geometry(view, base),
                                         tuple(base._data.shape))
    view._output_nr = 0
    view._requires_grad = True


# the binder and its fast paths (a module of their own; they use the names above)
from ember._bind_fast import _eager_pointwise, _eager_unary, _record, bind  # noqa: E402,I001
from ember._meta_check import check_results  # noqa: E402

_registry.install_binder(bind)
from ember.autograd import engine as _engine  # noqa: E402

_engine.Tensor, _engine._wrap = Tensor, _wrap


# ------------------------------------------------------------------------ methods
def tensor_method(*names: str) -> Callable[[Callable], Callable]:
    """Attach a frontend function as ``Tensor.<name>`` for each name."""
    def deco(fn: Callable) -> Callable:
        for n in names:
            setattr(Tensor, n, fn)
        return fn
    return deco


def as_tensor_arg(x: Any, op: str) -> Tensor:
    """Check that ``x`` is a Tensor, naming the op otherwise."""
    if isinstance(x, Tensor):
        return x
    raise EmberTypeError(f"[{op}] expected a Tensor, got {type(x).__name__}")


def check_same_shape(op: str, a: Tensor, b: Tensor) -> None:
    if a.shape != b.shape:
        raise ShapeError(f"[{op}] shapes {tuple(a.shape)} and {tuple(b.shape)} differ")

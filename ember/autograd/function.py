"""``autograd.Function``: user-defined forward/backward pairs.

Both PyTorch styles work: ``forward(ctx, *args)`` and ``forward(*args)`` with
``setup_context(ctx, inputs, output)``.  ``ctx`` supports ``save_for_backward`` (with the
in-place version check), ``saved_tensors``, ``needs_input_grad``, ``mark_dirty``,
``mark_non_differentiable`` and ``set_materialize_grads``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from ember import _lazy
from ember.autograd import grad_mode as _gm
from ember.autograd.graph import Node, SavedTensor
from ember.errors import EmberRuntimeError


class FunctionCtx:
    """The ``ctx`` passed to a Function's forward/setup_context and backward."""

    def __init__(self) -> None:
        self._saved: tuple = ()
        self._dirty: tuple = ()
        self._non_diff: tuple = ()
        self.materialize_grads = True
        self.needs_input_grad: tuple = ()
        self._node_name = "Function"
        self._outputs_ids: set[int] = set()

    def save_for_backward(self, *tensors: Any) -> None:
        self._to_save = tensors

    def mark_dirty(self, *tensors: Any) -> None:
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors: Any) -> None:
        self._non_diff = tensors

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)

    @property
    def saved_tensors(self) -> tuple:
        out = []
        for s in self._saved:
            if isinstance(s, SavedTensor):
                out.append(s.unpack())
            elif s is _FREED_MARK:
                SavedTensor.unpack(_FreedSaved())
            else:
                out.append(s)
        return tuple(out)


class _FreedSaved:
    tensor = None


_FREED_MARK = object()


class BackwardCFunction(Node):
    """The graph node of one ``Function.apply`` call."""

    __slots__ = ("fn_cls", "ctx", "_out_specs", "_n_args", "_in_dtypes")

    def __init__(self, fn_cls: type, ctx: FunctionCtx, edges: tuple, out_specs: list,
                 n_args: int, in_dtypes: tuple = ()) -> None:
        super().__init__(edges, len(out_specs))
        self.fn_cls = fn_cls
        self.ctx = ctx
        self._out_specs = out_specs
        self._n_args = n_args
        self._in_dtypes = in_dtypes  # a gradient is cast to its input's dtype, as in PyTorch

    def name(self) -> str:
        return f"{self.fn_cls.__name__}Backward"

    def apply(self, grads: tuple, create_graph: bool) -> tuple:
        from ember.tensor import Tensor
        ctx = self.ctx
        grads = list(grads)
        if ctx.materialize_grads:
            for i, g in enumerate(grads):
                if g is None and self._out_specs[i] is not None:
                    shape, d = self._out_specs[i]
                    grads[i] = Tensor._zeros(shape, d)
        result = self.fn_cls.backward(ctx, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) < self._n_args:
            raise EmberRuntimeError(
                f"function {self.name()} returned an incorrect number of gradients (expected "
                f"{self._n_args}, got {len(result)})"
            )
        extra = result[self._n_args:]
        if any(r is not None for r in extra):
            raise EmberRuntimeError(
                f"function {self.name()} returned an incorrect number of gradients (expected "
                f"{self._n_args}, got {len(result)})"
            )
        result = result[: self._n_args]
        if self._in_dtypes:
            result = tuple(r.to(d) if isinstance(r, Tensor) and d is not None and r._dtype is not d
                           and r._dtype.is_floating_point else r
                           for r, d in zip(result, self._in_dtypes))
        return tuple(result)

    def release(self) -> None:
        self.ctx._saved = tuple(_FREED_MARK if isinstance(s, SavedTensor) else s
                                for s in self.ctx._saved)


class _FunctionMeta(type):
    def __init__(cls, name: str, bases: tuple, ns: dict) -> None:
        super().__init__(name, bases, ns)


class Function(metaclass=_FunctionMeta):
    """Subclass with static ``forward`` and ``backward``; call ``MyFn.apply(*args)``."""

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        raise NotImplementedError

    @classmethod
    def _uses_setup_context(cls) -> bool:
        return cls.setup_context is not Function.setup_context

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        from ember.tensor import Tensor
        ctx = FunctionCtx()
        ctx._to_save = ()
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx.needs_input_grad = needs
        with _gm.no_grad():
            if cls._uses_setup_context():
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        is_tuple = isinstance(output, tuple)
        outs = list(output) if is_tuple else [output]
        record = _gm.STATE.grad_enabled and any(needs)
        dirty_ids = {id(t) for t in ctx._dirty}
        non_diff_ids = {id(t) for t in ctx._non_diff}
        arg_ids = {id(a) for a in args if isinstance(a, Tensor)}
        for i, o in enumerate(outs):
            # an input returned unchanged becomes a new alias, so its own grad_fn is kept
            if isinstance(o, Tensor) and id(o) in arg_ids and id(o) not in dirty_ids:
                alias = o.detach()
                alias._version_counter = o._version_counter
                outs[i] = alias
        if record:
            edges = tuple(a._grad_edge() if n else None for a, n in zip(args, needs))
            specs = [(o._data.shape, o._dtype) if isinstance(o, Tensor) else None for o in outs]
            in_dtypes = tuple(a._dtype if isinstance(a, Tensor) and a._dtype.is_floating_point
                              else None for a in args)
            node = BackwardCFunction(cls, ctx, edges, specs, len(args), in_dtypes)
            tr = _lazy.STATE.trace
            if tr is not None:  # recorded in compiled code: compiled autograd covers it
                node._compiled_by = tr.owner
            for i, o in enumerate(outs):
                if not isinstance(o, Tensor):
                    continue
                if id(o) in dirty_ids and o.grad_fn is None and o.requires_grad:
                    raise EmberRuntimeError(
                        "a leaf Variable that requires grad is being used in an in-place "
                        "operation."
                    )
                if id(o) in non_diff_ids or not o.dtype.is_floating_point:
                    o._requires_grad = False
                    continue
                o._requires_grad = True
                o.grad_fn = node
                o._output_nr = i
        out_ids = {id(o) for o in outs if isinstance(o, Tensor)}
        saved = []
        for t in ctx._to_save:
            if t is None:
                saved.append(None)
            elif isinstance(t, Tensor):
                saved.append(SavedTensor(t, f"{cls.__name__}Backward", id(t) in out_ids))
            else:
                raise EmberRuntimeError(
                    f"save_for_backward can only save variables, but argument is of type "
                    f"{type(t).__name__}"
                )
        ctx._saved = tuple(saved)
        return tuple(outs) if is_tuple else outs[0]


def once_differentiable(fn: Callable) -> Callable:
    """Run a backward with grad disabled (its result cannot be differentiated again)."""
    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        with _gm.no_grad():
            return fn(ctx, *args)
    return wrapper

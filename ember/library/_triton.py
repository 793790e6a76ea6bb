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

from typing import Any, Callable, Iterable

from ember import _lazy
from ember.autograd import grad_mode as _gm
from ember.errors import EmberRuntimeError
from ember.library._custom_op import CustomOpDef, custom_op
from ember.tensor import Tensor, _record

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
    graph nodes; an autograd formula registered on the op is recorded around them."""
    pos, kw = op._unflatten([t.detach() for t in tensors], params)
    with _gm.no_grad():
        out = op._kernel()(*pos, **kw)
    rets = [r for r in op._returns(out) if isinstance(r, Tensor)]
    for i in op._mutated_indices(params):
        tensors[i]._version_counter[0] += 1
    if _gm.STATE.grad_enabled and rets:
        needs = tuple(t._requires_grad for t in tensors)
        if any(needs):
            if op._backward is None:
                raise EmberRuntimeError(f"[{op._qualname}] an input requires grad but no "
                                        "autograd formula was registered "
                                        "(register_autograd)")
            _record(op.opdef, tuple(tensors), params, tuple(rets), needs)
    return out


def decomposes_now() -> bool:
    """True under ``ember.compile``'s recorder (not export's, not a fake impl's)."""
    return isinstance(_lazy.STATE.trace, _lazy.Trace)


__all__ = ["TRITON_OPS", "TraceableKernel", "kernel_op", "triton_op", "wrap_kernel",
           "wrap_triton"]

"""Kernel launches under ``ember.compile``/``ember.export`` (and inside fake impls).

A launch whose tensors are being recorded becomes one ``kernel_launch`` node: its inputs are
the launch's tensors, its params the kernel (the ``JITFunction``), the grid and the other
arguments, its outputs the new values of the tensors the kernel stores to (functional form, as
PyTorch's ``triton_kernel_wrapper_functional``); each stored tensor is then written back with
``copy_`` (which the compiler folds into the node's output).  The C backend lowers the node to
a ``UserKernel`` (``ember/compiler/c/lower/kernel_op.py``): the kernel's own C inside the
graph's translation unit.  Its ``eager`` rule (the interpreter or the kernel's library) runs
it where no C lowering applies and in an ``ExportedProgram``.  The grid and the int/float
arguments are numbers a graph may lift (sizes under dynamic shapes: ``SymInt``s under export,
runtime ``Sym``s in a size-generic compiled graph); the rest of the params is structure.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import _lazy
from ember.autograd import grad_mode as _gm
from ember.kernel._jit import Arg
from ember.ops import registry as _registry
from ember.ops.registry import OpDef


def is_tracing(bound: list) -> bool:
    """True when the launch must be recorded instead of run."""
    if _lazy.STATE.trace is not None:
        return True
    return any(a.kind == "tensor" and not isinstance(a.value._data, np.ndarray) for a in bound)


def _fresh(t: Any) -> bool:
    """``t`` holds an uninitialized array (``empty``/``empty_like``) no graph has read."""
    from ember._frontend.creation import UNINITIALIZED
    d = t._data
    return isinstance(d, np.ndarray) and UNINITIALIZED.get(id(d)) is d and \
        t._base is None and d.flags.c_contiguous


def _params(jf: Any, bound: list, grid: tuple) -> tuple[dict, list]:
    """The node's params: ``args`` (each argument's name, kind and what a compiled kernel is
    specialized on: a tensor's dtype, a constexpr's value; structure, never lifted), the int
    and float arguments' values ``scalars`` and the ``grid`` (numbers a graph may lift to
    runtime values: sizes under dynamic shapes), ``outs`` (the stored tensors' positions),
    ``fresh`` (those made uninitialized by the traced code) and ``fresh_specs`` (their shapes
    and dtypes)."""
    stored = jf.stored_params()
    tensors = [a for a in bound if a.kind == "tensor"]
    args = tuple((a.name, a.kind, a.dtype_name if a.kind == "tensor" else
                  a.value if a.kind == "constexpr" else None) for a in bound)
    scalars = tuple(a.value for a in bound if a.kind in ("int", "float"))
    outs = tuple(k for k, a in enumerate(tensors) if a.name in stored)
    fresh = tuple(k for k in outs if _fresh(tensors[k].value)
                  and isinstance(_lazy.STATE.trace, _lazy.Trace))
    specs = tuple((tuple(tensors[k].value.shape), tensors[k].dtype_name) for k in fresh)
    inputs = [a.value for k, a in enumerate(tensors) if k not in fresh]
    return {"kernel": jf, "grid": tuple(grid), "args": args, "scalars": scalars, "outs": outs,
            "fresh": fresh, "fresh_specs": specs}, inputs


def record_launch(jf: Any, bound: list, grid: tuple) -> None:
    """Record the launch as a ``kernel_launch`` node; each stored tensor then holds the new
    value: an uninitialized one made in the compiled function simply becomes the node's output
    (no copy in, no write-back), any other is written with ``copy_``."""
    tensors = [a.value for a in bound if a.kind == "tensor"]
    params, inputs = _params(jf, bound, grid)
    if not params["outs"]:
        return  # a kernel that stores nothing has no effect
    fresh = params["fresh"]
    with _gm.no_grad():
        flat = _registry.bind(KERNEL_LAUNCH, *[t.detach() for t in inputs], **params)
        flat = (flat,) if not isinstance(flat, (tuple, list)) else flat
        for k, new in zip(params["outs"], flat):
            if k in fresh:
                t = tensors[k]
                t._data = new._data
                new._data.trace.register_tensor(t)
            else:
                tensors[k].copy_(new)


def bound_of(args: tuple, scalars: tuple) -> list:
    """The launch's ``Arg``s from a node's ``args`` and ``scalars`` params (tensors as their
    dtype names)."""
    it = iter(scalars)
    return [Arg(n, k, next(it) if k in ("int", "float") else v) for n, k, v in args]


def full_operands(inputs: tuple, fresh: tuple, specs: tuple, make: Any) -> list:
    """Every tensor operand in order: the node's inputs with ``make(shape, dtype)`` for each
    fresh (uninitialized) one."""
    by_k = dict(zip(fresh, specs))
    it = iter(inputs)
    return [make(*by_k[k]) if k in by_k else next(it) for k in range(len(inputs) + len(fresh))]


def _meta(*tensors: Any, kernel: Any, grid: tuple, args: tuple, scalars: tuple, outs: tuple,
          fresh: tuple = (), fresh_specs: tuple = ()) -> tuple:
    from ember import dtypes as _dt
    ops = full_operands(tensors, fresh, fresh_specs,
                        lambda shape, dt: (shape, _dt.by_name(dt)))
    return tuple((tuple(o[0]), o[1]) if isinstance(o, tuple) else (tuple(o.shape), o.dtype)
                 for o in (ops[k] for k in outs))


def _eager(*arrays: Any, kernel: Any, grid: tuple, args: tuple, scalars: tuple, outs: tuple,
           fresh: tuple = (), fresh_specs: tuple = ()) -> tuple:
    from ember import dtypes as _dt
    arrs = full_operands(arrays, fresh, fresh_specs,
                         lambda shape, dt: np.empty(shape, _dt.by_name(dt).np))
    arrs = [np.array(a, copy=True) if k in outs and k not in fresh else a
            for k, a in enumerate(arrs)]
    kernel.run_arrays(bound_of(args, scalars), tuple(grid), arrs)
    return tuple(arrs[k] for k in outs)


KERNEL_LAUNCH = OpDef(
    name="kernel_launch", kind="extern", meta=_meta, eager=_eager, num_outputs=0,
    tags=frozenset({"nondifferentiable"}),
    # structure (a change is another graph); ``grid``, ``scalars`` and ``fresh_specs`` hold
    # the numbers a graph lifts to runtime values (sizes under dynamic shapes)
    static_params=frozenset({"kernel", "args", "outs", "fresh"}),
    doc="one launch of an ember.kernel @jit kernel; outputs: the tensors it stores to")
_registry.REGISTRY.setdefault(KERNEL_LAUNCH.name, KERNEL_LAUNCH)

__all__ = ["KERNEL_LAUNCH", "bound_of", "is_tracing", "record_launch"]

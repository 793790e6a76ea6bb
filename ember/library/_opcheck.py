"""``opcheck``: test a custom op's registrations against each other (PyTorch's names)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember.autograd import grad_mode as _gm
from ember.errors import EmberRuntimeError
from ember.library._custom_op import CustomOpDef
from ember.tensor import Tensor

DEFAULT_TEST_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor",
                      "test_aot_dispatch_dynamic")

# ember.compile, installed by the package root (layer 6) so this layer need not import it
COMPILE: list[Callable] = []


class OpCheckError(EmberRuntimeError):
    """An ``opcheck`` test failed (``raise_exception=True``)."""


class MetadataMismatchError(EmberRuntimeError):
    """The fake impl's shapes/dtypes differ from the real kernel's."""


def _clone(x: Any) -> Any:
    if isinstance(x, Tensor):
        r = x.detach().clone()
        r.requires_grad_(x.requires_grad)
        return r
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(y) for y in x)
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _tensors(x: Any) -> list:
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in _tensors(y)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


def _name(op: CustomOpDef) -> str:
    return f"{op._namespace}.{op._name}.default"


def _test_schema(op: CustomOpDef, args: tuple, kwargs: dict) -> None:
    args, kwargs = _clone((args, kwargs))
    values = op._bind_args(args, kwargs)
    before = {k: v.detach().clone() for k, v in values.items() if isinstance(v, Tensor)}
    with _gm.no_grad():
        op(*args, **kwargs)
    for a in op._schema.args:
        if a.name in before and not a.mutable:
            old, new = before[a.name].numpy(), values[a.name].detach().numpy()
            if not np.array_equal(old, new, equal_nan=True):
                raise EmberRuntimeError(f"Argument {a.name} is not defined as mutable but was "
                                        "mutated")


def _test_autograd_registration(op: CustomOpDef, args: tuple, kwargs: dict) -> None:
    args, kwargs = _clone((args, kwargs))
    if not any(t.requires_grad for t in _tensors((args, kwargs))):
        return
    if op._backward is None and getattr(op._init_fn, "_ember_legacy", False):
        raise AssertionError(
            f"{op._qualname}: at least one output of this operator has requires_grad=True but "
            "the operator does not have an autograd kernel defined at an autograd key (e.g. "
            "DispatchKey::Autograd). This could mean that you have incorrectly registered an "
            "autograd kernel to a non-Autograd DispatchKey, which may lead to silently incorrect "
            "results. If your operator consists of regular PyTorch operations, consider not "
            "using an operator at all or registering your operator as "
            "CompositeImplicitAutograd.")


def _test_faketensor(op: CustomOpDef, args: tuple, kwargs: dict) -> None:
    args, kwargs = _clone((args, kwargs))
    tensors, params = op._flatten(op._bind_args(args, kwargs))
    specs = op.opdef.meta(*tensors, **params)
    specs = (specs,) if op._single else specs
    with _gm.no_grad():
        real = op(*args, **kwargs)
    outs = _tensors(real) + [tensors[i] for i in op._mutated_indices(params)]
    for (shape, dtype), r in zip(specs, outs):
        rs = tuple(r.shape)
        if len(shape) != len(rs) or any(s is not None and s != q for s, q in zip(shape, rs)):
            raise MetadataMismatchError(
                f"When comparing the output of {_name(op)} on FakeTensor and concrete Tensors, "
                f"found mismatched tensor metadata: Shapes ember.Size({list(rs)}) and "
                f"ember.Size({list(shape)}) are not equal!")
        if dtype != r.dtype:
            raise MetadataMismatchError(
                f"When comparing the output of {_name(op)} on FakeTensor and concrete Tensors, "
                f"found mismatched tensor metadata: Dtypes {r.dtype} and {dtype} are not equal!")


def _run(fn: Callable, args: tuple, kwargs: dict, grads: bool) -> tuple:
    out = fn(*args, **kwargs)
    outs = _tensors(out)
    got = []
    if grads:
        leaves = [t for t in _tensors((args, kwargs)) if t.requires_grad]
        diff = [o for o in outs if o.requires_grad]
        if diff and leaves:
            total = sum((o.float().sum() for o in diff[1:]), diff[0].float().sum())
            total.backward()
            got = [t.grad for t in leaves]
    return outs + _tensors((args, kwargs)), got


def _test_aot_dispatch_dynamic(op: CustomOpDef, args: tuple, kwargs: dict) -> None:
    if not COMPILE:
        raise EmberRuntimeError("[opcheck] ember.compile is not available")
    grads = op._backward is not None
    a1, k1 = _clone((args, kwargs))
    a2, k2 = _clone((args, kwargs))
    eager, eg = _run(op, a1, k1, grads)
    compiled, cg = _run(COMPILE[0](lambda *a, **k: op(*a, **k), dynamic=True), a2, k2, grads)
    for what, xs, ys in (("output or mutated input", eager, compiled), ("gradient", eg, cg)):
        for i, (x, y) in enumerate(zip(xs, ys)):
            if (x is None) != (y is None) or x is not None and (
                    x.shape != y.shape or x.dtype != y.dtype or not np.allclose(
                        x.detach().numpy(), y.detach().numpy(), rtol=1.3e-6, atol=1e-5,
                        equal_nan=True)):
                raise EmberRuntimeError(
                    f"[opcheck] {_name(op)}: under ember.compile, {what} {i} differs from "
                    "eager; the fake impl, the autograd formula or the kernel depends on "
                    "something the compiled graph does not see")


_TESTS = {"test_schema": _test_schema, "test_autograd_registration": _test_autograd_registration,
          "test_faketensor": _test_faketensor,
          "test_aot_dispatch_dynamic": _test_aot_dispatch_dynamic}


def opcheck(op: Any, args: tuple, kwargs: dict | None = None, *,
            test_utils: str | tuple = DEFAULT_TEST_UTILS,
            raise_exception: bool = True, atol: float | None = None,
            rtol: float | None = None) -> dict[str, Any]:
    """Check a custom op's schema, autograd registration, fake impl and compiled behaviour on
    sample ``args``; returns ``{test_name: "SUCCESS" or the exception}``.

    >>> opcheck(numpy_sin, (ember.randn(3),))     # doctest: +SKIP
    {'test_schema': 'SUCCESS', 'test_autograd_registration': 'SUCCESS', ...}
    """
    if not isinstance(op, CustomOpDef):
        raise ValueError(f"opcheck(op, ...): op must be a custom op (CustomOpDef or "
                         f"ember.ops.<ns>.<name>), got {type(op).__name__}")
    kwargs = {} if kwargs is None else kwargs
    utils = (test_utils,) if isinstance(test_utils, str) else tuple(test_utils)
    for u in utils:
        if u not in _TESTS:
            raise ValueError(f"opcheck(op, ...): got test_utils={u!r}; expected a subset of "
                             f"{DEFAULT_TEST_UTILS}")
    results: dict[str, Any] = {}
    for u in utils:
        try:
            _TESTS[u](op, args, kwargs)
            results[u] = "SUCCESS"
        except Exception as e:  # noqa: BLE001 (each failure is reported, as PyTorch does)
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {u} failed with {e} (scroll up for "
                                   "stack trace)") from e
            results[u] = e
    return results


__all__ = ["DEFAULT_TEST_UTILS", "MetadataMismatchError", "OpCheckError", "opcheck"]

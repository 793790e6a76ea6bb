"""The structure of a module's inputs: binding to ``forward``'s argument names, flattening to
tensor leaves with their paths, and matching a ``dynamic_shapes`` spec to them."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from ember._dynamo.exc import UserError, UserErrorType
from ember.tensor import Tensor


def bind_arguments(mod: Any, args: tuple, kwargs: dict) -> dict:
    """``{argument name: value}`` of ``mod.forward(*args, **kwargs)`` (positional names for the
    args, ``*args`` entries as ``args_<k>``)."""
    fn = mod.forward if hasattr(mod, "forward") else mod
    try:
        sig = inspect.signature(fn)
        bound = sig.bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"[export] the example inputs do not match forward's signature: {e}"
                        ) from None
    out: dict = {}
    for name, value in bound.arguments.items():
        kind = sig.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            for k, v in enumerate(value):
                out[f"{name}_{k}"] = v
        elif kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        else:
            out[name] = value
    return out


def map_tensors(x: Any, fn: Callable[[Tensor], Any]) -> Any:
    if isinstance(x, Tensor):
        return fn(x)
    if isinstance(x, (tuple, list)):
        return type(x)(map_tensors(v, fn) for v in x)
    if isinstance(x, dict):
        return {k: map_tensors(v, fn) for k, v in x.items()}
    return x


@dataclass
class Leaf:
    """One tensor among the inputs."""

    name: str     # placeholder name: x, xs_0, d_a
    path: str     # inputs['x'], inputs['xs'][0]
    local: str    # L['x'], L['xs'][0] (PyTorch's source in violations)
    guard: str    # x, xs[0] (PyTorch's source in module() guards)
    tensor: Tensor
    spec: Any     # the tensor's raw dynamic_shapes entry (dict, tuple, None)


def _spec_child(spec: Any, key: Any, path: str) -> Any:
    if spec is None:
        return None
    try:
        return spec[key]
    except (KeyError, IndexError, TypeError):
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"[export] the dynamic_shapes spec at {path} does not have the structure "
                        f"of the inputs (no entry {key!r}); use None for static inputs") from None


def flatten(named: dict, spec: Any) -> list[Leaf]:
    """Tensor leaves of the named inputs with their specs (``spec``: None, a dict by argument
    name, or a tuple/list over the arguments in order)."""
    if spec is not None and not isinstance(spec, (dict, tuple, list)):
        raise UserError(UserErrorType.INVALID_INPUT,
                        "[export] dynamic_shapes must be a dict (by argument name), a tuple or "
                        f"list (by position) or None, got {type(spec).__name__}")
    if isinstance(spec, (tuple, list)):
        if len(spec) != len(named):
            raise UserError(UserErrorType.INVALID_INPUT,
                            "Detected mismatch between the structure of `inputs` and "
                            f"`dynamic_shapes`: `inputs` has {len(named)} elements, but "
                            f"`dynamic_shapes` has {len(spec)} elements")
        spec = dict(zip(named, spec))
    if isinstance(spec, dict):
        if set(spec) != set(named):
            raise UserError(UserErrorType.INVALID_INPUT,
                            "When `dynamic_shapes` is specified as a dict, its top-level keys "
                            f"must be the arg names {list(named)} of `inputs`, but here they are "
                            f"{list(spec)}. Alternatively, you could also ignore arg names "
                            "entirely and specify `dynamic_shapes` as a list/tuple matching "
                            "`inputs`.")
    out: list[Leaf] = []
    for name, value in named.items():
        s = spec.get(name) if isinstance(spec, dict) else None
        _walk(value, s, name, f"['{name}']", f"{name}", out)
    return out


def _walk(x: Any, spec: Any, name: str, sub: str, guard: str, out: list) -> None:
    if isinstance(x, Tensor):
        out.append(Leaf(name, f"inputs{sub}", f"L{sub}", guard, x, spec))
        return
    if isinstance(x, (tuple, list)):
        if spec is not None and not isinstance(spec, (tuple, list)):
            raise UserError(UserErrorType.INVALID_INPUT,
                            f"[export] expected a tuple or list as the spec of inputs{sub}, got "
                            f"{spec!r}")
        for k, v in enumerate(x):
            _walk(v, _spec_child(spec, k, f"inputs{sub}"), f"{name}_{k}", f"{sub}[{k}]",
                  f"{guard}[{k}]", out)
        return
    if isinstance(x, dict):
        for k, v in x.items():
            _walk(v, _spec_child(spec, k, f"inputs{sub}"), f"{name}_{k}", f"{sub}['{k}']",
                  f"{guard}['{k}']", out)
        return
    if spec is not None:
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"[export] inputs{sub} is a {type(x).__name__}, not a tensor: its "
                        f"dynamic_shapes entry must be None, got {spec!r}")


def structure(x: Any) -> Any:
    """The pytree structure of ``x`` (tensors as ``"T"``, other leaves kept as constants)."""
    if isinstance(x, Tensor):
        return "T"
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, tuple(structure(v) for v in x))
    if isinstance(x, dict):
        return ("dict", tuple((k, structure(v)) for k, v in x.items()))
    return ("const", x)


def leaves(x: Any) -> list:
    """The tensors of ``x`` in the order ``flatten`` visits them."""
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in leaves(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in leaves(v)]
    return []


def unflatten(struct: Any, it: Any) -> Any:
    if struct == "T":
        return next(it)
    kind, body = struct
    if kind == "const":
        return body
    if kind == "dict":
        return {k: unflatten(s, it) for k, s in body}
    vals = [unflatten(s, it) for s in body]
    return tuple(vals) if kind == "tuple" else vals


def skeleton(struct: Any) -> Any:
    """A :func:`structure` with constants' values dropped: where tensors and constants sit,
    which two calls must share (a constant's value is checked separately)."""
    if struct == "T":
        return "T"
    kind, body = struct
    if kind == "const":
        return "const"
    if kind == "dict":
        return ("dict", tuple((k, skeleton(v)) for k, v in body))
    return (kind, tuple(skeleton(v) for v in body))

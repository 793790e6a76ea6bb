"""Run every OpDef's ``meta`` on symbolic shapes taken from the OpInfo samples (ember-only).

``record_calls()`` runs the OpInfo table eagerly (forward and backward) with a spy binder and
keeps, per OpDef, a few distinct primitive calls with their real output shapes.
``run_symbolic(call)`` replays one call's meta on ``FakeTensor``s whose dims >= 2 are fresh
symbols (hint = the real size) and returns the outcome: the meta's output shapes with the
hints substituted (to compare with the real shapes) and the guards it recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import ember
from ember.ops import registry
from ember.sym import FakeTensor, ShapeEnv, SymInt, substitute

CALLS_PER_OP = 4


@dataclass
class Call:
    op: Any
    inputs: tuple          # shapes/dtypes as ("T", shape, dtype); other args as they were
    params: dict
    out_shapes: list       # real output shapes


@dataclass
class Outcome:
    op: str
    ok: bool
    symbolic: bool = False  # some output dim is still a SymInt
    guards: list = field(default_factory=list)
    error: str = ""
    shapes: list = field(default_factory=list)   # the meta's (symbolic) output shapes
    env: ShapeEnv | None = None


def _describe(x: Any) -> Any:
    if isinstance(x, ember.Tensor):
        return ("T", tuple(x.shape), x.dtype)
    if isinstance(x, (list, tuple)) and any(isinstance(v, ember.Tensor) for v in x):
        return type(x)(_describe(v) for v in x)
    return x


def _key(call_inputs: tuple, params: dict) -> str:
    return repr((call_inputs, sorted(params.items(), key=lambda kv: kv[0])))


def _shapes(out: Any) -> list:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [tuple(o.shape) if isinstance(o, ember.Tensor) else None for o in outs]


def core_op_names(names: Any) -> set[str]:
    """ember's own OpDefs among ``names``: not users' custom ops (``ns.name.default``, which
    tests define while the session runs) and not ``kernel_launch`` (a launch of a user's
    ``@ember.kernel.jit`` function, registered when ember.kernel first records one; its shape
    rule is the kernel's stores, tested in tests/kernel)."""
    return {n for n in names if "." not in n and n != "kernel_launch"}


def record_calls() -> dict[str, list[Call]]:
    from tests.opinfo import ALL_OPINFOS
    from tests.opinfo.core import to_ember

    calls: dict[str, list[Call]] = {}
    keys: set[str] = set()
    inner = registry._binder

    def spy(op, inputs, params):  # noqa: ANN001, ANN202
        out = inner(op, inputs, params)
        desc = tuple(_describe(x) for x in inputs)
        k = op.name + _key(desc, params)
        if k not in keys and len(calls.get(op.name, ())) < CALLS_PER_OP:
            keys.add(k)
            calls.setdefault(op.name, []).append(Call(op, desc, dict(params), _shapes(out)))
        return out

    registry.install_binder(spy)
    try:
        for info in ALL_OPINFOS:
            if not info.dtypes:
                continue
            d = "float32" if "float32" in info.dtypes else info.dtypes[0]
            for sample in info.samples(d, info.rng(d)):
                grad = [isinstance(a, np.ndarray) and a.dtype.kind == "f" and info.grad
                        and sample.grad for a in sample.args]
                args = [to_ember(a, g) for a, g in zip(sample.args, grad)]
                try:
                    out = info.fn(ember, *args, **sample.kwargs)
                except Exception:  # noqa: BLE001 (samples that raise on purpose)
                    continue
                outs = out if isinstance(out, (tuple, list)) else [out]
                outs = [o for o in outs if isinstance(o, ember.Tensor) and o.requires_grad]
                if outs:
                    ember.autograd.backward([o.sum() for o in outs])
    finally:
        registry.install_binder(inner)
    return calls


def _fake(x: Any, env: ShapeEnv, counter: list) -> Any:
    if isinstance(x, tuple) and len(x) == 3 and x[0] == "T":
        dims = []
        for n in x[1]:
            dims.append(env.create_symbol(n, f"in{counter[0]}.shape[{len(dims)}]"))
        counter[0] += 1
        return FakeTensor(dims, x[2])
    if isinstance(x, (list, tuple)):
        return type(x)(_fake(v, env, counter) for v in x)
    return x


# params that carry sizes (which export passes as SymInts when they come from input shapes)
SIZE_PARAMS = frozenset({"shape", "input_shape", "weight_shape", "in_size", "sizes",
                         "num_weights"})


def _dims_by_hint(fakes: list) -> dict:
    seen: dict[int, list] = {}
    for f in fakes:
        for t in (f if isinstance(f, (list, tuple)) else (f,)):
            if isinstance(t, FakeTensor):
                for d in t.shape:
                    if isinstance(d, SymInt):
                        seen.setdefault(d.hint(), []).append(d)
    return {h: ds[0] for h, ds in seen.items() if len(ds) == 1}


def _symbolize(v: Any, by_hint: dict) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return by_hint.get(v, v)
    if isinstance(v, tuple):
        return tuple(_symbolize(x, by_hint) for x in v)
    return v


def run_symbolic(call: Call, symbolic_params: bool = False) -> Outcome:
    """Replay ``call``'s meta on symbolic inputs; with ``symbolic_params``, size-carrying
    params (``SIZE_PARAMS``) use the input's symbol wherever their value is the hint of
    exactly one input dim (as ``x.view(x.shape[1], -1)`` does under export)."""
    env = ShapeEnv()
    counter = [0]
    fakes = [_fake(x, env, counter) for x in call.inputs]
    params = dict(call.params)
    if symbolic_params:
        by_hint = _dims_by_hint(fakes)
        if not by_hint and isinstance(params.get("shape"), tuple):  # creation ops: own symbols
            params["shape"] = tuple(env.create_symbol(n, f"shape[{i}]")
                                    for i, n in enumerate(params["shape"]))
        params = {k: _symbolize(v, by_hint) if k in SIZE_PARAMS else v
                  for k, v in params.items()}
    try:
        spec = call.op.meta(*fakes, **params)
    except Exception as e:  # noqa: BLE001 (reported, and checked against the expected table)
        return Outcome(call.op.name, False, error=f"{type(e).__name__}: {e}"[:300])
    specs = spec if call.op.num_outputs != 1 else (spec,)
    shapes = [s[0] for s in specs]
    symbolic = any(isinstance(d, SymInt) for s in shapes if s is not None for d in s)
    got = [None if s is None else tuple(substitute(tuple(s), None)) for s in shapes]
    for g, want in zip(got, call.out_shapes):
        if g is None or want is None:
            continue
        if len(g) != len(want) or any(
                not (a is None or isinstance(a, SymInt) or a == b) for a, b in zip(g, want)):
            return Outcome(call.op.name, False, symbolic, list(env.guards),
                           f"shape mismatch: symbolic meta gave {g}, eager {want}")
    return Outcome(call.op.name, True, symbolic, list(env.guards), shapes=shapes, env=env)


def _array(x: Any, values: dict) -> Any:
    if isinstance(x, FakeTensor):
        shape = tuple(int(substitute(d, values)) for d in x.shape)
        return np.zeros(shape, x.dtype.np)
    if isinstance(x, (list, tuple)):
        return type(x)(_array(v, values) for v in x)
    return x


def check_other_sizes(call: Call, out: Outcome, bump: int = 3) -> str | None:
    """For a guard-free symbolic outcome: run the eager kernel on zero-filled inputs whose
    symbolic dims are ``hint + bump`` and compare its shapes with the meta's expressions at
    those sizes.  Returns None when they agree, "skip" when the kernel refuses the inputs
    (e.g. a singular matrix), else the mismatch."""
    env = ShapeEnv()
    fakes = [_fake(x, env, [0]) for x in call.inputs]
    values = {s: v + bump for s, v in env.var_to_val.items()}
    redo = call.op.meta(*fakes, **call.params)
    if env.guards:
        return "skip"
    specs = redo if call.op.num_outputs != 1 else (redo,)
    try:
        arrays = [_array(f, values) for f in fakes]
        res = call.op.eager(*arrays, **call.params)
    except Exception:  # noqa: BLE001 (inputs the kernel refuses: nothing to compare)
        return "skip"
    res = res if call.op.num_outputs != 1 else (res,)
    for (shape, _), arr in zip(specs, res):
        if shape is None or any(getattr(d, "hint", lambda: 0)() is None for d in shape):
            continue
        want = tuple(np.shape(arr))
        got = tuple(int(substitute(d, values)) for d in shape)
        if got != want:
            return f"at sizes {values}: meta {got} ({shape}), eager {want}"
    return None

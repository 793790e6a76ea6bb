"""Property-based fuzzing of ``ember.compile`` (eager backend) against eager ember.

Hypothesis draws small random programs (``fuzz_programs.run_program``: pointwise ops with
broadcasting and scalars, reductions, views, in-place writes on inputs, intermediates and views,
matmul, cat/stack, softmax/layer_norm, random ops, ``.item()``/``bool()`` breaks, tensors kept in
a list that outlives the call) and random inputs (float32/float64/int64, contiguous, transposed
or strided, requiring grad, aliasing each other).  Each program runs eagerly on one copy of the
inputs and compiled on another; the two must agree on returned values, shapes, strides, dtypes,
version counters and autograd flags, the inputs afterwards (write-backs), the kept list, memory
sharing after the call (a write into each returned tensor is seen by the same tensors), and
gradients (``backward`` inside the compiled function or after it).  Each program is compiled
twice on the same sizes (cache hit) and on grown sizes (the dynamic path).

Bugs this found are minimized in ``test_fuzz_regressions.py``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import ember

from .fuzz_programs import OPS, make_inputs, run_program

# Strides of results are not compared (STRIDES = False): a lazy result of a pointwise op is
# C-contiguous while eager keeps the memory order of a non-contiguous input, so such results and
# views of them differ in strides (test_fuzz_regressions.test_pointwise_layout_*, xfail).
STRIDES = False
DTYPES = (ember.float32, ember.float64, ember.int64)

_shape = st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple)
_input = st.tuples(_shape, st.sampled_from(DTYPES), st.sampled_from(("c", "t", "s")),
                   st.booleans(), st.booleans())
_step = st.tuples(st.sampled_from(OPS), st.integers(0, 10_000), st.integers(0, 10_000),
                  st.integers(0, 10_000))

PROGRAM = st.fixed_dictionaries({
    "inputs": st.lists(_input, min_size=1, max_size=3),
    "prog": st.lists(_step, min_size=1, max_size=int(os.environ.get("EMBER_FUZZ_STEPS", "16"))),
    "nret": st.integers(1, 4),
    "ret_input": st.booleans(),
    "backward": st.sampled_from(("none", "inside", "outside")),
    "seed": st.integers(0, 2**16),
})


def _make_fn(p: dict, keep: list):
    prog, nret, seed = p["prog"], p["nret"], p["seed"]

    def program(*inputs):
        pool, scalars = run_program(prog, list(inputs), keep, seed)
        ret = pool[len(inputs):][-nret:]
        if p["ret_input"]:
            ret = [inputs[0]] + ret
        if p["backward"] == "inside":
            _backward(ret)
        return tuple(ret) + (tuple(scalars),)

    return program


def _backward(ret: list) -> None:
    loss = None
    for r in ret:
        if r.requires_grad and r.dtype.is_floating_point:
            s = r.sum().to(ember.float64)
            loss = s if loss is None else loss + s
    if loss is not None:
        loss.backward()


def _outcome(fn, args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - compared between eager and compiled
        return None, e


def _same_tensor(a, b, what: str, strides: bool = True) -> None:
    assert isinstance(b, ember.Tensor), what
    assert a.shape == b.shape, f"{what}: shape {a.shape} vs {b.shape}"
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} vs {b.dtype}"
    # strides: see test_fuzz_regressions.test_pointwise_on_view_layout_then_view (xfail): a
    # lazy pointwise result is C-contiguous while eager keeps its input's memory order
    if strides and a.numel() > 1:
        assert a.stride() == b.stride(), f"{what}: stride {a.stride()} vs {b.stride()}"
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=what)
    assert a._version == b._version, f"{what}: version {a._version} vs {b._version}"
    assert a.requires_grad == b.requires_grad, what
    assert (a.grad_fn is None) == (b.grad_fn is None), f"{what}: grad_fn"
    assert a.is_leaf == b.is_leaf, f"{what}: is_leaf"
    assert (a.grad is None) == (b.grad is None), f"{what}: grad presence"
    if a.grad is not None:
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy(), err_msg=f"{what}.grad")


def _same(a, b, what: str) -> None:
    if isinstance(a, ember.Tensor):
        _same_tensor(a, b, what, strides=STRIDES)
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), what
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{what}[{i}]")
    else:
        assert a == b or (a != a and b != b), f"{what}: {a!r} vs {b!r}"


def _poke(tensors: list) -> list:
    """Write a distinct value into each tensor's memory (aliasing check after the call); the
    exception types of the writes that raised."""
    errs = []
    with ember.no_grad():
        for k, t in enumerate(tensors):
            if not isinstance(t, ember.Tensor) or t.dtype == ember.bool:
                continue
            try:
                t.detach().add_(k + 1)
            except RuntimeError as e:
                errs.append((k, type(e)))
    return errs


def check_program(p: dict, grow: int = 0, compiled=None) -> None:
    keep_e: list = []
    keep_c: list = []
    eager_fn = _make_fn(p, keep_e)
    comp = compiled if compiled is not None else ember.compile(_make_fn(p, keep_c))
    if compiled is not None:
        keep_c = compiled.keep
    xs_e = make_inputs(p["inputs"], p["seed"], grow)
    xs_c = make_inputs(p["inputs"], p["seed"], grow)
    keep_c.clear()
    re, ee = _outcome(eager_fn, xs_e)
    rc, ec = _outcome(comp, xs_c)
    if ee is not None or ec is not None:
        assert type(ee) is type(ec), f"eager raised {ee!r}, compiled raised {ec!r}"
        return
    _same(re, rc, "outputs")
    _same(xs_e, xs_c, "inputs")
    _same(keep_e, keep_c, "kept")
    _same(ember.random.get_rng_state().numpy().tolist(), ember.random.get_rng_state()
          .numpy().tolist(), "rng")
    if p["backward"] == "outside":
        be = _outcome(_backward, (list(re[:-1]),))[1]
        bc = _outcome(_backward, (list(rc[:-1]),))[1]
        assert type(be) is type(bc), f"backward: eager {be!r}, compiled {bc!r}"
        _same(xs_e, xs_c, "inputs after backward")
    # memory sharing: a write into each returned tensor shows up in the same places
    pe = _poke(list(re[:-1]) + keep_e + xs_e)
    pc = _poke(list(rc[:-1]) + keep_c + xs_c)
    assert pe == pc, f"writes after the call: eager raised {pe}, compiled {pc}"
    for what, a, b in (("outputs", re, rc), ("kept", keep_e, keep_c), ("inputs", xs_e, xs_c)):
        for i, (x, y) in enumerate(zip(a, b)):
            if isinstance(x, ember.Tensor):
                np.testing.assert_array_equal(x.detach().numpy(), y.detach().numpy(),
                                              err_msg=f"after writes: {what}[{i}]")


class _Compiled:
    """One compiled program reused across calls (cache hits, dynamic sizes)."""

    def __init__(self, p: dict) -> None:
        self.keep: list = []
        self.fn = ember.compile(_make_fn(p, self.keep))

    def __call__(self, *args):
        return self.fn(*args)


# EMBER_FUZZ_EXAMPLES / EMBER_FUZZ_STEPS / EMBER_FUZZ_RANDOM=1 (fresh random programs) for
# longer local hunts; the default is deterministic and takes ~15 s
@settings(max_examples=int(os.environ.get("EMBER_FUZZ_EXAMPLES", "2000")), deadline=None,
          derandomize=not os.environ.get("EMBER_FUZZ_RANDOM"), database=None,
          report_multiple_bugs=False,
          # (no "explain" phase: its sys.settrace tracer has crashed the interpreter in a GC)
          phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
          suppress_health_check=list(HealthCheck))
@given(PROGRAM)
def test_fuzz_compiled_matches_eager(p):
    ember.compiler.reset()
    c = _Compiled(p)
    check_program(p, compiled=c)
    check_program(p, compiled=c)          # cache hit
    check_program(p, grow=1, compiled=c)  # new sizes: recompile with dynamic sizes
    check_program(p, grow=2, compiled=c)  # served by the dynamic graph
    check_program(p, grow=0, compiled=c)


@pytest.fixture(autouse=True)
def _reset():
    ember.compiler.reset()
    yield
    ember.compiler.reset()

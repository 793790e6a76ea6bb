"""Compiled (eager backend) equals eager over the whole OpInfo table, forward and backward.

Both sides run the same NumPy kernels, so values must agree exactly (NaNs in the same places);
random ops draw from the same Philox stream when seeded alike.  Ops whose output shape depends
on data graph-break and run eagerly, which must give the same answer too.  Cases, samples, float
arguments and gradients come from ``tests/opinfo/harness.py``; every case checks a sample.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from tests.opinfo import harness
from tests.opinfo.core import to_ember

CASES = harness.cases("fwd")
GRAD_CASES = harness.cases("grad")


def _same(a, b, what, values=True):
    if isinstance(a, ember.Tensor) and not values:  # uninitialized memory (empty*)
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), what
    elif isinstance(a, ember.Tensor):
        assert isinstance(b, ember.Tensor), what
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), what
        x, y = a.detach().numpy(), b.detach().numpy()
        if a.dtype.is_floating_point:
            x, y = x.astype(np.float64), y.astype(np.float64)
            assert np.array_equal(x, y, equal_nan=True), f"{what}: max diff {np.nanmax(abs(x-y))}"
        else:
            assert np.array_equal(x, y), what
    elif isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b), what
        for i, (p, q) in enumerate(zip(a, b)):
            _same(p, q, f"{what}[{i}]", values)
    else:
        assert a == b or (a != a and b != b), what


def _check_values(op, dtype, sample):
    want = harness.call(op, sample, [to_ember(a) for a in sample.args])
    ember.compiler.reset()

    def fn(*args, _op=op, _s=sample):
        return harness.call(_op, _s, args)

    got = ember.compile(fn, backend="eager")(*[to_ember(a) for a in sample.args])
    _same(got, want, f"{op.name}[{dtype}] {sample!r}", "empty" not in op.name)
    return True


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{o.name}-{d}" for o, d in CASES])
def test_compiled_values_equal_eager(op, dtype):
    harness.run_case("fwd", op, dtype, lambda sample, pos: _check_values(op, dtype, sample))


def _check_grads(op, sample, pos):
    """False when no output requires grad (nothing to compare)."""
    want = harness.grads(op, sample, [to_ember(a, i in pos) for i, a in enumerate(sample.args)],
                         pos)
    ember.compiler.reset()

    def fn(*args, _op=op, _s=sample, _p=pos):
        return harness.grads(_op, _s, list(args), _p)

    got = ember.compile(fn, backend="eager")(
        *[to_ember(a, i in pos) for i, a in enumerate(sample.args)])
    if want is None:
        assert got is None, f"{op.name}: compiled gave gradients, eager none"
        return False
    assert len(got) == len(want), f"{op.name}: {len(got)} vs {len(want)} gradients"
    for i, (g, w) in enumerate(zip(got, want)):
        if w is None:
            assert g is None, f"{op.name} grad[{i}]"
        else:
            _same(g, w, f"{op.name} grad[{i}] {sample!r}")
    return True


@pytest.mark.parametrize("op,dtype", GRAD_CASES, ids=[f"{o.name}-{d}" for o, d in GRAD_CASES])
def test_compiled_grads_equal_eager(op, dtype):
    harness.run_case("grad", op, dtype, lambda sample, pos: _check_grads(op, sample, pos))

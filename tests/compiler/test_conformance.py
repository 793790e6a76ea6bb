"""Compiled (eager backend) equals eager over the whole OpInfo table, forward and backward.

Both sides run the same NumPy kernels, so values must agree exactly (NaNs in the same places);
random ops draw from the same Philox stream when seeded alike.  Ops whose output shape depends
on data graph-break and run eagerly, which must give the same answer too.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from tests.opinfo import ALL_OPINFOS
from tests.opinfo.core import to_ember

CASES = [(op, d) for op in ALL_OPINFOS for d in op.dtypes]
GRAD_CASES = [(op, d) for op in ALL_OPINFOS if op.grad for d in op.grad_dtypes]


def _same(a, b, what, values=True):
    if isinstance(a, ember.Tensor) and not values:  # uninitialized memory (empty*)
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), what
    elif isinstance(a, ember.Tensor):
        assert isinstance(b, ember.Tensor), what
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), what
        x, y = a.detach().numpy(), b.detach().numpy()
        if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
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


def _call(op, sample, args):
    ember.manual_seed(1234)
    return op.fn(ember, *args, **sample.kwargs)


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{o.name}-{d}" for o, d in CASES])
def test_compiled_values_equal_eager(op, dtype):
    if dtype in op.xfail:
        pytest.skip(op.xfail[dtype])
    for sample in op.samples(dtype, op.rng(dtype)):
        want = _call(op, sample, [to_ember(a) for a in sample.args])
        ember.compiler.reset()

        def fn(*args, _op=op, _s=sample):
            return _call(_op, _s, args)

        got = ember.compile(fn, backend="eager")(*[to_ember(a) for a in sample.args])
        _same(got, want, f"{op.name}[{dtype}] {sample!r}", "empty" not in op.name)


def _float_positions(sample):
    return [i for i, a in enumerate(sample.args)
            if isinstance(a, np.ndarray) and a.dtype.kind == "f"]


def _grads(op, sample, args, pos):
    outs = _call(op, sample, args)
    outs = outs if isinstance(outs, (tuple, list)) else [outs]
    outs = [o for o in outs if isinstance(o, ember.Tensor) and o.requires_grad]
    if not outs:
        return None
    rng = np.random.default_rng(1)
    gos = [ember.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype) for o in outs]
    return ember.autograd.grad(outs, [args[i] for i in pos], gos, allow_unused=True)


@pytest.mark.parametrize("op,dtype", GRAD_CASES, ids=[f"{o.name}-{d}" for o, d in GRAD_CASES])
def test_compiled_grads_equal_eager(op, dtype):
    for sample in op.samples(dtype, op.rng(dtype)):
        pos = _float_positions(sample)
        if not sample.grad or not pos:
            continue
        want = _grads(op, sample, [to_ember(a, i in pos) for i, a in enumerate(sample.args)],
                      pos)
        ember.compiler.reset()

        def fn(*args, _op=op, _s=sample, _p=pos):
            return _grads(_op, _s, list(args), _p)

        got = ember.compile(fn, backend="eager")(
            *[to_ember(a, i in pos) for i, a in enumerate(sample.args)])
        if want is None:
            assert got is None
            continue
        want = [w if w is not None else None for w in want]
        for i, (g, w) in enumerate(zip(got, want)):
            if w is None:
                assert g is None, f"{op.name} grad[{i}]"
            else:
                _same(g, w, f"{op.name} grad[{i}] {sample!r}")

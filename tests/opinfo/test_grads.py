"""Gradients of every differentiable OpInfo against PyTorch and against finite differences
(cases, samples and float arguments from ``harness.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from tests.opinfo import ALL_OPINFOS, harness
from tests.opinfo.core import assert_close, convert_kwargs, to_ember, to_torch

GRAD_CASES = harness.cases("grad")
FD_CASES = [op for op in ALL_OPINFOS if op.grad and op.fd_check]


def _outputs(out):
    if isinstance(out, (tuple, list)):
        return [o for o in out if hasattr(o, "dtype") and o.dtype.is_floating_point]
    return [out]


@pytest.mark.parametrize("op,dtype", GRAD_CASES, ids=[f"{o.name}-{d}" for o, d in GRAD_CASES])
def test_grads_match_torch(op, dtype):
    torch = pytest.importorskip("torch")
    if op.skip_torch:
        pytest.skip(op.skip_torch)
    harness.run_case("grad", op, dtype, lambda sample, pos: _check(torch, op, dtype, sample, pos))


def _check(torch, op, dtype, sample, pos):
    """Gradients of one sample against torch's; False when no output requires grad."""
    e_args = [to_ember(a, i in pos) for i, a in enumerate(sample.args)]
    t_args = [to_torch(a, torch, i in pos) for i, a in enumerate(sample.args)]
    e_out = _outputs(op.fn(ember, *e_args, **sample.kwargs))
    t_out = _outputs(op.fn(torch, *t_args, **convert_kwargs(sample.kwargs, torch)))
    e_out = [o for o in e_out if o.requires_grad]
    t_out = [o for o in t_out if o.requires_grad]
    assert len(e_out) == len(t_out), f"{op.name}: differentiable outputs differ"
    if not t_out:
        return False
    rng = np.random.default_rng(1)
    gos = [rng.standard_normal(tuple(o.shape)).astype(np.float64) for o in t_out]
    e_g = ember.autograd.grad(
        e_out, [e_args[i] for i in pos],
        [ember.tensor(g, dtype=o.dtype) for g, o in zip(gos, e_out)], allow_unused=True)
    t_g = torch.autograd.grad(
        t_out, [t_args[i] for i in pos],
        [torch.tensor(g, dtype=o.dtype) for g, o in zip(gos, t_out)], allow_unused=True)
    for i, (a, e) in enumerate(zip(e_g, t_g)):
        what = f"{op.name} grad[{i}] {sample!r}"
        if e is None:
            assert a is None or float(a.abs().sum()) == 0.0, what
            continue
        assert a is not None, f"{what}: ember gave no gradient"
        assert_close(a, e, dtype, op.tols, what)
    return True


@pytest.mark.parametrize("op", FD_CASES, ids=[o.name for o in FD_CASES])
def test_grads_finite_differences(op):
    """gradcheck in float64 on the small samples."""
    checked = 0
    for sample, pos in harness.samples("grad", op, "float64"):
        if any(sample.args[i].size > 64 or sample.args[i].size == 0 for i in pos):
            continue
        args = [to_ember(a, i in pos) for i, a in enumerate(sample.args)]

        def f(*xs, args=args, pos=pos, sample=sample):
            full = list(args)
            for i, x in zip(pos, xs):
                full[i] = x
            out = op.fn(ember, *full, **sample.kwargs)
            return tuple(_outputs(out))

        assert ember.autograd.gradcheck(f, tuple(args[i] for i in pos), eps=1e-6, atol=1e-5,
                                        rtol=1e-4), f"{op.name} {sample!r}"
        checked += 1
    if checked == 0:
        pytest.skip(f"{op.name}: no small float64 sample")

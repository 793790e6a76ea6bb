"""The pointwise OpInfo table (and softmax) through the C backend (forward; float32, float64,
float16, bfloat16, int64, bool).

Every sample runs eagerly and compiled with ``backend="c"``.  Graphs that lowered fully to C
compare in ulps (libm's last bit may differ from NumPy's); graphs with an extern step run that
step's eager kernel, so they compare exactly.  ``KNOWN`` lists genuine differences (xfail).

float16/bfloat16 use the same rule in ulps of the 16-bit dtype: a C kernel computes in float
and rounds once at the store, eager rounds after every op, so a sample that is one op agrees
to the last bit (up to a float32 last-bit difference crossing a rounding boundary: 1 ulp), and
a sample that the frontend decomposes into several ops differs by the intermediate roundings,
a few ulp of the dtype at the operands' scale (the ``spacing(max)`` term).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember
from ember.compiler import cbackend
from ember.config import config
from tests.opinfo import (
    ops_nn_activation,
    ops_pointwise,
    ops_pointwise_logic,
    ops_pointwise_math,
    ops_reduction,
)
from tests.opinfo.core import to_ember

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

DTYPES = {"float32", "float64", "float16", "bfloat16", "int64", "bool"}
OPS = (ops_pointwise.OPINFOS + ops_pointwise_math.OPINFOS + ops_pointwise_logic.OPINFOS
       + ops_nn_activation.OPINFOS
       + [o for o in ops_reduction.OPINFOS if "softmax" in o.name])
CASES = [(op, d) for op in OPS for d in op.dtypes if d in DTYPES and d not in op.xfail]
ULPS = 4

# (op.name, dtype) -> why the C result differs from eager
KNOWN: dict = {}


def _compare(got, want, what, exact):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), what
        for i, (g, w) in enumerate(zip(got, want)):
            _compare(g, w, f"{what}[{i}]", exact)
        return
    if not isinstance(want, ember.Tensor):
        assert got == want or (got != got and want != want), what
        return
    assert isinstance(got, ember.Tensor), what
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), what
    a, b = got.detach().numpy(), want.detach().numpy()
    floating = got.dtype.is_floating_point  # (NumPy calls ml_dtypes' bfloat16 kind "V")
    if not floating or exact:
        assert np.array_equal(a, b, equal_nan=floating), what
        return
    assert np.array_equal(np.isnan(a), np.isnan(b)), f"{what}: NaNs differ"
    fin = ~np.isnan(a) & ~np.isinf(b)
    assert np.array_equal(a[~fin & ~np.isnan(a)], b[~fin & ~np.isnan(a)]), f"{what}: infs"
    a, b = a[fin], b[fin]
    # ulps of each value plus ulps of the largest: a fused chain (a gradgrad) may cancel after
    # a libm call whose last bit differs from NumPy's
    big = a.dtype.type(np.abs(b).max(initial=0))
    tol = ULPS * (np.spacing(np.maximum(np.abs(a), np.abs(b)).astype(a.dtype)) + np.spacing(big))
    err = np.abs(a.astype(np.float64) - b.astype(np.float64))
    assert np.all(err <= tol), f"{what}: max error {err.max()} ({(err / tol).max() * ULPS:.1f} ulp)"


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{o.name}-{d}" for o, d in CASES])
def test_c_backend_equals_eager(op, dtype):
    if (op.name, dtype) in KNOWN:
        pytest.xfail(KNOWN[(op.name, dtype)])
    for sample in op.samples(dtype, op.rng(dtype)):
        ember.manual_seed(1234)
        try:
            want = op.fn(ember, *[to_ember(a) for a in sample.args], **sample.kwargs)
        except Exception:  # noqa: BLE001 - error samples are another test's business
            continue
        ember.compiler.reset()
        before = cbackend.BUILDS[0]

        def fn(*args, _op=op, _s=sample):
            ember.manual_seed(1234)
            return _op.fn(ember, *args, **_s.kwargs)

        got = ember.compile(fn, backend="c")(*[to_ember(a) for a in sample.args])
        built = cbackend.BUILDS[0] > before
        cg = cbackend.last_compiled() if built else None
        exact = cg is None or not cg.program.kernels()
        _compare(got, want, f"{op.name}[{dtype}] {sample!r}", exact)

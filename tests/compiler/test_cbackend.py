"""The C backend (``backend="c"``, issue 5 first slice): compiled equals eager.

Arithmetic (+ - * /) must match eager bit for bit (gcc runs with -ffp-contract=off); libm
functions may differ from NumPy's by an ulp or two, so those compare in ulps.  Fusion is
checked on the loop IR; a golden file pins the generated C of one small graph
(``EMBER_UPDATE_GOLDEN=1`` rewrites it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.codegen.unit import generate
from ember.config import config

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

GOLDEN = Path(__file__).parent / "golden"
F = ember.nn.functional


@pytest.fixture(autouse=True)
def _fresh():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


def run_c(fn, *args):
    """(compiled result, eager result, the CompiledGraph) of ``fn(*args)``."""
    got = ember.compile(fn, backend="c", fullgraph=True)(*args)
    cg = cbackend.last_compiled()
    want = fn(*args)
    return got, want, cg


def assert_close(got, want, ulps=0):
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        a, b = g.numpy(), w.numpy()
        if a.dtype.kind != "f" or ulps == 0:
            np.testing.assert_array_equal(a, b)
            continue
        assert np.array_equal(np.isnan(a), np.isnan(b))
        fin = ~np.isnan(a)
        # ulps of each value, plus ulps of the largest value: a chain may cancel after a
        # libm call whose last bit differs from NumPy's
        big = np.abs(b[fin]).max(initial=0)
        tol = ulps * (np.spacing(np.maximum(np.abs(a[fin]), np.abs(b[fin])).astype(a.dtype))
                      + np.spacing(a.dtype.type(big)))
        err = np.abs(a[fin].astype(np.float64) - b[fin].astype(np.float64))
        assert np.all(err <= tol), f"max error {err.max()} > {ulps} ulp"


def randn(*shape, dtype=ember.float32):
    return ember.randn(*shape, dtype=dtype)


# ----------------------------------------------------------------------------- pointwise chains
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_arithmetic_chain_is_exact(dtype):
    def f(x, y):
        return (x * y + x) / (y - 0.5) - x * 3.0

    x, y = randn(7, 33, dtype=dtype), randn(7, 33, dtype=dtype)
    got, want, cg = run_c(f, x, y)
    assert_close(got, want)
    assert len(cg.program.kernels()) == 1 and cg.stats.fallback_count == 0


def test_large_outputs_are_page_aligned():
    """Buffers of 64 KiB and more start on a page (cbackend._empty): an output a few bytes after
    its inputs modulo 4 KiB makes a loop's next loads wait on its pending stores (4K aliasing);
    permuted (eager memory order) outputs too.  Values as eager."""
    def f(x, w, b):
        return ember.nn.functional.gelu(x * w + b) * ember.sigmoid(x)

    x, w, b = randn(1 << 15), randn(1 << 15), randn(1 << 15)
    got, want, cg = run_c(f, x, w, b)
    assert_close(got, want, ulps=4)
    assert got.numpy().ctypes.data % 4096 == 0
    small = cbackend._empty((7, 3), np.float32)
    assert small.shape == (7, 3) and small.dtype == np.float32
    big = cbackend._empty((5, 4096), np.float64)
    assert big.shape == (5, 4096) and big.flags.c_contiguous and big.ctypes.data % 4096 == 0
    big[...] = 1.0                                 # the whole view is writable memory
    t = randn(64, 512).transpose(0, 1)
    got, want, _ = run_c(lambda a: (a * 2.0).exp(), t)
    assert_close(got, want, ulps=4)


def _layers(ws, x):
    # matrix products and row kernels: each product's output is a temporary of its own
    for w in ws:
        x = F.softmax(x @ w, -1) * 2.0 - x
    return x


def test_memory_plan_shares_temporaries_with_disjoint_lifetimes():
    """Temporaries whose lifetimes (first to last kernel using them) do not overlap share
    memory (cbackend.memory_plan): here 6 products and 6 row kernels each make a 32x64 float32
    temporary, and at most three are alive at once.  Values equal eager's, also on a second
    call, which views the same slots again."""
    ws = [randn(64, 64) * 0.1 for _ in range(6)]
    x = randn(32, 64)
    f = ember.compile(lambda x: _layers(ws, x), backend="c", fullgraph=True)
    for _ in range(2):
        got = f(x)
        assert_close(got, _layers(ws, x), ulps=8)
    mem = cbackend.last_compiled().memory()
    assert mem["buffers"] >= 10, mem
    assert mem["slots"] <= 4, mem
    assert mem["bytes"] <= mem["bytes_unshared"] // 3, mem


def test_memory_plan_leaves_python_visible_buffers_alone():
    """A temporary that an extern reads, or that is an output or the base of an output view,
    keeps its own memory: here ``h`` goes to frexp (an extern) and ``g``'s transpose is
    returned while many later temporaries are made; ``g`` must still hold its values."""
    def f(x, w):
        h = (x @ w) * 2.0
        y = ember.frexp(h)[0]
        g = (y @ w) + 1.0
        z = g @ w
        for _ in range(4):
            z = F.softmax(z @ w, -1) * 3.0 - z
        return g.t(), z

    x, w = randn(8, 16), randn(16, 16) * 0.1
    got, want, cg = run_c(f, x, w)
    assert_close(got, want, ulps=8)
    assert cg.stats.externs == 1
    assert cg.memory()["slots"] < cg.memory()["buffers"]

    def base(r):
        src = cg._sources[r]
        return base(cg.graph.nodes[src[1]].args[0]) if src[0] == "view" else src

    outs = [base(r) for r in cg.graph.outputs]
    assert all(src[0] == "buf" and id(src[1]) not in cg._slots for src in outs), outs


def test_memory_plan_survives_the_run_plan_cache():
    """A warm CompiledGraph built from the on-disk run plan gets the same memory plan."""
    ws = [randn(64, 64) * 0.1 for _ in range(4)]
    x = randn(32, 64)
    ember.compile(lambda x: _layers(ws, x), backend="c", fullgraph=True)(x)
    cold = cbackend.last_compiled()
    warm = cbackend.CompiledGraph(cold.graph)
    assert warm._program is None                  # built from the run plan, not lowered
    assert warm.memory() == cold.memory() and warm.memory()["slots"] < 8
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(tuple(shape)).astype(dt.np) for shape, dt in cold.graph.inputs]
    for a, b in zip(warm(arrays), cold(arrays)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_transcendental_chain(dtype):
    def f(x):
        return ember.exp(x).log1p() + ember.tanh(x) * ember.sigmoid(x) - ember.sqrt(x.abs())

    x = randn(1000, dtype=dtype)
    got, want, cg = run_c(f, x)
    assert_close(got, want, ulps=4)
    assert len(cg.program.kernels()) == 1


def test_int64_chain():
    def f(x, y):
        return (x * y + 7) - (x - y) * 3 + ember.maximum(x, y) + (x >= y).to(ember.int64)

    x = ember.randint(-50, 50, (5, 6))
    y = ember.randint(1, 9, (5, 6)) * (ember.randint(0, 2, (5, 6)) * 2 - 1)
    got, want, cg = run_c(f, x, y)
    assert_close(got, want)
    assert cg.stats.fallback_count == 0 and len(cg.program.kernels()) == 1


def test_integer_division_runs_c_and_raises_on_zero():
    def f(x, y):
        return (x // y) + x % y + 1

    x = ember.randint(-50, 50, (5, 6))
    y = ember.randint(1, 9, (5, 6)) * (ember.randint(0, 2, (5, 6)) * 2 - 1)
    got, want, cg = run_c(f, x, y)
    assert_close(got, want)
    # one kernel; it checks the divisors (the entry returns 1, eager reruns and raises)
    assert cg.stats.fallback_count == 0 and len(cg.program.kernels()) == 1
    y[0, 0] = 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        ember.compile(f, backend="c")(x, y)


def test_int32_and_bool_chain():
    def f(x, y):
        b = (x > 0) & (y < 3) | ~(x == y)
        return b, (x + y).to(ember.int32) * 2, b.logical_not()

    x = ember.randint(-5, 5, (4, 9), dtype=ember.int32)
    y = ember.randint(-5, 5, (4, 9), dtype=ember.int32)
    got, want, cg = run_c(f, x, y)
    assert_close(got, want)
    assert cg.stats.fallback_count == 0 and len(cg.program.kernels()) == 1


def test_float_comparisons_and_where():
    def f(x, y):
        return ember.where(x > y, x, y * 2), ember.isnan(x / y), (x <= 0.25).to(ember.float32)

    x, y = randn(64), randn(64)
    x[3] = 0.0
    y[3] = 0.0
    got, want, cg = run_c(f, x, y)
    assert_close(got, want)
    assert cg.stats.fallback_count == 0


# ----------------------------------------------------------------------------- views and layout
def test_broadcast_via_expand_is_index_arithmetic():
    def f(x, b, c):
        return x * b + c

    x, b, c = randn(6, 5, 4), randn(4), randn(6, 1, 4)
    got, want, cg = run_c(f, x, b, c)
    assert_close(got, want)
    (k,) = cg.program.kernels()
    assert not k.flat and cg.stats.view_ops >= 2 and cg.stats.fallback_count == 0
    text = str(k)
    assert "[i2]);" in text  # the bias reads with stride 0 over the leading dims


def test_transposed_and_sliced_views_load_in_place():
    def f(x):
        return x.t() * 2 + x[1:, ::2].sum(0) if False else x.t() * 2 + x.t()[:, 1:2]

    x = randn(5, 7)
    got, want, cg = run_c(f, x)
    assert_close(got, want)
    assert len(cg.program.kernels()) == 1 and cg.stats.fallback_count == 0
    assert cg.stats.copies == 0


@pytest.mark.parametrize("case", ["t_add", "t_exp_t", "t_then_t", "permute3"])
def test_outputs_keep_eager_memory_order(case):
    fns = {
        "t_add": lambda x: x.t() + 1,
        "t_exp_t": lambda x: x.t() * ember.exp(x.t()),
        "t_then_t": lambda x: (x.t() * 2).t() + 1,
        "permute3": lambda x: ember.exp(x.reshape(2, 3, 5).permute(2, 0, 1)) * 2,
    }
    f = fns[case]
    x = randn(6, 5)
    got, want, cg = run_c(f, x)
    assert_close(got, want, ulps=2)
    assert got.stride() == want.stride() and got.is_contiguous() == want.is_contiguous()
    assert cg.stats.fallback_count == 0 and cg.stats.copies == 0


def test_non_contiguous_inputs():
    def f(x, y):
        return x * y - 1.0

    base = randn(8, 10)
    x = base.t()                 # transposed input
    y = randn(10, 16)[:, ::2]    # strided input
    got, want, cg = run_c(f, x, y)
    assert_close(got, want)
    assert cg.stats.copies >= 1  # non-contiguous inputs are copied once per call (counted)


def test_output_that_is_a_view_of_an_input_aliases_it():
    def f(x):
        return x.t(), x + 1

    x = randn(3, 4)
    got, want, _ = run_c(f, x)
    assert_close(got, want)
    assert got[0].stride() == want[0].stride()


# ----------------------------------------------------------------------------- dynamic, scalars
def test_dynamic_sizes_and_scalars_reuse_the_library():
    def f(x, a):
        return x * a + 1.5

    cf = ember.compile(f, backend="c")
    builds = []
    for n, a in ((8, 2.0), (13, 3.0), (21, 0.25), (5, -1.0), (40, 7.5)):
        x = randn(n, 3)
        assert_close(cf(x, a), f(x, a))
        builds.append(cbackend.BUILDS[0])
    # the second call recompiles with the size and the scalar lifted; that library serves the
    # rest (sizes travel in ints, the scalar in floats)
    assert builds[-1] == builds[1]
    cg = cbackend.last_compiled()
    assert cg.graph.num_scalars == 2
    assert "floats[" in cg.source and "(s0 * 3)" in cg.source


def test_dynamic_size_generic_kernel_runs_new_sizes():
    def f(x, y):
        return x * y + x

    cf = ember.compile(f, backend="c", dynamic=True)
    for n in (4, 9, 17):
        x, y = randn(n, 5), randn(n, 5)
        assert_close(cf(x, y), f(x, y))
    cg = cbackend.last_compiled()
    assert "s0" in cg.source


def test_multiple_outputs():
    def f(x, y):
        s = x + y
        return s, s * s, ember.exp(s) - y

    x, y = randn(3, 4), randn(3, 4)
    got, want, cg = run_c(f, x, y)
    assert_close(got, want, ulps=2)
    (k,) = cg.program.kernels()
    assert sum(1 for st in k.body if type(st).__name__ == "Store") == 3


# ----------------------------------------------------------------------------- externs
def test_extern_in_the_middle():
    # frexp has no C lowering: it runs eagerly between two C segments
    def f(x, b):
        h = x * 2 + 1
        y = ember.frexp(h)[0]
        return (y + b) * 0.5 - h

    x, b = randn(6, 8), randn(8)
    got, want, cg = run_c(f, x, b)
    assert_close(got, want)
    assert cg.stats.fallback_count > 0
    assert any(f.startswith("frexp") for f in cg.stats.fallbacks)
    assert len(cg.program.segments()) >= 2


def test_fallbacks_are_logged(capsys, monkeypatch):
    monkeypatch.setattr(config, "logs", frozenset({"fallbacks"}))

    def f(x):
        return ember.frexp(x)[0] + 1

    run_c(f, randn(3, 3))
    assert "[ember.compiler fallbacks]" in capsys.readouterr().err


LOWP = [ember.float16, ember.bfloat16]


def lowp_ulp(v, dtype):
    """One ulp of ``dtype`` (float16/bfloat16) at each |v| (float64), subnormal floor included."""
    mant, emin = (10, -14) if dtype == ember.float16 else (7, -126)
    e = np.floor(np.log2(np.maximum(np.abs(v), 2.0 ** emin)))
    return 2.0 ** (e - mant)


@pytest.mark.parametrize("dtype", LOWP, ids=["float16", "bfloat16"])
def test_lowp_chain_is_one_kernel(dtype):
    # gelu(x*w+b)*sigmoid(x): loads widen to float, the whole chain runs in float32 registers
    # and the store rounds once.  Eager rounds after each of the 5 ops (PyTorch's CPU
    # semantics), so the two differ: where x*w and b cancel, eager's rounding of x*w is
    # amplified (measured: float16 eager is up to ~900 ulp of the result from the float64
    # value, the fused kernel 0.5 ulp).  Against eager the tolerance is therefore counted at the
    # operands' scale s = max(|x*w|, |b|, |result|): eager's roundings of x*w and of + b are
    # 0.5 + 1 ulp(s) (|u| <= 2s), times |gelu'| * sigmoid <= 1.13, plus 0.5 ulp for each of
    # its gelu, sigmoid and product roundings: about 3.2 ulp(s) at most -> 4.
    def f(x, w, b):
        return F.gelu(x * w + b) * ember.sigmoid(x)

    x, w, b = (randn(1 << 14).to(dtype) for _ in range(3))
    got, want, cg = run_c(f, x, w, b)
    assert cg.stats.kernels == 1 and cg.stats.fallback_count == 0
    assert got.dtype == want.dtype == dtype
    src = cg.source
    assert "uint16_t *restrict" in src
    assert ("ember_f16_load_n(" if dtype == ember.float16 else "ember_bf16_load_n(") in src
    g, e = (t.float().numpy().astype(np.float64) for t in (got, want))
    X, W, B = (t.float().numpy().astype(np.float64) for t in (x, w, b))
    scale = np.maximum(np.abs(X * W), np.abs(B))
    assert np.all(np.abs(g - e) <= 4 * lowp_ulp(np.maximum(scale, np.abs(e)), dtype))
    if dtype == ember.float16:  # (bfloat16 results underflow float32's range in the far tail)
        from scipy.special import erf
        u = X * W + B
        ref = u * 0.5 * (1 + erf(u / np.sqrt(2))) / (1 + np.exp(-X))
        assert np.all(np.abs(g - ref) <= lowp_ulp(ref, dtype)), "fused float16 not within 1 ulp"


@pytest.mark.parametrize("dtype", LOWP, ids=["float16", "bfloat16"])
def test_lowp_casts_round_like_eager(dtype):
    # a value leaving float16/bfloat16 (a cast, a comparison) is rounded to its dtype first and
    # a cast into it rounds once, so these match eager bit for bit
    def f(x, y):
        a = (x * 3).float() + 1
        b = (y * 0.1).to(dtype) + x
        return a, b, (x * 3) > y.to(dtype), (y.double() * 1.7).to(dtype)

    x, y = randn(4099).to(dtype), randn(4099)
    got, want, cg = run_c(f, x, y)
    assert cg.stats.fallback_count == 0
    assert_close(got, want)


@pytest.mark.parametrize("dtype", LOWP, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("cols", [1, 33, 1024])
def test_lowp_softmax_and_log_softmax_rows(dtype, cols):
    # one rounding of a float32 computation, as eager (log_softmax also rounds the row sum and
    # its log to the dtype, as eager and PyTorch's last-dim kernel do); the sum runs in double
    # in C and in float in eager, which may move a result across a rounding boundary: 1 ulp
    def f(x):
        return ember.softmax(x * 2, -1), ember.log_softmax(x, -1)

    x = randn(5, cols).to(dtype)
    x[1, 0] = float("nan")
    if cols > 1:
        x[2] = float("-inf")
        x[3, -1] = float("inf")
    got, want, cg = run_c(f, x)
    assert cg.stats.fallback_count == 0
    assert [type(k).__name__ for k in cg.program.kernels()] == ["RowKernel", "RowKernel"]
    for g, w in zip(got, want):
        a, b = g.float().numpy().astype(np.float64), w.float().numpy().astype(np.float64)
        assert np.array_equal(np.isnan(a), np.isnan(b))
        fin = np.isfinite(b)
        assert np.array_equal(a[~fin & ~np.isnan(b)], b[~fin & ~np.isnan(b)])
        assert np.all(np.abs(a[fin] - b[fin]) <= lowp_ulp(b[fin], dtype))


# ----------------------------------------------------------------------------- fusion, golden
def _gelu_chain(x):
    # gelu(tanh) written out: 8 pointwise ops
    inner = (x + 0.044715 * x * x * x) * 0.7978845608028654
    return 0.5 * x * (1.0 + ember.tanh(inner))


def test_gelu_chain_is_one_kernel():
    x = randn(4096)
    got, want, cg = run_c(_gelu_chain, x)
    assert_close(got, want, ulps=4)
    assert len(cg.graph.nodes) >= 8
    (k,) = cg.program.kernels()
    assert k.flat and len(k.ops) == len(cg.graph.nodes)
    assert cg.stats.kernels == 1 and cg.stats.fallback_count == 0
    assert sum(1 for st in k.body if type(st).__name__ == "Store") == 1


def test_builtin_gelu_and_sigmoid_fuse():
    def f(x, w, b):
        return F.gelu(x * w + b) * ember.sigmoid(x)

    x, w, b = randn(64, 32), randn(64, 32), randn(64, 32)
    got, want, cg = run_c(f, x, w, b)
    assert_close(got, want, ulps=8)
    assert cg.stats.kernels == 1 and cg.stats.fallback_count == 0


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("cols", [1, 33, 1024])
def test_softmax_and_log_softmax_rows(dtype, cols):
    def f(x):
        return ember.softmax(x * 2, -1), ember.log_softmax(x, -1) + 1

    x = randn(5, cols, dtype=dtype)
    x[1, 0] = float("nan")
    if cols > 1:
        x[2] = float("-inf")
        x[3, -1] = float("inf")
    got, want, cg = run_c(f, x)
    assert_close(got, want, ulps=8)
    assert cg.stats.fallback_count == 0
    ks = cg.program.kernels()
    kinds = [type(k).__name__ for k in ks]
    # x * 2 runs inside the softmax row kernel; log_softmax reads x; "+ 1" is its own kernel
    assert kinds == ["RowKernel", "RowKernel", "Kernel"]
    assert ks[0].ops == ["mul", "softmax"] and ks[0].src is None


def test_softmax_chain_is_one_kernel():
    def f(x, b):
        return ember.softmax((x - b) * 0.125, -1)

    for shape in ((16, 100), (2, 3, 7)):
        ember.compiler.reset()
        x, b = randn(*shape), randn(shape[-1])
        got, want, cg = run_c(f, x, b)
        assert_close(got, want, ulps=8)
        (k,) = cg.program.kernels()
        assert k.ops == ["sub", "mul", "softmax"] and cg.stats.fallback_count == 0
        cg.program.verify()


def test_log_softmax_of_broadcast_chain_in_3d():
    def f(x, b):
        return ember.log_softmax(ember.exp(x.permute(1, 0, 2)) * b, -1)

    x, b = randn(3, 2, 7), randn(2, 1, 7)
    got, want, cg = run_c(f, x, b)
    assert_close(got, want, ulps=8)
    # the producer reads a permuted x, so eager keeps that layout through log_softmax: the
    # C order row kernel cannot take it; a ReduceKernel over the (unit-stride) last dim does,
    # with the producers fused, in eager's layout
    assert got.stride() == want.stride()
    assert cg.stats.fallback_count == 0 and cg.stats.kernels == 1

    def g(x, b):
        return ember.log_softmax(ember.exp(x) * b, -1)

    x = randn(2, 3, 7)
    got, want, cg = run_c(g, x, b)
    assert_close(got, want, ulps=8)
    (k,) = cg.program.kernels()
    assert k.ops == ["exp", "mul", "log_softmax"] and cg.stats.fallback_count == 0
    assert got.stride() == want.stride()


def test_softmax_producer_that_is_also_an_output_is_stored():
    def f(x):
        y = x * 3
        return ember.softmax(y, -1), y

    got, want, cg = run_c(f, randn(4, 9))
    assert_close(got, want, ulps=8)
    kinds = [type(k).__name__ for k in cg.program.kernels()]
    assert kinds == ["Kernel", "RowKernel"]


def test_softmax_over_a_leading_dim_stays_eager():
    def f(x):
        return ember.softmax(x, 0)

    got, want, cg = run_c(f, randn(4, 6))
    assert_close(got, want)
    assert cg.stats.fallback_count == 1


def test_loop_ir_prints_and_verifies():
    def f(x, y):
        return (x + y) * y

    x, y = randn(2, 3), randn(2, 3)
    _, _, cg = run_c(f, x, y)
    cg.program.verify()
    text = str(cg.program)
    assert "kernel kernel0" in text and "for i in 0..6" in text


def test_golden_c_source():
    def f(x, b):
        return ember.exp(x * b) - x

    ember.compile(f, backend="c")(randn(3, 4), randn(4))
    cg = cbackend.last_compiled()
    src = generate(cbackend.lower_and_schedule(cg.graph), prelude=False)
    path = GOLDEN / "mul_exp_sub_broadcast.c"
    if os.environ.get("EMBER_UPDATE_GOLDEN"):
        path.write_text(src)
    assert src == path.read_text(), "generated C changed; EMBER_UPDATE_GOLDEN=1 rewrites it"


def test_codegen_helper_returns_source():
    def f(x):
        return ember.sigmoid(x) * x

    src = ember.compiler.codegen(f, randn(8))
    assert "ember_entry" in src and "exp(" in src
    assert "ember_entry" in src.split("EMBER_EXPORT int ")[-1]


def test_c_backend_is_the_default():
    """ember.compile's default backend is PyTorch's name for its default, "inductor", and that
    name (like "c") is the C backend: a call without a backend builds C."""
    assert {"c", "inductor"} <= set(ember.compiler.list_backends())
    assert ember.compiler.config.default_backend == "inductor"
    before = cbackend.BUILDS[0]
    x = randn(64)
    got = ember.compile(lambda a: a * 2 + 1)(x)
    assert cbackend.BUILDS[0] == before + 1 and cbackend.last_compiled().stats.kernels == 1
    np.testing.assert_array_equal(got.numpy(), (x * 2 + 1).numpy())


def test_default_backend_setting(monkeypatch):
    """``ember.compiler.config.default_backend`` picks the backend of a compile() that names none,
    when compile() is called; a named backend wins over it; EMBER_COMPILE_BACKEND sets it."""
    monkeypatch.setattr(ember.compiler.config, "default_backend", "eager")
    before = cbackend.BUILDS[0]
    x = randn(64)
    got = ember.compile(lambda a: a * 3 + 1)(x)
    assert cbackend.BUILDS[0] == before
    np.testing.assert_array_equal(got.numpy(), (x * 3 + 1).numpy())
    ember.compile(lambda a: a * 3 - 1, backend="inductor")(x)
    assert cbackend.BUILDS[0] == before + 1
    code = ("import ember; print(ember.compiler.config.default_backend)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "EMBER_COMPILE_BACKEND": "eager"}, check=True)
    assert out.stdout.strip() == "eager"

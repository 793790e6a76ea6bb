"""EMBER_C_PROFILE: per-kernel timers in the C backend's entries (codegen_c.profile_block,
cbackend.profile / reset_profile / format_profile), and the vectorizing ``simd`` pragma on
pointwise loops under OpenMP (codegen_c.omp_loops)."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.build import toolchain
from ember.compiler.c.codegen.gemm import MIN_FLOPS
from ember.compiler.c.codegen.unit import generate
from ember.config import config

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

F = ember.nn.functional


@pytest.fixture
def profiled(monkeypatch):
    monkeypatch.setattr(config, "c_profile", True)
    # products through BLAS (the timers' BLAS column); the default runs the generated template
    # for wide float32 products on AVX-512 builds (codegen.gemm.template_wins)
    monkeypatch.setattr(config, "c_gemm", "blas")
    ember.compiler.reset()
    yield
    ember.compiler.reset()


def _mlp(x, w1, b1, w2, t):
    h = F.relu(F.linear(x, w1, b1))
    return F.cross_entropy(h @ w2, t) + (h * 0.5).sum()


def _inputs():
    g = np.random.default_rng(0)
    x = ember.tensor(g.standard_normal((64, 96), dtype=np.float32))
    w1 = ember.tensor(g.standard_normal((128, 96), dtype=np.float32))
    b1 = ember.tensor(g.standard_normal(128, dtype=np.float32))
    w2 = ember.tensor(g.standard_normal((128, 10), dtype=np.float32))
    t = ember.tensor(g.integers(0, 10, 64), dtype=ember.int64)
    return x, w1, b1, w2, t


def test_profiled_build_times_every_kernel_and_matches_the_normal_build(profiled):
    args = _inputs()
    want = _mlp(*args).numpy()
    f = ember.compile(lambda *a: _mlp(*a), backend="c")
    got = [f(*args).numpy() for _ in range(3)]
    cg = cbackend.last_compiled()
    assert "ember_profile_read" in cg.source and "EMBER_PROF_BEGIN_" in cg.source
    kernels = [k for s in cg.program.segments() for k in s.kernels]
    rows = cbackend.profile(cg)
    assert [r["name"].split()[0] for r in rows] == [f"{s.entry}:{k.name}"
                                                   for s in cg.program.segments()
                                                   for k in s.kernels]
    assert len(rows) == len(kernels) >= 3
    assert all(r["calls"] == 3 and r["ms"] > 0 for r in rows)
    gemms = [r for r in rows if "(GEMM" in r["name"]]
    assert gemms and all(0 < r["blas_ms"] <= r["ms"] for r in gemms)
    assert all(r["blas_ms"] == 0 for r in rows if r not in gemms)
    # the timers change nothing computed: the normal build gives the same bits
    config.c_profile = False
    ember.compiler.reset()
    plain = ember.compile(lambda *a: _mlp(*a), backend="c")
    ref = plain(*args).numpy()
    assert "EMBER_PROF" not in cbackend.last_compiled().source
    for g in got:
        np.testing.assert_array_equal(g, ref)
    np.testing.assert_allclose(ref, want, rtol=1e-5)


def test_reset_and_format(profiled):
    args = _inputs()
    f = ember.compile(lambda *a: _mlp(*a), backend="c")
    f(*args)
    cg = cbackend.last_compiled()
    cbackend.reset_profile(cg)
    assert all(r["calls"] == 0 and r["ms"] == 0 for r in cbackend.profile(cg))
    for _ in range(4):
        f(*args)
    rows = cbackend.profile(cg)
    text = cbackend.format_profile(rows, per=4)
    assert "cross_entropy" in text and "GEMM blas" in text and "total of" in text
    # slowest first
    ms = [r["ms"] for r in rows]
    lines = text.splitlines()[1:-1]
    assert float(lines[0].split()[0]) == pytest.approx(max(ms) / 4, abs=1e-3)
    assert cbackend.format_profile([]).startswith("(no profiled C kernels")


def test_profiled_kernel_with_checks_still_reports_bad_input(profiled):
    def f(x, t):
        return F.cross_entropy(x, t)

    x = ember.tensor(np.random.default_rng(1).standard_normal((4, 5), dtype=np.float32))
    bad, good = ember.tensor(np.array([0, 7, 1, 2])), ember.tensor(np.array([0, 4, 1, 2]))
    with pytest.raises(Exception) as want:
        f(x, bad)
    with pytest.raises(type(want.value), match="out of bounds"):
        ember.compile(f, backend="c")(x, bad)
    np.testing.assert_allclose(ember.compile(f, backend="c")(x, good).numpy(),
                               f(x, good).numpy(), rtol=1e-6)


def test_unprofiled_graph_gives_no_rows():
    ember.compiler.reset()
    f = ember.compile(lambda a: ember.exp(a) + 1, backend="c")
    f(ember.ones(8))
    cg = cbackend.last_compiled()
    if not config.c_profile:
        assert cbackend.profile(cg) == []


def test_flat_pointwise_loops_vectorize_under_openmp(tmp_path):
    # AdamW's update as a flat kernel: 4 inputs, 3 outputs.  Inside OpenMP's outlined function
    # gcc lost the parameters' `restrict` and gave up on run-time alias checks: scalar code.
    def adamw(p, g, m, v):
        m2 = m.lerp(g, 0.1)
        v2 = v * 0.999 + 0.001 * g * g
        return p * 0.99 - 0.01 * m2 / (v2.sqrt() + 1e-8), m2, v2

    g = np.random.default_rng(2)
    args = [ember.tensor(g.random(1 << 16, dtype=np.float32)) for _ in range(4)]
    src = generate(cbackend.lower_and_schedule(_graph_of(adamw, args)), prelude=False,
                   openmp=True)
    assert "#pragma omp parallel for simd" in src and "if(parallel: " in src
    # gcc really vectorizes the outlined loop (it did not without `simd`)
    whole = generate(cbackend.lower_and_schedule(_graph_of(adamw, args)), openmp=True)
    c = tmp_path / "k.c"
    c.write_text(whole)
    lines = whole.splitlines()
    loop = next(j + 2 for j, x in enumerate(lines) if "omp parallel for simd" in x)
    cmd = [*config.cc.split(), *toolchain.FLAGS, toolchain.OPENMP_FLAG, *cbackend.EXTRA_FLAGS,
           "-fopt-info-vec-optimized", "-c", "-o", str(tmp_path / "k.o"), str(c)]
    info = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    done = {int(m.group(1)) for m in re.finditer(r"k\.c:(\d+):\d+: optimized: loop vectorized",
                                                  info)}
    assert done & {loop, loop + 1}, (loop, info[:3000])   # (gcc names the loop or its body)
    want = [t.numpy() for t in adamw(*args)]
    got = [t.numpy() for t in ember.compile(adamw, backend="c")(*args)]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=0)


def _graph_of(fn, args):
    graphs: list = []

    def capture(graph, example_inputs):
        graphs.append(graph)
        return cbackend._eager_runner(graph)

    ember.compile(fn, backend=capture)(*args)
    return graphs[0]


# ------------------------------------------------------------ products split with their epilogue
@pytest.fixture
def two_threads(monkeypatch):
    # these tests are about BLAS pieces split over threads with the epilogue per block (the
    # template's own split is tested in test_cbackend_gemm_tmpl.py)
    monkeypatch.setattr(config, "c_gemm", "blas")
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    yield
    ember.set_num_threads(before)


def _close(got, want, ulps=8):
    for g, w in zip(got, want):
        a, b = g.detach().numpy(), w.detach().numpy()
        assert a.shape == b.shape and a.dtype == b.dtype
        scale = np.abs(b).max(initial=1.0)
        tol = ulps * np.spacing(a.dtype.type(scale)) * max(1, int(np.sqrt(a.shape[-1] + 1)))
        np.testing.assert_allclose(a, b, rtol=0, atol=tol)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("lead,k,n", [((256,), 128, 72), ((48,), 256, 200), ((4, 64), 96, 100),
                                      ((3, 5, 7), 160, 301)])
def test_split_product_runs_its_epilogue_per_block(two_threads, dtype, lead, k, n):
    # rows split (m >= n), columns split (n > m), leading dims folded into the rows, and an
    # odd count of rows: each thread's block gets the bias, gelu and residual of its elements
    if config.c_openmp is False:
        pytest.skip("needs the OpenMP build")
    g = np.random.default_rng(3)

    def t(*shape):
        return ember.tensor(g.standard_normal(shape).astype(dtype.np))

    x, w, b, r = t(*lead, k), t(n, k), t(n), t(*lead, n)
    assert 2 * int(np.prod(lead)) * n * k >= MIN_FLOPS   # large enough to be split

    def f(x, w, b, r):
        y = F.linear(x, w, b)
        return F.gelu(y) + r, y * 2

    ember.compiler.reset()
    got = ember.compile(f, backend="c", fullgraph=True)(x, w, b, r)
    cg = cbackend.last_compiled()
    assert "#pragma omp parallel num_threads(threads_)" in cg.source
    _close(got, f(x, w, b, r), ulps=16)


def test_split_product_with_adamw_epilogue_equals_eager(two_threads):
    # the MLP's weight gradient with AdamW fused into the product's epilogue (a flat epilogue
    # with 4 inputs and 3 outputs), n > m: column blocks
    g = np.random.default_rng(4)
    a = ember.tensor(g.standard_normal((256, 96), dtype=np.float32))
    dy = ember.tensor(g.standard_normal((256, 160), dtype=np.float32))
    assert 2 * 256 * 96 * 160 >= MIN_FLOPS
    p, m, v = (ember.tensor(g.standard_normal((96, 160), dtype=np.float32)) for _ in range(3))
    v = v.abs()

    def f(a, dy, p, m, v):
        grad = a.t() @ dy
        m2 = m.lerp(grad, 0.1)
        v2 = v * 0.999 + 0.001 * grad * grad
        return p * 0.99 - 0.01 * m2 / (v2.sqrt() + 1e-8), m2, v2

    ember.compiler.reset()
    got = ember.compile(f, backend="c", fullgraph=True)(a, dy, p, m, v)
    src = cbackend.last_compiled().source
    if config.c_openmp:
        assert "#pragma omp parallel num_threads(threads_)" in src
    _close(got, f(a, dy, p, m, v), ulps=16)


@pytest.mark.parametrize("n", [1, 2])
def test_split_conv_with_epilogue_equals_eager(two_threads, n):
    # conv's product (n spans the output's spatial dims) with bias and relu, large enough to
    # be split over the threads
    g = np.random.default_rng(5)
    x = ember.tensor(g.standard_normal((n, 16, 32, 32), dtype=np.float32))
    w = ember.tensor(g.standard_normal((64, 16, 3, 3), dtype=np.float32))
    b = ember.tensor(g.standard_normal(64, dtype=np.float32))
    assert 2 * 64 * 900 * 144 >= MIN_FLOPS

    def f(x, w, b):
        return F.relu(F.conv2d(x, w, b)) * 0.5

    ember.compiler.reset()
    got = ember.compile(f, backend="c", fullgraph=True)(x, w, b)
    _close([got], [f(x, w, b)], ulps=16)

"""Matrix products in the C backend: GEMM steps inside C segments equal eager.

Eager and compiled code call the same OpenBLAS (NumPy's), so products with the layouts NumPy
hands to sgemm/dgemm match bit for bit; NumPy switches to gemv/dot for m, n or k = 1 and to syrk
for ``a @ a.T``, and eager splits large products over its threads, so values compare with a
tolerance of a few ulps of the result's scale (``close``).  Epilogues (bias, activation) run in
C; libm-style functions may differ from NumPy's by an ulp, as in test_cbackend.py.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.build import autotune
from ember.compiler.c.codegen.gemm import TEMPLATES
from ember.config import config

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

F = ember.nn.functional
DTYPES = [ember.float32, ember.float64]


def compiled(fn, *args, **kw):
    """(compiled result, eager result, the last CompiledGraph)."""
    got = ember.compile(fn, backend="c", fullgraph=True, **kw)(*args)
    cg = cbackend.last_compiled()
    return got, fn(*args), cg


def close(got, want, ulps=8):
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        a, b = g.detach().numpy(), w.detach().numpy()
        scale = np.abs(b).max(initial=1.0)
        width = a.shape[-1] if a.ndim else 1
        tol = ulps * np.spacing(a.dtype.type(scale)) * max(1, int(np.sqrt(width + 1)))
        np.testing.assert_allclose(a, b, rtol=0, atol=tol)


def randn(*shape, dtype=ember.float32):
    return ember.randn(*shape, dtype=dtype)


def no_externs(cg):
    assert cg.stats.externs == 0, cg.stats.fallbacks
    assert any(type(k).__name__ == "GemmKernel" for k in cg.program.kernels())


# ----------------------------------------------------------------------------- products
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 5, 3), (64, 33, 17), (130, 257, 96),
                                   (1, 40, 9), (9, 40, 1), (6, 1, 8)])
def test_mm_equals_eager(dtype, m, k, n):
    a, b = randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)
    got, want, cg = compiled(lambda x, y: x @ y, a, b)
    close(got, want)
    no_externs(cg)
    if min(m, n, k) > 1:  # the same sgemm/dgemm call as NumPy's
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["tt", "tn", "nt", "sliced", "rowslice", "stepped"])
def test_mm_views_equal_eager(dtype, layout):
    base_a, base_b = randn(40, 50, dtype=dtype), randn(50, 40, dtype=dtype)

    def f(x, y):
        if layout == "tt":
            return x.t() @ y.t()
        if layout == "tn":
            return x.t()[:, :30] @ y[:30, :20]
        if layout == "nt":
            return x @ x[:25].t()
        if layout == "sliced":
            return x[3:30, 5:45] @ y[5:45, 2:39]
        if layout == "rowslice":
            return x[::2] @ y[:, 1:]
        return x[:, ::2] @ y[::2, ::3]  # no unit stride: packed before BLAS

    got, want, cg = compiled(f, base_a, base_b)
    close(got, want)
    no_externs(cg)
    assert cg.stats.copies == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_bmm_baddbmm_and_broadcast_batches(dtype):
    a, b = randn(4, 6, 5, dtype=dtype), randn(4, 5, 7, dtype=dtype)
    c = randn(4, 6, 7, dtype=dtype)
    got, want, cg = compiled(lambda x, y: ember.bmm(x, y), a, b)
    close(got, want)
    no_externs(cg)
    got, want, cg = compiled(lambda z, x, y: ember.baddbmm(z, x, y, beta=0.5, alpha=2.0),
                             c, a, b)
    close(got, want)
    no_externs(cg)
    # (3, 1, 6, 5) @ (2, 5, 7): batch dims broadcast (stride 0)
    x, y = randn(3, 1, 6, 5, dtype=dtype), randn(2, 5, 7, dtype=dtype)
    got, want, cg = compiled(lambda p, q: p @ q, x, y)
    close(got, want)
    no_externs(cg)
    # a transposed batched operand
    got, want, cg = compiled(lambda p, q: p.transpose(1, 2) @ q, randn(4, 5, 6, dtype=dtype), b)
    close(got, want)
    no_externs(cg)


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_batches_split_over_threads(dtype):
    # enough work for eager's batch split (and the C one): each entry one sgemm/dgemm call
    a, b = randn(2, 4, 64, 72, dtype=dtype), randn(2, 4, 72, 64, dtype=dtype)
    before = ember.get_num_threads()
    for threads in (1, 2):
        ember.set_num_threads(threads)
        try:
            got, want, cg = compiled(lambda x, y: x @ y, a, b)
        finally:
            ember.set_num_threads(before)
        no_externs(cg)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        ember.compiler.reset()


@pytest.mark.parametrize("dtype", DTYPES)
def test_addmm_alpha_beta_and_linear(dtype):
    a, b = randn(9, 11, dtype=dtype), randn(11, 13, dtype=dtype)
    for c in (randn(9, 13, dtype=dtype), randn(13, dtype=dtype)):
        for alpha, beta in ((1, 1), (2.5, 1), (1, 0.25), (-1.5, 3.0)):
            got, want, cg = compiled(
                lambda z, x, y, al=alpha, be=beta: ember.addmm(z, x, y, beta=be, alpha=al),
                c, a, b)
            close(got, want)
            no_externs(cg)
    x, w, bias = randn(2, 3, 11, dtype=dtype), randn(7, 11, dtype=dtype), randn(7, dtype=dtype)
    got, want, cg = compiled(lambda p, q, r: F.linear(p, q, r), x, w, bias)
    close(got, want)
    no_externs(cg)
    got, want, cg = compiled(lambda p, q: F.linear(p.transpose(0, 1), q), x, w)
    close(got, want)
    no_externs(cg)


@pytest.mark.parametrize("m,k,n", [(0, 5, 3), (4, 0, 3), (4, 5, 0)])
def test_empty_products(m, k, n):
    a, b = randn(m, k), randn(k, n)
    got, want, cg = compiled(lambda x, y: (x @ y) + 1, a, b)
    close(got, want)


def test_addmm_beta_zero_ignores_nan():
    c = ember.full((3, 4), float("nan"))
    a, b = randn(3, 5), randn(5, 4)
    got, want, cg = compiled(lambda z, x, y: ember.addmm(z, x, y, beta=0), c, a, b)
    assert not np.isnan(got.numpy()).any()
    close(got, want)


def test_dynamic_sizes_share_one_library():
    fn = ember.compile(lambda x, w, b: F.relu(F.linear(x, w, b)), backend="c", dynamic=True)
    w, b = randn(6, 10), randn(6)
    builds = None
    for rows in (5, 9, 17):
        x = randn(rows, 10)
        close(fn(x, w, b), F.relu(F.linear(x, w, b)))
        cg = cbackend.last_compiled()
        no_externs(cg)
        if builds is None:
            builds = cbackend.BUILDS[0]
    assert cbackend.BUILDS[0] == builds


def test_dynamic_batched_and_addmm():
    bmm = ember.compile(lambda x, y: ember.bmm(x, y.transpose(1, 2)) * 2, backend="c",
                        dynamic=True)
    addmm = ember.compile(lambda c, x, y: ember.addmm(c, x, y, beta=0.5, alpha=2.0),
                          backend="c", dynamic=True)
    for n in (3, 6):
        x, y = randn(n, 4, 5), randn(n, 7, 5)
        close(bmm(x, y), ember.bmm(x, y.transpose(1, 2)) * 2)
        c, a, b = randn(n, 7), randn(n, 5), randn(5, 7)
        close(addmm(c, a, b), ember.addmm(c, a, b, beta=0.5, alpha=2.0))
        assert any(type(k).__name__ == "GemmKernel"
                   for k in cbackend.last_compiled().program.kernels())


# ----------------------------------------------------------------------------- fusion
def test_linear_gelu_is_one_gemm_with_fused_epilogue():
    x, w, b = randn(32, 20), randn(24, 20), randn(24)
    got, want, cg = compiled(lambda p, q, r: F.gelu(F.linear(p, q, r)), x, w, b)
    close(got, want, ulps=16)
    no_externs(cg)
    ks = cg.program.kernels()
    assert len(ks) == 1 and cg.stats.epilogues == 1
    assert ks[0].ops == ["linear", "gelu"]
    # in place: the GEMM writes the output buffer, no buffer holds the raw product
    assert len(cg.program.segments()[0].buffers()) == 4


def test_residual_epilogue_keeps_needed_product():
    def f(x, w, r):
        h = x @ w
        return F.relu(h) + r, h

    x, w, r = randn(16, 8), randn(8, 12), randn(16, 12)
    got, want, cg = compiled(f, x, w, r)
    close(got, want)
    no_externs(cg)
    assert cg.stats.epilogues == 1 and len(cg.program.kernels()) == 1



@pytest.mark.parametrize("dtype", DTYPES)
def test_product_copied_into_zeroed_slice_keeps_zero_fill_first(dtype):
    # backward of ``x[:, :2] @ w``: basic_index_backward is a zero fill of (4, 6) then a copy of
    # the product into columns 0..1; the copy must not join the GEMM's epilogue ahead of the
    # fill (it did, and the fill then erased the product: zero gradients, seen in nn.GRU)
    x, w = randn(4, 6, dtype=dtype), randn(2, 6, dtype=dtype)

    def f(x, w):
        x = x.detach().requires_grad_()
        return ember.autograd.grad((x[:, :2] @ w).sum(), [x])[0]

    got, want, cg = compiled(f, x, w)
    close(got, want)
    assert np.abs(want.numpy()[:, :2]).min() > 0

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_linear_training_step_grads_equal_eager(dtype, act):
    def make():
        ember.manual_seed(0)
        return ember.nn.Sequential(ember.nn.Linear(12, 16), getattr(ember.nn, act.upper()
                                   if act == "gelu" else "ReLU")(), ember.nn.Linear(16, 5)
                                   ).to(dtype)

    x = randn(10, 12, dtype=dtype)
    y = ember.randint(0, 5, (10,))

    def step(m, x, y):
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        return loss

    me, mc = make(), make()
    le = step(me, x, y)
    lc = ember.compile(step, backend="c")(mc, x, y)
    cg = cbackend.last_compiled()
    assert sum(type(k).__name__ == "GemmKernel" for s in cg.program.segments()
               for k in s.kernels) >= 3
    close(lc, le, ulps=64)
    for pe, pc in zip(me.parameters(), mc.parameters()):
        close(pc.grad, pe.grad, ulps=64)


# ----------------------------------------------------------------------------- convolution
CONVS = [
    ((2, 4, 9, 8), (6, 2, 3, 3), dict(stride=2, padding=1, groups=2)),
    ((3, 3, 10), (5, 3, 4), dict(padding=2, dilation=2)),
    ((1, 2, 6, 7), (3, 2, 3, 2), dict(stride=(2, 1), padding=(1, 0))),
    ((2, 3, 5, 5), (4, 3, 1, 1), {}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(CONVS)))
def test_conv_is_im2col_gemm_with_fused_epilogue(dtype, case):
    shape, wshape, kw = CONVS[case]
    conv = F.conv1d if len(shape) == 3 else F.conv2d
    x, w, b = randn(*shape, dtype=dtype), randn(*wshape, dtype=dtype), randn(wshape[0],
                                                                              dtype=dtype)
    got, want, cg = compiled(lambda p, q, r: F.relu(conv(p, q, r, **kw)), x, w, b)
    close(got, want)
    no_externs(cg)
    assert cg.stats.epilogues == 1
    assert [type(k).__name__ for k in cg.program.kernels()] == ["Im2colKernel", "GemmKernel"]
    # a permuted (channels-last) input is read through its strides
    xt = randn(*(shape[:1] + shape[2:] + shape[1:2]), dtype=dtype)
    perm = (0, len(shape) - 1) + tuple(range(1, len(shape) - 1))
    got, want, cg = compiled(lambda p, q: conv(p.permute(*perm), q, **kw), xt, w)
    close(got, want)
    no_externs(cg)


def test_conv_training_grads_equal_eager():
    def make():
        ember.manual_seed(0)
        return ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3, padding=1), ember.nn.ReLU(),
                                   ember.nn.Flatten(), ember.nn.Linear(4 * 6 * 6, 5))

    x, y = randn(2, 3, 6, 6), ember.randint(0, 5, (2,))

    def step(m, x, y):
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        return loss

    me, mc = make(), make()
    le = step(me, x, y)
    lc = ember.compile(step, backend="c")(mc, x, y)
    cg = cbackend.last_compiled()
    assert not any(f.startswith(("convolution", "conv_weight_grad")) for f in cg.stats.fallbacks)
    close(lc, le, ulps=64)
    for pe, pc in zip(me.parameters(), mc.parameters()):
        close(pc.grad, pe.grad, ulps=64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(CONVS)))
def test_conv_weight_grad_in_c_equals_eager(dtype, case):
    shape, wshape, kw = CONVS[case]
    conv = F.conv1d if len(shape) == 3 else F.conv2d
    x, w0 = randn(*shape, dtype=dtype), randn(*wshape, dtype=dtype)
    gy = randn(*conv(x, w0, **kw).shape, dtype=dtype)  # a dense output gradient

    def fn(p, q, r):
        y = conv(p, q, **kw)
        (y * r).sum().backward()
        return y

    grads = []
    for use_c in (True, False):
        w = w0.clone().requires_grad_(True)
        (ember.compile(fn, backend="c") if use_c else fn)(x, w, gy)
        grads.append(w.grad)
        if use_c:
            cg = cbackend.last_compiled()
            assert not any(f.startswith("conv_weight_grad") for f in cg.stats.fallbacks)
    np.testing.assert_array_equal(grads[0].numpy(), grads[1].numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(CONVS)))
def test_conv_input_grad_in_c_equals_eager(dtype, case):
    shape, wshape, kw = CONVS[case]
    conv = F.conv1d if len(shape) == 3 else F.conv2d
    x0, w = randn(*shape, dtype=dtype), randn(*wshape, dtype=dtype)
    gy = randn(*conv(x0, w, **kw).shape, dtype=dtype)

    def fn(p, q, r):
        y = conv(p, q, **kw)
        (y * r).sum().backward()
        return y

    grads = []
    for use_c in (True, False):
        x = x0.clone().requires_grad_(True)
        (ember.compile(fn, backend="c") if use_c else fn)(x, w, gy)
        grads.append(x.grad)
        if use_c:
            cg = cbackend.last_compiled()
            assert not any(f.startswith("conv") for f in cg.stats.fallbacks)
            assert any(getattr(k, "col2im", False) for k in cg.program.kernels())
    np.testing.assert_array_equal(grads[0].numpy(), grads[1].numpy())


def test_conv_transpose_runs_in_c():
    x, w = randn(2, 4, 5, 5), randn(4, 3, 3, 3)
    got, want, cg = compiled(lambda p, q: F.conv_transpose2d(p, q, stride=2, padding=1), x, w)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert cg.stats.externs == 0, cg.stats.fallbacks


def test_integer_matmul_runs_in_c():
    a = ember.randint(0, 5, (3, 4))
    got, want, cg = compiled(lambda x: x @ x.t(), a)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert cg.stats.externs == 0  # tests/compiler/test_products_c.py: every integer dtype


def test_golden_gemm_source():
    from pathlib import Path

    from ember.compiler.c.codegen.unit import generate

    ember.compile(lambda x, w, b: F.gelu(F.linear(x.t(), w, b)), backend="c")(
        randn(3, 4), randn(5, 3), randn(5))
    cg = cbackend.last_compiled()
    src = generate(cbackend.lower_and_schedule(cg.graph), prelude=False)
    path = Path(__file__).parent / "golden" / "linear_gelu_gemm.c"
    if os.environ.get("EMBER_UPDATE_GOLDEN"):
        path.write_text(src)
    assert src == path.read_text(), "generated C changed; EMBER_UPDATE_GOLDEN=1 rewrites it"


# ----------------------------------------------------------------------------- max-autotune
def _tune_fn(x, w, b):
    return F.gelu(F.linear(x, w, b))


@pytest.fixture
def tune_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    autotune.CHOICES.clear()
    yield tmp_path
    autotune.CHOICES.clear()


def test_max_autotune_times_caches_and_equals_eager(tune_dir):
    x, w, b = randn(48, 40), randn(36, 40), randn(36)
    before = dict(autotune.STATS)
    got, want, cg = compiled(_tune_fn, x, w, b, mode="max-autotune")
    close(got, want, ulps=64)
    assert autotune.STATS["timed"] == before["timed"] + 1
    data = json.loads((tune_dir / autotune.FILE_NAME).read_text())
    (entry,) = data.values()
    assert entry["choice"] in entry["timings"] and len(entry["timings"]) >= 3
    gk = cg.program.kernels()[0]
    assert gk.impl == entry["choice"]
    # the same shape again in this process: no timing
    ember.compiler.reset()
    compiled(_tune_fn, x, w, b, mode="max-autotune")
    assert autotune.STATS["timed"] == before["timed"] + 1


def _child(cache_dir, queue):
    os.environ["EMBER_CACHE_DIR"] = cache_dir
    import ember as em
    from ember.compiler.c import backend as cb
    from ember.compiler.c.build import autotune as at
    from ember.config import config as cfg
    cfg.cache_dir = cache_dir
    em.manual_seed(1)
    x, w, b = em.randn(48, 40), em.randn(36, 40), em.randn(36)
    out = em.compile(_tune_fn, backend="c", mode="max-autotune", fullgraph=True)(x, w, b)
    want = _tune_fn(x, w, b)
    queue.put((dict(at.STATS), cb.last_compiled().program.kernels()[0].impl,
               float(np.abs(out.numpy() - want.numpy()).max())))


def test_max_autotune_choice_is_reused_by_a_new_process(tune_dir):
    x, w, b = randn(48, 40), randn(36, 40), randn(36)
    compiled(_tune_fn, x, w, b, mode="max-autotune")
    choice = cbackend.last_compiled().program.kernels()[0].impl
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(str(tune_dir), q))
    p.start()
    stats, impl, err = q.get(timeout=120)
    p.join(timeout=30)
    assert stats["timed"] == 0 and stats["cached"] == 1
    assert impl == choice and err < 1e-4


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", [0, 1, 2])
def test_forced_template_equals_eager(tune_dir, monkeypatch, dtype, variant):
    impl = TEMPLATES[dtype.name][variant]
    monkeypatch.setattr(autotune, "FORCE", impl)

    def f(x, w, b, r):
        return F.relu(F.linear(x, w, b)) + r

    x, w, b = randn(37, 300, dtype=dtype), randn(45, 300, dtype=dtype), randn(45, dtype=dtype)
    r = randn(37, 45, dtype=dtype)
    got, want, cg = compiled(f, x, w, b, r, mode="max-autotune")
    assert cg.program.kernels()[0].impl == impl
    close(got, want, ulps=64)
    a, bb = randn(3, 20, 33, dtype=dtype), randn(3, 33, 17, dtype=dtype)
    got, want, cg = compiled(lambda p, q: p.transpose(1, 2)[:, :, :20] @ q[:, :20], a, bb,
                             mode="max-autotune")
    close(got, want, ulps=64)
    # convolution: the tile epilogue unravels (n, o, h, w) from the GEMM's flat position
    x, w, b = randn(2, 4, 9, 8, dtype=dtype), randn(6, 2, 3, 3, dtype=dtype), randn(6,
                                                                                  dtype=dtype)
    got, want, cg = compiled(lambda p, q, r: F.relu(F.conv2d(p, q, r, padding=1, groups=2)),
                             x, w, b, mode="max-autotune")
    assert cg.program.kernels()[1].impl == impl and cg.stats.epilogues == 1
    close(got, want, ulps=64)


def test_identical_gemm_kernels_share_one_function():
    """Two layers whose products and residual epilogues differ only in their buffers (and in
    the epilogue locals' numbering) compile to one C function called twice."""
    rng = np.random.default_rng(3)
    x = ember.tensor(rng.standard_normal((64, 32), dtype=np.float32))
    w1, w2 = (ember.tensor(rng.standard_normal((32, 32), dtype=np.float32)) for _ in range(2))

    def f(x, w1, w2):
        h = x + F.linear(x, w1)
        return h + F.linear(h, w2)

    close(*compiled(f, x, w1, w2)[:2])
    src = ember.compiler.codegen(f, x, w1, w2)
    gemms = [line for line in src.splitlines()
             if line.startswith(("static void", "__attribute__((noinline)) static void"))
             and "(GEMM" in src.splitlines()[src.splitlines().index(line) - 1]]
    assert len(gemms) == 1, gemms

"""The generated GEMM template (csrc/gemm_tmpl_body.c.in, gemm_micro.h.in) on each x86-64 level.

Each level's build is made explicitly (``-march=<level>``, the level's tile from
``codegen.gemm.templates_for``) and run where the host can run it (``toolchain.host_can_run``):
the AVX-512 tile, the AVX2 tile, and the baseline (16-byte vectors) build.  Products whose
sizes are not multiples of the tile, the packed block or the k block, of size 1 and 0,
transposed and strided operands, batches, fused epilogues, on one and two threads, are checked
against torch with the rigorous error bound of a K-term dot product,
``|got - want| <= 2 (K + 2) eps (|A| |B|)``: a missing, doubled or misplaced term is far
outside it.  No timing here (benchmarks/bench_linalg.py measures).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.build import autotune
from ember.compiler.c.build.toolchain import host_can_run
from ember.compiler.c.codegen import gemm as gemm_codegen
from ember.config import config

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

F = ember.nn.functional
MARCHES = ["x86-64-v4", "x86-64-v3", "x86-64"]


def _bound(a: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    k = a.shape[-1]
    return 2 * (k + 2) * eps * (np.abs(a) @ np.abs(b)) + np.finfo(a.dtype).tiny


def _check(got, want, a, b):
    """``got`` (ember) equals ``want`` (torch) within the bound of the product ``a @ b``
    (numpy operands as the product sees them)."""
    g, w = got.detach().numpy(), want.detach().numpy()
    assert g.shape == w.shape and g.dtype == w.dtype
    eps = float(np.finfo(g.dtype).eps)
    bound = _bound(a.astype(np.float64), b.astype(np.float64), eps)
    bound = bound + 4 * eps * np.abs(w)  # the epilogue's own rounding (bias, relu)
    assert np.all(np.abs(g.astype(np.float64) - w) <= bound), float(
        np.max(np.abs(g.astype(np.float64) - w) - bound))


@pytest.fixture(params=MARCHES)
def template_build(request, monkeypatch, tmp_path):
    """Every product of the compiled function runs the template built for one level."""
    march = request.param
    if not host_can_run(march):
        pytest.skip(f"the host cannot run {march} code")
    extra = (f"-march={march}",) + (("-mno-avx512f",) if march != "x86-64-v4" else ())
    monkeypatch.setattr(cbackend, "EXTRA_FLAGS", cbackend.EXTRA_FLAGS + extra)
    monkeypatch.setattr(cbackend, "_load_plan", lambda key: None)
    tiles = gemm_codegen.templates_for(march)
    monkeypatch.setattr(gemm_codegen, "TEMPLATES", tiles)
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))   # autotune choices stay here
    autotune.CHOICES.clear()
    yield tiles
    autotune.CHOICES.clear()
    ember.set_num_threads(ember.get_num_threads())


def _compile_forced(monkeypatch, tiles, dtype, fn, *args):
    impl = tiles[dtype.name][0]
    monkeypatch.setattr(autotune, "FORCE", impl)
    out = ember.compile(fn, backend="c", fullgraph=True, dynamic=False,
                        mode="max-autotune")
    got = out(*args)
    cg = cbackend.last_compiled()
    gemms = [k for k in cg.program.kernels() if type(k).__name__ == "GemmKernel"]
    assert gemms and all(k.impl == impl for k in gemms), [k.impl for k in gemms]
    return out, got


# (M, K, N): tile edges (12/6 rows, 32/16 columns), the 120-row block, the 256 k block
SHAPES = [(1, 1, 1), (1, 300, 70), (7, 5, 3), (13, 257, 33), (121, 513, 65), (250, 40, 1),
          (130, 20, 1040)]   # (the last: more than 512 columns, 65 slivers of 16)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64], ids=["f32", "f64"])
def test_template_products_equal_torch(template_build, monkeypatch, dtype):
    rng = np.random.default_rng(7)
    npdt = np.float32 if dtype == ember.float32 else np.float64
    mats = []
    for m, k, n in SHAPES:
        mats.append(rng.standard_normal((m, k)).astype(npdt))
        mats.append(rng.standard_normal((k, n)).astype(npdt))

    def fn(*xs):
        return tuple(xs[j] @ xs[j + 1] for j in range(0, len(xs), 2))

    ex = [ember.tensor(x) for x in mats]
    tx = [torch.tensor(x) for x in mats]
    f, _ = _compile_forced(monkeypatch, template_build, dtype, fn, *ex)
    want = fn(*tx)
    for threads in (1, 2):
        ember.set_num_threads(threads)
        got = f(*ex)
        for j, (g, w) in enumerate(zip(got, want)):
            _check(g, w, mats[2 * j], mats[2 * j + 1])


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64], ids=["f32", "f64"])
def test_template_layouts_and_epilogues_equal_torch(template_build, monkeypatch, dtype):
    """Transposed and sliced operands (A^T and B^T as the backward reads them), a linear layer
    with bias and relu fused, a batched product with a broadcast operand, K = 0, and products
    of a few rows in each of the small path's layouts."""
    rng = np.random.default_rng(8)
    npdt = np.float32 if dtype == ember.float32 else np.float64
    a = rng.standard_normal((300, 130)).astype(npdt)    # read as a^T: 130 x 300 (ars = 1)
    b = rng.standard_normal((70, 300)).astype(npdt)     # b^T: 300 x 70 (brs = 1)
    c = rng.standard_normal((131, 90)).astype(npdt)     # sliced: rows 1.., every 2nd column
    d = rng.standard_normal((45, 38)).astype(npdt)
    x = rng.standard_normal((3, 37, 64)).astype(npdt)   # linear over (3, 37) rows
    w = rng.standard_normal((50, 64)).astype(npdt)
    bias = rng.standard_normal((50,)).astype(npdt)
    p = rng.standard_normal((4, 29, 40)).astype(npdt)
    q = rng.standard_normal((40, 33)).astype(npdt)      # broadcast over p's batch
    e = rng.standard_normal((5, 0)).astype(npdt)
    z = rng.standard_normal((0, 7)).astype(npdt)
    s3 = rng.standard_normal((3, 300)).astype(npdt)     # a few rows: B read in place
    s2 = rng.standard_normal((300, 2)).astype(npdt)

    def fn(a, b, c, d, x, w, bias, p, q, e, z, s3, s2, mod):
        lin = mod.relu(mod.linear(x, w, bias))
        return (a.t() @ b.t(), c[1:, ::2] @ d, lin, p @ q, e @ z,
                mod.linear(s3, b, b[:, 0]), s2.t() @ b.t(), mod.linear(s3[1], b))

    vals = (a, b, c, d, x, w, bias, p, q, e, z, s3, s2)
    ev = [ember.tensor(v) for v in vals]
    tv = [torch.tensor(v) for v in vals]
    f, _ = _compile_forced(monkeypatch, template_build, dtype,
                           lambda *xs: fn(*xs, F), *ev)
    want = fn(*tv, torch.nn.functional)
    operands = [(a.T, b.T), (c[1:, ::2], d), (x.reshape(-1, 64), w.T), (p, q), (e, z),
                (s3, b.T), (s2.T, b.T), (s3[1:2], b.T)]
    for threads in (1, 2):
        ember.set_num_threads(threads)
        got = f(*ev)
        for g, wt, (l, r) in zip(got, want, operands):
            if g.shape[-1] == 50 or g.ndim == 1:  # linear layers: compare as rows
                g, wt = g.reshape(-1, g.shape[-1]), wt.reshape(-1, wt.shape[-1])
            _check(g, wt, l, r)


def test_default_mode_choice_follows_config_and_cached_autotune(monkeypatch, tmp_path):
    """``config.c_gemm``: "template" and "blas" decide every product of a default-mode
    compile; "auto" takes the choice max-autotune stored for the same kernel (no timing)."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(cbackend, "_load_plan", lambda key: None)
    autotune.CHOICES.clear()
    rng = np.random.default_rng(9)
    x = ember.tensor(rng.standard_normal((40, 48), dtype=np.float32))
    w = ember.tensor(rng.standard_normal((36, 48), dtype=np.float32))

    def fn(x, w):
        return F.relu(F.linear(x, w))

    def impl_with(way, mode="default"):
        monkeypatch.setattr(config, "c_gemm", way)
        ember.compiler.reset()
        got = ember.compile(fn, backend="c", fullgraph=True, dynamic=False, mode=mode)(x, w)
        want = torch.relu(torch.tensor(x.numpy()) @ torch.tensor(w.numpy()).T)
        _check(got, want, x.numpy(), w.numpy().T)
        (k,) = [k for k in cbackend.last_compiled().program.kernels()
                if type(k).__name__ == "GemmKernel"]
        return k.impl

    tile = gemm_codegen.TEMPLATES["float32"][0]
    assert impl_with("template") == tile
    assert impl_with("blas") == "blas"
    assert impl_with("auto") == "blas"          # the measured rule: BLAS on this shape
    monkeypatch.setattr(autotune, "FORCE", None)
    monkeypatch.setattr(autotune, "_time", lambda k, p, f: {c: (0.0 if c == tile else 1.0)
                                                              for c in autotune.candidates(k)})
    assert impl_with("auto", mode="max-autotune") == tile   # stored in tmp_path
    autotune.CHOICES.clear()                                 # read back from the file
    assert impl_with("auto") == tile
    autotune.CHOICES.clear()
    with pytest.raises(ember.errors.EmberValueError, match=r"\[compile\] config.c_gemm"):
        impl_with("mkl")


def test_measured_rule_takes_the_template_for_wide_float32_products():
    """``template_wins`` (benchmarks/RESULTS.md, "The float32 GEMM template against MKL"):
    on an AVX-512 build the template runs the char GPT's, MiniLM's and the MLP's float32
    products; narrow outputs, a few rows, float64 and AVX2 builds keep BLAS; small k does not."""
    def kernel(m, n, k, dtype=ember.float32):
        return type("K", (), {"m": m, "n": n, "k": k, "half": "", "batch": (), "impl": "",
                              "dtype": dtype})()

    wide = gemm_codegen.templates_for("x86-64-v4")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gemm_codegen, "TEMPLATES", wide)
        assert gemm_codegen.template_wins(kernel(2048, 1152, 384))
        assert gemm_codegen.template_wins(kernel(256, 512, 784))
        assert not gemm_codegen.template_wins(kernel(256, 65, 384))    # the GPT's head
        assert not gemm_codegen.template_wins(kernel(4, 1536, 384))    # the small-M path
        assert gemm_codegen.template_wins(kernel(512, 784, 256))       # the MLP's weight grad
        assert gemm_codegen.template_wins(kernel(256, 512, 10))        # ... and k = 10
        assert not gemm_codegen.template_wins(kernel(2048, 1152, 384, ember.float64))
        mp.setattr(gemm_codegen, "TEMPLATES", gemm_codegen.templates_for("x86-64-v3"))
        assert not gemm_codegen.template_wins(kernel(2048, 1152, 384))
    assert gemm_codegen.half_impl("x86-64-v4") == "htmpl_14x32"
    assert gemm_codegen.half_impl("x86-64-v3") == "htmpl_6x16"


def test_template_fuses_adamw_update_vectorized_and_equal_torch(monkeypatch, tmp_path):
    """A linear layer's weight gradient with AdamW's update fused as the template's epilogue
    (the MLP step's products): the parameters after three compiled steps equal torch's, and
    the epilogue's column loop is marked ``omp simd`` (in the template's outlined parallel
    region it ran scalar without it: 1.5x BLAS's time, docs/compiler.md)."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(autotune, "FORCE", gemm_codegen.TEMPLATES["float32"][0])
    rng = np.random.default_rng(9)
    x = rng.standard_normal((40, 70)).astype(np.float32)
    g = rng.standard_normal((40, 130)).astype(np.float32)
    w0 = rng.standard_normal((130, 70)).astype(np.float32)
    ew, tw = ember.nn.Parameter(ember.tensor(w0)), torch.nn.Parameter(torch.tensor(w0))
    eopt = ember.optim.AdamW([ew], lr=0.01, weight_decay=0.1)
    topt = torch.optim.AdamW([tw], lr=0.01, weight_decay=0.1)

    def step(w, opt, x, g, mod):
        (mod.linear(x, w) * g).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    cstep = ember.compile(step, backend="c", mode="max-autotune")
    for _ in range(3):
        cstep(ew, eopt, ember.tensor(x), ember.tensor(g), F)
        step(tw, topt, torch.tensor(x), torch.tensor(g), torch.nn.functional)
    np.testing.assert_allclose(ew.detach().numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)
    cg = cbackend.last_compiled()
    fused = [k for k in cg.program.kernels()
             if type(k).__name__ == "GemmKernel" and len(k.epilogue) > 3]
    assert fused and all(k.impl.startswith("tmpl_") for k in fused), fused
    text = gemm_codegen.gemm_kernel(fused[0], cg.program, True)
    after = text[text.index("for (int64_t row = ic;"):].splitlines()
    assert [x.strip() for x in after[1:3]] == ["#ifdef _OPENMP", "#pragma omp simd"], after[:4]


# (M, K, N) split over two threads (gemm_tmpl_body.c.in): few row blocks by columns (each
# thread a run of B slivers, shared A panels: one k block / four k blocks), and many row blocks
# as units of row blocks x column runs, odd units walking their slivers backwards
SPLIT_SHAPES = [(256, 384, 1536), (256, 1536, 384), (28, 384, 1152), (100, 96, 200),
                (1000, 96, 200)]


def test_template_thread_split_bitwise_equal_one_thread(template_build, monkeypatch):
    rng = np.random.default_rng(11)
    mats = []
    for m, k, n in SPLIT_SHAPES:
        mats.append(rng.standard_normal((m, k)).astype(np.float32))
        mats.append(rng.standard_normal((n, k)).astype(np.float32))

    def fn(*xs):   # linear's layout (B transposed, as the GPT's layers) plus a bias-free relu
        return tuple((xs[j] @ xs[j + 1].t()).relu() for j in range(0, len(xs), 2))

    ex = [ember.tensor(x) for x in mats]
    f, _ = _compile_forced(monkeypatch, template_build, ember.float32, fn, *ex)
    want = fn(*[torch.tensor(x) for x in mats])
    outs = {}
    for threads in (1, 2, 1, 2):
        ember.set_num_threads(threads)
        got = [g.numpy().copy() for g in f(*ex)]
        if threads in outs:
            continue
        outs[threads] = got
        for j, (g, w) in enumerate(zip(got, want)):
            _check(ember.tensor(g), w, mats[2 * j], mats[2 * j + 1].T)
    for g1, g2 in zip(outs[1], outs[2]):
        assert g1.tobytes() == g2.tobytes()


# (M, K, N, layout): few row blocks, split by columns at two threads (at three too where B has
# 6 slivers): a partial last row block, tile and sliver edges, three k blocks with a partial
# one, an odd number of slivers (runs of unequal length), transposed A (the weight gradient's
# layout), B as stored (nn); many row blocks (the unit split at two threads, by columns at three)
COLUMN_SHAPES = [(257, 1000, 200, "nt"), (13, 384, 130, "nn"), (300, 520, 1152, "tn"),
                 (1000, 96, 200, "nt"), (64, 3, 250, "nt")]


@pytest.mark.parametrize("which", [0, 2], ids=["first_tile", "third_tile"])
def test_template_column_split_bitwise_equal_one_thread(template_build, monkeypatch, which):
    """The column split (each thread its own B slivers, A panels packed once and shared, a
    thread done with its run taking another's row blocks) computes the same tiles as one
    thread: equal to torch within the bound and equal bit for bit at 1, 2 and 3 threads (three
    threads on two cores: one often late, its run's rest taken by the others)."""
    rng = np.random.default_rng(12)
    mats, views = [], []
    for m, k, n, form in COLUMN_SHAPES:
        a = rng.standard_normal((k, m) if form == "tn" else (m, k)).astype(np.float32)
        b = rng.standard_normal((n, k) if form == "nt" else (k, n)).astype(np.float32)
        mats += [a, b]
        views.append((a.T if form == "tn" else a, b.T if form == "nt" else b))

    def fn(*xs):
        out = []
        for j, (_, _, _, form) in enumerate(COLUMN_SHAPES):
            a, b = xs[2 * j], xs[2 * j + 1]
            a = a.t() if form == "tn" else a
            out.append(((a @ b.t()) if form == "nt" else (a @ b)) * 0.5)
        return tuple(out)

    impl = template_build["float32"][which]
    monkeypatch.setattr(autotune, "FORCE", impl)
    ex = [ember.tensor(x) for x in mats]
    f = ember.compile(fn, backend="c", fullgraph=True, dynamic=False, mode="max-autotune")
    f(*ex)
    gemms = [k for k in cbackend.last_compiled().program.kernels()
             if type(k).__name__ == "GemmKernel"]
    assert len(gemms) == len(COLUMN_SHAPES) and all(k.impl == impl for k in gemms)
    want = fn(*[torch.tensor(x) for x in mats])
    outs = {}
    for threads in (1, 2, 3, 2, 3):
        ember.set_num_threads(threads)
        got = [g.numpy().copy() for g in f(*ex)]
        if threads not in outs:
            outs[threads] = got
            for g, w, (a, b) in zip(got, want, views):
                _check(ember.tensor(g), w, a, b)
        for g1, g in zip(outs[1], got):
            assert g1.tobytes() == g.tobytes()


def test_default_tile_covers_short_products_exactly():
    """``default_tile``: a product of at most EXACT_TILE_ROWS rows that the first tile pads
    takes a later tile that covers it exactly (the GPT's 256-row products: 8x48); otherwise,
    and for taller products, the first tile."""
    def kernel(m, n):
        return type("K", (), {"m": m, "n": n, "dtype": ember.float32})()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gemm_codegen, "TEMPLATES", gemm_codegen.templates_for("x86-64-v4"))
        assert gemm_codegen.default_tile(kernel(256, 1152)) == "tmpl_8x48"
        assert gemm_codegen.default_tile(kernel(256, 384)) == "tmpl_8x48"
        assert gemm_codegen.default_tile(kernel(256, 512)) == "tmpl_14x32"   # 512 % 48
        assert gemm_codegen.default_tile(kernel(252, 1152)) == "tmpl_14x32"  # 14 x 18 rows
        assert gemm_codegen.default_tile(kernel(2048, 1152)) == "tmpl_14x32"  # tall
        mp.setattr(gemm_codegen, "TEMPLATES", gemm_codegen.templates_for("x86-64-v3"))
        assert gemm_codegen.default_tile(kernel(256, 1152)) == "tmpl_4x16"
        assert gemm_codegen.default_tile(kernel(258, 1152)) == "tmpl_6x16"

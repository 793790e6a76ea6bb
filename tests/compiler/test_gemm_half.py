"""Compiled float16/bfloat16 products in the GEMM template (codegen/gemm.py, "half";
csrc/gemm_half*.h.in): operands converted while packed, float32 accumulation, one rounding.

Each code path is built explicitly, whatever the host is (``-march=<level>``, the level's
tile from ``codegen.gemm.templates_for``), and run where the host can run it: AVX-512
(float panels, ``vcvtph2ps`` / shift), AVX-512 with AVX512-BF16 and the ``vdpbf16ps`` pair
kernel (``EMBER_GEMM_BF16_DOT``), AVX-512 with AMX-BF16 (the tile kernel), x86-64-v3 (F16C,
the 6x16 tile) and baseline x86-64 (the portable conversions).  Results are checked against
torch 2.13's CPU half products: both round a float32 accumulation once, so they differ by at
most one rounding of the dtype plus the float32 error bound of a K-term dot product.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.build import autotune
from ember.compiler.c.build.toolchain import cpu_features, host_can_run
from ember.compiler.c.codegen import gemm as gemm_codegen
from ember.config import config

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

F = ember.nn.functional
# (march, extra flags, the pair kernel on, host features it needs)
BUILDS = {"v4": ("x86-64-v4", (), False, ()),
          "v4-bf16dot": ("x86-64-v4", ("-mavx512bf16",), True, ("avx512_bf16",)),
          "v4-amx": ("x86-64-v4", ("-mamx-tile", "-mamx-bf16"), False, ("amx_tile", "amx_bf16")),
          "v3": ("x86-64-v3", ("-mno-avx512f",), False, ()),
          "x86-64": ("x86-64", ("-mno-avx512f",), False, ())}
TORCH = {"bfloat16": torch.bfloat16, "float16": torch.float16}


@pytest.fixture(params=list(BUILDS))
def build(request, monkeypatch, tmp_path):
    """Every product of the compiled function runs the half template built for one ISA."""
    march, extra, dot, needs = BUILDS[request.param]
    feats = set(cpu_features().partition(":")[2].split(","))
    if not host_can_run(march) or not set(needs) <= feats:
        pytest.skip(f"the host cannot run {request.param} code")
    monkeypatch.setattr(cbackend, "EXTRA_FLAGS",
                        cbackend.EXTRA_FLAGS + (f"-march={march}",) + extra)
    monkeypatch.setattr(cbackend, "_load_plan", lambda key: None)
    monkeypatch.setattr(gemm_codegen, "TEMPLATES", gemm_codegen.templates_for(march))
    monkeypatch.setattr(gemm_codegen, "BF16_DOT", dot)
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    autotune.CHOICES.clear()
    yield request.param
    autotune.CHOICES.clear()
    ember.set_num_threads(ember.get_num_threads())


def _gemms():
    cg = cbackend.last_compiled()
    return cg, [k for k in cg.program.kernels() if type(k).__name__ == "GemmKernel"]


def _check(got, want, a, b, extra=None):
    """ember's half result within one rounding of the dtype plus the float32 bound of the
    product ``a @ b`` (float64 arrays of the operands' values) of torch's."""
    g = got.float().numpy().astype(np.float64)
    w = want.float().numpy().astype(np.float64)
    assert g.shape == w.shape
    eps_dt = float(torch.finfo(want.dtype).eps)
    eps32 = float(np.finfo(np.float32).eps)
    k = a.shape[-1]
    bound = eps_dt * np.abs(w) + 2 * (k + 2) * eps32 * (np.abs(a) @ np.abs(b)) + 1e-30
    if extra is not None:
        bound = bound + extra
    assert np.all(np.abs(g - w) <= bound), float(np.max(np.abs(g - w) - bound))


def _pair(rng, shape, dt):
    x = rng.standard_normal(shape).astype(np.float32)
    t = torch.tensor(x).to(TORCH[dt])
    return ember.tensor(x).to(getattr(ember, dt)), t, t.double().numpy()


def _compile(fn):
    return ember.compile(fn, backend="c", fullgraph=True, dynamic=False)


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("mkn", [(37, 53, 71), (130, 384, 96), (64, 385, 33), (29, 1, 17),
                                 (16, 800, 40)])
def test_matmul(build, dt, mkn):
    m, k, n = mkn
    rng = np.random.default_rng(m * 7 + k)
    ea, ta, na = _pair(rng, (m, k), dt)
    eb, tb, nb = _pair(rng, (k, n), dt)
    got = _compile(lambda x, y: x @ y)(ea, eb)
    assert got.dtype == getattr(ember, dt)
    cg, gemms = _gemms()
    assert [g.impl for g in gemms] == [gemm_codegen.half_impl()]
    assert gemms[0].half == (("b", "b") if dt == "bfloat16" else ("h", "h"))
    _check(got, ta @ tb, na, nb)
    if dt == "bfloat16" and build in ("v4-bf16dot", "v4-amx") and shutil.which("objdump"):
        dis = subprocess.run(["objdump", "-d", cg.path], capture_output=True, text=True).stdout
        assert ("tdpbf16ps" if build == "v4-amx" else "vdpbf16ps") in dis


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_transposed_and_batched(build, dt):
    rng = np.random.default_rng(3)
    ea, ta, na = _pair(rng, (3, 40, 50), dt)
    eb, tb, nb = _pair(rng, (3, 45, 40), dt)
    got = _compile(lambda x, y: x.transpose(1, 2) @ y.transpose(1, 2))(ea, eb)
    _check(got, ta.transpose(1, 2) @ tb.transpose(1, 2), na.transpose(0, 2, 1),
           nb.transpose(0, 2, 1))
    got = _compile(lambda x, y: ember.bmm(x, y))(ea.transpose(1, 2).contiguous(), eb[:, :, :45]
                                                 .transpose(1, 2).contiguous()[:, :45, :])
    assert got.shape == (3, 50, 45)


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_linear_bias_gelu(build, dt):
    rng = np.random.default_rng(5)
    ex, tx, nx = _pair(rng, (2, 37, 96), dt)
    ew, tw, nw = _pair(rng, (70, 96), dt)
    eb, tb, _ = _pair(rng, (70,), dt)
    got = _compile(lambda x, w, b: F.linear(x, w, b))(ex, ew, eb)
    want = torch.nn.functional.linear(tx, tw, tb)
    _check(got, want, nx, nw.T)
    assert _gemms()[1][0].half
    got = _compile(lambda x, w, b: F.gelu(F.linear(x, w, b)))(ex, ew, eb)
    want = torch.nn.functional.gelu(torch.nn.functional.linear(tx, tw, tb))
    # GELU's slope is below 1.13: the product's bound carries over, plus GELU's own rounding
    eps_dt = float(torch.finfo(want.dtype).eps)
    _check(got, want, nx, 1.13 * nw.T, extra=2 * eps_dt * np.abs(want.float().numpy()))


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_addmm_alpha_beta(build, dt):
    rng = np.random.default_rng(7)
    ec, tc, nc = _pair(rng, (33, 48), dt)
    ea, ta, na = _pair(rng, (33, 64), dt)
    eb, tb, nb = _pair(rng, (64, 48), dt)
    got = _compile(lambda c, a, b: ember.addmm(c, a, b, beta=0.5, alpha=2.0))(ec, ea, eb)
    want = torch.addmm(tc, ta, tb, beta=0.5, alpha=2.0)
    _check(got, want, 2 * na, nb, extra=0.5 * np.abs(nc) * 4 * float(torch.finfo(tc.dtype).eps))


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("geom", [(3, 16, 3, 1, 1, 1, 1, False), (8, 12, 3, 2, 0, 1, 2, True),
                                  (4, 40, 5, 1, 2, 2, 1, False), (32, 8, 1, 1, 0, 1, 1, True)])
def test_conv2d(build, dt, geom):
    """A half conv2d: im2col into half columns and one half template GEMM per (sample,
    group), no widened copies; without a bias one rounding, as torch's CPU conv; with a bias
    ember (eager and compiled) rounds the convolution, then the sum, as its eager does."""
    cin, cout, k, s, p, d, g, bias = geom
    rng = np.random.default_rng(cin * 31 + cout)
    ex, tx, nx = _pair(rng, (2, cin, 13, 11), dt)
    ew, tw, nw = _pair(rng, (cout, cin // g, k, k), dt)
    eb, tb, _ = _pair(rng, (cout,), dt)
    kw = dict(stride=s, padding=p, dilation=d, groups=g)
    got = _compile(lambda x, w, b: F.conv2d(x, w, b if bias else None, **kw))(ex, ew, eb)
    assert got.dtype == getattr(ember, dt)
    cg, gemms = _gemms()
    code = "b" if dt == "bfloat16" else "h"
    assert [gk.half for gk in gemms] == [(code, code)]
    assert not any("to_float32" in kn.ops for kn in cg.program.kernels())   # no widening
    want = torch.nn.functional.conv2d(tx, tw, tb if bias else None, **kw)
    eps_dt = float(torch.finfo(want.dtype).eps)
    eps32 = float(np.finfo(np.float32).eps)
    w = want.float().numpy().astype(np.float64)
    mag = torch.nn.functional.conv2d(torch.tensor(np.abs(nx)), torch.tensor(np.abs(nw)),
                                     **kw).numpy()
    kk = cin // g * k * k
    # one rounding and float32's bound of a kk-term sum; a bias: the conv's own rounding
    bound = eps_dt * np.abs(w) + 2 * (kk + 2) * eps32 * mag + (eps_dt * mag if bias else 0)
    diff = np.abs(got.float().numpy().astype(np.float64) - w)
    assert np.all(diff <= bound + 1e-30), float(np.max(diff - bound))
    eager = F.conv2d(ex, ew, eb if bias else None, **kw).float().numpy()
    assert np.all(np.abs(got.float().numpy() - eager) <= 2 * bound + 1e-30)


def _conv_bound(want, mag, terms, extra=0.0):
    """One rounding of the dtype plus float32's bound of a ``terms``-term sum of magnitude
    ``mag`` (float64 arrays) around torch's half result ``want``."""
    eps_dt = float(torch.finfo(want.dtype).eps)
    eps32 = float(np.finfo(np.float32).eps)
    w = want.detach().float().numpy().astype(np.float64)
    return w, eps_dt * np.abs(w) + 2 * (terms + 2) * eps32 * mag + extra + 1e-30


def _within(got, want, eager, mag, terms, extra=0.0):
    """ember's compiled half result within the bound of torch's, and of eager ember's."""
    w, bound = _conv_bound(want, mag, terms, extra)
    g = got.detach().float().numpy().astype(np.float64)
    assert g.shape == w.shape
    assert np.all(np.abs(g - w) <= bound), float(np.max(np.abs(g - w) - bound))
    assert np.all(np.abs(g - eager.detach().float().numpy()) <= 2 * bound)


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("geom", [(6, 8, 3, 2, 1, 1, 2), (16, 40, 3, 1, 2, 2, 1)])
def test_conv2d_backward(build, dt, geom):
    """conv2d's forward and backward in one compiled step: conv_input_grad (the half weight
    and gradient in a half GEMM, col2im in float32) and conv_weight_grad (half columns of the
    input, per-sample float32 products summed in float32) are half template GEMMs, no
    widened copies; each gradient rounded once, within one rounding plus float32's bound of
    torch's half backward."""
    cin, cout, k, s, p, d, g = geom
    rng = np.random.default_rng(cin * 7 + cout)
    ex, tx, nx = _pair(rng, (3, cin, 11, 10), dt)
    ew, tw, nw = _pair(rng, (cout, cin // g, k, k), dt)
    kw = dict(stride=s, padding=p, dilation=d, groups=g)
    egy, tgy, ngy = _pair(rng, tuple(torch.nn.functional.conv2d(tx, tw, **kw).shape), dt)

    def step(x, w, gy):
        x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
        out = F.conv2d(x, w, **kw)
        (out * gy).sum().backward()
        return out, x.grad, w.grad

    got = _compile(step)(ex, ew, egy)
    cg, gemms = _gemms()
    code = "b" if dt == "bfloat16" else "h"
    assert sorted(gk.ops[0] for gk in gemms) == ["conv_input_grad", "conv_weight_grad",
                                                "convolution"]
    assert all(gk.half == (code, code) for gk in gemms)
    assert not any("to_float32" in kn.ops for kn in cg.program.kernels())   # no widening
    eager = step(ex, ew, egy)
    tx, tw = tx.requires_grad_(), tw.requires_grad_()
    tout = torch.nn.functional.conv2d(tx, tw, **kw)
    (tout * tgy).sum().backward()
    ax, aw, agy = (torch.tensor(np.abs(v)) for v in (nx, nw, ngy))
    _within(got[0], tout, eager[0], torch.nn.functional.conv2d(ax, aw, **kw).numpy(),
            cin // g * k * k)
    _within(got[1], tx.grad, eager[1],
            torch.nn.grad.conv2d_input(ax.shape, aw, agy, **kw).numpy(), cout // g * k * k)
    _within(got[2], tw.grad, eager[2],
            torch.nn.grad.conv2d_weight(ax, aw.shape, agy, **kw).numpy(),
            ngy.size // ngy.shape[1])   # N * Ho * Wo terms


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("geom", [(8, 6, 3, 2, 1, 1, 1, 2, False),
                                  (12, 16, 4, 2, 1, 0, 2, 1, True)])
def test_conv_transpose2d(build, dt, geom):
    """A half conv_transpose2d (conv_input_grad): one half template GEMM per (sample, group)
    into float32 columns, col2im, one rounding (a bias: added after it, as eager)."""
    cin, cout, k, s, p, op, d, g, bias = geom
    rng = np.random.default_rng(cin * 5 + cout)
    ex, tx, nx = _pair(rng, (2, cin, 7, 9), dt)
    ew, tw, nw = _pair(rng, (cin, cout // g, k, k), dt)
    eb, tb, _ = _pair(rng, (cout,), dt)
    kw = dict(stride=s, padding=p, output_padding=op, groups=g, dilation=d)
    got = _compile(lambda x, w, b: F.conv_transpose2d(x, w, b if bias else None, **kw))(
        ex, ew, eb)
    cg, gemms = _gemms()
    code = "b" if dt == "bfloat16" else "h"
    assert [gk.half for gk in gemms] == [(code, code)]
    assert not any("to_float32" in kn.ops for kn in cg.program.kernels())
    want = torch.nn.functional.conv_transpose2d(tx, tw, tb if bias else None, **kw)
    mag = torch.nn.functional.conv_transpose2d(torch.tensor(np.abs(nx)),
                                               torch.tensor(np.abs(nw)), **kw).numpy()
    eps_dt = float(torch.finfo(want.dtype).eps)
    eager = F.conv_transpose2d(ex, ew, eb if bias else None, **kw)
    _within(got, want, eager, mag, cin // g * k * k, eps_dt * mag if bias else 0.0)


def test_conv_weight_grad_runtime_batch():
    """dynamic=True: conv_weight_grad's half GEMM runs over a runtime batch, its per-sample
    float32 products summed by the runtime batch-sum kernel, then rounded once."""
    def step(x, w, gy):
        x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
        (F.conv2d(x, w, padding=1) * gy).sum().backward()
        return w.grad

    f = ember.compile(step, backend="c", dynamic=True)
    for n in (2, 5):
        rng = np.random.default_rng(n)
        ex, tx, nx = _pair(rng, (n, 4, 6, 6), "bfloat16")
        ew, tw, nw = _pair(rng, (5, 4, 3, 3), "bfloat16")
        egy, tgy, ngy = _pair(rng, (n, 5, 6, 6), "bfloat16")
        got = f(ex, ew, egy)
        assert [gk.half for gk in _gemms()[1]] == [("b", "b")]
        tw.requires_grad_()
        (torch.nn.functional.conv2d(tx, tw, padding=1) * tgy).sum().backward()
        mag = torch.nn.grad.conv2d_weight(torch.tensor(np.abs(nx)), tw.shape,
                                          torch.tensor(np.abs(ngy)), padding=1).numpy()
        _within(got, tw.grad, step(ex, ew, egy), mag, ngy.size // ngy.shape[1])   # N*Ho*Wo


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_autocast_weight_cast_fused(build, dt):
    """autocast inside ember.compile: the float32 weight is rounded while packed (no cast
    kernel for it), with the values of the cast."""
    rng = np.random.default_rng(11)
    lin = ember.nn.Linear(96, 80)
    tlin = torch.nn.Linear(96, 80)
    with torch.no_grad():
        tlin.weight.copy_(torch.tensor(lin.weight.detach().numpy()))
        tlin.bias.copy_(torch.tensor(lin.bias.detach().numpy()))
    x = rng.standard_normal((50, 96)).astype(np.float32)

    def f(x):
        with ember.autocast("cpu", dtype=getattr(ember, dt)):
            return lin(x)

    with ember.no_grad():
        got = _compile(f)(ember.tensor(x))
    with torch.no_grad(), torch.autocast("cpu", dtype=TORCH[dt]):
        want = tlin(torch.tensor(x))
    assert got.dtype == getattr(ember, dt) and want.dtype == TORCH[dt]
    cg, gemms = _gemms()
    assert gemms[0].half[1] == ("r" if dt == "bfloat16" else "q")
    nx = torch.tensor(x).to(TORCH[dt]).double().numpy()
    nw = tlin.weight.detach().to(TORCH[dt]).double().numpy()
    _check(got, want, nx, nw.T)
    # the weight's cast is packed, not computed by a kernel of its own
    casts = [k for k in cg.program.kernels() if type(k).__name__ == "Kernel"
             and tuple(k.ranges) == (80, 96)]
    assert not casts


def test_small_rows_keep_blas_path():
    """A product of a few static rows keeps the widening + BLAS path (gemv reads the weight
    once); its values are eager's bit for bit."""
    rng = np.random.default_rng(13)
    x = ember.tensor(rng.standard_normal((2, 64)).astype(np.float32)).to(ember.bfloat16)
    w = ember.tensor(rng.standard_normal((32, 64)).astype(np.float32)).to(ember.bfloat16)
    got = _compile(lambda x, w: F.linear(x, w))(x, w)
    assert all(not g.half for g in _gemms()[1])
    assert np.array_equal(got.float().numpy(), F.linear(x, w).float().numpy())


def test_autocast_training_step_compiled():
    """A compiled autocast training step (forward, backward) on the half template: the
    backward products read the weights' casts packed from float32 too; gradients agree with
    eager ember's and torch's within bfloat16 rounding (products rounded once to bfloat16:
    differences of a bfloat16 ulp or two in intermediate values)."""
    rng = np.random.default_rng(17)
    w1, b1 = rng.standard_normal((96, 64)).astype(np.float32) / 8, np.zeros(96, np.float32)
    w2 = rng.standard_normal((10, 96)).astype(np.float32) / 10
    xs = rng.standard_normal((40, 64)).astype(np.float32)
    ts = rng.integers(0, 10, 40)

    def run(lib, compiled):
        p = [lib.tensor(a, requires_grad=True) for a in (w1, b1, w2)]

        def step(x, t):
            with lib.autocast("cpu", dtype=lib.bfloat16):
                h = lib.nn.functional.gelu(lib.nn.functional.linear(x, p[0], p[1]))
                loss = lib.nn.functional.cross_entropy(lib.nn.functional.linear(h, p[2]), t)
            loss.backward()
            return loss

        fn = ember.compile(step, backend="c") if compiled else step
        fn(lib.tensor(xs), lib.tensor(ts))
        if compiled:   # the backward's products ran in the half template too
            assert any(k.half for k in _gemms()[1])
        return [q.grad.detach().numpy() for q in p]

    eager, comp, ref = run(ember, False), run(ember, True), run(torch, False)
    eps = float(torch.finfo(torch.bfloat16).eps)
    for e, c, r in zip(eager, comp, ref):
        scale = float(np.abs(r).max())
        assert np.abs(c - e).max() <= 4 * eps * scale
        assert np.abs(c - r).max() <= 4 * eps * scale


# -- each ISA path's assembly, whatever the host ----------------------------------------------
# (the half template's paths are chosen by the preprocessor: the host's unit, compiled again
# with another level's flags, selects that level's kernel)
_ASM = {
    "v4-amx": ("bfloat16", ("-march=x86-64-v4", "-mamx-tile", "-mamx-bf16"), False,
               ("tdpbf16ps",), ()),
    "v4-bf16dot": ("bfloat16", ("-march=x86-64-v4", "-mavx512bf16"), True, ("vdpbf16ps",), ()),
    "v4-f16": ("float16", ("-march=x86-64-v4",), False, ("vcvtph2ps", "zmm"), ("tdpbf16ps",)),
    "v3-f16": ("float16", ("-march=x86-64-v3", "-mno-avx512f"), False, ("vcvtph2ps", "ymm"),
               ("zmm",)),
    "v3-bf16": ("bfloat16", ("-march=x86-64-v3", "-mno-avx512f"), False, ("ymm",),
                ("zmm", "tdpbf16ps", "vdpbf16ps")),
}


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("level", list(_ASM))
def test_half_unit_assembly_per_isa(level, monkeypatch, tmp_path):
    """The compiled half product's unit, built for every ISA level whatever the host (AMD
    AVX2 machines compile the AVX-512 / AMX paths too): each level's instructions are there and
    the others' are not (the ``build`` fixture above runs the levels the host can run)."""
    dt, flags, dot, want, unwanted = _ASM[level]
    monkeypatch.setattr(gemm_codegen, "BF16_DOT", dot)
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    rng = np.random.default_rng(0)
    ea, _, _ = _pair(rng, (37, 53), dt)
    eb, _, _ = _pair(rng, (53, 71), dt)
    _compile(lambda x, y: x @ y)(ea, eb)
    cg, gemms = _gemms()
    assert [g.impl for g in gemms] == [gemm_codegen.half_impl()]
    src = tmp_path / "unit.c"
    src.write_text(cg.source)
    asm = subprocess.run(["gcc", "-O3", *flags, "-fopenmp", "-ffp-contract=off", "-fPIC", "-S",
                          str(src), "-o", "-"], check=True, capture_output=True,
                         text=True).stdout
    for w in want:
        assert w in asm, f"{flags}: no {w}"
    for u in unwanted:
        assert u not in asm, f"{flags}: {u} present"


# (M, K, N) that two threads split (gemm_tmpl_body.c.in): many row blocks of whole B, two
# row blocks x two column runs (28 rows), odd sizes with edge tiles and several k blocks; the
# B slivers are packed (converted) by whichever thread needs one first, odd units walking
# them backwards
SPLIT_SHAPES = [(257, 131, 301), (28, 385, 1100), (131, 800, 97), (250, 1000, 70)]


@pytest.mark.parametrize("build", ["v4", "v4-amx", "v3"], indirect=True)
@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn"])
def test_two_threads_bitwise_equal_one_thread(build, dt, layout):
    """A half product split over two threads gives the bits of one thread (each tile summed
    in the same order), within the half bound of torch's product; B as stored (``x @ y``),
    B transposed (a linear layer's weight, ``x @ w.t()``: B^T widened into float blocks) and
    A transposed (``x.t() @ y``, as a conv_transpose's weight: A's k steps widened by
    vectors, the rows past the last whole tile one by one)."""
    rng = np.random.default_rng(23)
    pairs = []
    for m, k, n in SPLIT_SHAPES:
        pairs.append((_pair(rng, (k, m) if layout == "tn" else (m, k), dt),
                      _pair(rng, (n, k) if layout == "nt" else (k, n), dt)))

    def fn(*xs):
        if layout == "nt":
            return tuple(xs[j] @ xs[j + 1].t() for j in range(0, len(xs), 2))
        if layout == "tn":
            return tuple(xs[j].t() @ xs[j + 1] for j in range(0, len(xs), 2))
        return tuple(xs[j] @ xs[j + 1] for j in range(0, len(xs), 2))

    ex = [e for pa in pairs for (e, _, _) in pa]
    f = _compile(fn)
    outs, old = {}, ember.get_num_threads()
    try:
        for threads in (1, 2, 2):
            ember.set_num_threads(threads)
            got = [g.float().numpy().copy() for g in f(*ex)]
            outs.setdefault(threads, []).append(got)
    finally:
        ember.set_num_threads(old)
    gemms = _gemms()[1]
    assert len(gemms) == len(SPLIT_SHAPES) and all(g.half for g in gemms)
    for j, ((_, ta, na), (_, tb, nb)) in enumerate(pairs):
        if layout == "nt":
            tb, nb = tb.t(), nb.T
        if layout == "tn":
            ta, na = ta.t(), na.T
        want = ta @ tb
        _check(ember.tensor(outs[1][0][j]).to(getattr(ember, dt)), want, na, nb)
        for got in outs[2]:
            assert got[j].tobytes() == outs[1][0][j].tobytes(), (SPLIT_SHAPES[j], layout)

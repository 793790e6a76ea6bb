"""``resample`` and ``resample_backward`` (``F.interpolate``) as ``ResampleKernel``s
(``c/lower/resample.py``): no externs, bit-identical to eager ember (same tables, same order of
products and sums, one rounding for float16/bfloat16), equal to PyTorch within the dtype's
tolerance, forward and backward, every mode, ``align_corners`` both ways, size or scale."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.config import config

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

F, TF = ember.nn.functional, torch.nn.functional
TOL = {"float32": dict(rtol=1e-5, atol=1e-5), "float64": dict(rtol=1e-12, atol=1e-12),
       "float16": dict(rtol=1e-2, atol=1e-2), "bfloat16": dict(rtol=2e-2, atol=2e-2),
       "uint8": dict(rtol=0, atol=0)}

# (mode, spatial dims, align_corners values, extra kwargs)
MODES = [("nearest", 2, [None], {}), ("nearest-exact", 2, [None], {}),
         ("bilinear", 2, [False, True], {}), ("bicubic", 2, [False, True], {}),
         ("linear", 1, [False, True], {}), ("trilinear", 3, [False, True], {}),
         ("nearest", 3, [None], {}), ("bilinear", 2, [False], {"antialias": True}),
         ("bicubic", 2, [True], {"antialias": True}), ("area", 3, [None], {})]
CASES = [(m, nd, ac, kw) for m, nd, acs, kw in MODES for ac in acs]
IDS = [f"{m}{nd}d-ac{ac}{'-aa' if kw else ''}" for m, nd, ac, kw in CASES]
SIZES = {1: ((11,), (3,)), 2: ((9, 4), (2, 6)), 3: ((5, 3, 6), (2, 2, 1))}
IN = {1: (2, 3, 7), 2: (2, 3, 5, 7), 3: (2, 2, 3, 4, 5)}


@pytest.fixture(autouse=True)
def _two_threads():
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    yield
    ember.set_num_threads(before)


def _input(nd: int, dtype: str, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(IN[nd]) * 4
    return x.astype(np.float64) if dtype != "uint8" else (np.abs(x) * 20).astype(np.uint8)


def _kw(mode: str, nd: int, ac, extra: dict, by: str, small: bool = False) -> dict:  # noqa: ANN001
    kw = dict(mode=mode, **extra)
    if ac is not None:
        kw["align_corners"] = ac
    if by == "size":
        kw["size"] = SIZES[nd][1 if small else 0]
    else:
        kw["scale_factor"] = 0.6 if small else 1.7
    return kw


def _assert_no_externs() -> None:
    cg = cbackend.last_compiled()
    assert cg.extern_count == 0, cg.externs
    assert cg.stats.kernels >= 1


def _torch_of(x: ember.Tensor, requires_grad: bool = False):  # noqa: ANN202
    t = torch.from_numpy(x.float().numpy() if x.dtype == ember.bfloat16 else x.numpy().copy())
    if x.dtype == ember.bfloat16:
        t = t.to(torch.bfloat16)
    return t.requires_grad_(requires_grad)


def _np(t) -> np.ndarray:  # noqa: ANN001
    if isinstance(t, torch.Tensor):
        t = t.detach()
        return (t.float() if t.dtype in (torch.bfloat16, torch.float16) else t).numpy()
    return (t.float() if t.dtype in (ember.bfloat16, ember.float16) else t).numpy()


@pytest.mark.parametrize("by", ["size", "scale"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode,nd,ac,extra", CASES, ids=IDS)
def test_forward_and_backward_lower_and_match(mode, nd, ac, extra, dtype, by):
    """Up (by size or scale) and down-sampling, forward and gradient: zero externs in either
    graph, bit-equal to eager, equal to torch."""
    for small in (False, True):
        kw = _kw(mode, nd, ac, extra, by, small)
        x = ember.tensor(_input(nd, dtype)).to(getattr(ember, dtype))
        ember.compiler.reset()
        f = ember.compile(lambda t, kw=kw: F.interpolate(t, **kw), backend="c", dynamic=False)
        got = f(x)
        _assert_no_externs()
        want = F.interpolate(x, **kw)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        ref = TF.interpolate(_torch_of(x), **kw)
        np.testing.assert_allclose(got.numpy(), ref.numpy(), **TOL[dtype])

        xg = x.detach().requires_grad_()
        g = ember.tensor(np.random.default_rng(1).standard_normal(tuple(want.shape))).to(x.dtype)
        (gc,) = ember.autograd.grad(f(xg), xg, g)
        _assert_no_externs()
        (ge,) = ember.autograd.grad(F.interpolate(xg, **kw), xg, g)
        np.testing.assert_array_equal(gc.numpy(), ge.numpy())
        xt = _torch_of(x, True)
        (gt,) = torch.autograd.grad(TF.interpolate(xt, **kw), xt, torch.from_numpy(g.numpy()))
        np.testing.assert_allclose(gc.numpy(), gt.numpy(), **TOL[dtype])


HALF = [(m, ac, dt) for m, ac in [("nearest", None), ("nearest-exact", None),
                                   ("bilinear", False), ("bilinear", True), ("bicubic", False)]
        for dt in ("float16", "bfloat16", "uint8") if dt != "uint8" or m.startswith("nearest")]


@pytest.mark.parametrize("mode,ac,dtype", HALF, ids=[f"{m}-ac{a}-{d}" for m, a, d in HALF])
def test_half_and_uint8_round_once_as_eager(mode, ac, dtype):
    """float16/bfloat16 compute in float32 and round once (bit-equal to eager); uint8 for the
    nearest modes is a plain gather."""
    kw = _kw(mode, 2, ac, {}, "scale")
    x = ember.tensor(_input(2, dtype)).to(getattr(ember, dtype))
    ember.compiler.reset()
    f = ember.compile(lambda t: F.interpolate(t, **kw), backend="c", dynamic=False)
    got = f(x)
    _assert_no_externs()
    want = F.interpolate(x, **kw)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(_np(got), _np(want))
    np.testing.assert_allclose(_np(got), _np(TF.interpolate(_torch_of(x), **kw)), **TOL[dtype])
    if dtype != "uint8":
        xg = x.detach().requires_grad_()
        g = ember.tensor(np.random.default_rng(1).standard_normal(tuple(want.shape))).to(x.dtype)
        (gc,) = ember.autograd.grad(f(xg), xg, g)
        _assert_no_externs()
        (ge,) = ember.autograd.grad(F.interpolate(xg, **kw), xg, g)
        np.testing.assert_array_equal(_np(gc), _np(ge))


def test_strided_input_fused_neighbours_and_large_threaded():
    """A permuted (non-contiguous) input produced by a fused pointwise op, a consumer fused
    after, and planes enough for the threaded loop."""
    x = np.random.default_rng(2).standard_normal((3, 20, 24, 40)).astype(np.float32)

    def fn(t, m=F):  # noqa: ANN001, ANN202
        u = (t * 2 + 1).permute(0, 3, 1, 2)      # (3, 40, 20, 24), channels last in memory
        return m.interpolate(u, scale_factor=2, mode="bilinear", align_corners=False) - 1

    ember.compiler.reset()
    got = ember.compile(fn, backend="c", dynamic=False)(ember.tensor(x))
    _assert_no_externs()
    np.testing.assert_array_equal(got.numpy(), fn(ember.tensor(x)).numpy())
    np.testing.assert_allclose(got.numpy(), fn(torch.from_numpy(x), TF).numpy(),
                               rtol=1e-5, atol=1e-5)


def test_double_backward_compiles_without_externs():
    """resample and resample_backward are each other's vjp: the gradient of a gradient."""
    x = ember.tensor(_input(2, "float64")).requires_grad_()
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)

    def loss(t, m=F, lib=ember):  # noqa: ANN001, ANN202
        y = m.interpolate(t, scale_factor=1.5, mode="bicubic", align_corners=False)
        (g,) = lib.autograd.grad((y * y).sum(), t, create_graph=True)
        return (g * g).sum()

    ember.compiler.reset()
    got = ember.compile(loss, backend="c", dynamic=False)(x)
    assert cbackend.last_compiled().extern_count == 0
    np.testing.assert_allclose(got.item(), loss(xt, TF, torch).item(), rtol=1e-10)


def test_generated_source_runs_the_pass_helper_on_static_tables():
    """The C holds the kernel's tables as static arrays and calls the csrc template's pass."""
    x = ember.tensor(_input(2, "float32")).float()
    text = cbackend.codegen(
        lambda t: F.interpolate(t, size=(9, 4), mode="bicubic", align_corners=True), x)
    assert "static void ember_rs_pass_f(" in text
    assert "static const int32_t kernel0_i0[] = {" in text
    assert "ember_rs_pass_f(" in text.split("static int kernel0(")[1]


@pytest.mark.parametrize("mode", ["bicubic", "bilinear"])
def test_inf_and_nan_propagate_as_eager(mode):
    """Non-finite values: the same products and sums as eager, so the same NaN/inf pattern
    (the backward's padded taps multiply by 0 as eager's do)."""
    x = _input(2, "float32").astype(np.float32)
    x[0, 0, 1, 2], x[1, 2, 3, 0] = np.inf, np.nan
    xe = ember.tensor(x)
    kw = dict(scale_factor=0.5, mode=mode, align_corners=False)
    ember.compiler.reset()
    f = ember.compile(lambda t: F.interpolate(t, **kw), backend="c", dynamic=False)
    got, want = f(xe), F.interpolate(xe, **kw)
    _assert_no_externs()
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert np.isnan(got.numpy()).any()
    xg = ember.tensor(x).requires_grad_()
    g = np.ones(tuple(want.shape), np.float32)
    g[0, 0, 0, 0] = np.inf
    (gc,) = ember.autograd.grad(f(xg), xg, ember.tensor(g))
    _assert_no_externs()
    (ge,) = ember.autograd.grad(F.interpolate(xg, **kw), xg, ember.tensor(g))
    np.testing.assert_array_equal(gc.numpy(), ge.numpy())
    assert not np.isfinite(gc.numpy()).all()


def test_symbolic_batch_and_channels_stay_in_c():
    """A new batch (or channel) size makes the graph shape-generic: the leading dims become
    runtime integers and the kernel still runs in C (the spatial sizes stay static)."""
    kw = dict(size=(5, 7), mode="bicubic", align_corners=False)
    ember.compiler.reset()
    f = ember.compile(lambda t: F.interpolate(t, **kw) * 2, backend="c")
    for n, c in ((4, 3), (3, 3), (5, 2), (2, 6)):
        x = ember.tensor(np.random.default_rng(n).standard_normal((n, c, 6, 9)))
        got = f(x)
        cg = cbackend.last_compiled()
        assert cg.extern_count == 0, cg.externs
        np.testing.assert_array_equal(got.numpy(), (F.interpolate(x, **kw) * 2).numpy())
        xg = x.detach().requires_grad_()
        g = ember.ones(n, c, 5, 7, dtype=ember.float64)
        (gc,) = ember.autograd.grad(f(xg), xg, g)
        assert cbackend.last_compiled().extern_count == 0
        (ge,) = ember.autograd.grad(F.interpolate(xg, **kw) * 2, xg, g)
        np.testing.assert_array_equal(gc.numpy(), ge.numpy())
    assert cg._int_names, "the last graph should be shape-generic"

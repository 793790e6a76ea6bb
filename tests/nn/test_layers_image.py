"""The image layers (padding, pixel shuffle, upsampling, fold) as modules, against torch:
outputs, input gradients, reprs and errors; and a small image model, eager and compiled."""

import numpy as np
import pytest

import ember
from ember.ops.nn_resize import repeat_plan
from tests.nn._layer_utils import assert_close_all, load_from_torch, run_both

torch = pytest.importorskip("torch")

PADS = [f"{kind}Pad{d}d" for kind in ("Reflection", "Replication", "Zero", "Circular")
        for d in (1, 2, 3)]


def _pad_shape(d: int, batched: bool) -> tuple:
    return ((2,) if batched else ()) + (3,) + (4, 5, 3)[:d]


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("name", PADS)
def test_padding_modules(name: str, batched: bool) -> None:
    d = int(name[-2])
    pad = (2, 1, 0, 1, 1, 2)[:2 * d]
    e, t = getattr(ember.nn, name)(pad), getattr(torch.nn, name)(pad)
    x = np.random.default_rng(0).standard_normal(_pad_shape(d, batched))
    assert_close_all(e, t, *run_both(e, t, torch, x))
    assert repr(e) == repr(t)
    e1, t1 = getattr(ember.nn, name)(1), getattr(torch.nn, name)(1)
    assert repr(e1) == repr(t1)
    assert_close_all(e1, t1, *run_both(e1, t1, torch, x.astype(np.float32)), rtol=1.3e-6,
                     atol=1e-5)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_constant_pad(d: int) -> None:
    pad = (1, 2, 2, 0, 1, 1)[:2 * d]
    name = f"ConstantPad{d}d"
    e, t = getattr(ember.nn, name)(pad, 3.5), getattr(torch.nn, name)(pad, 3.5)
    x = np.random.default_rng(1).standard_normal(_pad_shape(d, True))
    assert_close_all(e, t, *run_both(e, t, torch, x))
    assert repr(e) == repr(t)


def test_circular_pad_rejects_wrong_dims() -> None:
    with pytest.raises(ValueError, match=r"\[CircularPad2d\] expected 3D or 4D input \(got 2D"):
        ember.nn.CircularPad2d(1)(ember.zeros(3, 3))
    with pytest.raises(RuntimeError, match=r"\[pad\] Argument #4: Padding size should be less"):
        ember.nn.ReflectionPad1d(3)(ember.zeros(1, 2, 3))


@pytest.mark.parametrize("cls,kw", [
    ("Upsample", {"scale_factor": 2}),
    ("Upsample", {"size": (5, 7), "mode": "bilinear"}),
    ("Upsample", {"scale_factor": (1.5, 2.0), "mode": "bicubic", "align_corners": True}),
    ("Upsample", {"scale_factor": 1.7, "mode": "nearest-exact",
                  "recompute_scale_factor": True}),
    ("UpsamplingNearest2d", {"scale_factor": 3}),
    ("UpsamplingBilinear2d", {"size": 6}),
])
def test_upsample_modules(cls: str, kw: dict) -> None:
    e, t = getattr(ember.nn, cls)(**kw), getattr(torch.nn, cls)(**kw)
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 5))
    assert_close_all(e, t, *run_both(e, t, torch, x))
    assert repr(e) == repr(t)


def test_upsample_1d_3d() -> None:
    for mode, shape in (("linear", (2, 3, 5)), ("trilinear", (1, 2, 3, 4, 3)),
                        ("nearest", (1, 2, 3, 4, 3))):
        e = ember.nn.Upsample(scale_factor=2, mode=mode)
        t = torch.nn.Upsample(scale_factor=2, mode=mode)
        x = np.random.default_rng(3).standard_normal(shape)
        assert_close_all(e, t, *run_both(e, t, torch, x))


def test_pixel_shuffle_modules_round_trip() -> None:
    e, t = ember.nn.PixelShuffle(3), torch.nn.PixelShuffle(3)
    x = np.random.default_rng(4).standard_normal((2, 18, 2, 3))
    assert_close_all(e, t, *run_both(e, t, torch, x))
    assert repr(e) == repr(t)
    eu, tu = ember.nn.PixelUnshuffle(3), torch.nn.PixelUnshuffle(3)
    assert repr(eu) == repr(tu)
    y = e(ember.tensor(x))
    np.testing.assert_array_equal(eu(y).numpy(), x)


def test_fold_unfold_modules() -> None:
    eu = ember.nn.Unfold((2, 3), dilation=1, padding=1, stride=(1, 2))
    tu = torch.nn.Unfold((2, 3), dilation=1, padding=1, stride=(1, 2))
    x = np.random.default_rng(5).standard_normal((2, 3, 5, 6))
    assert_close_all(eu, tu, *run_both(eu, tu, torch, x))
    assert repr(eu) == repr(tu)
    cols = tu(torch.tensor(x)).detach().numpy()
    ef = ember.nn.Fold((5, 6), (2, 3), padding=1, stride=(1, 2))
    tf = torch.nn.Fold((5, 6), (2, 3), padding=1, stride=(1, 2))
    assert_close_all(ef, tf, *run_both(ef, tf, torch, cols))
    assert repr(ef) == repr(tf)


def _image_model(nn):  # noqa: ANN001, ANN202
    return nn.Sequential(
        nn.ReflectionPad2d(1), nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
        nn.Upsample(scale_factor=2, mode="bilinear"), nn.Conv2d(8, 12, 3, padding=1),
        nn.PixelShuffle(2), nn.LeakyReLU(0.2, inplace=True), nn.ReplicationPad2d((1, 0, 0, 1)),
        nn.Unfold(2, stride=2), nn.Flatten())


@pytest.mark.parametrize("compiled", [False, True])
def test_image_model_training_step(compiled: bool) -> None:
    """A super-resolution style model: forward, backward, running stats, eager and compiled."""
    torch.manual_seed(0)
    t = _image_model(torch.nn).double()
    e = _image_model(ember.nn).double()
    load_from_torch(e, t)
    x = np.random.default_rng(6).standard_normal((2, 3, 6, 6))
    fe = ember.compile(e) if compiled else e
    out = run_both(fe, t, torch, x)
    assert_close_all(e, t, *out, rtol=1e-9, atol=1e-9)
    for (n, bt), (_, be) in zip(t.named_buffers(), e.named_buffers()):
        np.testing.assert_allclose(be.numpy(), bt.numpy(), rtol=1e-10, atol=1e-12, err_msg=n)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_interpolate_large_float32_blocks_and_threads(mode: str) -> None:
    """Inputs large enough for the row-blocked, threaded eager kernels (several blocks, the
    flat last-axis gather, a short last block), forward and backward against torch."""
    x = np.random.default_rng(7).standard_normal((4, 16, 40, 48)).astype(np.float32)
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    kw = {"scale_factor": 2, "mode": mode}
    ye, yt = ember.nn.functional.interpolate(xe, **kw), torch.nn.functional.interpolate(xt, **kw)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    g = np.random.default_rng(8).standard_normal(tuple(yt.shape)).astype(np.float32)
    ye.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("factor", [2, 3])
@pytest.mark.parametrize("mode,ac", [("nearest", None), ("nearest-exact", None),
                                     ("bilinear", False), ("bilinear", True),
                                     ("bicubic", False), ("bicubic", True)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_interpolate_integer_factor_repeat_path(mode: str, ac, factor: int, dtype: str) -> None:
    """Integer upscaling of the last dim reads the taps from one repeat of each block
    (``nn_resize.repeat_plan``), with the border outputs gathered apart: against torch,
    several blocks and a short last one, on two threads."""
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        x = np.random.default_rng(10).standard_normal((3, 40, 32, 40)).astype(dtype)
        x[0, 0, 3, 0] = np.inf
        kind = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
        plan = repeat_plan(kind, 40, 40 * factor, bool(ac), float(factor), dtype)
        assert (plan is not None) == (not ac or factor == 2)  # else the gather path
        kw = {"scale_factor": factor, "mode": mode}
        if ac is not None:
            kw["align_corners"] = ac
        xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ye = ember.nn.functional.interpolate(xe, **kw)
        yt = torch.nn.functional.interpolate(xt, **kw)
        tol = 1e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
        g = np.random.default_rng(12).standard_normal(tuple(yt.shape)).astype(dtype)
        ye.backward(ember.tensor(g))
        yt.backward(torch.tensor(g))
        gtol = 1e-4 if dtype == "float32" else 1e-11
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=gtol, atol=gtol)
    finally:
        ember.set_num_threads(before)


@pytest.mark.parametrize("mode,shape,size,dtype", [
    ("bilinear", (1, 2, 300, 260), (600, 520), "float32"),
    ("bilinear", (1, 2, 300, 260), (601, 517), "float64"),
    ("bicubic", (2, 1, 280, 250), (560, 500), "float32"),
    ("bicubic", (2, 1, 280, 250), (563, 499), "float64"),
    ("nearest", (1, 2, 300, 260), (600, 520), "float32"),
    ("trilinear", (1, 1, 40, 30, 40), (81, 60, 80), "float64")])
def test_interpolate_large_planes_in_chunks(mode: str, shape: tuple, size: tuple,
                                            dtype: str) -> None:
    """A plane larger than a block is computed in chunks of output rows along its first
    spatial dim, each from the input rows it reads, forward and backward, on two threads:
    against torch (float64
    for the non-integer scales, where float32 tables differ from ATen's by an ulp at a few
    positions, as they did before chunking)."""
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        x = np.random.default_rng(11).standard_normal(shape).astype(dtype)
        kw = {"size": size, "mode": mode}
        if mode != "nearest":
            kw["align_corners"] = False
        xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ye = ember.nn.functional.interpolate(xe, **kw)
        yt = torch.nn.functional.interpolate(xt, **kw)
        tol = 1e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
        g = np.random.default_rng(12).standard_normal(tuple(yt.shape)).astype(dtype)
        ye.backward(ember.tensor(g))
        yt.backward(torch.tensor(g))
        gtol = 1e-4 if dtype == "float32" else 1e-11
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=gtol, atol=gtol)
    finally:
        ember.set_num_threads(before)


@pytest.mark.parametrize("name,kw", [("upsample", {"mode": "bilinear"}), ("upsample_nearest", {}),
                                     ("upsample_bilinear", {})])
def test_deprecated_upsample_functions(name: str, kw: dict) -> None:
    x = np.random.default_rng(9).standard_normal((1, 2, 3, 4))
    with pytest.warns(UserWarning, match=rf"`nn.functional.{name}` is deprecated"):
        ye = getattr(ember.nn.functional, name)(ember.tensor(x), scale_factor=2, **kw)
    with pytest.warns(UserWarning):
        yt = getattr(torch.nn.functional, name)(torch.tensor(x), scale_factor=2, **kw)
    np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=1e-12, atol=1e-12)

"""Eager ``F.interpolate`` (``resample`` / ``resample_backward``) through its small C kernel
(``ember/ops/_resample_c.py``, ``ember/ops/csrc/resample_eager.c``): bit-identical to the NumPy
path (every mode, ``align_corners`` both ways, float32/float64/float16/bfloat16, size or scale,
up and down, odd sizes, strided input, the NumPy path's repeat and chunked forms, threads),
equal to PyTorch within the dtype's tolerance, and the NumPy fallback when no C compiler is
there or ``EMBER_EAGER_C=0``."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tomllib

import ember
from ember.config import config
from ember.ops import _native, _resample_c

torch = pytest.importorskip("torch")

F, TF = ember.nn.functional, torch.nn.functional
TOL = {"float32": dict(rtol=1e-5, atol=1e-5), "float64": dict(rtol=1e-12, atol=1e-12),
       "float16": dict(rtol=1e-2, atol=1e-2), "bfloat16": dict(rtol=2e-2, atol=2e-2)}
# (mode, spatial dims, align_corners values, extra kwargs)
MODES = [("nearest", 2, [None], {}), ("nearest-exact", 2, [None], {}),
         ("bilinear", 2, [False, True], {}), ("bicubic", 2, [False, True], {}),
         ("linear", 1, [False, True], {}), ("trilinear", 3, [False, True], {}),
         ("nearest", 3, [None], {}), ("bilinear", 2, [False], {"antialias": True}),
         ("bicubic", 2, [True], {"antialias": True}), ("area", 3, [None], {}),
         ("area", 2, [None], {})]
CASES = [(m, nd, ac, kw) for m, nd, acs, kw in MODES for ac in acs]
IDS = [f"{m}{nd}d-ac{ac}{'-aa' if kw else ''}" for m, nd, ac, kw in CASES]
IN = {1: (2, 3, 7), 2: (2, 3, 5, 7), 3: (2, 2, 3, 4, 5)}
SIZES = {1: [(11,), (3,), (7,)], 2: [(9, 4), (2, 6), (10, 14), (13, 5)],
         3: [(5, 3, 6), (2, 2, 1), (6, 8, 10)]}
SCALES = [1.7, 0.6, 2.0, 3.0]


@pytest.fixture(autouse=True)
def _two_threads():  # noqa: ANN202
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    yield
    ember.set_num_threads(before)


@pytest.fixture
def kernel():  # noqa: ANN201
    """The C kernel on (skip without a C compiler); restored afterwards."""
    old = _resample_c.set_enabled(True)
    if not _resample_c.available():
        _resample_c.set_enabled(old)
        pytest.skip("no C compiler: the eager resample kernel could not be built")
    yield
    _resample_c.set_enabled(old)


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def _both(x: ember.Tensor, g: ember.Tensor | None, kw: dict) -> list:
    """``[(y, dx)]`` with the C kernel and with the NumPy path."""
    res = []
    for on in (True, False):
        _resample_c.set_enabled(on)
        assert _resample_c.available() == on
        xg = x.detach().requires_grad_()
        y = F.interpolate(xg, **kw)
        gr = g if g is not None else ember.ones_like(y)
        (dx,) = ember.autograd.grad(y, xg, gr)
        res.append((y.detach(), dx))
    _resample_c.set_enabled(True)
    return res


def _check(x: ember.Tensor, kw: dict, dtype: str, seed: int = 1) -> None:
    y0 = F.interpolate(x, **kw)
    g = ember.tensor(np.random.default_rng(seed).standard_normal(tuple(y0.shape))).to(x.dtype)
    (yc, gc), (yn, gn) = _both(x, g, kw)
    np.testing.assert_array_equal(_bits(yc.numpy()), _bits(yn.numpy()))
    np.testing.assert_array_equal(_bits(gc.numpy()), _bits(gn.numpy()))
    xt = torch.from_numpy(x.float().numpy() if dtype == "bfloat16" else x.numpy().copy())
    xt = (xt.to(torch.bfloat16) if dtype == "bfloat16" else xt).requires_grad_()
    yt = TF.interpolate(xt, **kw)
    gt = torch.from_numpy(g.float().numpy() if dtype == "bfloat16" else g.numpy()).to(yt.dtype)
    (dt,) = torch.autograd.grad(yt, xt, gt)
    tol = TOL[dtype]
    np.testing.assert_allclose(yc.float().numpy(), yt.detach().float().numpy(), **tol)
    np.testing.assert_allclose(gc.float().numpy(), dt.float().numpy(),
                               rtol=tol["rtol"] * 10, atol=tol["atol"] * 10)


def _kw(mode: str, ac, extra: dict) -> dict:  # noqa: ANN001
    kw = dict(mode=mode, **extra)
    if ac is not None:
        kw["align_corners"] = ac
    return kw


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode,nd,ac,extra", CASES, ids=IDS)
def test_c_kernel_bit_identical_to_numpy_and_close_to_torch(kernel, mode, nd, ac, extra, dtype):
    """By size (odd, up, down, integer factors) and by scale, forward and gradient."""
    x = ember.tensor(np.random.default_rng(0).standard_normal(IN[nd]) * 4).to(
        getattr(ember, dtype))
    for size in SIZES[nd]:
        if mode == "area" and any(s > n for s, n in zip(size, IN[nd][2:])):
            continue      # torch's adaptive pooling: any size; kept to down/equal for speed
        _check(x, dict(_kw(mode, ac, extra), size=size), dtype)
    if mode != "area":
        for s in SCALES:
            _check(x, dict(_kw(mode, ac, extra), scale_factor=s), dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mode,ac", [("bilinear", False), ("bicubic", True), ("nearest", None)])
def test_low_precision_through_float32_kernel(kernel, mode, ac, dtype):
    x = ember.tensor(np.random.default_rng(2).standard_normal((2, 3, 6, 5))).to(
        getattr(ember, dtype))
    _check(x, dict(_kw(mode, ac, {}), scale_factor=1.5), dtype)


# float64 for large non-integer scales: there float32 tables differ from ATen's by an ulp at a
# few positions (tests/nn/test_layers_image.py), on both eager paths alike
@pytest.mark.parametrize("shape,kw,dtype", [
    ((4, 16, 40, 48), dict(scale_factor=2, mode="bilinear"), "float32"),   # repeat path, threads
    ((4, 16, 40, 48), dict(scale_factor=3, mode="bicubic", align_corners=True), "float32"),
    ((1, 2, 300, 260), dict(size=(600, 520), mode="bilinear"), "float32"),  # chunked planes
    ((1, 2, 300, 310), dict(size=(611, 97), mode="bilinear"), "float64"),
    ((3, 5, 17, 23), dict(size=(40, 41), mode="nearest-exact"), "float32"),
])
def test_large_blocked_threaded_and_chunked_inputs(kernel, shape, kw, dtype):
    x = ember.tensor(np.random.default_rng(3).standard_normal(shape).astype(dtype))
    _check(x, kw, dtype)


def test_strided_and_single_thread(kernel):
    base = np.random.default_rng(4).standard_normal((3, 4, 9, 12)).astype(np.float32)
    x = ember.tensor(base)[:, 1:, ::2, 1::3]          # a non-contiguous view
    assert not x.is_contiguous()
    _check(x, dict(size=(7, 8), mode="bicubic", align_corners=False), "float32")
    ember.set_num_threads(1)
    _check(ember.tensor(base), dict(scale_factor=2.5, mode="bilinear"), "float32")


def test_special_values_propagate_as_numpy(kernel):
    x = np.random.default_rng(5).standard_normal((2, 2, 6, 6)).astype(np.float32)
    x[0, 0, 2, 3], x[1, 1, 0, 0], x[0, 1, 5, 5] = np.inf, np.nan, -np.inf
    x[1, 0, 3, 3] = 1e-40                                  # subnormal
    (yc, gc), (yn, gn) = _both(ember.tensor(x), None, dict(scale_factor=2, mode="bicubic"))
    np.testing.assert_array_equal(_bits(yc.numpy()), _bits(yn.numpy()))
    np.testing.assert_array_equal(_bits(gc.numpy()), _bits(gn.numpy()))
    g = np.random.default_rng(6).standard_normal((2, 2, 12, 12)).astype(np.float32)
    g[0, 0, 3, 4], g[1, 1, 7, 7] = np.inf, np.nan     # padded 0 * inf taps of the adjoint
    (_, gc), (_, gn) = _both(ember.tensor(x), ember.tensor(g), dict(scale_factor=2,
                                                                    mode="bilinear"))
    assert np.isnan(gc.numpy()).any()
    np.testing.assert_array_equal(_bits(gc.numpy()), _bits(gn.numpy()))


def test_missing_compiler_falls_back_to_numpy(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "cc", "ember-no-such-compiler")
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    monkeypatch.setitem(_resample_c._state, "tried", False)
    monkeypatch.setitem(_resample_c._state, "lib", None)
    monkeypatch.setitem(_resample_c._state, "enabled", True)
    assert not _resample_c.available()
    x = np.random.default_rng(6).standard_normal((2, 3, 5, 7)).astype(np.float32)
    kw = dict(size=(9, 4), mode="bilinear", align_corners=False)
    y = F.interpolate(ember.tensor(x), **kw)
    np.testing.assert_allclose(y.numpy(), TF.interpolate(torch.from_numpy(x), **kw).numpy(),
                               rtol=1e-5, atol=1e-5)
    assert not any(tmp_path.rglob("*.so"))


def test_eager_c_setting_turns_every_eager_kernel_off(monkeypatch, kernel):
    from ember.ops import _fma
    monkeypatch.setattr(config, "eager_c", False)
    assert not _resample_c.available() and not _fma.native_fma()
    assert _resample_c.run(np.ones((1, 1, 2, 2), np.float32), 2,
                           [(np.zeros((1, 2), np.intp), None)] * 2, range(1, -1, -1),
                           (2, 2)) is None
    monkeypatch.setattr(config, "eager_c", True)
    assert _resample_c.available()


def test_environment_switch_is_read_at_import():
    code = ("from ember.ops import _fma, _resample_c; "
            "assert not _resample_c.available() and not _fma.native_fma()")
    root = pathlib.Path(__file__).resolve().parents[1]
    env = dict(os.environ, EMBER_EAGER_C="0", PYTHONPATH=str(root))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)


def test_native_cache_key_and_failed_build(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    a = _native.Native("t", "int f(void) { return 1; }", {})
    b = _native.Native("t", "int f(void) { return 2; }", {})
    assert a.path() != b.path() and a.path().startswith(str(tmp_path / "eager"))
    bad = _native.Native("bad", "this is not C", {})
    assert bad.lib() is None and bad.state["tried"]
    assert not any(tmp_path.rglob("*.so")) and not any(tmp_path.rglob("*.c"))


def test_c_source_is_package_data():
    root = pathlib.Path(__file__).resolve().parents[1]
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["ember"]
    csrc = root / "ember" / "ops" / "csrc"
    files = [p.relative_to(root / "ember").as_posix() for p in csrc.iterdir() if p.is_file()]
    assert files
    for f in files:
        assert any(pathlib.PurePosixPath(f).match(pat) for pat in data), (f, data)

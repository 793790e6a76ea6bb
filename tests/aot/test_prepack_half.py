"""Half products over package constants pack B once per load (docs/aot.md, "Performance"):
bfloat16 and float16 models, and a float32 model under bfloat16 autocast (whose products pack
the float32 weight rounded to bfloat16).  Outputs equal ``ep.module()``'s within the half
GEMM's rounding and torch's within the dtype's, from Python and from the C runner; the packed
copy is really what later runs read (a weight changed behind the model's back is not seen
until the copies are dropped); ``load_constants`` repacks; ``EMBER_AOT_PREPACK=0`` packs per
call."""

import zipfile

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.export import Dim, export
from tests.aot.helpers import CRunner

torch = pytest.importorskip("torch")

# float32: the packed-copy check; "-v3": built for x86-64-v3 (no AMX, no AVX-512: bfloat16
# widened to float panels while packed, the 6x16 tile)
MODES = ("bfloat16", "float16", "autocast", "float32", "bfloat16-v3", "autocast-v3")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(40, 72)    # N not a multiple of the tile width: an edge sliver
        self.fc2 = nn.Linear(72, 24)

    def forward(self, x):
        return self.fc2(nn.functional.gelu(self.fc1(x))) + x @ self.fc1.weight[:24].t()


class Autocast(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        with ember.autocast("cpu", dtype=ember.bfloat16):
            return self.inner(x)


def _dtypes(mode):
    """(ember input dtype, output dtype, torch compute dtype)"""
    mode = mode.removesuffix("-v3")
    if mode == "float16":
        return ember.float16, ember.float16, torch.float16
    if mode == "float32":
        return ember.float32, ember.float32, torch.float32
    return ((ember.bfloat16 if mode == "bfloat16" else ember.float32), ember.bfloat16,
            torch.bfloat16)


def _eps(dt) -> float:
    return float(np.finfo({ember.bfloat16: ml_dtypes.bfloat16, ember.float16: np.float16,
                           ember.float32: np.float32}[dt]).eps)


@pytest.fixture(scope="module", params=MODES)
def package(request, tmp_path_factory):
    mode = request.param
    ember.manual_seed(0)
    m = MLP().eval()
    if mode.startswith("autocast"):
        m = Autocast(m)
    else:
        m = m.to(_dtypes(mode)[0])
    x = ember.randn(19, 40).to(_dtypes(mode)[0])
    ep = export(m, (x,), dynamic_shapes=({0: Dim("n", min=1)},))
    path = str(tmp_path_factory.mktemp("prepack_half") / f"{mode}.pt2")
    conf = {"aot_inductor.march": "x86-64-v3"} if mode.endswith("-v3") else None
    ember.aot.compile_and_package(ep, package_path=path, inductor_configs=conf)
    return mode, ep, path


def _x(mode, n, seed=0):
    g = np.random.default_rng(seed + n)
    return ember.tensor(g.standard_normal((n, 40)).astype(np.float32)).to(_dtypes(mode)[0])


def _state(model) -> dict:
    return {k.removeprefix("inner."): model.get_constant(k).float().numpy()
            for k in model.get_constant_fqns()}


def _torch_ref(mode, state: dict, x) -> np.ndarray:
    """torch 2.13's CPU half linear layers (autocast: the weights cast to bfloat16)."""
    tdt = _dtypes(mode)[2]
    mode = mode.removesuffix("-v3")
    s = {k: torch.from_numpy(v).to(tdt) for k, v in state.items()}
    t = torch.from_numpy(x.float().numpy()).to(tdt)
    h = torch.nn.functional.gelu(torch.nn.functional.linear(t, s["fc1.weight"], s["fc1.bias"]))
    y = torch.nn.functional.linear(h, s["fc2.weight"], s["fc2.bias"])
    return (y + t @ s["fc1.weight"][:24].T).float().numpy()


def _close(got, want, mode, ulps):
    """Within ``ulps`` roundings of the output dtype, relative to the output's scale."""
    eps = _eps(_dtypes(mode)[1])
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=ulps * eps,
                               atol=ulps * eps * scale)


def test_half_products_pack_their_constant_weights(package):
    mode, _, path = package
    with zipfile.ZipFile(path) as z:
        src = next(z.read(n).decode() for n in z.namelist() if n.endswith(".wrapper.c"))
    assert "#define EMBER_PP_SLOTS 3" in src                      # fc1, fc2, fc1[:24]
    assert ("ember_ppget_" in src) == (mode != "float32")         # the half getters
    if mode.endswith("-v3"):   # float panels of the 6x16 tile, from bfloat16 / rounded float32
        assert f"ember_ppget_hpack_b_16_{'r' if mode.startswith('autocast') else 'b'}(" in src
    assert ember.aot.load_package(path)._prepack is not None


def test_outputs_from_python_and_c(package):
    mode, ep, path = package
    model = ember.aot.load_package(path)
    c = CRunner()
    rc, h, err = c.load(path)
    assert rc == 0, err
    try:
        for n in (19, 19, 3, 64, 130, 19):   # first run packs, later ones reuse; 130: threads
            x = _x(mode, n)
            got = model(x)
            assert got.dtype is _dtypes(mode)[1]
            want = ep.module()(x).detach().float().numpy()
            # eager widens to float32 BLAS; the package's half GEMM sums in another order:
            # a rounding apart in fc1's output, carried through GELU and fc2 (float32: sums
            # of 40-72 products in another order)
            ulps = 64 if mode == "float32" else 4
            _close(got.float().numpy(), want, mode, ulps)
            _close(got.float().numpy(), _torch_ref(mode, _state(model), x), mode, ulps)
            rc, outs = c.run(h, [x.numpy()])
            assert rc == 0, c.error()
            np.testing.assert_array_equal(outs[0].astype(np.float32), got.float().numpy())
    finally:
        c.lib.ember_aot_unload(h)


def test_runs_read_the_packed_copy(package):
    """A weight changed in the loader's private memory behind its back: runs keep reading the
    copy packed at the first run until the copies are dropped (``ember_aot_prepack_v1``)."""
    mode, _, path = package
    model = ember.aot.load_package(path)
    fqn = next(k for k in model.get_constant_fqns() if k.endswith("fc2.weight"))
    model.load_constants({fqn: model.get_constant(fqn)}, check_full_update=False)  # private
    x = _x(mode, 23)
    before = model(x).float().numpy()                # packs fc2.weight
    model._constants[fqn][...] = model._constants[fqn] * 3   # behind the model's back
    np.testing.assert_array_equal(model(x).float().numpy(), before)
    model._prepack(1)                                # drop the copies: repacked from memory
    after = model(x).float().numpy()
    assert not np.allclose(after, before)
    _close(after, _torch_ref(mode, _state(model), x), mode, 64 if mode == "float32" else 4)


def test_load_constants_repacks(package):
    mode, _, path = package
    model = ember.aot.load_package(path)
    x = _x(mode, 21)
    before = model(x).float().numpy()
    rng = np.random.default_rng(1)
    new = {k: model.get_constant(k) for k in model.get_constant_fqns()}
    new = {k: ember.tensor(rng.standard_normal(v.shape).astype(np.float32) * 0.2).to(v.dtype)
           for k, v in new.items()}
    model.load_constants(new, check_full_update=True)
    got = model(x).float().numpy()
    assert not np.allclose(got, before)
    _close(got, _torch_ref(mode, _state(model), x), mode, 64 if mode == "float32" else 4)


def test_prepack_off_by_environment(package, monkeypatch):
    mode, ep, path = package
    model = ember.aot.load_package(path)
    want = model(_x(mode, 33)).float().numpy()
    monkeypatch.setenv("EMBER_AOT_PREPACK", "0")
    per_call = ember.aot.load_package(path)
    assert per_call._user_memory        # packs per call: no second copy of the weights
    np.testing.assert_array_equal(per_call(_x(mode, 33)).float().numpy(), want)


@pytest.mark.parametrize("mode", ["bfloat16", "float16", "autocast"])
def test_static_few_rows_are_half_products_too(mode, tmp_path):
    """A package has no BLAS: a product of at most 4 static rows (batch-1 decoding) is a half
    template GEMM over the weight packed once, not a float32 copy of the weight per call."""
    ember.manual_seed(0)
    m = MLP().eval()
    m = Autocast(m) if mode == "autocast" else m.to(_dtypes(mode)[0])
    x = _x(mode, 2)
    ep = export(m, (x,))                                  # 2 static rows
    path = str(tmp_path / "few.pt2")
    ember.aot.compile_and_package(ep, package_path=path)
    with zipfile.ZipFile(path) as z:
        src = next(z.read(n).decode() for n in z.namelist() if n.endswith(".wrapper.c"))
    assert "to_float32" not in src and "#define EMBER_PP_SLOTS 3" in src
    model = ember.aot.load_package(path)
    c = CRunner()
    rc, h, err = c.load(path)
    assert rc == 0, err
    try:
        for _ in range(2):
            got = model(x)
            _close(got.float().numpy(), ep.module()(x).detach().float().numpy(), mode, 4)
            _close(got.float().numpy(), _torch_ref(mode, _state(model), x), mode, 4)
            rc, outs = c.run(h, [x.numpy()])
            assert rc == 0, c.error()
            np.testing.assert_array_equal(outs[0].astype(np.float32), got.float().numpy())
    finally:
        c.lib.ember_aot_unload(h)

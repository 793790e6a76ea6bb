"""Products whose B operand is a package constant pack it once per load (docs/aot.md,
"Performance"): outputs equal ``ep.module()``'s and torch's, ``load_constants`` drops the packed
copies (the next run uses the new weights), several threads may call one model, the C runner
packs once too, and a user-managed constant switches the packed copies off."""

import threading

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.export import Dim, export
from tests.aot.helpers import CRunner

torch = pytest.importorskip("torch")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(40, 72)    # N not a multiple of the tile width: an edge sliver
        self.fc2 = nn.Linear(72, 24)

    def forward(self, x):
        return self.fc2(nn.functional.gelu(self.fc1(x))) + x @ self.fc1.weight[:24].t()


def _torch_ref(state: dict, x: np.ndarray) -> np.ndarray:
    s = {k: torch.from_numpy(np.asarray(v)) for k, v in state.items()}
    t = torch.from_numpy(x)
    h = torch.nn.functional.gelu(t @ s["fc1.weight"].T + s["fc1.bias"])
    return (h @ s["fc2.weight"].T + s["fc2.bias"] + t @ s["fc1.weight"][:24].T).numpy()


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    ember.manual_seed(0)
    m = MLP().eval()
    x = ember.randn(19, 40)
    ep = export(m, (x,), dynamic_shapes=({0: Dim("n", min=1)},))
    path = str(tmp_path_factory.mktemp("prepack") / "mlp.pt2")
    ember.aot.compile_and_package(ep, package_path=path)
    return ep, path


def _state(model) -> dict:
    return {k: model.get_constant(k).numpy() for k in model.get_constant_fqns()}


def test_packed_once_outputs_unchanged(package):
    ep, path = package
    model = ember.aot.load_package(path)
    assert model._prepack is not None   # the library packs its constant operands once
    for n in (19, 19, 3, 64, 19):       # first run packs, later ones reuse; M <= 4 too
        x = ember.randn(n, 40)
        got = model(x).numpy()
        np.testing.assert_allclose(got, ep.module()(x).detach().numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, _torch_ref(_state(model), x.numpy()), rtol=1e-4,
                                   atol=1e-5)


@pytest.mark.parametrize("user_managed", [False, True])
def test_load_constants_repacks(package, user_managed):
    _, path = package
    model = ember.aot.load_package(path)
    x = ember.randn(23, 40)
    before = model(x).numpy()                         # packs the original weights
    rng = np.random.default_rng(1)
    new = {k: ember.tensor(rng.standard_normal(v.shape).astype(np.float32))
           for k, v in _state(model).items()}
    model.load_constants(new, check_full_update=True, user_managed=user_managed)
    got = model(x).numpy()
    want = _torch_ref({k: v.numpy() for k, v in new.items()}, x.numpy())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert not np.allclose(got, before)
    # only fc1.weight changes (the other product's B is also fc1.weight: both repack)
    w = {k: v.numpy().copy() for k, v in new.items()}
    w["fc1.weight"] = rng.standard_normal(w["fc1.weight"].shape).astype(np.float32)
    model.load_constants({"fc1.weight": ember.tensor(w["fc1.weight"])},
                         check_full_update=False, user_managed=user_managed)
    np.testing.assert_allclose(model(x).numpy(), _torch_ref(w, x.numpy()), rtol=1e-4,
                               atol=1e-4)


def test_user_managed_memory_changed_in_place(package):
    _, path = package
    model = ember.aot.load_package(path)
    state = {k: v.copy() for k, v in _state(model).items()}
    mine = ember.tensor(state["fc2.weight"])
    model.load_constants({"fc2.weight": mine}, check_full_update=False, user_managed=True)
    x = ember.randn(30, 40)
    model(x)
    mine.numpy()[:] *= -2.0                 # the owner changes the memory in place
    state["fc2.weight"] = mine.numpy()
    np.testing.assert_allclose(model(x).numpy(), _torch_ref(state, x.numpy()), rtol=1e-4,
                               atol=1e-4)


def test_threads_share_the_packed_copies(package):
    ep, path = package
    model = ember.aot.load_package(path)   # fresh: the threads race to pack first
    xs = [ember.randn(8 + 5 * i, 40) for i in range(6)]
    want = [ep.module()(x).detach().numpy() for x in xs]
    errors: list = []
    go = threading.Barrier(6)

    def work(i):
        go.wait()
        for _ in range(15):
            got = model(xs[i]).numpy()
            if not np.allclose(got, want[i], rtol=1e-5, atol=1e-5):
                errors.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_c_runner_packs_once(package):
    ep, path = package
    c = CRunner()
    rc, h, err = c.load(path)
    assert rc == 0, err
    try:
        for n in (17, 17, 2):
            x = np.random.default_rng(n).standard_normal((n, 40)).astype(np.float32)
            rc, outs = c.run(h, [x])
            assert rc == 0, c.error()
            np.testing.assert_allclose(outs[0], ep.module()(ember.tensor(x)).detach().numpy(),
                                       rtol=1e-5, atol=1e-5)
    finally:
        c.lib.ember_aot_unload(h)


def test_prepack_off_by_environment(package, monkeypatch):
    ep, path = package
    monkeypatch.setenv("EMBER_AOT_PREPACK", "0")
    model = ember.aot.load_package(path)
    assert model._user_memory          # packs per call: no second copy of the weights
    x = ember.randn(33, 40)
    np.testing.assert_allclose(model(x).numpy(), ep.module()(x).detach().numpy(), rtol=1e-5,
                               atol=1e-5)


def test_two_loads_keep_their_own_weights(package):
    _, path = package
    a, b = ember.aot.load_package(path), ember.aot.load_package(path)
    rng = np.random.default_rng(2)
    new = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in _state(a).items()}
    b.load_constants({k: ember.tensor(v) for k, v in new.items()}, check_full_update=True)
    x = ember.randn(21, 40)
    for _ in range(3):   # alternating: each keeps (or repacks) its own packed weights
        np.testing.assert_allclose(a(x).numpy(), _torch_ref(_state(a), x.numpy()), rtol=1e-4,
                                   atol=1e-4)
        np.testing.assert_allclose(b(x).numpy(), _torch_ref(new, x.numpy()), rtol=1e-4,
                                   atol=1e-4)

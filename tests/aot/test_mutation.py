"""Programs that update buffers in place (a step counter, BatchNorm's running statistics in
train mode) package and run from Python and from the C runner; every call updates the
package's private copy of the buffers exactly as ``ep.module()`` updates its own, call by
call."""

import shutil

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.export import Dim, export
from tests.aot.helpers import CRunner


class Counter(nn.Module):
    """A running counter and a running sum of the inputs."""

    def __init__(self):
        super().__init__()
        self.register_buffer("n", ember.zeros(1))
        self.register_buffer("total", ember.zeros(4))
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        self.n.add_(1)
        self.total.add_(x.sum(0))
        return self.fc(x) * self.n, self.total / self.n


class BNTrain(nn.Module):
    """BatchNorm in train mode: batch statistics out, running statistics updated."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.conv(x)).relu()


MODELS = {
    "counter": (Counter, lambda b: (ember.randn(b, 4),), {"x": {0: Dim("b", max=64)}}),
    "batchnorm_train": (BNTrain, lambda b: (ember.randn(b, 3, 6, 5),),
                        {"x": {0: Dim("b", max=64)}}),
}


def _flat(x):
    return list(x) if isinstance(x, tuple) else [x]


@pytest.fixture(scope="module")
def crunner():
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc for libember_aot")
    return CRunner()


@pytest.mark.parametrize("name", list(MODELS))
def test_buffers_update_call_by_call(name, tmp_path, crunner):
    cls, make, spec = MODELS[name]
    ember.manual_seed(0)
    m = cls()
    if name == "counter":
        m.eval()
    ep = export(m, make(3), dynamic_shapes=spec)
    mutated = [s.target for s in ep.graph_signature.output_specs
               if s.kind.name == "BUFFER_MUTATION"]
    assert mutated
    path = ember.aot.compile_and_package(ep, package_path=str(tmp_path / "m.pt2"))
    model = ember.aot.load_package(path)
    meta = model.get_metadata()
    assert meta["ember.runtime_abi"] == "2"
    assert sorted(eval(meta["ember.mutated_buffers"])) == sorted(mutated)
    rc, h, err = crunner.load(path)
    assert rc == 0, err
    ref = ep.module()
    try:
        for call, b in enumerate((3, 5, 2, 7)):
            args = make(b)
            want = [w.detach().numpy() for w in _flat(ref(*args))]
            got = [g.numpy() for g in _flat(model(*args))]
            rc, c_got = crunner.run(h, [a.numpy() for a in args])
            assert rc == 0, crunner.error()
            for g, c, w in zip(got, c_got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"call {call}")
                np.testing.assert_allclose(c, w, rtol=1e-5, atol=1e-5, err_msg=f"call {call}")
            state = dict(ref.named_buffers())
            for fqn in mutated:
                np.testing.assert_allclose(model.get_constant(fqn).numpy(),
                                           state[fqn].detach().numpy(), rtol=1e-5, atol=1e-6)
    finally:
        crunner.lib.ember_aot_unload(h)
    # the package file itself is unchanged: a fresh load starts from the exported state
    again = ember.aot.load_package(path)
    for fqn in mutated:
        np.testing.assert_array_equal(again.get_constant(fqn).numpy(),
                                      ep.state_dict[fqn].detach().numpy())


def test_load_constants_resets_a_mutated_buffer(tmp_path):
    ember.manual_seed(0)
    m = Counter().eval()
    ep = export(m, (ember.randn(3, 4),))
    model = ember.aot.load_package(
        ember.aot.compile_and_package(ep, package_path=str(tmp_path / "c.pt2")))
    x = ember.randn(3, 4)
    first = model(x)[0].numpy()
    model(x)
    model.load_constants({"n": ember.zeros(1)}, check_full_update=False)
    np.testing.assert_allclose(model(x)[0].numpy(), first, rtol=1e-6)
    assert float(model.get_constant("n").numpy()[0]) == 1.0

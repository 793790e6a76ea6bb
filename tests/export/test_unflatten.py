"""``ember.export.unflatten`` restores the module hierarchy as ``torch.export.unflatten`` does:
the same submodule names and state, the same outputs, submodules that run alone, and a
submodule that can be swapped for another module with the same inputs and outputs."""

import numpy as np
import pytest

import ember
from ember.export import Dim, InterpreterModule, export, unflatten

torch = pytest.importorskip("torch")


def _model(T):
    class Blk(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = T.nn.Linear(4, 4)
            self.act = T.nn.ReLU()

        def forward(self, x):
            return self.act(self.fc(x)) + x

    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.b1, self.b2 = Blk(), Blk()
            self.head = T.nn.Linear(4, 2)
            self.register_buffer("scale", T.ones(4) * 2)

        def forward(self, x):
            return self.head(self.b2(self.b1(x)) * self.scale)
    return M


def _pair():
    ember.manual_seed(0)
    m, tm = _model(ember)(), _model(torch)()
    tm.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in m.state_dict().items()})
    ep = export(m, (ember.randn(3, 4),), dynamic_shapes={"x": {0: Dim.AUTO}})
    tep = torch.export.export(tm, (torch.randn(3, 4),),
                              dynamic_shapes={"x": {0: torch.export.Dim.AUTO}})
    return m, ep, torch.export.unflatten(tep)


def test_hierarchy_and_outputs_match_torch():
    m, ep, tum = _pair()
    um = unflatten(ep)
    names = sorted(n for n, _ in um.named_modules() if n)
    tnames = sorted(n for n, _ in tum.named_modules() if n)
    assert names == tnames == ["b1", "b1.act", "b1.fc", "b2", "b2.act", "b2.fc", "head"]
    assert sorted(um.state_dict()) == sorted(tum.state_dict())
    assert isinstance(um.b1, InterpreterModule)
    for rows in (2, 5, 9):
        x = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
        with ember.no_grad():
            got = um(ember.tensor(x)).numpy()
        want = tum(torch.tensor(x)).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_submodule_runs_alone_and_has_its_graph():
    m, ep, tum = _pair()
    um = unflatten(ep)
    x = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
    with ember.no_grad():
        got = um.b1(ember.tensor(x)).numpy()
        np.testing.assert_allclose(got, m.b1(ember.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, tum.b1(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    ops = [n.op for n in um.b1.graph.nodes]
    assert ops.count("call_module") == 2  # fc and act
    assert [n.target for n in um.graph.nodes if n.op == "call_module"] == ["b1", "b2", "head"]


def test_swapping_a_submodule():
    m, ep, _ = _pair()
    um = unflatten(ep)
    um.b2.act = ember.nn.Tanh()
    m.b2.act = ember.nn.Tanh()
    x = ember.randn(4, 4)
    with ember.no_grad():
        np.testing.assert_allclose(um(x).numpy(), m(x).numpy(), rtol=1e-5, atol=1e-6)


def test_guards_still_checked():
    _, ep, _ = _pair()
    with pytest.raises(AssertionError, match=r"Guard failed: x.size\(\)\[1\] == 4"):
        unflatten(ep)(ember.randn(3, 5))


def test_unflatten_after_save_load():
    import io
    m, ep, _ = _pair()
    buf = io.BytesIO()
    ember.export.save(ep, buf)
    buf.seek(0)
    um = unflatten(ember.export.load(buf))
    assert isinstance(um.b2.fc, InterpreterModule)
    x = ember.randn(4, 4)
    with ember.no_grad():
        np.testing.assert_allclose(um(x).numpy(), m(x).numpy(), rtol=1e-5, atol=1e-6)

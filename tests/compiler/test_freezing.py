"""``ember._inductor.config.freezing`` (docs/compiler.md, "Frozen weights packed once
(ember.compile)"): a compiled inference graph packs its nn.Parameter B operands once; results
are bit-equal to the graph compiled without freezing, weights changed in place between calls
(an optimizer step, ``copy_``, ``load_state_dict``, ...) give the new results, and graphs that
may record autograd (training forwards, backward graphs) are never frozen."""

import threading

import numpy as np
import pytest

import ember
import ember._inductor.config as icfg
import ember.nn as nn
from ember.compiler.c import backend
from ember.config import config

torch = pytest.importorskip("torch")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(40, 100)   # N not a multiple of the tile width: an edge sliver
        self.fc2 = nn.Linear(100, 120)

    def forward(self, x):
        return self.fc2(nn.functional.gelu(self.fc1(x)))


@pytest.fixture(autouse=True)
def _templates(monkeypatch):
    # the template (which packs B) for every float32 product, whatever this CPU's measured
    # rule picks; freezing switched off again after each test
    monkeypatch.setattr(config, "c_gemm", "template")
    monkeypatch.setattr(config, "freezing", False)


def _model(seed=0):
    ember.manual_seed(seed)
    return MLP()


def _torch_ref(m, x):
    s = {k: torch.from_numpy(v.numpy().copy()) for k, v in m.state_dict().items()}
    t = torch.from_numpy(x.numpy())
    h = torch.nn.functional.gelu(t @ s["fc1.weight"].T + s["fc1.bias"])
    return (h @ s["fc2.weight"].T + s["fc2.bias"]).numpy()


def _frozen_call(cm, x):
    with ember.no_grad(), icfg.patch(freezing=True):
        return cm(x).numpy()


def _plain_call(cm, x):
    with ember.no_grad():
        return cm(x).numpy()


def test_config_switch_is_pytorchs_name():
    assert icfg.freezing is False and config.freezing is False
    icfg.freezing = True
    assert config.freezing is True
    icfg.freezing = False
    with icfg.patch(freezing=True):
        assert config.freezing is True
    assert config.freezing is False


def test_bit_equal_with_and_without_freezing():
    m = _model()
    cm = ember.compile(m, backend="inductor")
    xs = [ember.randn(n, 40) for n in (19, 19, 3, 64, 19, 19)]  # M <= 4 reads B in place
    frozen = [_frozen_call(cm, x) for x in xs]   # the first call packs, later ones reuse
    cg = backend.last_compiled()
    assert cg._frozen is not None and len(cg._frozen.inputs) == 2   # both weights
    assert "# frozen:" in cg.source_graph.python()
    plain = [_plain_call(cm, x) for x in xs]
    pcg = backend.last_compiled()
    assert pcg._frozen is None   # without freezing: no slots
    assert backend._plan_key(cg.graph) != backend._plan_key(pcg.graph)
    warm = backend.CompiledGraph(cg.source_graph)   # a warm start: the run plan from disk
    assert warm._frozen is not None and warm._frozen.inputs == cg._frozen.inputs
    for x, got, want in zip(xs, frozen, plain):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_allclose(got, _torch_ref(m, x), rtol=1e-4, atol=1e-5)


def _change_mul(m):
    with ember.no_grad():
        m.fc1.weight.mul_(2.0)


def _change_copy(m):
    with ember.no_grad():
        m.fc2.weight.copy_(ember.randn(120, 100))


def _change_state_dict(m):
    m.load_state_dict(_model(seed=7).state_dict())


def _change_optimizer(m):
    opt = ember.optim.AdamW(m.parameters(), lr=0.1)
    loss = m(ember.randn(5, 40)).square().sum()   # under grad, eager
    loss.backward()
    opt.step()


def _change_sgd_compiled(m):
    opt = ember.optim.SGD(m.parameters(), lr=0.5)

    @ember.compile(backend="inductor")
    def step(x):
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()
    step(ember.randn(5, 40))


def _change_view(m):
    with ember.no_grad():
        m.fc1.weight[3].fill_(0.5)   # a view shares the weight's version counter


def _change_data(m):
    m.fc2.weight.data = ember.randn(120, 100)   # another array


@pytest.mark.parametrize("change", [_change_mul, _change_copy, _change_state_dict,
                                    _change_optimizer, _change_sgd_compiled, _change_view,
                                    _change_data])
def test_weights_changed_in_place_give_new_results(change):
    m = _model()
    cm = ember.compile(m, backend="inductor")
    x = ember.randn(19, 40)
    for _ in range(3):   # packed, then the followed (prepared) call path
        before = _frozen_call(cm, x)
    change(m)
    for _ in range(2):
        got = _frozen_call(cm, x)
        np.testing.assert_array_equal(got, _plain_call(cm, x))
        np.testing.assert_allclose(got, _torch_ref(m, x), rtol=1e-4, atol=1e-5)
    assert not np.array_equal(got, before)


def test_training_graphs_are_not_frozen():
    m = _model()
    cm = ember.compile(m, backend="inductor")
    x = ember.randn(19, 40)
    with icfg.patch(freezing=True):
        for _ in range(2):
            out = cm(x)                       # grad on, weights require grad: training
            fwd = backend.last_compiled()
            assert fwd._frozen is None and fwd.source_graph.frozen == ()
            out.sum().backward()              # the backward graph (compiled autograd)
            assert backend.last_compiled()._frozen is None
        with ember.no_grad():
            cm(x)
        assert backend.last_compiled()._frozen is not None   # the inference graph is
        m.requires_grad_(False)               # grad on, but nothing requires grad
        cm(x)
        assert backend.last_compiled()._frozen is not None


def test_weight_written_by_the_graph_is_not_frozen():
    m = _model()

    @ember.compile(backend="inductor")
    def f(x):
        y = m(x)
        m.fc2.weight.mul_(0.5)                # written in place by this very graph
        return y

    x = ember.randn(19, 40)
    with ember.no_grad(), icfg.patch(freezing=True):
        for _ in range(3):
            want = _torch_ref(m, x)
            np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-4, atol=1e-5)
        cg = backend.last_compiled()
        assert cg._frozen is not None
        assert [k for k, _ in cg._frozen.inputs] == [k for k in cg.source_graph.frozen
                                                     if k in dict(cg._frozen.inputs)]
        assert len(cg._frozen.inputs) == 1    # fc1's weight only


def test_two_models_share_one_graph():
    a, b = _model(0), _model(1)

    @ember.compile(backend="inductor")
    def f(mod, x):
        return mod(x)

    x = ember.randn(19, 40)
    for _ in range(3):   # one compiled graph, the weights of either model alternately
        for mod in (a, b):
            got = _frozen_call(lambda y: f(mod, y), x)
            np.testing.assert_allclose(got, _torch_ref(mod, x), rtol=1e-4, atol=1e-5)


def test_reduce_overhead_replay_sees_changed_weights():
    m = _model()
    cm = ember.compile(m, backend="inductor", mode="reduce-overhead")
    x = ember.randn(19, 40)
    for _ in range(4):
        _frozen_call(cm, x)
    _change_mul(m)
    for _ in range(2):
        np.testing.assert_allclose(_frozen_call(cm, x), _torch_ref(m, x), rtol=1e-4,
                                   atol=1e-5)


def test_threads_call_one_frozen_graph():
    m = _model()
    cm = ember.compile(m, backend="inductor")
    xs = [ember.randn(19, 40) for _ in range(4)]
    want = [_torch_ref(m, x) for x in xs]
    _frozen_call(cm, xs[0])
    errors = []

    def work(i):
        try:
            for _ in range(5):
                np.testing.assert_allclose(_frozen_call(cm, xs[i]), want[i], rtol=1e-4,
                                           atol=1e-5)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_half_weights_packed_once():
    m = _model().to(ember.bfloat16)   # half products: the half template's packed panels
    cm = ember.compile(m, backend="inductor")
    x = ember.randn(19, 40).to(ember.bfloat16)

    def run(frozen):
        with ember.no_grad(), icfg.patch(freezing=frozen):
            return cm(x).float().numpy()
    for _ in range(3):
        got = run(True)
    assert backend.last_compiled()._frozen is not None
    np.testing.assert_array_equal(got, run(False))
    with ember.no_grad():
        m.fc1.weight.mul_(2.0)
    got = run(True)
    np.testing.assert_array_equal(got, run(False))
    with ember.no_grad():
        want = m(x).float().numpy()
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)

"""Adam/AdamW inside ``ember.compile`` as ONE multi-tensor node per parameter group
(``adam_step``, ``ember/ops/optim_step.py``): compiled training over several steps matches
torch's AdamW/Adam (a learning rate changed between steps included, without recompiling), the
node is decomposed for the C backend with its lifted numbers (no extern), the state is written
in place by the C entry (no copy-back), and the numbers are those of the per-parameter graph."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.compiler.c import backend as cbackend
from ember.compiler.c.decompose import decompose
from ember.compiler.frontend import api
from ember.compiler.frontend.graph import Graph, Node, Sym
from ember.ops.optim_step import ADAM_STEP
from ember.ops.registry import OPS, OpDef
from ember.optim import adam
from tests.compiler.helpers import Counting

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _fresh_compiler():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


def _models(sizes=(20, 32, 16, 4), seed=0):
    rng = np.random.default_rng(seed)
    layers_e, layers_t = [], []
    for a, b in zip(sizes[:-1], sizes[1:]):
        w = (rng.standard_normal((b, a)) / np.sqrt(a)).astype(np.float32)
        bias = (rng.standard_normal(b) * 0.1).astype(np.float32)
        le, lt = ember.nn.Linear(a, b), torch.nn.Linear(a, b)
        with ember.no_grad(), torch.no_grad():
            le.weight.copy_(ember.tensor(w))
            le.bias.copy_(ember.tensor(bias))
            lt.weight.copy_(torch.tensor(w))
            lt.bias.copy_(torch.tensor(bias))
        layers_e += [le, ember.nn.ReLU()]
        layers_t += [lt, torch.nn.ReLU()]
    return ember.nn.Sequential(*layers_e[:-1]), torch.nn.Sequential(*layers_t[:-1])


def _data(steps, n=16, d=20, k=4):
    rng = np.random.default_rng(1)
    return [(rng.standard_normal((n, d)).astype(np.float32), rng.integers(0, k, n))
            for _ in range(steps)]


def _estep(m, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    return loss


def _tstep(m, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    return loss


OPTS = {
    "adamw": (lambda lib, ps: lib.optim.AdamW(ps, lr=1e-2, weight_decay=0.1), True),
    "adam": (lambda lib, ps: lib.optim.Adam(ps, lr=1e-2, betas=(0.8, 0.99)), True),
    "adamw-foreach-fused-kw": (lambda lib, ps: lib.optim.AdamW(
        ps, lr=1e-2, foreach=False, fused=None), True),
    "adam-coupled-wd": (lambda lib, ps: lib.optim.Adam(ps, lr=1e-2, weight_decay=0.1), True),
    "adamw-maximize": (lambda lib, ps: lib.optim.AdamW(ps, lr=1e-3, maximize=True), True),
    "adam-maximize-coupled-wd": (lambda lib, ps: lib.optim.Adam(
        ps, lr=1e-3, weight_decay=0.05, maximize=True), True),
    # the per-parameter path (documented): amsgrad
    "adamw-amsgrad": (lambda lib, ps: lib.optim.AdamW(ps, lr=1e-2, amsgrad=True), False),
}


def _assert_state_close(eo, to, em, tm, versions=True):
    for ep, tp in zip(em.parameters(), tm.parameters()):
        np.testing.assert_allclose(ep.detach().numpy(), tp.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        es, ts = eo.state[ep], to.state[tp]
        for k in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(es[k].numpy(), ts[k].numpy(), rtol=1e-5, atol=1e-8)
            assert not versions or es[k]._version == ts[k]._version
        assert float(es["step"]) == float(ts["step"])
        assert not versions or es["step"]._version == ts["step"]._version


@pytest.mark.parametrize("name", list(OPTS))
def test_compiled_training_matches_torch_with_lr_changes(name):
    """8 compiled C steps of an MLP against torch's optimizer, the lr changed before steps 4,
    6 and 7 (as a scheduler would): losses, parameters, moments, steps.  The first change lifts
    the lr's numbers to runtime arguments (one recompile, as for any Python number); later
    changes reuse that entry."""
    make, fused = OPTS[name]
    em, tm = _models()
    eo, to = make(ember, em.parameters()), make(torch, tm.parameters())
    step = ember.compile(_estep, backend="c")
    for i, (x, y) in enumerate(_data(8)):
        if i in (3, 5, 6):
            for g in eo.param_groups + to.param_groups:
                g["lr"] = g["lr"] * 0.7
        le = step(em, eo, ember.tensor(x), ember.tensor(y))
        lt = _tstep(tm, to, torch.tensor(x), torch.tensor(y))
        np.testing.assert_allclose(le.item(), lt.item(), rtol=1e-5)
        if i == 4:
            cg = cbackend.last_compiled()
    _assert_state_close(eo, to, em, tm)
    assert cbackend.last_compiled() is cg          # no compile after the lr was lifted
    src = cg.source_graph
    assert (ADAM_STEP in [n.op for n in src.nodes]) == fused
    assert cg.externs == []


def test_one_node_per_group_and_no_recompile_on_lr_change():
    em, _ = _models()
    params = list(em.parameters())
    eo = ember.optim.AdamW([{"params": params[:2]}, {"params": params[2:], "lr": 3e-3}],
                           lr=1e-2)
    be = Counting()
    step = ember.compile(_estep, backend=be)
    for i, (x, y) in enumerate(_data(7)):
        if i >= 3:
            eo.param_groups[1]["lr"] = 1e-3 / i
        step(em, eo, ember.tensor(x), ember.tensor(y))
    ops = [n.op for n in be.graphs[-1].nodes]
    assert ops.count(ADAM_STEP) == 2                  # one per parameter group
    assert OPS.lerp not in ops and OPS.addcdiv not in ops
    # step 1 compiles, step 2 lifts the bias corrections, step 4 the changed lr's numbers;
    # later lr changes need no new graph
    assert be.count == 3


@pytest.mark.parametrize("kw", [
    {"weight_decay": 0.1, "decoupled_weight_decay": True},
    {"weight_decay": 0.1, "maximize": True},
    {"betas": (0.8, 0.95)},
])
def test_same_bits_as_the_per_parameter_graph(monkeypatch, kw):
    """The decomposed node gives the C backend the per-parameter path's primitives: the
    compiled parameters and moments are bit for bit those of the per-parameter recording."""
    def run():
        ember.compiler.reset()
        em, _ = _models(seed=3)
        eo = ember.optim.Adam(em.parameters(), lr=1e-2, **kw)
        step = ember.compile(_estep, backend="c")
        for x, y in _data(5):
            step(em, eo, ember.tensor(x), ember.tensor(y))
        assert (ADAM_STEP in [n.op for n in cbackend.last_compiled().source_graph.nodes]) \
            == fused
        return [p.detach().numpy().copy() for p in em.parameters()] + \
            [eo.state[p][k].numpy().copy() for p in em.parameters()
             for k in ("exp_avg", "exp_avg_sq")]
    fused = True
    got = run()
    monkeypatch.setattr(adam, "_fusable", lambda p, state, group: False)
    monkeypatch.setattr(adam, "_fusable_vcs", lambda p, state: None)
    fused = False
    want = run()
    for a, b in zip(got, want):
        assert np.array_equal(a, b)


def test_state_written_in_place_by_the_c_entry():
    """The moments and parameters keep their arrays and the C entry computes into them: the
    compiled program donates every written input (4 per parameter)."""
    em, _ = _models()
    eo = ember.optim.AdamW(em.parameters(), lr=1e-2)
    step = ember.compile(_estep, backend="c")
    data = _data(4)
    step(em, eo, ember.tensor(data[0][0]), ember.tensor(data[0][1]))
    arrays = [(p._data, eo.state[p]["exp_avg"]._data, eo.state[p]["exp_avg_sq"]._data)
              for p in em.parameters()]
    for x, y in data[1:]:
        step(em, eo, ember.tensor(x), ember.tensor(y))
    for p, (pa, ma, va) in zip(em.parameters(), arrays):
        assert p._data is pa and eo.state[p]["exp_avg"]._data is ma
        assert eo.state[p]["exp_avg_sq"]._data is va
    cg = cbackend.last_compiled()
    assert len(cg.program.donated) >= 4 * len(list(em.parameters()))


def test_follows_the_known_trace_every_step(monkeypatch):
    """Once the bias corrections and lr are lifted, steps follow the known trace (no capture):
    the multi-tensor node's changed numbers are loosened like a pointwise op's."""
    n = [0]
    real = api.capture

    def counting(*a, **k):
        n[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(api, "capture", counting)
    em, tm = _models()
    eo = ember.optim.AdamW(em.parameters(), lr=1e-2)
    to = torch.optim.AdamW(tm.parameters(), lr=1e-2)
    step = ember.compile(_estep, backend="c")
    counts = []
    for i, (x, y) in enumerate(_data(9)):
        if i == 2:   # the lr changes once early: lifted with the bias corrections
            for g in eo.param_groups + to.param_groups:
                g["lr"] = 5e-3
        step(em, eo, ember.tensor(x), ember.tensor(y))
        _tstep(tm, to, torch.tensor(x), torch.tensor(y))
        counts.append(n[0])
    assert counts[-1] == counts[4]
    _assert_state_close(eo, to, em, tm)


def test_state_dict_round_trip_between_compiled_steps():
    em, tm = _models()
    eo = ember.optim.AdamW(em.parameters(), lr=1e-2)
    to = torch.optim.AdamW(tm.parameters(), lr=1e-2)
    step = ember.compile(_estep, backend="c")
    data = _data(6)
    for x, y in data[:3]:
        step(em, eo, ember.tensor(x), ember.tensor(y))
        _tstep(tm, to, torch.tensor(x), torch.tensor(y))
    eo2 = ember.optim.AdamW(em.parameters(), lr=1e-2)
    eo2.load_state_dict(eo.state_dict())
    sd = eo2.state_dict()["state"]
    assert sorted(sd[0]) == ["exp_avg", "exp_avg_sq", "step"] and float(sd[0]["step"]) == 3
    for x, y in data[3:]:
        step(em, eo2, ember.tensor(x), ember.tensor(y))
        _tstep(tm, to, torch.tensor(x), torch.tensor(y))
    _assert_state_close(eo2, to, em, tm, versions=False)  # loading makes new state tensors


def test_reduce_overhead_replays_match_torch():
    em, tm = _models()
    eo = ember.optim.AdamW(em.parameters(), lr=1e-2, weight_decay=0.05)
    to = torch.optim.AdamW(tm.parameters(), lr=1e-2, weight_decay=0.05)
    step = ember.compile(_estep, backend="c", mode="reduce-overhead")
    for x, y in _data(7):
        le = step(em, eo, ember.tensor(x), ember.tensor(y))
        lt = _tstep(tm, to, torch.tensor(x), torch.tensor(y))
        np.testing.assert_allclose(le.item(), lt.item(), rtol=1e-5)
    _assert_state_close(eo, to, em, tm)


# ------------------------------------------------------------------ the decomposition pass
def _adam_graph(lifted: bool) -> Graph:
    f32 = ember.float32
    inputs = [((3, 2), f32)] * 4 + [((), f32)]
    s = [Sym(k, "scalar") for k in range(3)]
    params = {"decay": s[0] if lifted else 0.999, "w1": 0.1, "beta2": 0.999, "w2": 0.001,
              "eps": 1e-8, "bc2": (s[1] if lifted else 0.5,),
              "neg_step": (s[2] if lifted else -0.01,)}
    specs = (((), f32), ((3, 2), f32), ((3, 2), f32), ((3, 2), f32))
    node = Node(ADAM_STEP, tuple(("i", k) for k in range(5)), params, specs)
    g = Graph(inputs, [node], [("n", 0, j) for j in range(4)], 3 if lifted else 0,
              ("scalar",) * 3 if lifted else ())
    g.mutated = ((0, 4), (1, 0), (2, 2), (3, 3))
    return g


def test_decompose_accepts_lifted_numbers_of_passthrough_ops():
    g = _adam_graph(lifted=True)
    d = decompose(g)
    assert [n.op.name for n in d.nodes] == ["add", "mul", "lerp", "mul", "addcmul", "sqrt",
                                            "div", "add", "addcdiv"]
    assert d.nodes[1].args[1] == Sym(0, "scalar")        # p * decay
    assert d.nodes[6].args[1] == Sym(1, "scalar")        # sqrt(v) / bc2
    assert d.nodes[8].params["value"] == Sym(2, "scalar")
    assert d.mutated == g.mutated                        # in-place writes survive the pass
    d.verify()
    # numbers: the decomposed graph runs like the node's eager kernel
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((3, 2)).astype(np.float32) for _ in range(4)]
    arrays[3] = np.abs(arrays[3])
    arrays.append(np.asarray(2.0, np.float32))
    scalars = [0.99, 0.7, -0.02]
    for a, b in zip(d.run(arrays, scalars), g.run(arrays, scalars)):
        assert np.array_equal(a, b)


def test_decompose_keeps_an_op_that_computes_with_a_lifted_number():
    """A ``scalar_passthrough`` op whose decomposition does arithmetic on a lifted number
    cannot be expanded (the result would not be a runtime argument): it stays an extern."""
    def meta(x, *, c):
        return tuple(x.shape), x.dtype

    def eager(x, *, c):
        return x * np.float32(c * 2)

    def decomp(x, *, c):
        return x * (c * 2)
    op = OpDef("test_scaled_twice", "composite", meta, eager, None, decomp=decomp,
               tags=frozenset({"nondifferentiable", "scalar_passthrough"}))
    f32 = ember.float32
    g = Graph([((4,), f32)], [Node(op, (("i", 0),), {"c": Sym(0, "scalar")}, (((4,), f32),))],
              [("n", 0, 0)], 1, ("scalar",))
    assert [n.op for n in decompose(g).nodes] == [op]
    g2 = Graph([((4,), f32)], [Node(op, (("i", 0),), {"c": 1.5}, (((4,), f32),))],
               [("n", 0, 0)])
    assert [n.op.name for n in decompose(g2).nodes] == ["mul"]


def test_decompose_still_keeps_lifted_numbers_of_other_ops():
    from ember.ops.nn_activation import GLU
    f32 = ember.float32
    assert "scalar_passthrough" not in GLU.tags
    g = _adam_graph(lifted=True)
    assert decompose(g) is not g
    g3 = Graph([((4, 2), f32)], [Node(GLU, (("i", 0),), {"dim": Sym(0, "size")},
                                      (((4, 1), f32),))], [("n", 0, 0)], 1, ("size",))
    assert [n.op for n in decompose(g3).nodes] == [GLU]


@pytest.mark.parametrize("wd, graphs", [(0.0, 2), (0.1, 3)])
def test_lr_schedule_compiles(wd, graphs):
    """A new lr every step from step 4 on: without weight decay the lr only reaches the graph
    through the step size, lifted at step 2 with the bias corrections, so no step compiles
    again; AdamW's ``1 - lr * weight_decay`` is lifted at the lr's first change (one more
    graph, as for any Python number), and later changes reuse it."""
    em, tm = _models()
    eo = ember.optim.AdamW(em.parameters(), lr=1e-2, weight_decay=wd)
    to = torch.optim.AdamW(tm.parameters(), lr=1e-2, weight_decay=wd)
    be = Counting()
    step = ember.compile(_estep, backend=be)
    for i, (x, y) in enumerate(_data(8)):
        if i >= 3:
            for g in eo.param_groups + to.param_groups:
                g["lr"] = 1e-2 / (i + 1)
        le = step(em, eo, ember.tensor(x), ember.tensor(y))
        lt = _tstep(tm, to, torch.tensor(x), torch.tensor(y))
        np.testing.assert_allclose(le.item(), lt.item(), rtol=1e-5)
    assert be.count == graphs
    _assert_state_close(eo, to, em, tm)

"""ember.export against torch.export (2.13, the oracle) on a model zoo: an MLP, a conv net, a
transformer block (with ``view(-1, 4)`` and a concat), two inputs related by broadcasting and a
derived dim.  Compared: the symbolic input shapes and range constraints (as numbers, symbols
renamed in order of appearance), ``ep.module()`` on new shapes (against torch's and against the
eager module), specialization warnings and errors, and save/load round trips."""

import io
import logging
import re

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def zoo(T):
    """The models, written once against a torch-like namespace ``T`` (ember or torch)."""
    nn, F = T.nn, T.nn.functional

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(F.gelu(self.fc1(x)))

    class ConvNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.c2 = nn.Conv2d(8, 4, 3, stride=2)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(4, 5)

        def forward(self, x):
            h = self.pool(F.relu(self.bn(self.c1(x))))
            return self.fc(self.c2(h).relu().mean(dim=(2, 3)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(8)
            self.qkv, self.proj, self.mem = nn.Linear(8, 24), nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x, m):
            B, T_, C = x.shape
            q, k, v = self.qkv(self.ln(x)).split(8, dim=-1)
            q, k, v = (t.view(B, T_, 2, 4).transpose(1, 2) for t in (q, k, v))
            a = ((q @ k.transpose(-2, -1)) * 0.5).softmax(-1)
            y = (a @ v).transpose(1, 2).reshape(B, T_, C)
            z = x + self.proj(y)
            return T.cat([z, self.mem(m)], dim=1), z.view(-1, 4)

    class Bcast(nn.Module):
        def forward(self, x, y):
            return (x * y).sum(0), x + y

    class Derived(nn.Module):
        def forward(self, x, y):
            return x + T.cat([y, y]), y * 2

    return MLP, ConvNet, Block, Bcast, Derived


E_MODELS, T_MODELS = zoo(ember), zoo(torch)


def _pair(k: int):
    ember.manual_seed(k)
    em = E_MODELS[k]().eval()
    tm = T_MODELS[k]().eval()
    tm.load_state_dict({n: torch.from_numpy(v.detach().numpy().copy())
                        for n, v in em.state_dict().items()})
    return em, tm


def _inputs(shapes, seed=0):
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    return tuple(ember.tensor(a) for a in arrs), tuple(torch.from_numpy(a) for a in arrs)


def _specs(T_dim, kind):
    """dynamic_shapes per zoo entry, built with ember's or torch's ``Dim``."""
    A = T_dim.AUTO
    d = T_dim("d", min=2, max=32)
    return [
        {"x": {0: A}},
        {"x": {0: A, 2: A, 3: A}},
        {"x": {0: A, 1: A}, "m": {0: A, 1: A}},
        {"x": {0: A, 1: A, 2: A}, "y": {0: A, 1: A}},
        {"x": {0: 2 * d}, "y": {0: d}},
    ][kind]


CASES = [  # (zoo index, example shapes, new shapes for ep.module())
    (0, [(5, 8)], [[(3, 8)], [(17, 8)]]),
    (1, [(2, 3, 16, 16)], [[(3, 3, 12, 20)], [(2, 3, 14, 10)]]),
    (2, [(2, 5, 8), (2, 3, 8)], [[(3, 7, 8), (3, 2, 8)], [(4, 2, 8), (4, 9, 8)]]),
    (3, [(4, 1, 6), (5, 6)], [[(2, 1, 3), (7, 3)], [(6, 1, 9), (2, 9)]]),
    (4, [(10, 3), (5, 3)], [[(12, 3), (6, 3)], [(64, 3), (32, 3)]]),
]
IDS = ["mlp", "conv", "block", "bcast", "derived"]


def canon(ep):
    """Input shapes and range constraints with symbols renamed d0, d1, ... by first use."""
    user = set(ep.graph_signature.user_inputs)
    names: dict = {}

    def rename(s: str) -> str:
        return re.sub(r"\b[su]\d+\b", lambda m: names.setdefault(m.group(0), f"d{len(names)}"), s)

    shapes = [tuple(rename(str(d)) for d in n.meta["val"].shape)
              for n in ep.graph.nodes if n.op == "placeholder" and n.name in user]
    ranges = {}
    for k, v in ep.range_constraints.items():
        hi = None if str(v.upper) in ("int_oo", "oo", "inf") else int(v.upper)
        ranges[rename(str(k)).replace(" ", "")] = (int(v.lower), hi)
    return shapes, ranges


def _np(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.fixture(params=range(len(CASES)), ids=IDS)
def exported(request):
    k, shapes, news = CASES[request.param]
    em, tm = _pair(k)
    e_in, t_in = _inputs(shapes)
    e_ep = ember.export.export(em, e_in, dynamic_shapes=_specs(ember.export.Dim, k))
    t_ep = torch.export.export(tm, t_in, dynamic_shapes=_specs(torch.export.Dim, k))
    return em, tm, e_ep, t_ep, news


def test_same_shapes_and_range_constraints(exported):
    _, _, e_ep, t_ep, _ = exported
    assert canon(e_ep) == canon(t_ep)


def test_module_on_new_shapes(exported):
    em, tm, e_ep, t_ep, news = exported
    e_mod, t_mod = e_ep.module(), t_ep.module()
    for seed, shapes in enumerate(news, 1):
        e_in, t_in = _inputs(shapes, seed)
        got = _flat(e_mod(*e_in))
        for a, b in zip(got, _flat(t_mod(*t_in))):
            assert a.shape == tuple(b.shape)
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-4, atol=1e-5)
        for a, b in zip(got, _flat(em(*e_in))):
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6, atol=1e-6)


def test_guard_failures_match(exported):
    """An input that breaks a guard fails in both with AssertionError."""
    _, _, e_ep, t_ep, news = exported
    shapes = [list(s) for s in news[0]]
    dim = 1 if len(shapes[0]) == 4 else -1  # a static dim, or one tied to another input's
    shapes[0][dim] += 1
    e_in, t_in = _inputs(shapes)
    with pytest.raises(Exception) as t_err:
        t_ep.module()(*t_in)
    with pytest.raises(Exception) as e_err:
        e_ep.module()(*e_in)
    assert isinstance(e_err.value, AssertionError) == isinstance(t_err.value, AssertionError)


def test_save_load_round_trip(exported, tmp_path):
    em, _, e_ep, _, news = exported
    buf = io.BytesIO()
    ember.export.save(e_ep, buf)
    buf.seek(0)
    loaded = [ember.export.load(buf)]
    ember.export.save(e_ep, tmp_path / "m.ep.zip")
    loaded.append(ember.export.load(tmp_path / "m.ep.zip"))
    e_in, _ = _inputs(news[-1], 7)
    want = _flat(e_ep.module()(*e_in))
    for ep2 in loaded:
        assert canon(ep2) == canon(e_ep)
        for a, b in zip(_flat(ep2.module()(*e_in)), want):
            np.testing.assert_array_equal(_np(a), _np(b))


# ------------------------------------------------------------------ specialization and errors
def _export_both(spec_fn, shapes, k=0):
    em, tm = _pair(k)
    e_in, t_in = _inputs(shapes)
    outcome = []
    for export, mod, inp, Dim in ((ember.export.export, em, e_in, ember.export.Dim),
                                  (torch.export.export, tm, t_in, torch.export.Dim)):
        try:
            outcome.append(export(mod, inp, dynamic_shapes=spec_fn(Dim)))
        except Exception as e:  # noqa: BLE001 (compared below)
            outcome.append(e)
    return outcome


def test_auto_0_1_specializes_with_torch_warning(caplog):
    with caplog.at_level(logging.WARNING):
        e_ep, t_ep = _export_both(lambda D: {"x": {0: D.AUTO}}, [(1, 8)])
    msgs = [r.getMessage() for r in caplog.records if "0/1 specialized" in r.getMessage()]
    assert len(msgs) == 2 and msgs[0] == msgs[1]
    assert msgs[0] == ("dimension inputs['x'].shape[0] 0/1 specialized; Dim.AUTO was specified "
                       "along with a sample input with hint = 1.")
    assert canon(e_ep) == canon(t_ep) == ([("1", "8")], {})


def test_dynamic_0_1_is_an_error_like_torch():
    e, t = _export_both(lambda D: {"x": {0: D.DYNAMIC}}, [(1, 8)])
    assert type(t) is ValueError and type(e) is ValueError
    assert str(e) == str(t)


def test_named_dim_specialized_is_a_user_error():
    e, t = _export_both(lambda D: {"x": {0: D("b")}}, [(1, 8)])
    assert isinstance(t, torch._dynamo.exc.UserError)
    assert isinstance(e, ember._dynamo.exc.UserError)
    for err in (e, t):
        assert "You marked b as dynamic but your code specialized it to be a constant (1)" \
            in str(err)
        assert "Suggested fixes:\n  b = 1" in str(err)


def test_named_dims_that_must_be_equal():
    e, t = _export_both(lambda D: {"x": {0: D("b"), 1: D.STATIC}, "m": {0: D("c")}},
                        [(2, 5, 8), (2, 3, 8)], k=2)
    for err in (e, t):
        assert type(err).__name__ == "UserError", err
        assert "The values of c = L['m'].size()[0] and b = L['x'].size()[0] must always be " \
               "equal." in str(err)
        assert "Suggested fixes:\n  c = b" in str(err)
    # ember names the line whose guard tied them (the concat in Block.forward)
    assert re.search(r"\(guard from .*test_zoo_vs_torch.py:\d+\)", str(e))


def test_dynamic_dim_specialized_is_a_user_error():
    e, t = _export_both(lambda D: {"x": {0: D.AUTO, 1: D.DYNAMIC}}, [(5, 8)])
    for err in (e, t):
        assert type(err).__name__ == "UserError", err
        assert "You marked L['x'].size()[1] as dynamic but your code specialized it to be a " \
               "constant (8)" in str(err)


def test_divisibility_violation_suggests_a_derived_dim():
    class View:
        @staticmethod
        def make(T):
            class M(T.nn.Module):
                def forward(self, x):
                    return x.view(-1, 4) * 2
            return M()

    outcomes = []
    for T, D, ex in ((ember, ember.export.Dim, ember.export.export),
                     (torch, torch.export.Dim, torch.export.export)):
        with pytest.raises(Exception) as err:
            ex(View.make(T), (T.randn(6, 6),), dynamic_shapes={"x": {0: D("b")}})
        outcomes.append(err.value)
    for err in outcomes:
        assert type(err).__name__ == "UserError"
        assert "Not all values of b = L['x'].size()[0] in the specified range satisfy the " \
               "generated guard" in str(err)
        assert "Suggested fixes:\n  _b = Dim('_b', min=1, max=oo)\n  b = 2*_b" in str(err)


def test_conflicting_dim_definitions():
    e, t = _export_both(lambda D: {"x": {0: D("b", max=3), 1: D.STATIC}, "m": {0: D("b")}},
                        [(2, 5, 8), (2, 3, 8)], k=2)
    for err in (e, t):
        assert type(err).__name__ == "UserError"
        assert "Found different definitions Dim('b', min=0, max=3) and Dim('b', min=0) for the " \
               "same symbolic dimension Dim('b', min=0)!" in str(err)


def test_dim_hint_ranges_intersect():
    e_ep, t_ep = _export_both(lambda D: {"x": {0: D.AUTO(min=3, max=100)}}, [(5, 8)])
    assert canon(e_ep) == canon(t_ep) == ([("d0", "8")], {"d0": (3, 100)})


def test_auto_dim_specialized_by_code_is_accepted():
    outs = []
    for T, ex, D in ((ember, ember.export.export, ember.export.Dim),
                     (torch, torch.export.export, torch.export.Dim)):
        class M(T.nn.Module):
            def forward(self, x):
                return x * int(x.shape[0])  # int() of a size specializes it

        outs.append(ex(M(), (T.randn(5, 3),), dynamic_shapes={"x": {0: D.AUTO, 1: D.AUTO}}))
    assert canon(outs[0]) == canon(outs[1]) == ([("5", "d0")], {"d0": (2, None)})
    with pytest.raises(AssertionError, match=r"Guard failed: x.size\(\)\[0\] == 5"):
        outs[0].module()(ember.randn(6, 3))


def test_slicing_keeps_sizes_symbolic_like_torch():
    outs, results = [], []
    for T, ex, D in ((ember, ember.export.export, ember.export.Dim),
                     (torch, torch.export.export, torch.export.Dim)):
        class M(T.nn.Module):
            def forward(self, x):
                return x[1:] * 2, x[:-2], x[::2]

        ep = ex(M(), (T.randn(10, 3),), dynamic_shapes={"x": {0: D.AUTO}})
        outs.append([tuple(re.sub(r"s\d+", "s", str(d)) for d in n.meta["val"].shape)
                     for n in ep.graph.nodes if n.op == "call_function"])
        results.append(canon(ep))
        new = ep.module()(T.ones(7, 3))
        assert [tuple(o.shape) for o in new] == [(6, 3), (5, 3), (4, 3)]
    assert outs[0] == outs[1]
    assert results[0] == results[1] == ([("d0", "3")], {"d0": (2, None)})


def test_narrowed_named_dims_suggest_the_same_ranges_as_torch():
    fixes = []
    for T, ex, D in ((ember, ember.export.export, ember.export.Dim),
                     (torch, torch.export.export, torch.export.Dim)):
        class C(T.nn.Module):
            def __init__(self):
                super().__init__()
                self.c, self.p = T.nn.Conv2d(3, 4, 3, stride=2), T.nn.MaxPool2d(2)

            def forward(self, x):
                return self.p(self.c(x))

        with pytest.raises(Exception) as err:
            ex(C(), (T.randn(2, 3, 16, 16),),
               dynamic_shapes={"x": {2: D("h"), 3: D("w", max=100)}})
        assert type(err.value).__name__ == "UserError"
        msg = str(err.value)
        assert msg.startswith("Constraints violated (")
        fixes.append(msg.split("Suggested fixes:\n")[1].split("\n\n")[0].split("\nThe error")[0])
    assert fixes[0] == fixes[1] == "  h = Dim('h', min=5)\n  w = Dim('w', min=5, max=100)"

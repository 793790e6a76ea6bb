"""``ember.cond`` with ``torch.cond``'s semantics: eager calls the chosen branch; export records
both branches as subgraphs of one ``cond`` node (operands, then the parameters the branches
read), and ``ep.module()`` picks the branch on each call."""

import numpy as np
import pytest

import ember
from ember.export import Dim, export

torch = pytest.importorskip("torch")


def _model(T):
    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = T.nn.Linear(4, 4)

        def forward(self, x):
            return T.cond(x.sum() > 0, lambda x: self.fc(x).relu(), lambda x: x.cos(), (x,))
    return M


def _pair():
    ember.manual_seed(0)
    m, tm = _model(ember)(), _model(torch)()
    with torch.no_grad():
        tm.fc.weight.copy_(torch.tensor(m.fc.weight.detach().numpy()))
        tm.fc.bias.copy_(torch.tensor(m.fc.bias.detach().numpy()))
    return m, tm


def _x(rows, sign):
    x = np.abs(np.random.default_rng(rows).standard_normal((rows, 4))).astype(np.float32)
    return x * sign


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_eager_calls_the_chosen_branch(sign):
    m, tm = _pair()
    x = _x(5, sign)
    np.testing.assert_allclose(m(ember.tensor(x)).detach().numpy(),
                               tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert ember.cond(True, lambda a: a + 1, lambda a: a - 1, (ember.ones(2),)).tolist() == \
        [2.0, 2.0]


def test_export_records_both_branches_like_torch():
    m, tm = _pair()
    ep = export(m, (ember.tensor(_x(3, 1.0)),), dynamic_shapes={"x": {0: Dim.AUTO}})
    tep = torch.export.export(tm, (torch.tensor(_x(3, 1.0)),),
                              dynamic_shapes={"x": {0: torch.export.Dim.AUTO}})
    (node,) = [n for n in ep.graph.nodes if getattr(n.target, "name", "") == "cond"]
    (tnode,) = [n for n in tep.graph.nodes if "cond" in str(n.target)]
    assert len(node.args[3]) == len(tnode.args[3]) == 3  # x and the two parameters
    true_ops = [n.target.name for n in node.args[1].graph.nodes if n.op == "call_function"]
    false_ops = [n.target.name for n in node.args[2].graph.nodes if n.op == "call_function"]
    assert true_ops == ["linear", "relu"] and false_ops == ["cos"]
    assert "class true_graph_0" in str(ep) and "class false_graph_0" in str(ep)
    for rows in (2, 7):
        for sign in (1.0, -1.0):
            x = _x(rows, sign)
            got = ep.module()(ember.tensor(x)).detach().numpy()
            want = tep.module()(torch.tensor(x)).detach().numpy()
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_module_of_cond_compiles_through_tracing():
    m, _ = _pair()
    ep = export(m, (ember.tensor(_x(3, 1.0)),), dynamic_shapes={"x": {0: Dim.AUTO}})
    cm = ember.compile(ep.module())
    with ember.no_grad():
        for sign in (1.0, -1.0):
            x = ember.tensor(_x(6, sign))
            np.testing.assert_allclose(cm(x).numpy(), m(x).numpy(), rtol=1e-5, atol=1e-6)


def test_tuple_outputs_and_branch_mismatch():
    class Two(ember.nn.Module):
        def forward(self, x, y):
            return ember.cond(x.max() > y.max(), lambda a, b: (a + b, a * b),
                              lambda a, b: (a - b, b), (x, y))
    ep = export(Two(), (ember.randn(3), ember.randn(3)))
    a, b = ember.tensor([5.0, 1.0, 0.0]), ember.tensor([1.0, 2.0, 3.0])
    got = ep.module()(a, b)
    assert isinstance(got, tuple) and np.allclose(got[0].numpy(), [6.0, 3.0, 3.0])
    got = ep.module()(b - 10, b)
    assert np.allclose(got[0].numpy(), [-10.0] * 3) and np.allclose(got[1].numpy(), b.numpy())

    class Bad(ember.nn.Module):
        def forward(self, x):
            return ember.cond(x.sum() > 0, lambda a: a, lambda a: a[:1], (x,))
    with pytest.raises(ember._dynamo.exc.UncapturedHigherOrderOpError, match="same metadata"):
        export(Bad(), (ember.randn(3),))


def test_bad_pred_raises_like_torch():
    with pytest.raises(RuntimeError, match="single-element tensor"):
        ember.cond(ember.tensor([1, 2]), lambda x: x, lambda x: x, (ember.randn(2),))
    with pytest.raises(RuntimeError, match="single-element tensor"):
        torch.cond(torch.tensor([1, 2]), lambda x: x, lambda x: x, (torch.randn(2),))


def test_save_load_round_trip():
    import io
    m, _ = _pair()
    ep = export(m, (ember.tensor(_x(3, 1.0)),), dynamic_shapes={"x": {0: Dim.AUTO}})
    buf = io.BytesIO()
    ember.export.save(ep, buf)
    buf.seek(0)
    ep2 = ember.export.load(buf)
    for sign in (1.0, -1.0):
        x = ember.tensor(_x(4, sign))
        np.testing.assert_allclose(ep2.module()(x).detach().numpy(),
                                   ep.module()(x).detach().numpy(), rtol=1e-6)


def test_module_with_cond_re_exports():
    m, _ = _pair()
    ep = export(m, (ember.tensor(_x(3, 1.0)),), dynamic_shapes={"x": {0: Dim.AUTO}})
    ep2 = export(ep.module(), (ember.tensor(_x(3, 1.0)),), dynamic_shapes={"x": {0: Dim.AUTO}})
    conds = [n for n in ep2.graph.nodes if getattr(n.target, "name", "") == "cond"]
    assert len(conds) == 1
    for sign in (1.0, -1.0):
        x = ember.tensor(_x(5, sign))
        np.testing.assert_allclose(ep2.module()(x).detach().numpy(), m(x).detach().numpy(),
                                   rtol=1e-5, atol=1e-6)


def _size_model(T, separate_line=False):
    class S(T.nn.Module):
        def forward(self, x):
            if separate_line:
                big = x.shape[0] > 4
                return T.cond(big, lambda x: x.sin(), lambda x: x.cos() + 1, (x,))
            return T.cond(x.shape[0] > 4, lambda x: x.sin(), lambda x: x.cos() + 1, (x,))
    return S


@pytest.mark.parametrize("separate_line", [False, True])
def test_size_predicate_records_both_branches_like_torch(separate_line):
    """A SymBool predicate on a dynamic size (``x.shape[0] > 4``) is not guarded: both branches
    are recorded, the range stays [2, inf) and each call picks its branch, as in torch 2.13."""
    ep = export(_size_model(ember, separate_line)(), (ember.randn(6, 3),),
                dynamic_shapes={"x": {0: Dim.AUTO}})
    tep = torch.export.export(_size_model(torch, separate_line)(), (torch.randn(6, 3),),
                              dynamic_shapes={"x": {0: torch.export.Dim.AUTO}})
    conds = [n for n in ep.graph.nodes if getattr(n.target, "name", "") == "cond"]
    tconds = [n for n in tep.graph.nodes if "cond" in str(n.target)]
    assert len(conds) == len(tconds) == 1
    assert isinstance(conds[0].args[0], ember.SymBool) and str(conds[0].args[0]) == "s0 > 4"
    got = [str(v) for v in ep.range_constraints.values()]
    want = [str(v) for v in tep.range_constraints.values()]
    assert got == want == ["VR[2, int_oo]"]
    assert not ep.shape_env.guards
    for rows in (3, 4, 5, 9):
        x = np.random.default_rng(rows).standard_normal((rows, 3)).astype(np.float32)
        got = ep.module()(ember.tensor(x)).numpy()
        want = tep.module()(torch.tensor(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_size_predicate_saves_and_loads(tmp_path):
    ep = export(_size_model(ember)(), (ember.randn(6, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    ember.export.save(ep, tmp_path / "c.ep.zip")
    ep2 = ember.export.load(tmp_path / "c.ep.zip")
    x = ember.randn(3, 3)
    np.testing.assert_allclose(ep2.module()(x).numpy(), (x.cos() + 1).numpy(), rtol=1e-6)


def test_size_comparison_branched_in_python_still_guards_like_torch():
    """``if x.shape[0] > 4:`` guards (bool() of the SymBool), narrowing the range as torch's."""
    def mk(T):
        class G(T.nn.Module):
            def forward(self, x):
                return x.sin() if x.shape[0] > 4 else x.cos()
        return G
    ep = export(mk(ember)(), (ember.randn(6, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    tep = torch.export.export(mk(torch)(), (torch.randn(6, 3),),
                              dynamic_shapes={"x": {0: torch.export.Dim.AUTO}})
    got = [str(v) for v in ep.range_constraints.values()]
    want = [str(v) for v in tep.range_constraints.values()]
    assert got == want == ["VR[5, int_oo]"]
    with pytest.raises(AssertionError):
        ep.module()(ember.randn(3, 3))

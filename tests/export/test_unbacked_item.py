"""``.item()`` while exporting gives an unbacked SymInt (``u0``) usable in later shapes;
``ember._check`` / ``ember._check_is_size`` on it become runtime-assert nodes
(``_assert_scalar``) and value-range facts, as ``torch._check`` does under ``torch.export``."""

import io
import warnings

import numpy as np
import pytest

import ember
from ember.export import Dim, compile_program, export, load, save

torch = pytest.importorskip("torch")


def _model(T):
    class M(T.nn.Module):
        def forward(self, x, n):
            k = n.item()
            T._check(k >= 0)
            T._check(k <= x.shape[0])
            return x[:k] * 2
    return M


def _both():
    ep = export(_model(ember)(), (ember.randn(6, 4), ember.tensor(3)),
                dynamic_shapes={"x": {0: Dim.AUTO}, "n": None})
    tep = torch.export.export(_model(torch)(), (torch.randn(6, 4), torch.tensor(3)),
                              dynamic_shapes={"x": {0: torch.export.Dim.AUTO}, "n": None})
    return ep, tep


def test_item_is_unbacked_and_checks_are_assert_nodes():
    ep, tep = _both()
    assert [str(v) for v in ep.range_constraints.values()] == \
        [str(v) for v in tep.range_constraints.values()]  # u0: [0, oo], s0: [2, oo]
    assert str(next(iter(ep.range_constraints))) == "u0"
    asserts = [n for n in ep.graph.nodes if getattr(n.target, "name", "") == "_assert_scalar"]
    tasserts = [n for n in tep.graph.nodes if "_assert_scalar" in str(n.target)]
    assert len(asserts) == len(tasserts) == 2
    item = next(n for n in ep.graph.nodes if getattr(n.target, "name", "") == "item")
    assert isinstance(item.meta["val"], ember.SymInt) and str(item.meta["val"]) == "u0"
    out = next(n for n in ep.graph.nodes if n.name == "mul").meta["val"]
    assert "u0" in str(out.shape[0])


@pytest.mark.parametrize("rows,k", [(8, 5), (6, 0), (3, 3)])
def test_module_runs_like_torch(rows, k):
    ep, tep = _both()
    x = np.random.default_rng(0).standard_normal((rows, 4)).astype(np.float32)
    got = ep.module()(ember.tensor(x), ember.tensor(k))
    want = tep.module()(torch.tensor(x), torch.tensor(k))
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy())


@pytest.mark.parametrize("k", [9, -1])
def test_failed_runtime_assert_raises_like_torch(k):
    ep, tep = _both()
    with pytest.raises(RuntimeError, match="Runtime assertion failed for expression u0"):
        ep.module()(ember.randn(8, 4), ember.tensor(k))
    with pytest.raises(RuntimeError, match="Runtime assertion failed for expression u0"):
        tep.module()(torch.randn(8, 4), torch.tensor(k))


def test_branching_on_unbacked_still_raises():
    class M(ember.nn.Module):
        def forward(self, x, n):
            if n.item() > 2:
                return x
            return -x
    with pytest.raises(ember.errors.GuardOnDataDependentSymNode, match="u0"):
        export(M(), (ember.randn(3), ember.tensor(3)))


def test_check_is_size_and_eager_check():
    class M(ember.nn.Module):
        def forward(self, x, n):
            k = n.item()
            ember._check_is_size(k, max=16)
            return ember.zeros(k) + x.sum()
    ep = export(M(), (ember.randn(3), ember.tensor(4)))
    assert str(ep.range_constraints[next(iter(ep.range_constraints))]) == "VR[0, 16]"
    assert ep.module()(ember.ones(3), ember.tensor(7)).shape == (7,)
    with pytest.raises(RuntimeError):
        ep.module()(ember.ones(3), ember.tensor(17))
    ember._check(True)
    with pytest.raises(RuntimeError, match="Expected cond to be True"):
        ember._check(False)
    with pytest.raises(RuntimeError, match="custom"):
        ember._check(1 > 2, lambda: "custom")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError):
            torch._check(False)


def test_save_load_keeps_item_and_asserts():
    ep, _ = _both()
    buf = io.BytesIO()
    save(ep, buf)
    buf.seek(0)
    ep2 = load(buf)
    assert ep2.module()(ember.randn(8, 4), ember.tensor(5)).shape == (5, 4)
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        ep2.module()(ember.randn(8, 4), ember.tensor(9))


def test_compile_falls_back_for_unbacked():
    ep, _ = _both()
    with pytest.raises(NotImplementedError, match="run time"):
        compile_program(ep)
    cm = ember.compile(ep.module())
    x = ember.randn(7, 4)
    with ember.no_grad():
        np.testing.assert_allclose(cm(x, ember.tensor(4)).numpy(), (x[:4] * 2).numpy())


def _float_model(T):
    class F(T.nn.Module):
        def forward(self, x, t):
            v = t.item()
            return x * v + (v * 2 + 1) - x / v, 2 - x * (-v)
    return F


def _float_both():
    ep = export(_float_model(ember)(), (ember.randn(6, 3), ember.tensor(2.5)),
                dynamic_shapes={"x": {0: Dim.AUTO}, "t": None})
    tep = torch.export.export(_float_model(torch)(), (torch.randn(6, 3), torch.tensor(2.5)),
                              dynamic_shapes={"x": {0: torch.export.Dim.AUTO}, "t": None})
    return ep, tep


def test_float_item_is_an_unbacked_symfloat_like_torch():
    """A float ``.item()`` is an unbacked SymFloat (``zuf0``, range (-oo, oo)) that tensor ops
    take as their scalar: one ``item`` node, no specialization, the value read per call."""
    ep, tep = _float_both()
    items = [n for n in ep.graph.nodes if getattr(n.target, "name", "") == "item"]
    titems = [n for n in tep.graph.nodes if "item" in str(n.target)]
    assert len(items) == len(titems) == 1
    assert {str(k): str(v) for k, v in ep.range_constraints.items()} == \
        {str(k): str(v) for k, v in tep.range_constraints.items()
         if not str(k).startswith("s")} | {"s0": "VR[2, int_oo]"}
    assert "zuf0" in {str(k) for k in tep.range_constraints}
    for rows, val in ((4, 3.0), (7, -0.5)):
        x = np.random.default_rng(rows).standard_normal((rows, 3)).astype(np.float32)
        got = ep.module()(ember.tensor(x), ember.tensor(val))
        want = tep.module()(torch.tensor(x), torch.tensor(val))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)


def test_float_item_save_load_and_compile():
    ep, _ = _float_both()
    buf = io.BytesIO()
    save(ep, buf)
    buf.seek(0)
    ep2 = load(buf)
    assert str(ep2.range_constraints) == str(ep.range_constraints)
    x, t = ember.randn(5, 3), ember.tensor(-2.0)
    want = ep.module()(x, t)
    fast = ember.compile(ep2.module())
    with ember.no_grad():
        for got in (ep2.module()(x, t), fast(x, t)):
            for g, w in zip(got, want):
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)


def test_branching_on_float_item_raises_data_dependent():
    class B(ember.nn.Module):
        def forward(self, x, t):
            return x * 2 if t.item() > 0 else x
    with pytest.raises(ember.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode,
                       match="test_unbacked_item.py"):
        export(B(), (ember.randn(3, 3), ember.tensor(1.0)))

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

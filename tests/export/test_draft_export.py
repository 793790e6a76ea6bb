"""``draft_export`` reports issues instead of failing, as ``torch.export.draft_export`` does:
the same failure types and counts, the same range constraints after turning violated dims into
``Dim.AUTO``, and a program that runs (specialized to the example's data-dependent values)."""

import numpy as np
import pytest

import ember
from ember.export import Dim, draft_export, export

torch = pytest.importorskip("torch")


def _data_dependent(T):
    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = T.nn.Linear(4, 4)

        def forward(self, x, y):
            h = self.fc(x)
            if h.sum() > 0:
                h = h * 2
            n = int(y.max())
            return h + y[:1].sum() + n
    return M


def _broadcast(T):
    class N(T.nn.Module):
        def forward(self, x, y):
            return x + y
    return N


def _types(ep):
    return [int(f.failure_type) for f in ep._report.failures]


def test_data_dependent_branches_reported_like_torch():
    ember.manual_seed(0)
    m = _data_dependent(ember)()
    x, y = ember.randn(6, 4), ember.tensor([1.0, 3.0])
    ep = draft_export(m, (x, y), dynamic_shapes={"x": {0: Dim("b")}, "y": None})
    tm = _data_dependent(torch)()
    tep = torch.export.draft_export(tm, (torch.randn(6, 4), torch.tensor([1.0, 3.0])),
                                    dynamic_shapes={"x": {0: torch.export.Dim("b")}, "y": None})
    assert _types(ep) == _types(tep) == [2, 2]
    assert ep._report.successful() is tep._report.successful() is False
    f = ep._report.failures
    assert f[0].data["user_stack"].endswith("in forward") and f[0].data["result"] is True
    assert f[1].data["result"] == 3.0 and f[1].data["occurrences"] == 1
    text = str(ep._report)
    assert "WARNING: 2 issue(s) found during export" in text
    assert "Data dependent error." in text and "test_draft_export.py" in text
    with ember.no_grad():  # specialized to the example's branch: equal on that data
        np.testing.assert_allclose(ep.module()(x, y).numpy(), m(x, y).numpy(), rtol=1e-6)
        x2 = ember.randn(9, 4)
        assert ep.module()(x2, y).shape == (9, 4)


def test_plain_export_still_raises_on_data():
    m = _data_dependent(ember)()
    with pytest.raises(ember.errors.GuardOnDataDependentSymNode):
        export(m, (ember.randn(6, 4), ember.tensor([1.0, 3.0])))


def test_constraint_violation_becomes_guard_added():
    ep = draft_export(_broadcast(ember)(), (ember.randn(3, 4), ember.randn(3, 4)),
                      dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("b")}})
    TD = torch.export.Dim
    tep = torch.export.draft_export(_broadcast(torch)(), (torch.randn(3, 4), torch.randn(3, 4)),
                                    dynamic_shapes={"x": {0: TD("a")}, "y": {0: TD("b")}})
    assert _types(ep) == _types(tep) == [3]
    assert [str(v) for v in ep.range_constraints.values()] == \
        [str(v) for v in tep.range_constraints.values()] == ["VR[2, int_oo]"]
    data = ep._report.failures[0].data
    assert "must always be equal" in data["expr"]
    assert data["new_dynamic_shapes"]["x"][0].type == "AUTO"
    assert "Guard Added." in str(ep._report)
    out = ep.module()(ember.ones(5, 4), ember.ones(5, 4))
    np.testing.assert_allclose(out.numpy(), np.full((5, 4), 2.0))


def test_clean_program_is_successful():
    class K(ember.nn.Module):
        def forward(self, x):
            return x.relu()
    ep = draft_export(K(), (ember.randn(3, 4),))
    assert ep._report.failures == [] and ep._report.successful()
    assert "Congratulations: No issues are found during export" in str(ep._report)


def test_other_errors_still_raise():
    class Bad(ember.nn.Module):
        def forward(self, x):
            return x.view(5, 5)
    with pytest.raises(Exception, match="view"):
        draft_export(Bad(), (ember.randn(3, 4),))


def test_specialized_value_is_asserted_at_run_time():
    class S(ember.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return x

    ep = draft_export(S(), (ember.ones(3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert _types(ep) == [2]
    np.testing.assert_allclose(ep.module()(ember.ones(5)).numpy(), np.full(5, 2.0))
    with pytest.raises(RuntimeError, match="Runtime assertion failed: gt differs from True"):
        ep.module()(-ember.ones(5))

"""``preserve_module_call_signature`` against ``torch.export`` 2.13: the preserved submodule
keeps its call signature (non-tensor arguments, keyword arguments, a dict/tuple output) in
``ep.module_call_graph`` and in the unflattened module, and can be swapped for any module with
that signature."""

import io

import numpy as np
import pytest

import ember
from ember.export import Dim, export, unflatten
from ember.export.graph_signature import ConstantArgument, TensorArgument

torch = pytest.importorskip("torch")


def _model(T):
    class Sub(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = T.nn.Linear(4, 4)

        def forward(self, x, y, scale=2.0, flag=True):
            a = self.fc(x) * scale
            return {"a": a, "b": (y + 1, a - y)}

    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.sub = Sub()
            self.fc2 = T.nn.Linear(4, 4)

        def forward(self, x):
            d = self.sub(x, x * 2, scale=3.0)
            return self.fc2(d["a"]) + d["b"][0] + d["b"][1]
    return M


def _swap(T):
    class Other(T.nn.Module):
        def forward(self, x, y, scale=2.0, flag=True):
            return {"a": x * scale, "b": (y - 1, y * y)}
    return Other


def _pair():
    ember.manual_seed(0)
    m, tm = _model(ember)(), _model(torch)()
    tm.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in m.state_dict().items()})
    ep = export(m, (ember.randn(3, 4),), dynamic_shapes={"x": {0: Dim.AUTO}},
                preserve_module_call_signature=("sub",))
    tep = torch.export.export(tm, (torch.randn(3, 4),),
                              dynamic_shapes={"x": {0: torch.export.Dim.AUTO}},
                              preserve_module_call_signature=("sub",))
    return m, ep, tep


def _arg_kinds(args):
    return [(type(a).__name__, getattr(a, "value", None)) for a in args]


def test_module_call_graph_matches_torch():
    _, ep, tep = _pair()
    assert [e.fqn for e in ep.module_call_graph] == [e.fqn for e in tep.module_call_graph]
    got = {e.fqn: e.signature for e in ep.module_call_graph}
    want = {e.fqn: e.signature for e in tep.module_call_graph}
    assert {k for k, v in got.items() if v is None} == {k for k, v in want.items() if v is None}
    assert got[""].forward_arg_names == want[""].forward_arg_names == ["x"]
    assert _arg_kinds(got["sub"].inputs) == _arg_kinds(want["sub"].inputs) == [
        ("TensorArgument", None), ("TensorArgument", None), ("ConstantArgument", 3.0)]
    assert len(got["sub"].outputs) == len(want["sub"].outputs) == 3
    names = {n.name for n in ep.graph.nodes}
    assert all(a.name in names for a in got["sub"].inputs + got["sub"].outputs
               if isinstance(a, TensorArgument))
    assert isinstance(got["sub"].inputs[2], ConstantArgument)


def _values(x):
    if isinstance(x, dict):
        return {k: _values(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_values(v) for v in x)
    return x.detach().numpy()


def _close(a, b):
    assert type(a) is type(b) or (isinstance(a, np.ndarray) and isinstance(b, np.ndarray))
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _close(a[k], b[k])
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            _close(u, v)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_unflattened_submodule_keeps_signature_and_swaps():
    m, ep, tep = _pair()
    um, tum = unflatten(ep), torch.export.unflatten(tep)
    for rows in (2, 6):
        x = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
        ex, tx = ember.tensor(x), torch.tensor(x)
        with ember.no_grad():
            _close(_values(um(ex)), _values(tum(tx)))
            _close(_values(um(ex)), _values(m(ex)))
            # the submodule alone, with the original calling convention and output structure
            _close(_values(um.sub(ex, ex * 2, scale=3.0)),
                   _values(tum.sub(tx, tx * 2, scale=3.0)))
    um.sub, tum.sub = _swap(ember)(), _swap(torch)()
    x = np.random.default_rng(9).standard_normal((5, 4)).astype(np.float32)
    with ember.no_grad():
        got = um(ember.tensor(x)).numpy()
    want = tum(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert "fc" not in dict(um.sub.named_children())


def test_swapped_module_with_wrong_output_structure_raises():
    _, ep, _ = _pair()
    um = unflatten(ep)

    class Bad(ember.nn.Module):
        def forward(self, x, y, scale=2.0, flag=True):
            return x
    um.sub = Bad()
    with pytest.raises(TypeError, match="preserved signature"):
        um(ember.randn(3, 4))


def test_save_load_keeps_module_call_graph():
    m, ep, _ = _pair()
    buf = io.BytesIO()
    ember.export.save(ep, buf)
    buf.seek(0)
    ep2 = ember.export.load(buf)
    assert [(e.fqn, e.signature) for e in ep2.module_call_graph[1:]] == \
        [(e.fqn, e.signature) for e in ep.module_call_graph[1:]]
    um = unflatten(ep2)
    um.sub = _swap(ember)()
    x = ember.randn(4, 4)
    with ember.no_grad():
        want = m.fc2(x * 3.0) + (x * 2 - 1) + (x * 2) * (x * 2)
        np.testing.assert_allclose(um(x).numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_unknown_fqn_raises_attribute_error_as_torch():
    m = _model(ember)()
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        export(m, (ember.randn(3, 4),), preserve_module_call_signature=("nope",))
    tm = _model(torch)()
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        torch.export.export(tm, (torch.randn(3, 4),), preserve_module_call_signature=("nope",))


def test_not_preserved_has_no_signature():
    ep = export(_model(ember)(), (ember.randn(3, 4),))
    assert [e.signature for e in ep.module_call_graph[1:]] == [None, None, None]

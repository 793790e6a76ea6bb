"""Compiling an exported program without retracing: ``ember.compile(ep.module())`` and
``ember.export.compile_program(ep)`` build ONE size-generic C entry (symbolic sizes are runtime
ints) that gives what the eager module gives on every admitted size."""

import numpy as np
import pytest

import ember
from ember.demo import CharGPT
from ember.export import Dim, compile_program, export


class Net(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = ember.nn.Linear(8, 16), ember.nn.Linear(16, 4)

    def forward(self, x, y):
        h = self.fc1(x).relu()
        h = ember.cat([h, y], dim=1).view(-1, 4)
        return (h[1:] * 2).softmax(-1), self.fc2(self.fc1(x))


def _counting():
    calls = []

    def backend(graph, example_inputs):
        calls.append(graph)
        from ember.compiler.frontend.backends import lookup_backend
        return lookup_backend("c")(graph, example_inputs)
    return backend, calls


def _close(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def _export_net():
    ember.manual_seed(0)
    m = Net().eval()
    ep = export(m, (ember.randn(5, 8), ember.randn(5, 4)),
                dynamic_shapes={"x": {0: Dim.AUTO}, "y": {0: Dim.AUTO}})
    return m, ep


def test_compile_of_exported_module_one_build_for_all_batches():
    m, ep = _export_net()
    backend, calls = _counting()
    cm = ember.compile(ep.module(), backend=backend)
    with ember.no_grad():
        for b in (3, 5, 17, 64, 2):
            x, y = ember.randn(b, 8), ember.randn(b, 4)
            got, want = cm(x, y), m(x, y)
            assert got[0].shape == (5 * b - 1, 4)
            _close(got[0], want[0])
            _close(got[1], want[1])
    assert len(calls) == 1  # one compile, no recompile
    assert calls[0].num_scalars >= 1  # the batch is a runtime int


def test_compile_program_builds_c_once():
    from ember.compiler.c import backend as cb
    m, ep = _export_net()
    before = cb.BUILDS[0]
    cp = compile_program(ep)
    assert cb.BUILDS[0] == before + 1
    with ember.no_grad():
        for b in (4, 9, 31):
            x, y = ember.randn(b, 8), ember.randn(b, 4)
            _close(cp(x, y)[0], m(x, y)[0])
    assert cb.BUILDS[0] == before + 1
    assert [str(e) for e in cp.exprs][:1] == ["s0"]


def test_guards_still_raise():
    _, ep = _export_net()
    cp = compile_program(ep, backend="eager")
    with pytest.raises(AssertionError, match=r"Guard failed: y.size\(\)\[0\] == x.size\(\)\[0\]"):
        cp(ember.randn(3, 8), ember.randn(4, 4))
    with pytest.raises(AssertionError, match=r"Guard failed: x.size\(\)\[1\] == 8"):
        cp(ember.randn(3, 7), ember.randn(3, 4))
    with pytest.raises(ValueError, match="Trying to flatten user inputs"):
        cp(ember.randn(3, 8))


def test_range_and_divisibility_guards():
    class M(ember.nn.Module):
        def forward(self, x):
            return x.view(-1, 4).sum(1)
    ep = export(M(), (ember.randn(8, 3),), dynamic_shapes={"x": {0: Dim.AUTO(max=64)}})
    cp = compile_program(ep)
    x = ember.randn(12, 3)
    _close(cp(x), x.view(-1, 4).sum(1))
    with pytest.raises(AssertionError, match=r"Guard failed: x.size\(\)\[0\] <= 64"):
        cp(ember.randn(128, 3))
    with pytest.raises(AssertionError, match=r"% 4 == 0"):
        cp(ember.randn(5, 3))


def test_buffer_mutation_written_back():
    ember.manual_seed(0)
    m = ember.nn.Sequential(ember.nn.Linear(6, 5), ember.nn.BatchNorm1d(5)).train()
    ep = export(m, (ember.randn(7, 6),), dynamic_shapes={"input": {0: Dim.AUTO}})
    ref, mod = ep.module(), ep.module()
    cm = ember.compile(mod)
    with ember.no_grad():
        for b in (4, 11):
            x = ember.randn(b, 6)
            _close(cm(x), ref(x))
    for (k, a), (_, b) in zip(mod.named_buffers(), ref.named_buffers()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def test_grad_enabled_call_compiles_forward_and_backward():
    m, ep = _export_net()
    mod = ep.module()
    backend, calls = _counting()
    cm = ember.compile(mod, backend=backend)
    for b in (6, 9):
        x, y = ember.randn(b, 8), ember.randn(b, 4)
        out = cm(x, y)[1]
        assert out.requires_grad
        out.sum().backward()
        _close(out, m(x, y)[1])
    m(x, y)[1].sum().backward()
    m(ember.randn(6, 8), ember.randn(6, 4))  # (no grads from this one)
    assert len(calls) == 2  # one forward and one backward entry for both batch sizes
    assert all(g.num_scalars >= 1 for g in calls)


class _BNNet(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.bn = ember.nn.Linear(4, 6), ember.nn.BatchNorm1d(6)

    def forward(self, x):
        return (self.bn(self.fc(x)).relu() * x.sum(1, keepdim=True)).sum(1)


def test_training_mode_program_compiled_matches_eager():
    """BatchNorm in train mode (BUFFER_MUTATION outputs) with grad required: the compiled
    forward/backward entries write the running stats back and give eager's gradients."""
    import copy
    ember.manual_seed(0)
    m = _BNNet().train()
    ref = copy.deepcopy(m)
    ep = export(m, (ember.randn(5, 4),), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert {s.kind.name for s in ep.graph_signature.output_specs} == {"BUFFER_MUTATION",
                                                                     "USER_OUTPUT"}
    mod = ep.module()
    backend, calls = _counting()
    cm = ember.compile(mod, backend=backend)
    for b in (5, 8, 3):
        x = ember.randn(b, 4)
        xe, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
        got, want = cm(xe), ref(xr)
        _close(got, want)
        (got * ember.arange(b)).sum().backward()
        (want * ember.arange(b)).sum().backward()
        _close(xe.grad, xr.grad)
        for (k, a), (_, r) in zip(mod.named_buffers(), ref.named_buffers()):
            np.testing.assert_allclose(a.numpy(), r.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
        for (k, a), (_, r) in zip(mod.named_parameters(), ref.named_parameters()):
            np.testing.assert_allclose(a.grad.numpy(), r.grad.numpy(), rtol=1e-4, atol=1e-5,
                                       err_msg=k)
    assert int(mod.bn.num_batches_tracked) == 3
    assert len(calls) == 2  # forward + backward, size-generic


def test_char_gpt_dynamic_sequence():
    ember.manual_seed(0)
    m = CharGPT(30, block=32, d=16, layers=2, heads=2).eval()
    t = Dim("t", max=32)
    ep = export(m, (ember.randint(0, 30, (2, 9)),), dynamic_shapes={"idx": {0: Dim.AUTO, 1: t}})
    backend, calls = _counting()
    cm = ember.compile(ep.module(), backend=backend)
    with ember.no_grad():
        for b, n in ((2, 9), (3, 17), (1 + 1, 32)):
            idx = ember.randint(0, 30, (b, n))
            _close(cm(idx), m(idx))
    assert len(calls) == 1


def test_loaded_program_compiles():
    import io
    m, ep = _export_net()
    buf = io.BytesIO()
    ember.export.save(ep, buf)
    buf.seek(0)
    cp = compile_program(ember.export.load(buf))
    with ember.no_grad():
        for b in (2, 13):
            x, y = ember.randn(b, 8), ember.randn(b, 4)
            _close(cp(x, y)[1], m(x, y)[1])


def test_char_gpt_training_step_compiled_matches_eager():
    """A causal-attention model's training step (dynamic batch and sequence) runs the compiled
    forward/backward pair: no guard added by its backward, eager's gradients at every size."""
    ember.manual_seed(0)
    m = CharGPT(65, block=64, d=32, layers=1, heads=2).eval()
    ep = export(m, (ember.randint(0, 65, (4, 16)),),
                dynamic_shapes={"idx": {0: Dim.AUTO, 1: Dim("t", max=64)}})
    mod = ep.module()
    backend, calls = _counting()
    cm = ember.compile(mod, backend=backend)
    for shape in ((3, 20), (5, 9)):
        x = ember.randint(0, 65, shape)
        for p in list(mod.parameters()) + list(m.parameters()):
            p.grad = None
        got, want = cm(x), m(x)
        _close(got, want)
        got.mean().backward()
        want.mean().backward()
        for (k, a), (_, b) in zip(mod.named_parameters(), m.named_parameters()):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-6,
                                       err_msg=k)
    assert len(calls) == 2 and cm._compiled.training_unsupported is None
